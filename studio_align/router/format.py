"""Router token format: how a request becomes a prompt and a plan becomes a completion.

The router is a plain decoder LM. A prompt is `<bos>` + text tokens + one marker per
attachment + `<plan>`; a completion is one `<step:ENGINE.TASK>` token per step, then
`<eos>`. Every step is a single special token, so the plan grammar is a token-level
automaton (see `grammar.py`) and a plan's probability is a product of a few factors.

Design choices:
- Text is normalised (NFKC, lower-case, collapsed whitespace) before training the
  tokenizer and before encoding, so full-width punctuation or capitals in a creator's
  request do not produce unseen tokens.
- Attachment markers follow the text in a fixed order (image, video, audio), whatever
  order the request lists them in: the plan depends on which kinds are there, not on
  their order, and a fixed order keeps prompts canonical.
- Segmentation noise (for SFT, off by default): `encode_prompt(rng=, split_prob=)`
  cuts words at random interior points and encodes the sides apart, so the router learns a
  request under other BPE segmentations than the greedy one, as it meets them when a
  person's typo, slang or brand name breaks a known word into unfamiliar pieces
  (BPE-dropout's idea, seeded so a run is reproducible).
- Special-token ids come first and in a fixed order (the catalog's order for steps), so a
  tokenizer trained on different texts still maps every step to the same id.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from studio_align.catalog import ATTACHMENT_KINDS, Catalog
from studio_align.errors import DataError
from studio_align.models.tokenizer import Tokenizer

PAD, BOS, EOS, UNK, PLAN = "<pad>", "<bos>", "<eos>", "<unk>", "<plan>"
BASE_SPECIAL_TOKENS: tuple[str, ...] = (PAD, BOS, EOS, UNK, PLAN)


def attachment_token(kind: str) -> str:
    return f"<att:{kind}>"


def step_token(step: str) -> str:
    return f"<step:{step}>"


def special_tokens(catalog: Catalog) -> list[str]:
    """All router special tokens, in id order: base tokens, attachment markers, steps."""
    return [
        *BASE_SPECIAL_TOKENS,
        *(attachment_token(k) for k in ATTACHMENT_KINDS),
        *(step_token(s) for s in catalog.names),
    ]


class TokenizerLike(Protocol):
    """What the router needs from the engine's tokenizer."""

    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: Sequence[int]) -> str: ...
    def token_to_id(self, tok: str) -> int | None: ...

    @property
    def vocab_size(self) -> int: ...


_SPACE = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """NFKC, lower-case and single spaces: what both tokenizer training and encoding see."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip().lower()


def request_fields(request: Any) -> tuple[str, list[str]]:
    """(text, attachments) of a request given as a mapping or an object with those fields."""
    if isinstance(request, Mapping):
        text, atts = request.get("text"), request.get("attachments", [])
    else:
        text, atts = getattr(request, "text", None), getattr(request, "attachments", [])
    if not isinstance(text, str):
        raise DataError(f"routing request needs a string 'text', got {type(text).__name__}")
    atts = list(atts or [])
    bad = [a for a in atts if a not in ATTACHMENT_KINDS]
    if bad:
        raise DataError(
            f"routing request: unknown attachment kind(s) {bad}; "
            f"expected some of {list(ATTACHMENT_KINDS)}"
        )
    return text, atts


def build_tokenizer(texts: Iterable[str], catalog: Catalog, vocab_size: int = 2048) -> Any:
    """Train the engine's byte-level BPE tokenizer on request texts with the router tokens."""

    corpus = [normalize_text(t) for t in texts]
    tok = Tokenizer.train(corpus, vocab_size=vocab_size, special_tokens=special_tokens(catalog))
    check_tokenizer(tok, catalog)
    return tok


def check_tokenizer(tok: TokenizerLike, catalog: Catalog) -> None:
    """Raise unless every router special token is a single known token."""
    missing = [t for t in special_tokens(catalog) if tok.token_to_id(t) is None]
    if missing:
        raise DataError(
            f"tokenizer lacks router token(s) {missing}; rebuild it with build_tokenizer "
            "for this catalog"
        )


def _id(tok: TokenizerLike, token: str) -> int:
    i = tok.token_to_id(token)
    if i is None:
        raise DataError(f"tokenizer has no token {token!r}")
    return int(i)


