"""GRPO scores each prompt once for its G samples (`LMPolicy.grouped_logps`): the same
log-probs, entropies and gradients as scoring every sample in its own row."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from studio_align.generation.constraint import FSMConstraint
from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.training.policy import LMPolicy

V, EOS, PAD = 41, 2, 0


def _constraint(rows: object) -> FSMConstraint:
    """Two states: state 0 allows the even ids (and eos), state 1 the odd ones."""
    ids = np.arange(V)
    allowed = np.stack([(ids % 2 == 0) | (ids == EOS), (ids % 2 == 1) | (ids == EOS)])
    allowed[:, PAD] = False
    next_state = np.tile((1 - np.arange(2))[:, None], (1, V)).astype(np.int32)
    return FSMConstraint(allowed=allowed, next_state=next_state, init_state=0)


# the unconstrained case runs with `-m slow` (the constrained one covers its path plus the mask)
@pytest.mark.parametrize("constrained", [pytest.param(False, marks=pytest.mark.slow), True])
def test_grouped_logps_equal_per_row(constrained: bool) -> None:
    model = Transformer(ModelConfig.tiny(V), rngs=nnx.Rngs(0))  # window 8: positions matter
    policy = LMPolicy(
        max_prompt_len=12, max_new_tokens=6, pad_id=PAD, eos_id=EOS,
        constraint_for=_constraint if constrained else None,
    )  # fmt: skip
    rng = np.random.default_rng(0)
    prompts = [rng.integers(3, V, n).tolist() for n in (1, 12, 5, 9)]  # ragged, one full width
    g = 3
    rollout = policy.sample(model, prompts, g, jax.random.key(1))
    assert rollout.lengths.min() < rollout.lengths.max()  # some stop early: padding inside rows
    batch = {k: jnp.asarray(v) for k, v in rollout.batch.items()}
    rows = jax.jit(policy.logps)(model, batch)
    grouped = jax.jit(lambda m, b: policy.grouped_logps(m, b, g))(model, batch)
    real = rollout.mask  # entropy past a completion's end is never used: compare real tokens
    for a, b in zip(rows, grouped, strict=True):
        np.testing.assert_allclose(np.asarray(b)[real], np.asarray(a)[real], rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(np.asarray(grouped[0]), rollout.old_logps, atol=2e-4)

    def total(m: Transformer, scorer: object) -> jax.Array:
        lp = scorer(m, batch)[0]  # type: ignore[operator]
        return jnp.sum(lp * jnp.linspace(0.5, 1.5, lp.size).reshape(lp.shape))

    g_rows = nnx.jit(nnx.grad(lambda m: total(m, policy.logps)))(model)
    g_grp = nnx.jit(nnx.grad(lambda m: total(m, lambda mm, b: policy.grouped_logps(mm, b, g))))(
        model
    )
    for a, b in zip(jax.tree.leaves(g_rows), jax.tree.leaves(g_grp), strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-5)
