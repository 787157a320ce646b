"""The USE SentencePiece model as the engine's `Tokenizer`, with a task's special tokens first.

A decoder conditioned on USE (`models.conditioned`) reads its text as USE pieces, so its
tokenizer must cut text exactly as `sentencepiece` does on the shipped `sp.model`, and
must be a `tokenizers` JSON so bundles save and load it like any other. The unigram
vocabulary, scores and the precompiled NFKC normaliser are read from the model file's
protobuf (sentencepiece's own `sentencepiece_model_pb2`) into a `tokenizers` Unigram
model: the conversion Hugging Face applies to every SentencePiece model
(`convert_slow_tokenizer`); it cuts the same pieces as `sentencepiece` on every request of
the hand-written sets and 3,000 generated ones (a test checks a sample).

Ids: the task's special tokens are `0 .. S-1` (so a decoder's output head covers them
alone), USE piece `i` is id `S + i`. The model file's own control pieces are renamed
(`<use:unk>`, `<use:s>`, `<use:/s>`) so they cannot collide with the task's tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from studio_align.errors import ModelLoadError
from studio_align.models.encoders.use import package_resources
from studio_align.models.tokenizer import Tokenizer

CONTROL = {"<unk>": "<use:unk>", "<s>": "<use:s>", "</s>": "<use:/s>"}


def use_tokenizer(
    specials: Sequence[str],
    *,
    roles: dict[str, str | None],
    sp_model: str | Path | None = None,
) -> Tokenizer:
    """`specials` (ids 0..S-1) then the USE pieces; `roles` maps pad/bos/eos/unk to tokens."""
    from sentencepiece import sentencepiece_model_pb2
    from tokenizers import AddedToken, Regex, normalizers, pre_tokenizers
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers.models import Unigram

    path = Path(sp_model) if sp_model is not None else package_resources() / "sp.model"
    proto = sentencepiece_model_pb2.ModelProto()  # type: ignore[attr-defined]
    try:
        proto.ParseFromString(path.read_bytes())
    except (OSError, ValueError) as e:  # protobuf's DecodeError is a ValueError
        raise ModelLoadError(f"{path}: not a SentencePiece model ({e})") from None
    if proto.trainer_spec.model_type != 1 or not proto.pieces:
        raise ModelLoadError(f"{path}: not a SentencePiece unigram model")
    vocab = [(s, 0.0) for s in specials]
    vocab += [(CONTROL.get(p.piece, p.piece), p.score) for p in proto.pieces]
    s = len(specials)
    tok = HFTokenizer(Unigram(vocab, s + proto.trainer_spec.unk_id, False))
    charsmap = proto.normalizer_spec.precompiled_charsmap
    tok.normalizer = normalizers.Sequence(
        [normalizers.Precompiled(charsmap), normalizers.Replace(Regex(" {2,}"), " ")]
    )
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    return Tokenizer(tok, **roles)
