"""Warm-up of a router: compile every (batch, prompt-length) bucket a request can reach.

A compile while serving stalls a whole batch for seconds (one 6.5 s stall was once
the p99 at concurrency 8, a prompt of the sampler's 48-token bucket that warm-up, which
assumed power-of-two buckets, never compiled). So the length buckets are computed from
the decoder's own rounding function over every length a prompt can have, not listed.

Design choices:
- One prompt per bucket (its shortest length) at each batch size compiles the decoding
  pass; with the KV-cache sampler that pass also returns the step logits and `<plan>`
  state that calibration and unfamiliarity need; the memory's sentence key is a second,
  encoder-only program per shape, compiled beside it.
- The full-pass fallback (`decode="full"`) scores decoded plans by a separate forward
  pass over prompt + plan; it is compiled for every plan length (0 .. max_steps + 1), since
  prompt + plan may cross into the next power-of-two bucket.
- A router with a plan prior (`prior.py`) does more for a request longer than its window:
  the frozen encoder reads the whole text (100-256 pieces: length buckets 128 and 256) and
  one scoring pass runs over the candidates of the batch's long requests (a full 128-token
  prompt bucket). Both are compiled for every power-of-two count a batch can reach. Where
  the prior reads windows of sentences (`windows.py`), they are decoded
  `windows.WINDOW_BATCH` at a time, so that batch size is compiled too, and where it finds
  the ask sentence (`asks.py`) the detector reads sentences in one shape (`ASK_SHAPE`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from studio_align.catalog import ATTACHMENT_KINDS
from studio_align.generation.sampler import bucket_prompt
from studio_align.router.analysis import analyse, bucket_pow2
from studio_align.router.asks import shipped_detector
from studio_align.router.format import BOS, EOS, MAX_TEXT_TOKENS, PAD, PLAN
from studio_align.router.prior import prior_features
from studio_align.router.windows import WINDOW_BATCH


def prompt_buckets(router: Any) -> list[int]:
    """One prompt length per compiled length bucket a request can reach, shortest first.

    A prompt is at most `MAX_TEXT_TOKENS` text ids plus `<bos>`, one marker per
    attachment kind and `<plan>`. The sampler rounds lengths to quarter-octave buckets
    (`bucket_prompt`: 16, 32, 48, 64, 96, 128), the full pass to powers of two.
    """
    longest = MAX_TEXT_TOKENS + len(ATTACHMENT_KINDS) + 2
    steps = router.max_steps + 1

    def key(n: int) -> Any:
        if router._sampler is not None:
            return bucket_prompt(n)
        return tuple(bucket_pow2(n + j, 16) for j in range(steps + 1))

    firsts: dict[Any, int] = {}
    for n in range(2, longest + 1):
        firsts.setdefault(key(n), n)
    return sorted(firsts.values())


def warm_scoring(router: Any, prompts: list[list[int]], inits: list[int]) -> None:
    """Compile the full-pass fallback's scoring pass for these prompts (nothing to do with
    the sampler, whose decoding pass returns what `decide` needs)."""
    if router._sampler is not None:
        return
    step = int(router.grammar.step_ids[0])
    for j in range(router.max_steps + 2):
        analyse(router, prompts, [[step] * j] * len(prompts), inits)


def warm_router(router: Any, batch_sizes: Sequence[int]) -> float:
    """Compile every (batch, prompt-length) bucket for `batch_sizes`; returns seconds."""
    t0 = time.perf_counter()
    bos, plan, pad = (router.tokenizer.token_to_id(t) for t in (BOS, PLAN, PAD))
    init = router.grammar.init_state(["image"])
    sizes = list(batch_sizes)
    if batch_sizes and router.prior is not None and router.prior.windows > 0:
        sizes = sorted({*sizes, WINDOW_BATCH})
    for b in sizes:
        for n in prompt_buckets(router):
            prompt = [bos, *([pad] * (n - 2)), plan]
            router._route_prompts([prompt] * b, [init] * b)
            warm_scoring(router, [prompt] * b, [init] * b)
            if router.memory_key == "sentence":
                router.memory_keys([prompt] * b)
    warm_prior(router, batch_sizes)
    return time.perf_counter() - t0


def warm_prior(router: Any, batch_sizes: Sequence[int]) -> None:
    """Compile what a long request adds when the router has a plan prior (module docstring)."""
    if router.prior is None or not batch_sizes:
        return
    bos, plan, pad, eos = (router.tokenizer.token_to_id(t) for t in (BOS, PLAN, PAD, EOS))
    prompt = [bos, *([pad] * MAX_TEXT_TOKENS), plan]
    init = router.grammar.init_state([])
    step = int(router.grammar.step_ids[0])
    most = bucket_pow2(max(batch_sizes), 1)
    if router.prior.windows > 0 and router.prior.asks:
        shipped_detector().probs(["warm-up"])
    m = 1
    while m <= most * bucket_pow2(router.prior.top_k, 1):  # candidates of every long request
        if m <= most:
            for words in (110, 230):  # the frozen encoder's 128- and 256-piece buckets
                # distinct texts: the prior encodes each distinct text once
                prior_features([{"text": f"{i} " + " cat" * words} for i in range(m)])
        analyse(router, [prompt] * m, [[step, eos]] * m, [init] * m)
        m *= 2
