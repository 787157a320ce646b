"""KV-cache sampler: cache/greedy equivalence, constraints, log-probs, no recompiles."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from studio_align.generation.constraint import FSMConstraint
from studio_align.generation.draw import filter_logits, sample_categorical
from studio_align.generation.sampler import Sampler, bucket_prompt
from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer

V, EOS, PAD = 41, 2, 0


@pytest.fixture(scope="module")
def model() -> Transformer:
    # Window 6 < prompt + generated length, so the local layer's mask is exercised.
    m = Transformer(ModelConfig.tiny(V, sliding_window=6), rngs=nnx.Rngs(0))
    # Sharpen the output distribution a bit so greedy paths are not knife-edge ties.
    m.embed_tokens.embedding[...] = m.embed_tokens.embedding[...] * 3.0
    return m


@nnx.jit
def last_logits(model, tokens, length):
    mask = jnp.arange(tokens.shape[1])[None] < length
    return model(tokens, None, mask)[0, length - 1]


@nnx.jit
def _padded_logits(model, tokens, length):
    mask = jnp.arange(tokens.shape[1])[None] < length
    return model(tokens, None, mask)[0]


def full_logits(model, seq):
    """Logits [len(seq), V] of one sequence, through a fixed-size jitted forward."""
    buf = np.zeros((1, 64), np.int32)
    buf[0, : len(seq)] = seq
    return np.asarray(_padded_logits(model, jnp.asarray(buf), len(seq)))[: len(seq)]


def reference_greedy(model, prompt, steps, allowed=None, next_state=None, state=0):
    """Argmax decoding by a full forward pass per token, no cache."""
    buf = np.zeros((1, 64), np.int32)
    buf[0, : len(prompt)] = prompt
    n = len(prompt)
    out = []
    for _ in range(steps):
        logits = np.asarray(last_logits(model, jnp.asarray(buf), n))
        if allowed is not None:
            logits = np.where(allowed[state], logits, -np.inf)
        tok = int(logits.argmax())
        out.append(tok)
        if allowed is not None:
            state = int(next_state[state, tok])
        if tok == EOS:
            break
        buf[0, n] = tok
        n += 1
    return out


PROMPTS = [[1, 5, 9, 12], [1, 30, 7, 8, 20, 21, 22, 4, 3], [1, 17]]


@pytest.mark.parametrize("pad_side", ["right", "left"])
def test_greedy_with_cache_equals_full_forward_argmax(model, pad_side):
    steps = 12  # prompt + generation runs well past the sliding window of 6
    sampler = Sampler(model, eos_id=EOS, pad_id=PAD, pad_side=pad_side)
    out = sampler.sample(PROMPTS, max_new_tokens=steps, temperature=0.0)
    assert out.tokens.shape == (3, steps)
    for i, p in enumerate(PROMPTS):
        ref = reference_greedy(model, p, steps)
        assert out.tokens[i, : out.lengths[i]].tolist() == ref
        assert out.lengths[i] == len(ref)


@pytest.mark.slow  # ~12 s; the router warm-up, server compile-count and flow compile-once tests cover it
def test_same_buckets_never_recompile(model):
    sampler = Sampler(model, eos_id=EOS)
    sampler.sample([[1, 2, 3]], max_new_tokens=5, temperature=0.0)
    n = sampler.compile_count
    # Same buckets (batch 1->1, prompt <=16, new tokens <=8), other lengths and values.
    sampler.sample([[1, 4, 5, 6, 7, 8, 9]], max_new_tokens=7, temperature=0.0)
    Sampler(model, eos_id=EOS).sample([[3] * 16], max_new_tokens=8, temperature=0.0)
    # a snapshot sampler's graphdef is hashed once (`StaticGraph`), still the same program
    Sampler(model, eos_id=EOS, snapshot=True).sample([[3] * 9], max_new_tokens=8, temperature=0.0)
    assert sampler.compile_count == n
    sampler.sample([[1, 2]], max_new_tokens=5, temperature=0.7, seed=1)
    m = sampler.compile_count
    assert m == n + 1  # sampling mode differs from greedy: one new program
    sampler.sample([[1, 2, 9]], max_new_tokens=6, temperature=1.3, seed=5)
    assert sampler.compile_count == m
    sampler.sample([[1, 2]] * 3, max_new_tokens=5, temperature=0.7)  # batch bucket 4
    assert sampler.compile_count == m + 1


def test_logps_are_constrained_policy_logps(model):
    # Constraint: only tokens 10..19 and EOS allowed; temperature/top-k do not change logps.
    allowed = np.zeros((1, V), bool)
    allowed[0, 10:20] = True
    allowed[0, EOS] = True
    fsm = FSMConstraint(allowed=allowed, next_state=np.zeros((1, V), np.int32))
    sampler = Sampler(model, eos_id=EOS)
    out = sampler.sample(
        PROMPTS, max_new_tokens=6, temperature=0.7, top_k=4, seed=3, constraint=fsm
    )
    for i, p in enumerate(PROMPTS):
        gen = out.tokens[i, : out.lengths[i]].tolist()
        assert all(allowed[0, t] for t in gen)
        logits = full_logits(model, p + gen)
        for k, tok in enumerate(gen):
            row = np.where(allowed[0], logits[len(p) - 1 + k], -np.inf)
            ref = row[tok] - np.logaddexp.reduce(row[allowed[0]])
            np.testing.assert_allclose(out.logps[i, k], ref, atol=1e-4)
        assert np.all(out.logps[i, out.lengths[i] :] == 0)
        assert np.all(out.tokens[i, out.lengths[i] :] == PAD)


def test_fsm_grammar_and_eos_stop(model):
    # Grammar: exactly "A B EOS" with A in {10, 11}, B in {20, 21}; states 0 -> 1 -> 2 -> 3.
    s = 4
    allowed = np.zeros((s, V), bool)
    nxt = np.full((s, V), 3, np.int32)
    allowed[0, [10, 11]] = True
    nxt[0, [10, 11]] = 1
    allowed[1, [20, 21]] = True
    nxt[1, [20, 21]] = 2
    allowed[2, EOS] = True
    allowed[3, PAD] = True
    fsm = FSMConstraint(allowed=allowed, next_state=nxt, init_state=np.array([0, 1, 0]))
    sampler = Sampler(model, eos_id=EOS)
    for temperature in (0.0, 1.0):
        out = sampler.sample(
            PROMPTS, max_new_tokens=8, temperature=temperature, seed=0, constraint=fsm
        )
        assert out.lengths.tolist() == [3, 2, 3]
        for i, st in enumerate([0, 1, 0]):
            gen = out.tokens[i, : out.lengths[i]].tolist()
            assert fsm.accepts_prefix(gen, st) and gen[-1] == EOS
            assert out.logps[i, out.lengths[i] - 1] == pytest.approx(0.0, abs=1e-6)  # forced
    # Greedy under the constraint agrees with the uncached reference.
    greedy = sampler.sample(PROMPTS, max_new_tokens=8, temperature=0.0, constraint=fsm)
    for i, st in enumerate([0, 1, 0]):
        ref = reference_greedy(model, PROMPTS[i], 8, allowed, nxt, st)
        assert greedy.tokens[i, : greedy.lengths[i]].tolist() == ref


@pytest.mark.slow  # ~13 s; test_logps_are_constrained_policy_logps keeps the policy check in the default run
def test_sampling_frequencies_match_policy(model):
    allowed = np.zeros((1, V), bool)
    allowed[0, [5, 6, 7]] = True
    fsm = FSMConstraint(allowed=allowed, next_state=np.zeros((1, V), np.int32))
    sampler = Sampler(model, eos_id=EOS)
    prompt = [1, 9, 14]
    out = sampler.sample([prompt] * 256, max_new_tokens=1, temperature=1.0, seed=11, constraint=fsm)
    logits = full_logits(model, prompt)[-1, [5, 6, 7]]
    probs = np.exp(logits - np.logaddexp.reduce(logits))
    freq = np.array([(out.tokens[:, 0] == t).mean() for t in (5, 6, 7)])
    assert np.abs(freq - probs).max() < 0.09, (freq, probs)
    np.testing.assert_allclose(np.exp(out.logps[:, 0]), probs[out.tokens[:, 0] - 5], rtol=1e-4)
    # top-k 1 (with top-p on too) is greedy.
    g = sampler.sample([prompt], max_new_tokens=4, temperature=0.0).tokens
    assert (
        sampler.sample([prompt], max_new_tokens=4, top_k=1, top_p=0.5, seed=2).tokens == g
    ).all()


def test_sample_categorical_never_draws_a_zero_mass_token():
    # Mass on a few tokens spread over blocks, with a near-zero one at a block's edge:
    # every draw (including the rounding fallback inside the chosen block) has mass.
    logits = np.full((512, 300), -np.inf, np.float32)
    logits[:, [3, 63, 64, 200, 299]] = [0.0, -30.0, 1.0, 2.0, 0.5]
    tok = np.asarray(sample_categorical(jax.random.key(3), jnp.asarray(logits)))
    assert set(np.unique(tok)) <= {3, 63, 64, 200, 299}
    freq = np.bincount(tok, minlength=300)[[3, 64, 200, 299]] / len(tok)
    probs = np.exp([0.0, 1.0, 2.0, 0.5]) / np.exp([0.0, 1.0, 2.0, 0.5]).sum()
    assert np.abs(freq - probs).max() < 0.07, (freq, probs)


def test_filter_logits():
    logits = jnp.log(jnp.array([[0.5, 0.3, 0.15, 0.05]]))
    k2 = filter_logits(logits, jnp.int32(2), jnp.float32(1.0), use_k=True, use_p=False)
    assert np.isfinite(np.asarray(k2)).tolist() == [[True, True, False, False]]
    p = filter_logits(logits, jnp.int32(0), jnp.float32(0.79), use_k=False, use_p=True)
    assert np.isfinite(np.asarray(p)).tolist() == [[True, True, False, False]]
    p = filter_logits(logits, jnp.int32(0), jnp.float32(0.81), use_k=False, use_p=True)
    assert np.isfinite(np.asarray(p)).tolist() == [[True, True, True, False]]


def test_bad_inputs(model):
    sampler = Sampler(model, eos_id=EOS)
    with pytest.raises(ValueError, match="at least one token"):
        sampler.sample([[]], max_new_tokens=2)
    with pytest.raises(ValueError, match=r"\[0, 41\)"):
        sampler.sample([[1, V]], max_new_tokens=2)
    with pytest.raises(ValueError, match="covers"):
        sampler.sample([[1]], max_new_tokens=2, constraint=FSMConstraint.unconstrained(V + 1))
    with pytest.raises(ValueError, match="init_state"):
        sampler.sample(
            [[1], [2]],
            max_new_tokens=2,
            constraint=FSMConstraint(
                np.ones((1, V), bool), np.zeros((1, V), np.int32), np.array([0, 0, 0])
            ),
        )


def test_prompt_buckets_are_multiples_not_powers():
    # 48-token prompts are not padded to 64; at most four buckets per octave
    assert [bucket_prompt(n) for n in (1, 3, 16, 17, 48, 49, 64, 65, 130, 300)] == [
        16, 16, 16, 32, 48, 64, 64, 96, 192, 384,
    ]  # fmt: skip


@pytest.mark.parametrize(
    "constrained", [pytest.param(False, marks=pytest.mark.slow), True]
)  # the constrained case runs the same shared-prefill path under the grammar, ~17 s less
def test_group_size_shares_the_prefill(model, constrained):
    """G samples per prompt from one prefill == the prompt repeated G times (greedy: same
    tokens and log-probs; rows prompt-major), and each group row draws its own sample."""
    g = 3
    fsm = None
    if constrained:
        allowed = np.zeros((1, V), bool)
        allowed[0, 10:20] = True
        allowed[0, EOS] = True
        fsm = FSMConstraint(allowed=allowed, next_state=np.zeros((1, V), np.int32))
    sampler = Sampler(model, eos_id=EOS, pad_id=PAD)
    shared = sampler.sample(
        PROMPTS, max_new_tokens=7, temperature=0.0, group_size=g, constraint=fsm
    )
    rows = [p for p in PROMPTS for _ in range(g)]
    plain = sampler.sample(rows, max_new_tokens=7, temperature=0.0, constraint=fsm)
    assert shared.tokens.shape == (len(rows), 7)
    assert shared.tokens.tolist() == plain.tokens.tolist()
    assert shared.lengths.tolist() == plain.lengths.tolist()
    np.testing.assert_allclose(shared.logps, plain.logps, atol=1e-5)
    # sampled: the same draws as the repeated prompts (same key, same rows), not all alike
    drawn = sampler.sample([PROMPTS[1]], max_new_tokens=7, temperature=4.0, seed=4, group_size=8)
    again = sampler.sample([PROMPTS[1]] * 8, max_new_tokens=7, temperature=4.0, seed=4)
    assert drawn.tokens.tolist() == again.tokens.tolist()
    assert len({tuple(t) for t in drawn.tokens.tolist()}) > 1
