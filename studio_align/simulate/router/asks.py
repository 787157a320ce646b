"""The sentences the shipped ask detector (`router/asks.py`) is fitted on, and the command
that fits it.

Asks are the generator's training requests at today's defaults (one demo seed); sentences
that ask for nothing are the pools that long messages and context lines are written from:
background, greetings, sign-offs, what is handled elsewhere, hand-offs and deadlines
(`long_messages.py`, `slots.CONTEXT_LINES`). None of them is a sentence of a hand-written
set.

    python -m studio_align.simulate.router.asks [--seed 0] [--n 3000] [--out PATH]

writes the detector (default: the package's `router/weights/ask_detector.json`).
"""

from __future__ import annotations

import argparse
import sys

from studio_align.router.asks import ASK_WEIGHTS, AskDetector, fit_ask_detector
from studio_align.router.format import request_fields
from studio_align.simulate.router import long_messages as lm
from studio_align.simulate.router.requests import demo_splits
from studio_align.simulate.router.slots import CONTEXT_LINES


def detector_sentences(seed: int = 0, n: int = 3000) -> tuple[list[str], list[str]]:
    """`(asks, not_asks)`: the distinct texts of `n` generated training requests, and the
    pools' sentences that ask for nothing."""
    train = demo_splits(seed=seed, n_train=n, n_val=1, n_heldout=1)["train"]
    asks = sorted({request_fields(r["request"])[0] for r in train})
    not_asks: list[str] = []
    for lang in ("en", "zh"):
        not_asks += [
            *lm.BACKGROUND[lang],
            *lm.GREETINGS[lang],
            *lm.SIGNOFFS[lang],
            *CONTEXT_LINES[lang],
        ]
        not_asks += [s for medium in lm.HANDLED.values() for s in medium[lang]]
    return asks, sorted(set(not_asks))


def fit_shipped(seed: int = 0, n: int = 3000) -> AskDetector:
    asks, not_asks = detector_sentences(seed, n)
    command = f"python -m studio_align.simulate.router.asks --seed {seed} --n {n}"
    return fit_ask_detector(asks, not_asks, command=command)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=3000, help="generated requests (asks)")
    ap.add_argument("--out", default=str(ASK_WEIGHTS))
    args = ap.parse_args(argv)
    detector = fit_shipped(args.seed, args.n)
    print(f"{detector.save(args.out)}: {detector.fitted}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
