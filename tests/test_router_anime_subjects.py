"""Anime subjects: a still's or a clip's subject becomes one drawn the anime way; the plan,
the attachments and every other example stay as they were."""

from __future__ import annotations

from router_lever_helpers import hand_written_texts, lever_changes, swapped_plans

from studio_align.router.format import is_cjk
from studio_align.simulate.router.phrases import BOARD
from studio_align.simulate.router.slots import ANIME_SUBJECTS, BUSY_SUBJECTS, SLOTS


def test_anime_subject_prob_swaps_the_subject_of_stills_and_clips_only() -> None:
    changed, n = lever_changes("anime_subject_prob", 0.5, seed=5)
    assert 0.08 < len(changed) / n < 0.2  # about half of the 28 % with a pool subject
    plans = swapped_plans(changed, SLOTS["subject"], ANIME_SUBJECTS)
    assert not any(BOARD in p for p in plans)  # storyboards name a story, not a subject
    assert ("wan.text_to_video",) in plans and ("ideogram.text_to_image",) in plans


def _shingles(phrase: str) -> set[str]:
    """Runs of four English words or five Chinese characters: longer than a trade's phrase
    ("an anime girl", 魔法少女), which a lever may share with the sets."""
    if is_cjk(phrase):
        return {phrase[i : i + 5] for i in range(len(phrase) - 4)}
    words = phrase.lower().split()
    return {" ".join(words[i : i + 4]) for i in range(len(words) - 3)}


def test_anime_subjects_are_new_and_copy_no_hand_written_request() -> None:
    plain = {s for pool in (*SLOTS["subject"].values(), *BUSY_SUBJECTS.values()) for s in pool}
    texts = hand_written_texts()
    for lang, pool in ANIME_SUBJECTS.items():
        assert len(set(pool)) == len(pool) >= 24
        assert not plain & set(pool)
        assert all(is_cjk(s) == (lang == "zh") for s in pool)
        assert all("storyboard" not in s and "分镜" not in s for s in pool)
        copied = {g for s in pool for g in _shingles(s) if any(g in t for t in texts)}
        assert not copied, copied
