"""Arrays for each stage of `train grading`, built once from the logs' images.

Every image a kept event refers to is decoded once, through `reward_models.images`
(any size and mode: alpha over grey, 16-bit rescaled, JPEG draft decoding of large
files), into a `thumbnail`-px square; its colour features are computed once. The
stages then index into those arrays:

- `bc_arrays`: (features, conditioning, `after` grade) of retouches;
- `dpo_arrays`: (features, conditioning, chosen grade, rejected grade) from retouches
  (`after ≻ before`, when they differ) and graded selections (chosen ≻ each unchosen);
- `prompt_rows`: GRPO prompts, one per distinct training source (retouch images, and
  selection sources with their style request).

An unreadable image is either a `DataError` naming it (`skip_bad_images = false`) or its
events are dropped and counted (`GradingLogs.skipped["unreadable_image"]`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from studio_align.errors import DataError
from studio_align.reward_models.color_stats import color_features
from studio_align.reward_models.images import load_image
from studio_align.training.metrics import Progress
from studio_align.verticals.grading.logs import GradingLogs
from studio_align.verticals.grading.model import GradingModel, thumbnails


@dataclass
class Thumbs:
    index: dict[str, int]
    pixels: np.ndarray  # [N, S, S, 3] float32
    feats: np.ndarray  # [N, F]

    def rows(self, paths: Sequence[str]) -> np.ndarray:
        return np.array([self.index[p] for p in paths], np.int64)


def default_workers() -> int:
    """Threads for image work: one per usable core (Pillow's decode, resize, 3D LUT and
    encode release the GIL, so images are processed side by side), at most 8."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(n, 8))


def load_thumbs(
    paths: Sequence[str], size: int, *, skip_bad: bool, progress: bool = True
) -> tuple[Thumbs, dict[str, str]]:
    """Decode `paths` into thumbnails (on `default_workers()` threads, in order); returns
    them and {path: reason} of unreadable ones."""

    def one(p: str) -> np.ndarray | str:
        try:
            return thumbnails([load_image(p, max_side=4 * size)], size)[0]
        except DataError as e:
            if not skip_bad:
                raise
            return str(e)

    bar = Progress(len(paths), stage="images", enabled=progress)
    good: list[str] = []
    # filled in place: a list of thumbnails stacked at the end held every pixel twice
    # (at 30,000 thumbnails of 64 px, 1.5 GB more at the peak)
    pixels = np.empty((len(paths), size, size, 3), np.float32)
    bad: dict[str, str] = {}
    with ThreadPoolExecutor(default_workers()) as pool:
        for i, (p, res) in enumerate(zip(paths, pool.map(one, paths), strict=True)):
            if isinstance(res, str):
                bad[p] = res
            else:
                pixels[len(good)] = res
                good.append(p)
            bar.update(i + 1)
    bar.close()
    pixels = pixels[: len(good)]
    feats = np.concatenate(
        [color_features(pixels[i : i + 512]) for i in range(0, len(pixels), 512)]
        or [np.zeros((0, 47), np.float32)]
    )
    return Thumbs({p: i for i, p in enumerate(good)}, pixels, feats), bad


def bc_arrays(
    data: GradingLogs, th: Thumbs, model: GradingModel, split: str = "train"
) -> dict[str, np.ndarray]:
    rs = [r for r in data.retouches if r.split == split]
    rows = th.rows([r.image for r in rs])
    return {
        "feats": th.feats[rows],
        "cond": model.conditioning([""] * len(rs), [r.creator for r in rs]),
        "actions": np.stack([r.after for r in rs]).astype(np.float32)
        if rs
        else np.zeros((0, 9), np.float32),
    }


def dpo_arrays(data: GradingLogs, th: Thumbs, model: GradingModel) -> dict[str, np.ndarray]:
    # (source, style, creator, chosen grade, rejected grade)
    pairs: list[tuple[str, str, str, np.ndarray, np.ndarray]] = [
        (r.image, "", r.creator, r.after, r.before)
        for r in data.retouches
        if r.split == "train" and not np.allclose(r.after, r.before)
    ]
    for s in data.selections:
        if s.split != "train" or s.grades is None or s.source is None:
            continue
        pairs += [
            (s.source, s.prompt, s.creator, s.grades[c], s.grades[j])
            for c in s.chosen
            for j in range(len(s.images))
            if j not in s.chosen
        ]
    if not pairs:
        raise DataError(
            "algorithm = 'dpo' needs retouches whose after differs from before, or selections "
            "with 'source' and candidate 'grade' fields; none in the training split"
        )
    rows = th.rows([p[0] for p in pairs])
    return {
        "feats": th.feats[rows],
        "cond": model.conditioning([p[1] for p in pairs], [p[2] for p in pairs]),
        "chosen": np.clip(np.stack([p[3] for p in pairs]), -1, 1).astype(np.float32),
        "rejected": np.clip(np.stack([p[4] for p in pairs]), -1, 1).astype(np.float32),
    }


def prompt_rows(
    data: GradingLogs, th: Thumbs, split: str = "train"
) -> tuple[list[str], list[str], list[str]]:
    """(source paths, style requests, creators) of GRPO prompts, one per source and style."""
    keys = [(r.image, "", r.creator) for r in data.retouches if r.split == split]
    keys += [
        (s.source, s.prompt, s.creator)
        for s in data.selections
        if s.split == split and s.source is not None
    ]
    out = list(dict.fromkeys(keys))  # distinct, in first-seen order
    return [k[0] for k in out], [k[1] for k in out], [k[2] for k in out]
