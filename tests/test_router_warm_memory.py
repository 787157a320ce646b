"""Warm-up leaves no compile for the memory path (issue 14: one 6.5 s stall at p99).

A router with an exemplar memory routes through `decide` (plan, step logits, `<plan>`
embedding, memory lookup) and embeds feedback through `remember`. After `warmup`, no
request of any length (every prompt-length bucket up to the longest prompt a request can
make) may build a new XLA program, counted process-wide by `generation.compiles`, and the
separate scoring pass must not run at all: the decoding pass returns its inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from flax import nnx

from studio_align.catalog import default_catalog
from studio_align.generation import compiles, sampler
from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.router import analysis
from studio_align.router.analysis import analyse
from studio_align.router.format import MAX_TEXT_TOKENS, build_tokenizer, encode_prompt
from studio_align.router.router import Router
from studio_align.simulate.router.requests import generate_examples

CAT = default_catalog()
EXAMPLES = generate_examples(200, seed=0)


@pytest.fixture(scope="module")
def router() -> Router:
    tok = build_tokenizer([e["request"]["text"] for e in EXAMPLES], CAT, vocab_size=600)
    model = Transformer(ModelConfig.tiny(vocab_size=640), rngs=nnx.Rngs(0))
    return Router(model, tok, CAT)


def _requests_of_every_length(router: Router) -> list[dict]:
    """One request per prompt length from the shortest to past the truncation bound."""
    out, seen = [], set()
    for k in range(MAX_TEXT_TOKENS + 8):
        for atts in ([], ["image", "video", "audio"]):
            req = {"text": " ".join(["video"] * k), "attachments": atts}
            n = len(encode_prompt(router.tokenizer, req))
            if n not in seen:
                seen.add(n)
                out.append(req)
    assert max(seen) == MAX_TEXT_TOKENS + 5  # <bos>, three markers, <plan>: the longest
    return out


def test_decoding_pass_returns_what_the_scoring_pass_computes(router: Router) -> None:
    reqs = [e["request"] for e in EXAMPLES[:12]]
    comps, an = router.analyse(reqs)
    prompts, inits = router.encode(reqs)
    ref = analyse(router, prompts, comps, inits)
    np.testing.assert_array_equal(an.actions, ref.actions)
    finite = np.isfinite(ref.step_logits)
    np.testing.assert_array_equal(finite, np.isfinite(an.step_logits))
    np.testing.assert_allclose(an.step_logits[finite], ref.step_logits[finite], atol=1e-4)
    np.testing.assert_allclose(an.hidden, ref.hidden, atol=1e-4)


def test_warmup_leaves_no_compile_for_the_memory_path(router: Router) -> None:
    compiles.install()
    reqs = _requests_of_every_length(router)
    plans = [["ideogram.text_to_image"] if not r["attachments"] else ["ideogram.edit_image"]
             for r in reqs]  # fmt: skip
    assert router.remember(reqs[:2], plans[:2], ["ana", None]) == 2  # now it has a memory
    router.warmup([1])
    before = (compiles.total(), analysis._trace_count, sampler._trace_count)
    for r, p in zip(reqs, plans, strict=True):  # every length
        router.decide([r], creators=["ana"])
        router.remember([r], [p], ["bo"])
    after = (compiles.total(), analysis._trace_count, sampler._trace_count)
    assert after == before, compiles.by_program()
    assert router.memory is not None and len(router.memory) == 2 + len(reqs)
