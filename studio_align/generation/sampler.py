"""Batched autoregressive sampling with a static KV cache, prefix-shared across a group.

Design choices:

- One jitted function does prefill and the whole decode loop (`lax.while_loop`, which
  stops early once every row has ended). N new tokens cost one prefill and N - 1 decode
  calls: the token drawn last is never fed back. The KV cache is created inside that
  function, so its buffers live (and are updated in place) within one XLA program and
  their sharding always follows the weights': a call with sharded weights (a trainer's
  mesh) compiles exactly once, like any other.
- Prefix sharing: `sample(prompts, group_size=G)` draws G continuations per prompt. The
  prompt is prefilled once and its cache repeated G times (rows `i*G .. i*G+G-1` belong
  to prompt i), so a GRPO rollout prefills `prompts` rows, not `prompts * G`.
- Shapes are bucketed: batch to a power of two, prompt length to a multiple of a quarter
  of its next power of two (at least 16: 48 stays 48, 130 becomes 192), so there are at
  most four buckets per octave (a server warms up a handful) and under a third of a
  bucket is padding; `max_new_tokens` to a power of two (the real limit is a traced
  value). Sampling settings are traced values too; only the *mode* (greedy or not, top-k
  on or off, top-p on or off, constrained or not) is static. So calls with the same
  buckets and mode never recompile — `Sampler.compile_count` counts traces. The jitted
  function is module level with the model's graphdef as a static argument, so a new
  `Sampler` over the same architecture reuses compiled code too.
- Prompts are padded on the right by default (`pad_side="left"` also works); each row
  keeps its own length and positions, so rows never see each other's padding.
- A row ends when it emits an end id (included in the output and in `lengths`), or when
  its constraint state allows no token at all (it then emits the first end id with
  log-prob 0). After the end, tokens are `pad_id` and log-probs 0.

Log-probabilities (`SampleOutput.logps`): for each emitted token, the log-probability
under the **policy** distribution: softmax of the model's raw logits (temperature 1)
restricted to the tokens the constraint allows in that state, renormalised. Temperature,
top-k and top-p shape only how the token is drawn, not the returned log-prob. So with
`temperature=1, top_k=0, top_p=1` the log-probs are exactly those of the sampling
distribution (what GRPO's importance ratio needs), and in every mode they equal what
a training-time forward pass computes for the same constrained policy.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.generation.constraint import FSMConstraint
from studio_align.generation.continuous import generate_continuous
from studio_align.generation.draw import DrawSettings, draw_token
from studio_align.models.transformer import Transformer, positions_from_mask

_trace_count = 0


@dataclass(frozen=True)
class SampleOutput:
    """`tokens [B, N]`, `logps [B, N]` (float32, 0 after the end), `lengths [B]` (incl. eos);
    with `with_states=True` also `hidden [B, D]` (final-norm state at each prompt's last
    token) and `step_logits [B, N, V]` (raw float32 logits each token was drawn from), so a
    caller that scores what it decoded needs no second forward pass; and, for a model with
    a `sentence(tokens, mask)` method (one that reads its prompt through a pretrained
    encoder), `sentence [B, D_s]`, computed in the same program as the prefill."""

    tokens: np.ndarray
    logps: np.ndarray
    lengths: np.ndarray
    hidden: np.ndarray | None = None
    step_logits: np.ndarray | None = None
    sentence: np.ndarray | None = None


class StaticGraph:
    """A model's graphdef as a static jit argument, hashed once.

    jit hashes its static arguments on every call, and flax's `GraphDef` hashes its whole
    module tree each time (~0.35 ms a call on a 3-layer router); equal graphdefs
    still share compiled code (equality falls back to the graphdefs' own)."""

    __slots__ = ("_hash", "graphdef")

    def __init__(self, graphdef: Any) -> None:
        self.graphdef = graphdef
        self._hash = hash(graphdef)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StaticGraph) and (
            self.graphdef is other.graphdef or self.graphdef == other.graphdef
        )


