"""DPO scoring at completion positions only: same log-probs as the full projection."""

from __future__ import annotations

import jax
import numpy as np
from flax import nnx

from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.training.dpo import completion_windows, pair_logps, reference_logps
from studio_align.training.packing import pack_pairs


def _pairs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    prompts = [rng.integers(3, 40, int(n)).tolist() for n in (2, 9, 5, 13, 1, 7)]
    chosen = [[*rng.integers(3, 40, int(n)).tolist(), 2] for n in (0, 3, 6, 1, 11, 2)]
    rejected = [[*rng.integers(3, 40, int(n)).tolist(), 2] for n in (4, 0, 2, 9, 1, 5)]
    return pack_pairs(prompts, chosen, rejected, pad_id=0)


def test_windows_cover_every_completion_token() -> None:
    pairs = _pairs()
    w = completion_windows(pairs)
    k = w["chosen_window"].shape[1]
    assert k % 8 == 0 and w["rejected_window"].shape == w["chosen_window"].shape
    for side in ("chosen", "rejected"):
        loss = pairs[f"{side}_loss"].astype(bool)
        for row, idx in zip(loss, w[f"{side}_window"], strict=True):
            covered = np.zeros_like(row)
            covered[idx + 1] = True
            assert not (row & ~covered).any()  # no completion token left out
            assert idx.min() >= 0 and idx.max() + 1 < len(row)


def test_windowed_pair_logps_equal_full() -> None:
    model = Transformer(ModelConfig.tiny(41), rngs=nnx.Rngs(0))
    pairs = _pairs()
    full = jax.jit(pair_logps)(model, pairs)
    windowed = jax.jit(pair_logps)(model, {**pairs, **completion_windows(pairs)})
    for key in ("chosen_logps", "rejected_logps", "chosen_len", "rejected_len"):
        np.testing.assert_allclose(np.asarray(windowed[key]), np.asarray(full[key]), rtol=1e-5)
    ref, _ = reference_logps(model, pairs, batch_size=4, cache_dir=None)
    np.testing.assert_allclose(ref["ref_chosen_logps"], np.asarray(full["chosen_logps"]), rtol=1e-5)
    assert ref["chosen_window"].tolist() == completion_windows(pairs)["chosen_window"].tolist()
