"""Which sentence of a long message is the ask: a logistic regression over the frozen
encoder's vector of each sentence.

Why: a long request is read in windows of whole sentences (`windows.py`), and each window,
routed alone, is sure of what its own sentences name. A window of background ("the agency
already did the music", "we opened a second shop in October") gets a plan as confident as
the window that holds the ask, so the best-scored window is often not the ask's: on the
long validation set the windows were chosen on, some window's plan was the label for 95 %
of requests and the chosen one for 65 %. The sentence most like a request tells which
windows to believe: only windows that contain it compete (`windows.read_windows`).
Measured on the two long validation sets not chosen on, over the quickstart's routers of
three seeds (docs/experiments/router-ask-detector.md): SFT exact 0.667 -> 0.808, the served
router 0.608 -> 0.666, abstaining on 17.5 % of them (30.8 %); 43 ms more per long request.

The detector reads one sentence at a time with the pretrained encoder as shipped
(`frozen.py`), so it is the same for every router and ships as package data
(`weights/ask_detector.json`: the weight vector, the bias, and how they were fitted). It
was fitted on requests (asks) and sentences that ask for nothing (background, greetings,
sign-offs, what is handled elsewhere), by `python -m studio_align.simulate.router.asks`;
`fit_ask_detector` fits one on a platform's own sentences.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.errors import CheckpointError
from studio_align.models.encoders.protocol import encode_texts
from studio_align.router.format import MAX_TEXT_TOKENS
from studio_align.router.frozen import fit_logistic, frozen_encoder

ASK_WEIGHTS = Path(__file__).parent / "weights" / "ask_detector.json"
# one shape for every call, so a server compiles it once (`warm.warm_prior`): eight
# sentences at a time, each cut at the router's window (`format.MAX_TEXT_TOKENS`; a longer
# sentence is a window of its own, which the router cuts too). The long validation sets'
# requests have 8 sentences at the median and 18 at most, of 17 pieces at the median and 65
# at the 99th percentile; one such request took 31 ms at this shape and 178 ms at 32
# sentences of 128 pieces (two cores)
ASK_SHAPE = (8, MAX_TEXT_TOKENS)


@dataclass(frozen=True)
class AskDetector:
    """`p(ask | sentence) = sigmoid(vector(sentence) @ weight + bias)`."""

    weight: np.ndarray  # [512]
    bias: float
    fitted: dict[str, Any]  # how: the command, the data's sizes, the L2 weight

    def probs(self, sentences: Sequence[str]) -> np.ndarray:
        """`[N]` the probability that each sentence is a request."""
        x = encode_texts(frozen_encoder(), list(sentences), shape=ASK_SHAPE)
        return 1.0 / (1.0 + np.exp(-(x @ self.weight + self.bias)))

    def save(self, path: str | Path) -> Path:
        f = Path(path)
        body = {"weight": self.weight.astype(float).round(6).tolist(), "bias": self.bias,
                "fitted": self.fitted}  # fmt: skip
        f.write_text(json.dumps(body) + "\n", encoding="utf-8")
        return f

    @classmethod
    def load(cls, path: str | Path) -> AskDetector:
        """A missing or damaged file is one line (`CheckpointError`)."""
        f = Path(path)
        try:
            body = json.loads(f.read_text(encoding="utf-8"))
            weight = np.asarray(body["weight"], np.float32)
            bias, fitted = float(body["bias"]), dict(body.get("fitted", {}))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CheckpointError(f"{f}: invalid ask detector ({e})") from e
        dim = frozen_encoder().dim
        if weight.shape != (dim,):
            raise CheckpointError(f"{f}: weight {weight.shape}, the encoder's vectors are {dim}-d")
        return cls(weight, bias, fitted)


@cache
def shipped_detector() -> AskDetector:
    """The detector that ships with the package, loaded once per process."""
    return AskDetector.load(ASK_WEIGHTS)


def fit_ask_detector(
    asks: Sequence[str], not_asks: Sequence[str], *, l2: float = 1e-3, **fitted: Any
) -> AskDetector:
    """A detector fitted on `asks` (requests) against `not_asks` (sentences that ask for
    nothing), the two classes weighted alike (the fewer repeated); `fitted` is kept with it."""
    if not asks or not not_asks:
        raise ValueError("an ask detector needs asks and sentences that ask for nothing")
    enc = frozen_encoder()
    xa, xn = encode_texts(enc, list(asks)), encode_texts(enc, list(not_asks))
    repeat = max(1, len(xa) // len(xn))
    x = np.concatenate([xa, *([xn] * repeat)])
    y = np.concatenate([np.ones(len(xa), np.int32), np.zeros(len(xn) * repeat, np.int32)])
    w, b = fit_logistic(x, y, 2, l2)
    fitted = {**fitted, "asks": len(asks), "not_asks": len(not_asks), "l2": l2}
    return AskDetector(w[:, 1] - w[:, 0], float(b[1] - b[0]), fitted)


def ask_sentences(texts: Sequence[str], split: Callable[[str], list[str]]) -> list[str | None]:
    """For each text, its sentence (`split(text)`) most likely to be the ask, or None for a
    text of one sentence; the sentences of every text scored in one pass."""
    parts = [split(t) for t in texts]
    flat = [s for p in parts for s in p if len(p) > 1]
    probs = iter(shipped_detector().probs(flat) if flat else [])
    out: list[str | None] = []
    for p in parts:
        if len(p) < 2:
            out.append(None)
            continue
        scores = [next(probs) for _ in p]
        out.append(p[int(np.argmax(scores))])
    return out
