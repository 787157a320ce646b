"""Each lever draws alike whatever text the levers before it wrote, so turning one on
changes only the requests it touches, never a later lever's picks elsewhere."""

from __future__ import annotations

import random

from studio_align.simulate.router.levers import swap_first
from studio_align.simulate.router.requests import generate_examples
from studio_align.simulate.router.slots import BUSY_SUBJECTS


def test_a_swap_takes_one_draw_whether_or_not_it_finds_a_word() -> None:
    pools, new = {"en": ("a cat",)}, {"en": ("a fox", "a crow", "an owl")}
    swapped, missed = random.Random(7), random.Random(7)
    assert swap_first("draw a cat", pools, new, swapped) != "draw a cat"
    assert swap_first("draw a dog", pools, new, missed) == "draw a dog"
    assert swapped.random() == missed.random()


def test_an_earlier_swap_leaves_the_later_swaps_picks_alone() -> None:
    """The busy subjects take the subject slot before the anime subjects do (both on): every
    request that differs with busy subjects on holds a busy subject. Had the anime swap
    drawn only where it found a plain subject, each row the busy lever took would shift
    every later anime pick, and rows it never touched would differ too."""
    off = generate_examples(3000, seed=3, busy_prob=0.0, anime_subject_prob=0.3)
    on = generate_examples(3000, seed=3, busy_prob=0.3, anime_subject_prob=0.3)
    changed = [x["request"]["text"] for b, x in zip(off, on, strict=True) if b != x]
    assert len(changed) > 100
    busy = [s for pool in BUSY_SUBJECTS.values() for s in pool]
    assert all(any(s in text for s in busy) for text in changed)
