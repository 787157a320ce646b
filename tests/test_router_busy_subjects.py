"""Busy subjects: the scene's nouns change, the plan and every other example do not."""

from __future__ import annotations

from router_lever_helpers import lever_changes

from studio_align.router.format import is_cjk
from studio_align.simulate.router.slots import BUSY_SUBJECTS, SLOTS


def test_busy_prob_swaps_subjects_only_and_keeps_the_rest_byte_identical() -> None:
    # the anime subjects swap the same slot after it: off, so a changed row lost its subject
    changed, n = lever_changes("busy_prob", 0.5, seed=3, anime_subject_prob=0.0)
    assert 0.08 < len(changed) / n < 0.25  # only requests with a pool subject change
    for b, x in changed:
        (old,) = [s for pool in SLOTS["subject"].values() for s in pool
                  if s in b["request"]["text"] and s not in x["request"]["text"]]  # fmt: skip
        lang = "zh" if is_cjk(old) else "en"
        new = [s for s in BUSY_SUBJECTS[lang] if s in x["request"]["text"]]
        assert new, (old, x["request"]["text"])  # replaced in the subject's own language


def test_busy_subjects_are_distinct_from_the_plain_pool() -> None:
    plain = {s for pool in SLOTS["subject"].values() for s in pool}
    for lang, pool in BUSY_SUBJECTS.items():
        assert len(set(pool)) == len(pool) >= 30
        assert not plain & set(pool)
        assert all(is_cjk(s) == (lang == "zh") for s in pool)
