"""DPO pair scoring layouts (completion windows, shared-prompt rows): the full projection's
log-probs and gradients, at a fraction of the positions."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.training.dpo import reference_logps
from studio_align.training.packing import pack_pairs
from studio_align.training.pair_scoring import completion_windows, pair_logps, shared_pair_layout


def _pairs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    prompts = [rng.integers(3, 40, int(n)).tolist() for n in (2, 9, 5, 13, 1, 7)]
    chosen = [[*rng.integers(3, 40, int(n)).tolist(), 2] for n in (0, 3, 6, 1, 11, 2)]
    rejected = [[*rng.integers(3, 40, int(n)).tolist(), 2] for n in (4, 0, 2, 9, 1, 5)]
    return pack_pairs(prompts, chosen, rejected, pad_id=0, layout=False)


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


KEYS = ("chosen_logps", "rejected_logps", "chosen_len", "rejected_len")


def test_shared_prompt_rows_equal_two_rows() -> None:
    """Values AND gradients: the window-8 local layer checks that rejected positions restart
    after the prompt, the branch mask that rejected tokens never see chosen ones."""
    model = Transformer(ModelConfig.tiny(41), rngs=nnx.Rngs(0))
    pairs = _pairs()
    shared = shared_pair_layout(pairs)
    assert shared is not None
    assert shared["shared_tokens"].shape[1] < 2 * pairs["chosen_tokens"].shape[1]

    def total(m: Transformer, batch: dict) -> jax.Array:
        out = pair_logps(m, batch)
        return jnp.sum(out["chosen_logps"] * 0.7 - out["rejected_logps"] * 1.3)

    full = jax.jit(pair_logps)(model, pairs)
    fast = jax.jit(pair_logps)(model, {**pairs, **shared})
    for key in KEYS:
        np.testing.assert_allclose(np.asarray(fast[key]), np.asarray(full[key]), rtol=2e-5)
    grad = nnx.jit(nnx.grad(total))
    g_full = grad(model, pairs)
    g_fast = grad(model, {**pairs, **shared})
    for a, b in zip(jax.tree.leaves(g_full), jax.tree.leaves(g_fast), strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-5)


def test_reference_logps_use_the_shared_layout() -> None:
    model = Transformer(ModelConfig.tiny(41), rngs=nnx.Rngs(0))
    pairs = _pairs()
    full = jax.jit(pair_logps)(model, pairs)
    ref, _ = reference_logps(model, pairs, batch_size=4, cache_dir=None)
    np.testing.assert_allclose(ref["ref_chosen_logps"], np.asarray(full["chosen_logps"]), rtol=2e-5)
    assert "shared_tokens" in ref and "chosen_window" not in ref


def test_pairs_that_do_not_share_a_prompt_fall_back_to_windows() -> None:
    model = Transformer(ModelConfig.tiny(41), rngs=nnx.Rngs(0))
    pairs = _pairs()
    pairs["rejected_tokens"] = pairs["rejected_tokens"].copy()
    pairs["rejected_tokens"][3, 0] += 1  # row 3's prompts now differ
    assert shared_pair_layout(pairs) is None
    ref, _ = reference_logps(model, pairs, batch_size=4, cache_dir=None)
    assert ref["chosen_window"].tolist() == completion_windows(pairs)["chosen_window"].tolist()
    full = jax.jit(pair_logps)(model, pairs)
    np.testing.assert_allclose(
        ref["ref_rejected_logps"], np.asarray(full["rejected_logps"]), rtol=2e-5
    )


def test_pack_pairs_picks_the_shorter_layout() -> None:
    assert "shared_tokens" in pack_pairs([[1, 2, 3]], [[4, 5]], [[6]], pad_id=0)
    # 1 + 7 + 7 tokens in one row would be no shorter than two rows of 8: windows instead
    long = pack_pairs([[1]], [[3] * 7], [[4] * 7], pad_id=0)
    assert "shared_tokens" not in long and "chosen_window" in long
