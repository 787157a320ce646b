"""Continuous batching (`generation/continuous.py`): a few rows serving a longer queue give
the batch sampler's greedy tokens, policy log-probs, grammar and per-request draws."""

from __future__ import annotations

import numpy as np
import pytest
from flax import nnx
from test_sampler import full_logits

from studio_align.generation.constraint import FSMConstraint
from studio_align.generation.sampler import Sampler
from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer

V, PAD = 41, 0
ENDS = tuple(range(2, 8))  # six end ids of 41: lengths vary from 1 to the limit
PROMPTS = [[1, 5, 9, 12], [1, 30, 7, 8, 20, 21, 22, 4, 3], [1, 17], [1, 2, 3], [1, 40, 39]]


@pytest.fixture(scope="module")
def model() -> Transformer:
    m = Transformer(ModelConfig.tiny(V, sliding_window=6), rngs=nnx.Rngs(0))
    m.embed_tokens.embedding[...] = m.embed_tokens.embedding[...] * 3.0  # fewer near-ties
    return m


def _rows(out, i: int) -> list[int]:
    return out.tokens[i, : out.lengths[i]].tolist()


def test_greedy_equals_the_batch_sampler_with_rows_reused(model):
    sampler = Sampler(model, eos_id=ENDS, pad_id=PAD)
    batch = sampler.sample(PROMPTS, max_new_tokens=12, temperature=0.0, group_size=2)
    cont = sampler.sample(PROMPTS, max_new_tokens=12, temperature=0.0, group_size=2, slots=3)
    assert len(set(batch.lengths.tolist())) > 1  # rows end at different steps
    np.testing.assert_array_equal(cont.lengths, batch.lengths)
    np.testing.assert_array_equal(cont.tokens, batch.tokens)
    np.testing.assert_allclose(cont.logps, batch.logps, atol=1e-4)


@pytest.mark.slow  # ~10 s; continuous batching is off by default, and the greedy test above runs it
def test_draws_are_keyed_per_sample_and_logps_are_the_policy(model):
    sampler = Sampler(model, eos_id=ENDS, pad_id=PAD)
    a = sampler.sample(PROMPTS, max_new_tokens=10, seed=4, group_size=3, slots=2, temperature=4.0)
    b = sampler.sample(PROMPTS, max_new_tokens=10, seed=4, group_size=3, slots=5, temperature=4.0)
    np.testing.assert_array_equal(a.tokens, b.tokens)  # which row served it does not matter
    assert len({tuple(_rows(a, i)) for i in range(3)}) > 1  # the G samples differ
    for i in range(len(PROMPTS) * 3):
        prompt, gen = PROMPTS[i // 3], _rows(a, i)
        assert gen[-1] in ENDS or len(gen) == 10
        logits = full_logits(model, prompt + gen)
        for k, tok in enumerate(gen):
            row = logits[len(prompt) - 1 + k]
            np.testing.assert_allclose(a.logps[i, k], row[tok] - np.logaddexp.reduce(row),
                                       atol=1e-4)  # fmt: skip
        assert np.all(a.tokens[i, len(gen) :] == PAD) and np.all(a.logps[i, len(gen) :] == 0)


@pytest.mark.slow  # two more compiles of the loop (constrained); greedy equality stays in the default run
def test_grammar_holds_and_matches_the_batch_sampler(model):
    # "A B <end>" with A in {10, 11}, B in {20, 21}; some requests start in state 1
    s = 4
    allowed = np.zeros((s, V), bool)
    nxt = np.full((s, V), 3, np.int32)
    allowed[0, [10, 11]], nxt[0, [10, 11]] = True, 1
    allowed[1, [20, 21]], nxt[1, [20, 21]] = True, 2
    allowed[2, 2] = True
    allowed[3, PAD] = True
    starts = np.array([0, 1, 0, 1, 0])
    fsm = FSMConstraint(allowed=allowed, next_state=nxt, init_state=starts)
    sampler = Sampler(model, eos_id=2, pad_id=PAD)
    for temperature in (0.0, 1.0):
        kw = dict(max_new_tokens=8, temperature=temperature, seed=1, constraint=fsm)
        cont = sampler.sample(PROMPTS, slots=2, **kw)
        assert cont.lengths.tolist() == [3, 2, 3, 2, 3]
        for i, st in enumerate(starts):
            assert fsm.accepts_prefix(_rows(cont, i), int(st)) and _rows(cont, i)[-1] == 2
        if temperature == 0.0:
            np.testing.assert_array_equal(cont.tokens, sampler.sample(PROMPTS, **kw).tokens)


def test_bad_slots_are_refused(model):
    sampler = Sampler(model, eos_id=ENDS)
    with pytest.raises(ValueError, match="slots"):
        sampler.sample(PROMPTS, max_new_tokens=4, slots=-1)
    with pytest.raises(ValueError, match="with_states"):
        sampler.sample(PROMPTS, max_new_tokens=4, slots=2, with_states=True)
