"""Built-in aesthetic rewards and encoders, through the plugin host like any plugin."""

from __future__ import annotations

import numpy as np
import pytest
from flax import nnx

from studio_align.errors import RewardError
from studio_align.reward_models import rewards as aest
from studio_align.reward_models.color_stats import FEATURE_DIM, ColorStatsEncoder
from studio_align.reward_models.preference import PreferenceModel
from studio_align.reward_models.scorer import AestheticScorer
from studio_align.scoring import score_batch
from studio_align.simulate.grading.scenes import make_scenes
from studio_align.verticals.grading.renderer import params_to_vector, render


def test_registered_through_the_hooks(host):
    assert {"aesthetic", "clip_critic", "identity"} <= set(host.rewards)
    assert {"clip", "color-stats"} <= set(host.encoders)
    enc = host.encoders["color-stats"].factory(size=16)
    assert enc.dim == FEATURE_DIM and enc.identity.startswith("color-stats")


def test_identity_reward_prefers_lighter_edits(host):
    src = list(make_scenes(0, 3, (32, 32)))
    light = [render(s, params_to_vector({"exposure": 0.1})) for s in src]
    heavy = [render(s, params_to_vector({"exposure": 0.9, "contrast": 1.0})) for s in src]
    r = host.rewards["identity"]
    same = r.fn(images=src, sources=src)
    assert np.allclose(same, 1.0, atol=1e-6)
    a, b = np.array(r.fn(images=light, sources=src)), np.array(r.fn(images=heavy, sources=src))
    assert (a > b).all() and (a < 1).all()
    assert r.fn(images=src, sources=[src[0], None, src[2]])[1] is None
    assert r.fn(images=src) == [None, None, None]


def _warmth_scorer() -> AestheticScorer:
    """A preference model whose population head scores warmth (feature 7) only."""
    m = PreferenceModel(FEATURE_DIM, hidden=0, creators=[], rngs=nnx.Rngs(0))
    w = np.zeros((FEATURE_DIM, 1), np.float32)
    w[7] = 1.0
    m.l1.kernel.value = w
    m.l1.bias.value = np.zeros((1,), np.float32)
    return AestheticScorer(m, ColorStatsEncoder(size=16))


def test_aesthetic_reward_uses_context_model_and_explains_missing_one(host, monkeypatch):
    src = list(make_scenes(1, 4, (24, 24)))
    warm = [render(s, params_to_vector({"temperature": 0.8})) for s in src]
    scores = score_batch(
        [host.rewards["aesthetic"]],
        None,
        {"images": src + warm},
        context={"aesthetic_model": _warmth_scorer()},
    )
    s = scores.per_reward["aesthetic"]
    assert (s[4:] > s[:4]).all()
    monkeypatch.delenv(aest.ENV_MODEL, raising=False)
    aest.configure()
    with pytest.raises(RewardError, match="train reward"):
        score_batch([host.rewards["aesthetic"]], None, {"images": src})


def test_clip_critic_with_tiny_clip(host):
    pytest.importorskip("open_clip")
    from studio_align.reward_models.clip import TINY_CONFIG

    enc = host.encoders["clip"].factory(
        model="studio-tiny-clip", model_config=TINY_CONFIG, random_init=True
    )
    imgs = list(make_scenes(2, 3, (32, 32)))
    reqs = [{"text": "warm film"}, "neon street", {"text": ""}]
    out = score_batch(
        [host.rewards["clip_critic"]], None, {"images": imgs, "requests": reqs},
        context={"clip_encoder": enc},
    )  # fmt: skip
    vals = out.per_reward["clip_critic"]
    direct = np.sum(enc.encode_images(imgs) * enc.encode_texts(["warm film", "neon street", ""]), 1)
    np.testing.assert_allclose(vals, direct, atol=1e-5)
    with pytest.raises(RewardError, match="no CLIP encoder"):
        aest.configure()
        score_batch([host.rewards["clip_critic"]], None, {"images": imgs, "requests": reqs})


def test_aesthetic_reward_from_a_model_directory_and_gate(tmp_path, host):
    from studio_align.reward_models.preference import save_preference_model

    scorer = _warmth_scorer()
    meta = {
        "encoder": {
            "name": "color-stats",
            "options": {"size": 16},
            "identity": scorer.encoder.identity,
        },
        "gate": {"floor": 0.6, "accuracy": 0.8, "passed": True},
    }
    save_preference_model(scorer.model, tmp_path / "rm", meta)
    src = list(make_scenes(1, 2, (24, 24)))
    warm = [render(s, params_to_vector({"temperature": 0.8})) for s in src]
    s = host.rewards["aesthetic"].fn(images=src + warm, aesthetic_model=str(tmp_path / "rm"))
    assert s[2] > s[0] and s[3] > s[1]
    meta["gate"] = {"floor": 0.9, "accuracy": 0.55, "passed": False}
    save_preference_model(scorer.model, tmp_path / "rm", meta)  # retrained in place: reloaded
    with pytest.raises(Exception, match=r"0\.550 is below the quality floor 0\.900"):
        score_batch([host.rewards["aesthetic"]], None, {"images": src},
                    context={"aesthetic_model": str(tmp_path / "rm")})  # fmt: skip
