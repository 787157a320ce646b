"""Seeded toy tasks for the preference and RL trainers (tests, benchmarks, docs).

Token-level tasks on a tiny vocabulary, so they need no tokenizer and run in seconds:

- `preference_pairs`: prompt `<bos> a b`; the preferred one-token answer is determined by
  `a` alone (`answer = ANSWER0 + a`), the rejected answer is another answer token. The
  held-out split uses `b` values never seen in training, so held-out accuracy measures
  whether the rule was learnt rather than the pairs memorised.
- `pattern_reward`: a verifiable reward for GRPO: the fraction of completion positions
  that carry the target token pattern (e.g. alternating 5, 6, 5, 6 ...).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PAD, BOS, EOS = 0, 1, 2
KINDS = 4  # values of `a`
FIRST_A, FIRST_B, N_B = 4, 8, 16
ANSWER0 = FIRST_B + N_B  # answers are ANSWER0 + a
VOCAB = 32


def preference_pairs(
    n: int, *, seed: int, heldout: bool = False
) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
    """(prompts, chosen, rejected) token lists; held-out prompts use unseen `b` values."""
    rng = np.random.default_rng(seed)
    b_values = (
        np.arange(FIRST_B + 12, FIRST_B + N_B) if heldout else np.arange(FIRST_B, FIRST_B + 12)
    )
    prompts, chosen, rejected = [], [], []
    for _ in range(n):
        a = int(rng.integers(KINDS))
        b = int(rng.choice(b_values))
        wrong = int((a + rng.integers(1, KINDS)) % KINDS)
        prompts.append([BOS, FIRST_A + a, b])
        chosen.append([ANSWER0 + a, EOS])
        rejected.append([ANSWER0 + wrong, EOS])
    return prompts, chosen, rejected


def pattern_reward(target: Sequence[int]):  # type: ignore[no-untyped-def]
    """Reward(completions=...) -> fraction of the first len(target) tokens matching `target`."""
    target = list(target)

    def pattern(completions: Sequence[Sequence[int]]) -> list[float]:
        out = []
        for c in completions:
            c = list(c)[: len(target)]
            out.append(sum(int(x == t) for x, t in zip(c, target, strict=False)) / len(target))
        return out

    return pattern


def answer_prompts(n_b: int = 3) -> list[list[int]]:
    """GRPO prompts of the answer task: `<bos> a b` for every kind `a` and `n_b` fillers."""
    return [[BOS, FIRST_A + a, FIRST_B + b] for a in range(KINDS) for b in range(n_b)]


def answer_reward(
    completions: Sequence[Sequence[int]], prompts: Sequence[Sequence[int]]
) -> list[float]:
    """Verifiable reward of the answer task: 1/2 for the right answer token first
    (`ANSWER0 + a`, `a` read from the prompt), 1/2 for stopping right after it (`<eos>`)."""
    out = []
    for c, p in zip(completions, prompts, strict=True):
        want = ANSWER0 + (p[1] - FIRST_A)
        out.append(
            0.5 * float(len(c) > 0 and c[0] == want) + 0.5 * float(len(c) > 1 and c[1] == EOS)
        )
    return out