@functools.lru_cache(maxsize=256)
def _key(seed: int) -> jax.Array:
    """`jax.random.key(seed)`, made once per seed (keys are immutable; ~0.2 ms each); bounded,
    since a training loop may draw with a new seed every step."""
    return jax.random.key(seed)


def _next_pow2(n: int) -> int:
    return 1 << max(0, (max(1, n) - 1).bit_length())


def bucket_batch(n: int) -> int:
    return _next_pow2(n)


def bucket_prompt(n: int, minimum: int = 16) -> int:
    """`n` rounded up to a multiple of `max(minimum, next_pow2(n) / 4)`."""
    step = max(minimum, _next_pow2(n) // 4)
    return max(minimum, -(-n // step) * step)


def bucket_new_tokens(n: int) -> int:
    return _next_pow2(n)


class Sampler:
    """Samples continuations of token-id prompts from a `Transformer`.

    `eos_id` may be one id or several (e.g. Gemma's `<eos>` and `<end_of_turn>`).
    The sampler reads the model's current weights on every call, so it stays valid while
    the model is trained in place; `snapshot=True` reads them once (and on `refresh()`),
    which is what a server wants.
    """

    def __init__(
        self,
        model: Transformer,
        *,
        eos_id: int | Sequence[int] = 2,
        pad_id: int = 0,
        pad_side: Literal["right", "left"] = "right",
        cache_dtype: Any = None,
        snapshot: bool = False,
    ):
        self.model = model
        # snapshot=True: split the model once (serving: ~7 ms a call saved on a 4M model);
        # call refresh() after changing its weights. Default: re-read on every call.
        self._split = nnx.split(model) if snapshot else None
        self._static = StaticGraph(self._split[0]) if self._split is not None else None
        self.eos_ids = (eos_id,) if isinstance(eos_id, int) else tuple(int(e) for e in eos_id)
        if not self.eos_ids:
            raise ValueError("Sampler needs at least one eos id")
        self.pad_id = int(pad_id)
        if pad_side not in ("right", "left"):
            raise ValueError(f"pad_side must be 'right' or 'left', got {pad_side!r}")
        self.pad_side = pad_side
        self.cache_dtype = jnp.dtype(cache_dtype or model.cfg.jnp_dtype)

    @classmethod
    def for_tokenizer(cls, model: Transformer, tokenizer: Any, **kwargs: Any) -> Sampler:
        return cls(model, eos_id=tokenizer.eos_id, pad_id=tokenizer.pad_id or 0, **kwargs)

    def refresh(self) -> None:
        """Re-read the model's weights (only needed with `snapshot=True`)."""
        if self._split is not None:
            self._split = nnx.split(self.model)
            self._static = StaticGraph(self._split[0])

    @property
    def compile_count(self) -> int:
        """Traces of the batch generation function so far (process-wide); the continuous
        program (`slots`) is counted by `generation.compiles`, which sees every program."""
        return _trace_count

    def sample(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int | None = None,
        rng: jax.Array | None = None,
        constraint: FSMConstraint | None = None,
        group_size: int = 1,
        with_states: bool = False,
        slots: int = 0,
    ) -> SampleOutput:
        """Continue every prompt by up to `max_new_tokens` tokens (`temperature=0`: greedy).

        With `group_size = G` each prompt gets G samples (prefilled once, cache shared):
        the output has `len(prompts) * G` rows, prompt-major, and a `constraint`'s
        `init_state` has one entry per output row. `slots = S` (fewer than the output
        rows) decodes S rows at a time by continuous batching (`continuous.py`): a row
        that ends takes the next sample at once; draws are keyed per (sample, token).
        """
        n = len(prompts)
        if n == 0:
            raise ValueError("sample() needs at least one prompt")
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token (e.g. <bos>)")
        if slots < 0 or (slots and with_states):
            raise ValueError("slots must be >= 0, and continuous batching has no with_states")
        if temperature < 0 or not 0 < top_p <= 1 or top_k < 0:
            raise ValueError("need temperature >= 0, 0 < top_p <= 1 and top_k >= 0")
        vocab = self.model.cfg.vocab_size
        b, p, m = (
            bucket_batch(n),
            bucket_prompt(max(map(len, prompts))),
            bucket_new_tokens(max_new_tokens),
        )
        tokens = np.full((b, p), self.pad_id, np.int32)
        lengths = np.ones((b,), np.int32)  # padding rows: one pad token, discarded
        for i, pr in enumerate(prompts):
            if self.pad_side == "right":
                tokens[i, : len(pr)] = pr
            else:
                tokens[i, p - len(pr) :] = pr
            lengths[i] = len(pr)
        reads = int(getattr(self.model.cfg, "input_vocab_size", vocab))  # encoder models
        if int(tokens.max(initial=0)) >= reads or int(tokens.min(initial=0)) < 0:
            raise ValueError(f"prompt token ids must lie in [0, {reads})")
        fsm = constraint or FSMConstraint.unconstrained(vocab)
        allowed, next_state = fsm.tables(vocab)
        init = fsm.init_states(n * group_size, b * group_size)
        if rng is None:
            rng = _key(0 if seed is None else int(seed))
        mode = (temperature == 0.0, top_k > 0, top_p < 1.0, constraint is not None)
        graphdef, state = self._split or nnx.split(self.model)
        # host arrays go to the jitted call as they are: jit moves them in C++, where
        # `jnp.asarray` dispatched one Python op per argument (~0.1 ms each)
        drawing = (
            np.asarray(max_new_tokens, np.int32),
            np.asarray(max(temperature, 1e-6), np.float32),
            np.asarray(top_k, np.int32),
            np.asarray(top_p, np.float32),
            allowed,
            next_state,
        )
        if 0 < slots < n * group_size:
            right = np.full((n, p), self.pad_id, np.int32)
            for i, pr in enumerate(prompts):
                right[i, : len(pr)] = pr
            out_tok, out_lp, out_len = generate_continuous(
                graphdef, state, jnp.asarray(right), jnp.asarray(lengths[:n]), rng, *drawing,
                jnp.asarray(init[: n * group_size]), slots=slots, new_slots=m,
                group_size=group_size, cache_dtype=self.cache_dtype.name,
                eos_ids=self.eos_ids, pad_id=self.pad_id, mode=mode,
            )  # fmt: skip
            return SampleOutput(
                tokens=np.asarray(out_tok)[:, :max_new_tokens],
                logps=np.asarray(out_lp)[:, :max_new_tokens],
                lengths=np.asarray(out_len),
            )
        out_tok, out_lp, out_len, hidden, step_logits, sentence = _generate(
            self._static or StaticGraph(graphdef),
            state,
            tokens,
            lengths,
            rng,
            *drawing,
            init,
            new_slots=m,
            group_size=group_size,
            cache_dtype=self.cache_dtype.name,
            eos_ids=self.eos_ids,
            pad_id=self.pad_id,
            left_padded=self.pad_side == "left",
            mode=mode,
            with_states=with_states,
        )
        rows = n * group_size
        return SampleOutput(
            tokens=np.asarray(out_tok)[:rows, :max_new_tokens],
            logps=np.asarray(out_lp)[:rows, :max_new_tokens],
            lengths=np.asarray(out_len)[:rows],
            hidden=np.asarray(hidden)[:rows] if with_states else None,
            step_logits=np.asarray(step_logits)[:rows, :max_new_tokens] if with_states else None,
            sentence=np.asarray(sentence)[:rows] if sentence.ndim == 2 else None,
        )


@partial(
    jax.jit,
    static_argnames=(
        "graphdef", "new_slots", "group_size", "cache_dtype", "eos_ids", "pad_id",
        "left_padded", "mode", "with_states",
    ),
)  # fmt: skip
def _generate(
    graphdef,
    state,
    tokens,
    lengths,
    rng,
    max_new,
    temperature,
    top_k,
    top_p,
    allowed,
    next_state,
    init_state,
    *,
    new_slots: int,
    group_size: int,
    cache_dtype: str,
    eos_ids: tuple[int, ...],
    pad_id: int,
    left_padded: bool,
    mode: tuple[bool, bool, bool, bool],
    with_states: bool = False,
):
    global _trace_count
    _trace_count += 1
    model = nnx.merge(graphdef.graphdef, state)
    bp, p = tokens.shape
    b = bp * group_size
    n_out = new_slots
    cols = jnp.arange(p)
    if left_padded:
        mask = cols[None, :] >= (p - lengths)[:, None]
        last = jnp.full((bp,), p - 1)
    else:
        mask = cols[None, :] < lengths[:, None]
        last = lengths - 1
    cache = model.init_cache(bp, p + new_slots, jnp.dtype(cache_dtype))
    h, cache = model.hidden_cached(tokens, positions_from_mask(mask), mask, cache)
    h = h[jnp.arange(bp), last]  # only the last position's logits are needed
    logits = model.logits(h)
    # inside the decoding program: no second jitted call, padding bucket or host transfer
    sent = model.sentence(tokens, mask) if with_states and hasattr(model, "sentence") else None
    if group_size > 1:  # prefix sharing: one prefill per prompt, its cache copied G times

        def rep(x: jax.Array) -> jax.Array:
            return jnp.repeat(x, group_size, axis=0) if x.ndim else x

        cache = jax.tree.map(rep, cache)
        logits, lengths, h = rep(logits), rep(lengths), rep(h)
        sent = None if sent is None else rep(sent)
    eos = jnp.asarray(eos_ids, jnp.int32)

    settings = DrawSettings(temperature, top_k, top_p, allowed, eos[0], mode)

    def pick(logits, fsm, key):
        return draw_token(logits, fsm, key, settings)

    def emit(i, done, logits, fsm, out_tok, out_lp, out_len, out_lg):
        """Draw token i from `logits` and record it (rows already done emit padding)."""
        if with_states:
            out_lg = out_lg.at[:, i].set(logits.astype(jnp.float32))
        tok, logp = pick(logits, fsm, jax.random.fold_in(rng, i))
        tok = jnp.where(done, pad_id, tok)
        logp = jnp.where(done, 0.0, logp)
        out_tok = out_tok.at[:, i].set(tok)
        out_lp = out_lp.at[:, i].set(logp)
        out_len = out_len + (~done).astype(jnp.int32)
        fsm = jnp.where(done, fsm, next_state[fsm, tok])
        done = done | jnp.isin(tok, eos)
        return tok, done, fsm, out_tok, out_lp, out_len, out_lg

    # token 0 comes from the prefill's logits; every loop step feeds the previous token
    # back and draws the next, so the last token drawn is never run through the model
    tok, done, fsm, out_tok, out_lp, out_len, out_lg = emit(
        0,
        jnp.zeros((b,), jnp.bool_),
        logits,
        init_state,
        jnp.full((b, n_out), pad_id, jnp.int32),
        jnp.zeros((b, n_out), jnp.float32),
        jnp.zeros((b,), jnp.int32),
        jnp.zeros((b, n_out, logits.shape[-1]) if with_states else (0,), jnp.float32),
    )

    def cond(carry):
        i, done = carry[0], carry[1]
        return (i < max_new) & ~jnp.all(done)

    def body(carry):
        i, done, tok, fsm, cache, out_tok, out_lp, out_len, out_lg = carry
        pos = (lengths + i - 1)[:, None]
        logits, cache = model.forward_cached(tok[:, None], pos, jnp.ones((b, 1), bool), cache)
        tok, done, fsm, out_tok, out_lp, out_len, out_lg = emit(
            i, done, logits[:, 0], fsm, out_tok, out_lp, out_len, out_lg
        )
        return i + 1, done, tok, fsm, cache, out_tok, out_lp, out_len, out_lg

    carry = (jnp.ones((), jnp.int32), done, tok, fsm, cache, out_tok, out_lp, out_len, out_lg)
    *_, out_tok, out_lp, out_len, out_lg = jax.lax.while_loop(cond, body, carry)
    none = jnp.zeros((0,))
    return (out_tok, out_lp, out_len, h if with_states else none, out_lg,
            none if sent is None else sent)  # fmt: skip