def _encode_text(tok: TokenizerLike, text: str) -> list[int]:
    """Text ids with special-token strings in the text kept as plain text, so a request
    that contains `<step:...>` or `<plan>` cannot inject control tokens."""
    try:
        return list(tok.encode(text, allow_special=False))  # type: ignore[call-arg]
    except TypeError:
        return list(tok.encode(text))


MAX_TEXT_TOKENS = 96
"""Text tokens kept per request. A routing intent lives in a sentence or two; bounding the
prompt bounds the shapes a server must compile (prompt buckets 16..128) and the cost of a
pasted essay. Training and routing truncate alike, so the model sees what it will serve."""


def truncate_ids(ids: list[int], limit: int) -> list[int]:
    """Keep the head and the tail (the request's verb and its last clause, e.g. "...and add
    music") when `ids` is longer than `limit`."""
    if len(ids) <= limit:
        return ids
    tail = limit // 4
    return ids[: limit - tail] + ids[len(ids) - tail :]


_WORD = re.compile(r"\w{2,}")


def text_pieces(tok: TokenizerLike, request: Any) -> int:
    """How many text ids the request's whole text has, before `truncate_ids`."""
    return len(_encode_text(tok, normalize_text(request_fields(request)[0])))


def split_cuts(text: str, rng: np.random.Generator, prob: float) -> list[int]:
    """Segmentation-noise cut points: with probability `prob`, one uniform interior point of
    each word of two or more characters (a Latin word, a run of CJK characters)."""
    cuts = []
    for m in _WORD.finditer(text):
        if rng.random() < prob:
            cuts.append(int(rng.integers(m.start() + 1, m.end())))
    return cuts


def _encode_cut(tok: TokenizerLike, text: str, cuts: Sequence[int]) -> list[int]:
    ids: list[int] = []
    for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True):
        ids += _encode_text(tok, text[a:b])
    return ids


def encode_prompt(
    tok: TokenizerLike,
    request: Any,
    *,
    max_text_tokens: int = MAX_TEXT_TOKENS,
    rng: np.random.Generator | None = None,
    split_prob: float = 0.0,
) -> list[int]:
    """`<bos>` + text tokens (at most `max_text_tokens`) + attachment markers (fixed kind
    order) + `<plan>`. With `rng` and `split_prob > 0`, the text carries segmentation noise
    (module docstring); otherwise nothing is drawn."""
    text, atts = request_fields(request)
    norm = normalize_text(text)
    cuts = split_cuts(norm, rng, split_prob) if rng is not None and split_prob > 0 else []
    text_ids = truncate_ids(_encode_cut(tok, norm, cuts), max_text_tokens)
    ids = [_id(tok, BOS), *text_ids]
    ids += [_id(tok, attachment_token(k)) for k in ATTACHMENT_KINDS if k in atts]
    ids.append(_id(tok, PLAN))
    return ids


def encode_plan(tok: TokenizerLike, plan: Sequence[str]) -> list[int]:
    """One step token per step, then `<eos>`."""
    return [_id(tok, step_token(s)) for s in plan] + [_id(tok, EOS)]


def step_id_map(tok: TokenizerLike, catalog: Catalog) -> dict[int, str]:
    """Token id -> step name, for every catalog step."""
    return {_id(tok, step_token(s)): s for s in catalog.names}


def decode_plan(
    tok: TokenizerLike, ids: Iterable[int], catalog: Catalog | None = None
) -> list[str]:
    """Step names from generated ids, stopping at `<eos>`/`<pad>`; non-step tokens are skipped.

    With a catalog the id map is exact; without one, step tokens are recognised by their
    `<step:...>` text (one decode call per id).
    """
    stop = {_id(tok, EOS), _id(tok, PAD)}
    known = step_id_map(tok, catalog) if catalog is not None else None
    plan: list[str] = []
    for i in ids:
        i = int(i)
        if i in stop:
            break
        if known is not None:
            if i in known:
                plan.append(known[i])
            continue
        piece = tok.decode([i]).strip()
        if piece.startswith("<step:") and piece.endswith(">"):
            plan.append(piece[len("<step:") : -1])
    return plan


def is_cjk(text: str) -> bool:
    """True when the text contains any CJK ideograph (the language split of evaluation)."""
    return any("\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf" for ch in text)
