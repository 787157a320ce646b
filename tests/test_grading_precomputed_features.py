"""`train grading` hands its thumbnails' colour features to the inline reward model
instead of decoding every image a second time; that is only right if they are exactly
what the reward model's own encoder computes from the files, which these tests check."""

from __future__ import annotations

import numpy as np
import pytest

from studio_align.reward_models.cache import CachedEncoder
from studio_align.reward_models.color_stats import ColorStatsEncoder
from studio_align.reward_models.train import (
    EncoderConfig,
    FitSection,
    RewardTrainConfig,
    train_reward,
)
from studio_align.simulate.grading.platform import write_platform_demo
from studio_align.verticals.grading.dataset import load_thumbs
from studio_align.verticals.grading.logs import read_grading_logs

THUMB = 16


@pytest.fixture(scope="module")
def platform(tmp_path_factory):
    # JPEGs larger than 4 * THUMB, so both paths take the JPEG draft decode
    root = tmp_path_factory.mktemp("platform")
    return write_platform_demo(root, retouches=2, selections=6, ratings=2, size=96,
                               creators=["ana", "bo"], image_format="jpg")  # fmt: skip


def test_thumbnail_features_equal_the_reward_encoders_embeddings(platform, tmp_path):
    paths = read_grading_logs([str(platform)], heldout_fraction=0.0).images()
    th, bad = load_thumbs(paths, THUMB, skip_bad=True, progress=False)
    assert not bad
    enc = CachedEncoder(ColorStatsEncoder(THUMB), tmp_path / "cache", max_side=4 * THUMB)
    np.testing.assert_allclose(th.feats[th.rows(paths)], enc.encode_files(paths), atol=1e-6)


@pytest.mark.slow  # two reward-model fits (about 10 s of CPU each at idle)
def test_reward_model_with_precomputed_features_is_the_same_model(platform, tmp_path):
    paths = read_grading_logs([str(platform)], heldout_fraction=0.0).images()
    th, _ = load_thumbs(paths, THUMB, skip_bad=True, progress=False)
    reports = []
    for name, feats in (("plain", None), ("pre", {p: th.feats[i] for p, i in th.index.items()})):
        cfg = RewardTrainConfig(
            logs=[str(platform)], out=str(tmp_path / name), heldout_fraction=0.3,
            skip_bad_images=True, train=FitSection(steps=5), gate={"min_heldout_accuracy": 0.0},
            encoder=EncoderConfig(options={"size": THUMB}, max_side=4 * THUMB,
                                  cache_dir=str(tmp_path / f"cache-{name}")),
        )  # fmt: skip
        reports.append(train_reward(cfg, features=feats))
    plain, pre = reports
    assert plain["encoder"]["precomputed"] == 0 and plain["encoder"]["cache_misses"] > 0
    assert pre["encoder"]["precomputed"] == pre["images"] and pre["encoder"]["cache_misses"] == 0
    assert pre["loss"] == plain["loss"] and pre["heldout"] == plain["heldout"]
