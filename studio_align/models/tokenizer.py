"""Byte-level BPE tokenizer: trained on the user's own texts, or any HF `tokenizer.json`.

Design choices:

- Built on Hugging Face `tokenizers` and stored in its `tokenizer.json` format, so a
  tokenizer trained here loads in `transformers`, and a model's own `tokenizer.json`
  (e.g. Gemma 3) loads here with `Tokenizer.load`.
- Byte-level: every string encodes (no unknown characters) and `decode(encode(s)) == s`.
  No normaliser, so the round trip is exact; callers normalise if they want to.
- Pre-tokenisation: digits are split one by one, then the GPT-2 regex splits words,
  punctuation and whitespace. A run of CJK characters is one "word" to that regex, so BPE
  learns frequent Chinese words and phrases (视频, 配乐) as single tokens; English gets
  the usual word and sub-word pieces.
- Special tokens (`<pad> <bos> <eos> <unk>` first, then the caller's, e.g. the router's
  `<plan>`, `<att:image>`, `<step:wan.image_to_video>`) take ids 0, 1, 2, ... in order and
  always encode to single ids. `encode(text, allow_special=False)` treats them as plain
  text instead, so user input cannot inject control tokens.
- For a loaded HF tokenizer the pad/bos/eos/unk tokens are read from
  `tokenizer_config.json` / `special_tokens_map.json` beside it when present, otherwise
  guessed from common names (`<pad>`, `<bos>`, `<s>`, `<|endoftext|>`, ...).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers, trainers
from tokenizers import Tokenizer as HFTokenizer

from studio_align.errors import ConfigError, ModelLoadError

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
BASE_SPECIALS = (PAD, BOS, EOS, UNK)
_ROLE_CANDIDATES = {
    "pad": ("<pad>", "[PAD]", "<|pad|>", "<|endoftext|>"),
    "bos": ("<bos>", "<s>", "[CLS]", "<|begin_of_text|>", "<|endoftext|>"),
    "eos": ("<eos>", "</s>", "[SEP]", "<|end_of_text|>", "<|endoftext|>", "<|im_end|>"),
    "unk": ("<unk>", "[UNK]", "<|unk|>"),
}


class Tokenizer:
    """A `tokenizers.Tokenizer` plus the ids of its pad/bos/eos/unk tokens."""

    def __init__(
        self,
        tok: HFTokenizer,
        *,
        pad: str | None = PAD,
        bos: str | None = BOS,
        eos: str | None = EOS,
        unk: str | None = UNK,
    ):
        self._tok = tok
        self.pad_token, self.bos_token, self.eos_token, self.unk_token = pad, bos, eos, unk
        self.pad_id = self._id_or_none(pad)
        self.bos_id = self._id_or_none(bos)
        self.eos_id = self._id_or_none(eos)
        self.unk_id = self._id_or_none(unk)

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int,
        special_tokens: Sequence[str] = (),
        *,
        min_frequency: int = 2,
    ) -> Tokenizer:
        """Train byte-level BPE on `texts`; `<pad> <bos> <eos> <unk>` come first, then the rest."""
        specials = list(dict.fromkeys([*BASE_SPECIALS, *special_tokens]))
        alphabet = pre_tokenizers.ByteLevel.alphabet()
        if vocab_size < len(specials) + len(alphabet):
            raise ConfigError(
                f"vocab_size {vocab_size} is below {len(specials) + len(alphabet)} "
                "(special tokens + 256 byte symbols)"
            )
        tok = HFTokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=[AddedToken(s, special=True, normalized=False) for s in specials],
            initial_alphabet=alphabet,
            show_progress=False,
        )
        tok.train_from_iterator(texts, trainer=trainer)
        return cls(tok)

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        """Load `tokenizer.json` (a file, or a directory holding one, e.g. an HF model dir)."""
        p = Path(path)
        file = p / "tokenizer.json" if p.is_dir() else p
        if not file.exists():
            raise ModelLoadError(f"{file}: tokenizer.json not found")
        try:
            tok = HFTokenizer.from_file(str(file))
        except Exception as e:  # tokenizers raises plain Exception subclasses
            raise ModelLoadError(f"{file}: not a valid tokenizer.json: {e}") from e
        roles = _roles_from_hf_config(file.parent)
        vocab = tok.get_vocab(with_added_tokens=True)
        for role, names in _ROLE_CANDIDATES.items():
            if roles.get(role) is None:
                roles[role] = next((n for n in names if n in vocab), None)
        return cls(tok, **roles)

    def save(self, path: str | Path) -> Path:
        """Write `tokenizer.json` (to `path`, or into it when it is a directory)."""
        p = Path(path)
        file = p / "tokenizer.json" if p.is_dir() else p
        file.parent.mkdir(parents=True, exist_ok=True)
        self._tok.save(str(file))
        return file

    # -- use ---------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    @property
    def backend(self) -> HFTokenizer:
        """The underlying `tokenizers.Tokenizer`."""
        return self._tok

    def encode(self, text: str, *, add_bos: bool = False, allow_special: bool = True) -> list[int]:
        """Token ids of `text`; special-token strings in it become their ids unless disallowed."""
        self._tok.encode_special_tokens = not allow_special
        try:
            ids = self._tok.encode(text, add_special_tokens=False).ids
        finally:
            self._tok.encode_special_tokens = False
        if add_bos:
            if self.bos_id is None:
                raise ValueError("this tokenizer has no bos token")
            ids = [self.bos_id, *ids]
        return ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Iterable[int], *, skip_special_tokens: bool = False) -> str:
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def id_to_token(self, i: int) -> str | None:
        return self._tok.id_to_token(int(i))

    def _id_or_none(self, token: str | None) -> int | None:
        return None if token is None else self._tok.token_to_id(token)

    def __repr__(self) -> str:
        return (
            f"Tokenizer(vocab_size={self.vocab_size}, pad={self.pad_id}, bos={self.bos_id}, "
            f"eos={self.eos_id}, unk={self.unk_id})"
        )


def _roles_from_hf_config(directory: Path) -> dict[str, str | None]:
    """pad/bos/eos/unk token strings from `tokenizer_config.json`/`special_tokens_map.json`."""
    roles: dict[str, str | None] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        f = directory / name
        if not f.exists():
            continue
        try:
            data: dict[str, Any] = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        for role in ("pad", "bos", "eos", "unk"):
            v = data.get(f"{role}_token")
            if isinstance(v, dict):
                v = v.get("content")
            if isinstance(v, str) and roles.get(role) is None:
                roles[role] = v
    return roles
