"""The `Policy` protocol GRPO trains, and its implementation for the engine's LM.

GRPO needs two things from a policy, whatever it is (a decoder LM choosing plan tokens,
or the grading vertical's Gaussian over colour parameters):

- `sample(model, prompts, group_size, rng) -> Rollout`: draw `group_size` completions
  per prompt, laid out group-contiguous (rows `p*G .. p*G+G-1` belong to prompt p), with
  the per-token log-probs of what was drawn under the sampling distribution (GRPO's
  "old" log-probs), a `[N, T]` mask of real completion tokens, lengths in tokens, the
  arrays `logps` needs to score the same completions again (`batch`) and per-sample
  reward columns (`columns`, e.g. `completions`, `plans`, `actions`).
- `logps(model, batch) -> (logps [N, T], mask [N, T], entropy [N, T])`: the same
  log-probs recomputed differentiably (it runs inside the jitted update), plus the
  per-position entropy of the sampling distribution (logged).

A continuous policy is the same with `T = 1` (or one "token" per action dimension): its
log-density stands in for log-probs, exactly what the clipped importance ratio needs.
`model` is the `nnx.Module` being trained; the policy object holds only sampling
settings, so GRPO can evaluate it under the current, reference or old parameters.

`LMPolicy` implements the protocol with the engine's `Sampler`. The sampler returns the
log-probs of the *policy* distribution (temperature 1, restricted to what the decoding
constraint allows, renormalised); `LMPolicy.logps` computes exactly that quantity in a
full forward pass, re-applying the FSM mask from states replayed on the host. The
sampling temperature only shapes exploration; with `temperature = 1` (the default)
rollouts are exactly on-policy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.errors import DataError
from studio_align.generation.sampler import Sampler
from studio_align.models.transformer import positions_from_mask


@dataclass
class Rollout:
    """`N = prompts * group_size` sampled completions, group-contiguous."""

    batch: dict[str, np.ndarray]  # what `Policy.logps` needs, leading dim N
    old_logps: np.ndarray  # [N, T] float32: log-probs at sampling time
    mask: np.ndarray  # [N, T] bool: real completion tokens
    lengths: np.ndarray  # [N] int: completion length in tokens
    truncated: np.ndarray  # [N] bool: stopped by the length limit, not by the policy
    columns: dict[str, list[Any]] = field(default_factory=dict)  # reward inputs per sample

    def __len__(self) -> int:
        return len(self.lengths)

    def select(self, rows: np.ndarray) -> Rollout:
        """The rollout restricted to `rows` (indices), in that order."""
        return Rollout(
            batch={k: v[rows] for k, v in self.batch.items()},
            old_logps=self.old_logps[rows],
            mask=self.mask[rows],
            lengths=self.lengths[rows],
            truncated=self.truncated[rows],
            columns={k: [v[i] for i in rows] for k, v in self.columns.items()},
        )

    @staticmethod
    def concat(parts: Sequence[Rollout]) -> Rollout:
        return Rollout(
            batch={k: np.concatenate([p.batch[k] for p in parts]) for k in parts[0].batch},
            old_logps=np.concatenate([p.old_logps for p in parts]),
            mask=np.concatenate([p.mask for p in parts]),
            lengths=np.concatenate([p.lengths for p in parts]),
            truncated=np.concatenate([p.truncated for p in parts]),
            columns={k: [x for p in parts for x in p.columns[k]] for k in parts[0].columns},
        )


class Policy(Protocol):
    """What GRPO trains (see the module docstring)."""

    def sample(
        self, model: nnx.Module, prompts: Sequence[Any], group_size: int, rng: jax.Array
    ) -> Rollout: ...

    def logps(
        self, model: nnx.Module, batch: Mapping[str, jax.Array]
    ) -> tuple[jax.Array, jax.Array, jax.Array]: ...


def prompt_width(records: Sequence[Mapping[str, Any]], max_len: int | None = None) -> int:
    """The prompt length a policy pads to: `max_len`, else the longest token prompt
    rounded up to 8; 0 where no prompt is a token sequence (a continuous policy's prompt
    is the index of its condition: the flow and grading tasks)."""
    if max_len:
        return max_len
    longest = max((len(p) for r in records if hasattr(p := r["prompt"], "__len__")), default=0)
    return -(-longest // 8) * 8


def replay_fsm(
    completions: np.ndarray, init_state: np.ndarray, next_state: np.ndarray
) -> np.ndarray:
    """`[N, T]` FSM state *before* each completion token (host-side replay)."""
    n, t = completions.shape
    states = np.zeros((n, t), np.int32)
    s = np.broadcast_to(np.asarray(init_state, np.int32), (n,)).copy()
    for j in range(t):
        states[:, j] = s
        s = next_state[s, completions[:, j]]
    return states


class LMPolicy:
    """The engine's decoder LM as a GRPO policy over token completions.

    `prompts` are token-id lists. `max_prompt_len` fixes the packed width so every
    rollout has the same shapes (no recompiles). `constraint_for(prompts)` may return an
    `FSMConstraint` (`allowed [S, V]`, `next_state [S, V]`, `init_state [N]`) applied
    while sampling and re-applied in `logps`. `decode(ids) -> value` adds a reward column
    `decoded_column` (e.g. plans) next to `completions` (token-id lists up to `<eos>`).
    """

    def __init__(
        self,
        *,
        max_prompt_len: int,
        max_new_tokens: int,
        pad_id: int,
        eos_id: int,
        temperature: float = 1.0,
        constraint_for: Callable[[Sequence[Sequence[int]]], Any] | None = None,
        decode: Callable[[list[int]], Any] | None = None,
        decoded_column: str = "plans",
        sampler_options: Mapping[str, Any] | None = None,
        slots: int = 0,
    ):
        if temperature <= 0:
            raise ValueError("GRPO rollouts need temperature > 0")
        self.max_prompt_len = max_prompt_len
        self.max_new_tokens = max_new_tokens
        self.pad_id, self.eos_id = pad_id, eos_id
        self.temperature = temperature
        self.constraint_for = constraint_for
        self.decode = decode
        self.decoded_column = decoded_column
        self.sampler_options = dict(sampler_options or {})
        self.slots = slots  # continuous batching (`Sampler.sample(slots=)`); 0: off
        self._allowed: jax.Array | None = None
        self._sampler: Any = None

    # -- sampling ----------------------------------------------------------------------------

    def sample(
        self, model: nnx.Module, prompts: Sequence[Sequence[int]], group_size: int, rng: jax.Array
    ) -> Rollout:

        rows = [list(p) for p in prompts for _ in range(group_size)]
        too_long = [i for i, p in enumerate(rows) if len(p) > self.max_prompt_len]
        if too_long:
            raise DataError(
                f"prompt of {len(rows[too_long[0]])} tokens exceeds max_prompt_len={self.max_prompt_len}"
            )
        constraint = self.constraint_for(rows) if self.constraint_for is not None else None
        if self._sampler is None:
            self._sampler = Sampler(
                cast(Any, model), eos_id=self.eos_id, pad_id=self.pad_id, **self.sampler_options
            )
        sampler = self._sampler
        sampler.model = model  # the sampler reads the weights of `model` on every call
        out = sampler.sample(
            [list(p) for p in prompts],  # each prompt prefilled once, its cache shared by G rows
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            rng=rng,
            constraint=constraint,
            group_size=group_size,
            slots=self.slots,
        )
        comp = np.asarray(out.tokens, np.int32)
        n, t = comp.shape
        lengths = np.asarray(out.lengths, np.int64)
        mask = np.arange(t)[None, :] < lengths[:, None]
        comp = np.where(mask, comp, self.pad_id).astype(np.int32)
        ended = np.array(
            [bool(m.any() and c[m][-1] == self.eos_id) for c, m in zip(comp, mask, strict=True)]
        )
        width = self.max_prompt_len + t
        tokens = np.full((n, width), self.pad_id, np.int32)
        attn = np.zeros((n, width), bool)
        plen = np.array([len(p) for p in rows], np.int32)
        for i, p in enumerate(rows):
            tokens[i, : plen[i]] = p
            tokens[i, plen[i] : plen[i] + t] = comp[i]
            attn[i, : plen[i] + lengths[i]] = True
        batch = {"tokens": tokens, "attn": attn, "prompt_len": plen, "completion_mask": mask}
        if constraint is not None:
            self._allowed = jnp.asarray(np.asarray(constraint.allowed))
            batch["fsm_states"] = replay_fsm(
                comp, np.asarray(constraint.init_state), np.asarray(constraint.next_state)
            )
        completions = [c[m].tolist() for c, m in zip(comp, mask, strict=True)]
        columns: dict[str, list[Any]] = {"completions": completions}
        if self.decode is not None:
            columns[self.decoded_column] = [self.decode(c) for c in completions]
        return Rollout(
            batch=batch,
            old_logps=np.where(mask, np.asarray(out.logps, np.float32), 0.0),
            mask=mask,
            lengths=lengths,
            truncated=~ended,
            columns=columns,
        )

    def pack(
        self, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]]
    ) -> dict[str, np.ndarray]:
        """The `logps` batch of given completions (a dataset's, not sampled), padded to
        `max_new_tokens`, with the FSM states replayed when there is a constraint."""
        n, t = len(prompts), self.max_new_tokens
        comp = np.full((n, t), self.pad_id, np.int32)
        lengths = np.zeros(n, np.int64)
        for i, c in enumerate(completions):
            if len(c) > t:
                raise DataError(f"completion of {len(c)} tokens exceeds max_new_tokens={t}")
            comp[i, : len(c)] = c
            lengths[i] = len(c)
        rows = [list(p) for p in prompts]
        if any(len(p) > self.max_prompt_len for p in rows):
            raise DataError(f"a prompt exceeds max_prompt_len={self.max_prompt_len}")
        mask = np.arange(t)[None, :] < lengths[:, None]
        tokens = np.full((n, self.max_prompt_len + t), self.pad_id, np.int32)
        attn = np.zeros(tokens.shape, bool)
        plen = np.array([len(p) for p in rows], np.int32)
        for i, p in enumerate(rows):
            tokens[i, : plen[i]] = p
            tokens[i, plen[i] : plen[i] + t] = comp[i]
            attn[i, : plen[i] + lengths[i]] = True
        batch = {"tokens": tokens, "attn": attn, "prompt_len": plen, "completion_mask": mask}
        constraint = self.constraint_for(rows) if self.constraint_for is not None else None
        if constraint is not None:
            self._allowed = jnp.asarray(np.asarray(constraint.allowed))
            batch["fsm_states"] = replay_fsm(
                comp, np.asarray(constraint.init_state), np.asarray(constraint.next_state)
            )
        return batch

    # -- scoring -----------------------------------------------------------------------------

    def logps(
        self, model: nnx.Module, batch: Mapping[str, jax.Array]
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        return self.logps_and_features(model, batch)[:3]

    def logps_and_features(
        self, model: nnx.Module, batch: Mapping[str, jax.Array]
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """`logps` plus the hidden state `[N, T, D]` each completion token is predicted
        from (the state a value head reads: PPO's critic shares this forward pass)."""
        lm = cast(Any, model)
        h, targets = self._completion_hidden(lm, batch)
        if h is None:  # a model without `hidden`/`logits`: its logits are the features
            logits, targets = self._completion_logits(lm, batch)
            return (*self._score(logits, targets, batch), logits)
        logits = lm.logits(h).astype(jnp.float32)
        return (*self._score(logits, targets, batch), h)

    def features(self, model: nnx.Module, batch: Mapping[str, jax.Array]) -> jax.Array:
        """The hidden state `[N, T, D]` before each completion token (a critic's input)."""
        h, _ = self._completion_hidden(cast(Any, model), batch)
        return h if h is not None else self._completion_logits(cast(Any, model), batch)[0]

    def feature_dim(self, model: nnx.Module) -> int:
        cfg = cast(Any, model).cfg
        return int(cfg.d_model) if hasattr(model, "hidden") else int(cfg.vocab_size)

    def completion_logits(
        self, model: nnx.Module, batch: Mapping[str, jax.Array]
    ) -> tuple[jax.Array, jax.Array]:
        """Logits `[N, T, V]` at the completion positions, with the FSM constraint applied
        (disallowed tokens at -1e30), and the completion tokens `[N, T]` (distillation)."""
        lm = cast(Any, model)
        h, targets = self._completion_hidden(lm, batch)
        if h is None:
            logits, targets = self._completion_logits(lm, batch)
        else:
            logits = lm.logits(h).astype(jnp.float32)
        return self._constrained(logits, batch)[0], targets

    def _positions(self, batch: Mapping[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
        # completion token j of row i sits at plen_i + j; it is predicted at plen_i + j - 1
        t = batch["completion_mask"].shape[1]
        idx = batch["prompt_len"][:, None] + jnp.arange(t)[None, :] - 1
        return idx, jnp.take_along_axis(batch["tokens"], idx + 1, axis=1)

    def _completion_hidden(
        self, lm: Any, batch: Mapping[str, jax.Array]
    ) -> tuple[jax.Array | None, jax.Array]:
        idx, targets = self._positions(batch)
        if not (hasattr(lm, "hidden") and hasattr(lm, "logits")):
            return None, targets
        # the vocabulary projection only at the T completion positions, not all of them
        h = lm.hidden(batch["tokens"], positions_from_mask(batch["attn"]), batch["attn"])
        return jnp.take_along_axis(h, idx[:, :, None], axis=1), targets

    def _completion_logits(
        self, lm: Any, batch: Mapping[str, jax.Array]
    ) -> tuple[jax.Array, jax.Array]:
        idx, targets = self._positions(batch)
        logits = lm(batch["tokens"], positions_from_mask(batch["attn"]), batch["attn"])
        return jnp.take_along_axis(logits, idx[:, :, None], axis=1).astype(jnp.float32), targets

    def grouped_logps(
        self, model: nnx.Module, batch: Mapping[str, jax.Array], group_size: int
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """`logps` for rows in groups of `group_size` consecutive samples of one prompt
        (what `sample` returns): each group is scored in ONE row, the prompt once and the
        G completions after it as branches that see the prompt and themselves only
        (`Transformer.hidden(branches=...)`), positions restarting after the prompt.
        Same values as `logps`, with `P + G*T` positions per group instead of
        `G*(P + T)` (112 against 256 for 48-token prompts, 4 x 16 tokens)."""
        lm = cast(Any, model)
        if not (hasattr(lm, "hidden") and hasattr(lm, "logits")):
            return self.logps(model, batch)
        tokens, mask = batch["tokens"], batch["completion_mask"]
        n, t = mask.shape
        g, wp = group_size, self.max_prompt_len
        groups = n // g
        plen = batch["prompt_len"][::g]  # [P]
        j = jnp.arange(t)
        comp = jnp.take_along_axis(tokens, batch["prompt_len"][:, None] + j[None, :], axis=1)
        prompt_ok = jnp.arange(wp)[None, :] < plen[:, None]
        row = jnp.concatenate([tokens[::g, :wp], comp.reshape(groups, g * t)], axis=1)
        attn = jnp.concatenate([prompt_ok, mask.reshape(groups, g * t)], axis=1)
        branch = jnp.repeat(jnp.arange(1, g + 1), t)[None, :]
        branches = jnp.concatenate(
            [jnp.zeros((groups, wp), jnp.int32), jnp.broadcast_to(branch, (groups, g * t))], axis=1
        )
        positions = jnp.concatenate(
            [
                jnp.where(prompt_ok, jnp.arange(wp)[None, :], 0),
                (plen[:, None] + jnp.tile(j, g)[None, :]),
            ],
            axis=1,
        )
        h = lm.hidden(row, positions, attn, branches)  # [P, wp + G*T, D]
        # token j of branch b is predicted at the prompt's last slot (j = 0) or at j - 1
        slot = wp + jnp.arange(g)[:, None] * t + j[None, :] - 1  # [G, T]
        pred = jnp.where(j[None, None, :] == 0, plen[:, None, None] - 1, slot[None])
        h = jnp.take_along_axis(h, pred.reshape(groups, g * t)[:, :, None], axis=1)
        logits = lm.logits(h).astype(jnp.float32).reshape(n, t, -1)
        return self._score(logits, comp, batch)

    def _score(
        self, logits: jax.Array, targets: jax.Array, batch: Mapping[str, jax.Array]
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(log-probs, mask, entropy) of `targets [N, T]` under `logits [N, T, V]`, with the
        decoding constraint re-applied from the replayed FSM states."""
        mask = batch["completion_mask"]
        logits, any_ok = self._constrained(logits, batch)
        lp, entropy = logps_and_entropy(logits, targets)
        lp = jnp.where(any_ok, lp, 0.0)
        return jnp.where(mask, lp, 0.0), mask, entropy

    def _constrained(
        self, logits: jax.Array, batch: Mapping[str, jax.Array]
    ) -> tuple[jax.Array, jax.Array]:
        """Logits with the decoding constraint re-applied from the replayed FSM states, and
        whether each position had any allowed token."""
        any_ok = jnp.ones(batch["completion_mask"].shape, bool)
        if "fsm_states" in batch:
            if self._allowed is None:
                raise DataError("LMPolicy.logps: FSM states given but no constraint was sampled")
            ok = self._allowed[batch["fsm_states"]]
            any_ok = jnp.any(ok, axis=-1)  # a dead state: the sampler forces eos with log-prob 0
            logits = jnp.where(ok | ~any_ok[..., None], logits, -1e30)
        return logits, any_ok


def logps_and_entropy(logits: jax.Array, targets: jax.Array) -> tuple[jax.Array, jax.Array]:
    """`log softmax(logits)[targets]` and the entropy, from one logsumexp (no `[.., V]`
    log-prob array is kept for the backward pass; masked logits of -1e30 weigh 0)."""
    lse = jax.nn.logsumexp(logits, axis=-1)
    picked = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    p = jax.lax.stop_gradient(jnp.exp(logits - lse[..., None]))
    entropy = lse - jnp.sum(p * jnp.where(p > 0, logits, 0.0), axis=-1)
    return picked - lse, jax.lax.stop_gradient(entropy)
