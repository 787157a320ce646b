"""The intent router: request -> plan of engine steps, with a confidence.

`Router(model, tokenizer, catalog)` wraps the engine's decoder LM. `route(requests)`
encodes each request as `<bos> text <att:...> <plan>` and decodes greedily under the
catalog's plan grammar (`grammar.py`), so every plan it returns is valid for the
request's attachments. The confidence of a plan is its probability under the
*constrained* distribution: at each decoding step the logits are masked to the tokens
the grammar allows and renormalised, and confidence = exp(sum of the chosen tokens'
log-probs). Masking first is what makes confidences comparable with accuracy (mass the
model puts on impossible plans is not counted against the plan it can actually emit).

Decoding uses the engine's KV-cache `Sampler` with the grammar as an `FSMConstraint`;
the sampler's per-token log-probs are those of the constrained, renormalised policy, so
their sum is the plan's log-probability. `plan_logps` computes the same quantity by one
scoring forward pass over prompt + plan (used by the `decode="full"` fallback, a few
full forward passes without a cache, and by tests that check the two agree).

Shapes are bucketed (the sampler rounds batches to powers of two and prompt lengths to
quarter octaves), so routing a new batch of a seen bucket never recompiles; `warmup()`
compiles every bucket a request can reach up front (`warm.py`). The sampler also returns
each plan's step logits and `<plan>` state, so calibration adds no second model pass;
the exemplar memory's key (`memory_keys`) is the pretrained encoder's sentence vector,
one encoder pass without the decoder (the `<plan>` state for a model without an encoder).

A request longer than the router's text window is the one exception to plain greedy
decoding: with a plan prior in the checkpoint (`prior.py`, `plan_prior.npz`), the greedy
plan and the prior's best plans are re-scored together and the best is returned, with the
router's own analysis of it (`route_ids`, `analyse` and `decide` alike).

A router checkpoint is a model bundle directory (`studio_align.models.bundle`:
model config, weights, `tokenizer.json`) plus `router.json` with the catalog and the
grammar's `max_steps`; `Router.load(path)` reads both, `checkpoint.save_router` writes both.
Beside them a checkpoint may hold its calibration, memory and plan prior.

What the router returns to a platform (`decide`): a plan, a calibrated confidence, and
whether to abstain. Calibration (temperature, unfamiliarity, abstention:
`calibration.py`) and the exemplar memory (`memory.py`) sit on top of the model's greedy
constrained decoding, without changing it:

    router.decide([{"text": "…", "attachments": ["image"]}], creators=["c42"])
    -> [{"plan": [...], "confidence": 0.93, "model_plan": [...], "model_confidence": 0.97,
         "unfamiliarity": 11.2, "abstain": False, "reason": None, "source": "model",
         "memory_similarity": None}]
    router.remember(request, final_plan, creator="c42")   # an accepted / re-routed event
    router.save_state(checkpoint_dir)                     # memory (+ calibration) beside it

Design choices:
- An abstained request still carries the router's best plan (`abstain: true`, `reason`
  `low_confidence` or `unfamiliar_request`), so a platform can show it as a suggestion.
- The memory obeys the router: a remembered plan is served only if it passes the catalog
  grammar for the request's attachments and `max_steps`; its confidence is the
  exemplar's similarity, and it goes through the same abstention as the model's plan (a
  request the calibration finds unfamiliar still abstains, with the remembered plan as the
  suggestion). Every confidence is clipped to [0, 1].
- Without a calibration the confidence is the model's and nothing abstains; without a
  memory every plan is the model's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.catalog import Catalog, default_catalog
from studio_align.errors import CheckpointError
from studio_align.generation.constraint import FSMConstraint
from studio_align.generation.sampler import Sampler, bucket_prompt
from studio_align.models.bundle import load_model_bundle
from studio_align.models.hf import load_hf
from studio_align.router.analysis import Analysis, analyse, bucket_pow2, from_decoding
from studio_align.router.calibration import Calibration, plan_logprob
from studio_align.router.checkpoint import load_router_meta
from studio_align.router.format import (
    check_tokenizer,
    encode_prompt,
    request_fields,
)
from studio_align.router.grammar import PlanGrammar, compile_grammar
from studio_align.router.memory import MEMORY_FILE, ExemplarMemory
from studio_align.router.prior import PlanPrior, rerank
from studio_align.router.warm import warm_router

# -- scoring and decoding ----------------------------------------------------------------------


def _states_along(grammar: PlanGrammar, init: int, ids: Sequence[int]) -> list[int]:
    """FSM state before each completion token."""
    out, s = [], init
    for t in ids:
        out.append(s)
        s = int(grammar.next_state[s, t])
    return out


@jax.jit
def _masked_sum_logps(logits: jax.Array, targets: jax.Array, allowed: jax.Array, w: jax.Array):
    """Sum over positions of log softmax(logits masked to `allowed`)[target], weighted by w."""
    masked = jnp.where(allowed, logits.astype(jnp.float32), -jnp.inf)
    lse = jax.nn.logsumexp(masked, axis=-1)
    picked = jnp.take_along_axis(masked, targets[..., None], axis=-1)[..., 0]
    lp = jnp.where(w > 0, picked - lse, 0.0)
    return jnp.sum(lp, axis=-1)


class Router:
    """Route requests to plans with the engine LM under the catalog's plan grammar."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        catalog: Catalog | None = None,
        *,
        max_steps: int = 3,
        decode: str = "auto",
        version: str = "",
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.catalog = catalog or default_catalog()
        check_tokenizer(tokenizer, self.catalog)
        vocab = int(model.cfg.vocab_size)  # the ids it predicts
        reads = int(getattr(model.cfg, "input_vocab_size", vocab))  # encoder models read more
        if tokenizer.vocab_size > reads:
            raise CheckpointError(
                f"tokenizer has {tokenizer.vocab_size} tokens, model only {reads}"
            )
        self.grammar = compile_grammar(
            self.catalog, tokenizer, vocab_size=vocab, max_steps=max_steps
        )
        self.max_steps = max_steps
        self.version = version
        self._allowed = jnp.asarray(self.grammar.allowed)
        self._graphdef, self._state = nnx.split(model)
        self._sampler: Any = None
        self.decode = decode
        if decode in ("auto", "sampler"):
            try:
                self._sampler = Sampler.for_tokenizer(model, tokenizer, snapshot=True)
            except ImportError:
                if decode == "sampler":
                    raise
        self.decode_used = "sampler" if self._sampler is not None else "full"
        self._logits_fn = jax.jit(self._logits)
        self._last_fn = jax.jit(self._last_logits)
        # what the exemplar memory compares (`memory_keys`): "sentence" where the model
        # reads text through a pretrained encoder, else "plan_state"
        self.memory_key = "sentence" if hasattr(model, "sentence") else "plan_state"
        self._sentence_fn = jax.jit(self._sentence) if hasattr(model, "sentence") else None
        self.calibration: Calibration | None = None  # fitted on validation (calibration.py)
        self.memory: ExemplarMemory | None = None  # exemplars from feedback (memory.py)
        self.prior: PlanPrior | None = None  # re-ranks long requests' plans (prior.py)

    # -- loading -------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path, **kwargs: Any) -> Router:
        """Load a router checkpoint directory: a model bundle + `router.json`, or the same
        exported to Hugging Face layout (`studio-align model export-hf`)."""

        meta = load_router_meta(path)
        d = Path(path)
        model: Any
        tok: Any
        if not (d / "bundle.json").exists() and (d / "config.json").exists():
            hf = load_hf(d)
            model, tok = hf.model, hf.tokenizer
        else:
            bundle = load_model_bundle(path)
            model, tok = bundle.model, bundle.tokenizer
        if tok is None:
            raise CheckpointError(f"{d}: a router checkpoint needs its tokenizer.json")
        version = kwargs.pop("version", None) or meta.get("version") or Path(path).name
        router = cls(
            model,
            tok,
            meta["catalog_obj"],
            max_steps=meta["max_steps"],
            version=version,
            **kwargs,
        )
        router.calibration = Calibration.load(path)
        router.memory = ExemplarMemory.load(path, max_steps=router.max_steps)
        router.prior = PlanPrior.load(path)
        want = router.memory_dim()
        if router.memory is not None and len(router.memory) and router.memory.dim != want:
            raise CheckpointError(
                f"{Path(path) / MEMORY_FILE}: exemplars are {router.memory.dim}-d, this "
                f"router's memory keys ({router.memory_key}) are {want}-d; rebuild the memory "
                "from the feedback log"
            )
        return router

    def memory_dim(self) -> int:
        """The width of `memory_keys`' rows."""
        if self.memory_key == "sentence":
            return int(self.model.sentence_dim)
        cfg = self.model.cfg
        return int(getattr(cfg, "d_model", None) or cfg.decoder.d_model)

    # -- core ----------------------------------------------------------------------------------

    def _logits(self, state: Any, tokens: jax.Array, mask: jax.Array) -> jax.Array:
        model = nnx.merge(self._graphdef, state)
        return model(tokens, None, mask)

    def _last_logits(
        self, state: Any, tokens: jax.Array, mask: jax.Array, idx: jax.Array
    ) -> jax.Array:
        logits = self._logits(state, tokens, mask)
        return logits[jnp.arange(tokens.shape[0]), idx]

    def _sentence(self, state: Any, tokens: jax.Array, mask: jax.Array) -> jax.Array:
        return nnx.merge(self._graphdef, state).sentence(tokens, mask)

    def memory_keys(
        self, prompts: Sequence[Sequence[int]], an: Analysis | None = None
    ) -> np.ndarray:
        """The rows the exemplar memory compares, one per prompt.

        `"sentence"`: the pretrained encoder's sentence vector of the request. It is the
        space in which paraphrases are near (the encoder was trained for that), and it
        does not move when the decoder is retrained, so a platform's exemplars stay valid
        across router versions; the sampler's decoding pass computes it with the prefill
        (`an.sentence`), else one encoder pass here. `"plan_state"`: the decoder's state
        at `<plan>` from the decoding pass itself (`an.hidden`), for a model without an
        encoder."""
        if self.memory_key == "plan_state" or self._sentence_fn is None:
            if an is None:
                raise ValueError("the <plan> state needs the decoding pass's analysis")
            return np.asarray(an.hidden)
        if an is not None and an.sentence is not None:
            return np.asarray(an.sentence)
        n = len(prompts)
        b, t = bucket_pow2(n, 1), bucket_prompt(max(len(p) for p in prompts))
        tokens = np.full((b, t), self.grammar.pad_id, np.int32)
        mask = np.zeros((b, t), bool)
        for i, p in enumerate(prompts):
            tokens[i, : len(p)] = p
            mask[i, : len(p)] = True
        out = self._sentence_fn(self._state, jnp.asarray(tokens), jnp.asarray(mask))
        return np.asarray(out)[:n]

    def refresh(self) -> None:
        """Re-read the model's weights (after training it in place)."""
        self._graphdef, self._state = nnx.split(self.model)
        if self._sampler is not None:
            self._sampler = Sampler.for_tokenizer(self.model, self.tokenizer, snapshot=True)

    def encode(self, requests: Sequence[Any]) -> tuple[list[list[int]], list[int]]:
        prompts = [encode_prompt(self.tokenizer, r) for r in requests]
        inits = [self.grammar.init_state(request_fields(r)[1]) for r in requests]
        return prompts, inits

    def plan_logps(
        self,
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        inits: Sequence[int],
    ) -> np.ndarray:
        """Sum of constrained, renormalised log-probs of each completion (plan ids + eos)."""
        n = len(prompts)
        seqs = [list(p) + list(c) for p, c in zip(prompts, completions, strict=True)]
        b, t = bucket_pow2(n, 1), bucket_pow2(max(len(s) for s in seqs), 16)
        tokens = np.full((b, t), self.grammar.pad_id, np.int32)
        mask = np.zeros((b, t), bool)
        # position i of the logits predicts token i+1
        targets = np.zeros((b, t), np.int32)
        allowed_idx = np.full((b, t), self.grammar.done_state, np.int32)
        w = np.zeros((b, t), np.float32)
        for i, (p, c, s0) in enumerate(zip(prompts, completions, inits, strict=True)):
            s = seqs[i]
            tokens[i, : len(s)] = s
            mask[i, : len(s)] = True
            for k, (tok, st) in enumerate(zip(c, _states_along(self.grammar, s0, c), strict=True)):
                pos = len(p) - 1 + k
                targets[i, pos] = tok
                allowed_idx[i, pos] = st
                w[i, pos] = 1.0
        logits = self._logits_fn(self._state, jnp.asarray(tokens), jnp.asarray(mask))
        allowed = self._allowed[jnp.asarray(allowed_idx)]
        out = _masked_sum_logps(logits, jnp.asarray(targets), allowed, jnp.asarray(w))
        return np.asarray(out)[:n]

    def step_logprobs(
        self,
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        inits: Sequence[int],
    ) -> list[np.ndarray]:
        """Per completion token, the constrained, renormalised log-probs over the vocabulary
        (`[len(c), V]`, -1e30 where the grammar forbids): the token distributions a
        distillation teacher gives, from one scoring forward pass."""
        n = len(prompts)
        seqs = [list(p) + list(c) for p, c in zip(prompts, completions, strict=True)]
        b, t = bucket_pow2(n, 1), bucket_pow2(max(len(s) for s in seqs), 16)
        tokens = np.full((b, t), self.grammar.pad_id, np.int32)
        mask = np.zeros((b, t), bool)
        allowed_idx = np.full((b, t), self.grammar.done_state, np.int32)
        for i, (p, c, s0) in enumerate(zip(prompts, completions, inits, strict=True)):
            tokens[i, : len(seqs[i])] = seqs[i]
            mask[i, : len(seqs[i])] = True
            for k, st in enumerate(_states_along(self.grammar, s0, c)):
                allowed_idx[i, len(p) - 1 + k] = st
        logits = self._logits_fn(self._state, jnp.asarray(tokens), jnp.asarray(mask))
        allowed = self._allowed[jnp.asarray(allowed_idx)]
        lp = np.asarray(
            jax.nn.log_softmax(jnp.where(allowed, logits.astype(jnp.float32), -1e30), axis=-1)
        )
        return [lp[i, len(p) - 1 : len(p) - 1 + len(c)] for i, (p, c) in
                enumerate(zip(prompts, completions, strict=True))]  # fmt: skip

    def _decode_full(self, prompts: list[list[int]], inits: list[int]) -> list[list[int]]:
        """Greedy constrained decoding by full forward passes (plans are a few tokens)."""
        n = len(prompts)
        steps = self.max_steps + 1
        b = bucket_pow2(n, 1)
        t = bucket_pow2(max(len(p) for p in prompts) + steps, 16)
        tokens = np.full((b, t), self.grammar.pad_id, np.int32)
        lengths = np.ones(b, np.int32)
        for i, p in enumerate(prompts):
            tokens[i, : len(p)] = p
            lengths[i] = len(p)
        state = np.full(b, self.grammar.done_state, np.int32)
        state[:n] = inits
        outs: list[list[int]] = [[] for _ in range(n)]
        for _ in range(steps):
            mask = np.arange(t)[None, :] < lengths[:, None]
            last = np.asarray(
                self._last_fn(
                    self._state, jnp.asarray(tokens), jnp.asarray(mask), jnp.asarray(lengths - 1)
                )
            )
            last = np.where(self.grammar.allowed[state], last, -np.inf)
            nxt = last.argmax(-1).astype(np.int32)
            for i in range(n):
                if state[i] != self.grammar.done_state:
                    outs[i].append(int(nxt[i]))
            tokens[np.arange(b), np.minimum(lengths, t - 1)] = nxt
            lengths = np.minimum(lengths + 1, t)
            state = self.grammar.next_state[state, nxt]
            if (state[:n] == self.grammar.done_state).all():
                break
        return outs

    def _decode_sampler(
        self, prompts: list[list[int]], inits: list[int]
    ) -> tuple[list[list[int]], np.ndarray, Analysis]:
        """Greedy constrained decoding with the KV-cache sampler; its log-probs are already
        those of the constrained, renormalised distribution (see generation/sampler.py).
        It also returns the step logits and `<plan>` states (`with_states`), so calibration
        and memory cost no second pass: one program per bucket, whatever the caller."""
        constraint = self._constraint(inits)
        out = self._sampler.sample(
            prompts,
            max_new_tokens=self.max_steps + 1,
            temperature=0.0,
            constraint=constraint,
            with_states=True,
        )
        toks, lengths = np.asarray(out.tokens), np.asarray(out.lengths)
        res = [[int(x) for x in toks[i, : int(lengths[i])]] for i in range(len(prompts))]
        assert out.step_logits is not None and out.hidden is not None
        an = from_decoding(self, res, inits, out.step_logits, out.hidden, out.sentence)
        return res, np.asarray(out.logps).sum(axis=-1), an

    def _constraint(self, inits: Sequence[int]) -> Any:

        return FSMConstraint(
            allowed=self.grammar.allowed,
            next_state=self.grammar.next_state,
            init_state=np.asarray(inits, np.int32),
        )

    def route_ids(
        self, requests: Sequence[Any]
    ) -> tuple[list[list[int]], list[list[int]], np.ndarray]:
        """(prompt ids, completion ids incl. eos, plan log-probs) of greedy constrained decoding."""
        prompts, inits = self.encode(requests)
        comps, logps = self._route_prompts(prompts, inits)
        comps, reranked, _ = rerank(self, requests, prompts, inits, comps, logps, None)
        assert reranked is not None
        return prompts, comps, reranked

    def _route_prompts(
        self, prompts: list[list[int]], inits: list[int]
    ) -> tuple[list[list[int]], np.ndarray]:
        comps, logps, _ = self._decode(prompts, inits)
        return comps, logps

    def _decode(
        self, prompts: list[list[int]], inits: list[int]
    ) -> tuple[list[list[int]], np.ndarray, Analysis | None]:
        """Plans, their log-probs and, from the sampler, their analysis (else None)."""
        if self._sampler is not None:
            return self._decode_sampler(prompts, inits)
        comps = self._decode_full(prompts, inits)
        return comps, self.plan_logps(prompts, comps, inits), None

    def route(
        self, requests: Sequence[Any], *, batch_size: int = 64
    ) -> tuple[list[list[str]], list[float]]:
        """Plans and confidences (probability of the decoded plan) for `requests`; with a
        calibration or memory loaded, `decide`'s plans and calibrated confidences."""
        if self.calibration is not None or self.memory is not None:
            ds = self.decide(requests, batch_size=batch_size)
            return [d["plan"] for d in ds], [d["confidence"] for d in ds]
        return self.route_raw(requests, batch_size=batch_size)

    def route_raw(
        self, requests: Sequence[Any], *, batch_size: int = 64
    ) -> tuple[list[list[str]], list[float]]:
        """The model's own plans and uncalibrated confidences (no calibration, no memory)."""
        plans: list[list[str]] = []
        confs: list[float] = []
        id_to_step = dict(zip(self.grammar.step_ids, self.catalog.names, strict=True))
        for start in range(0, len(requests), batch_size):
            chunk = list(requests[start : start + batch_size])
            if not chunk:
                continue
            _, comps, logps = self.route_ids(chunk)
            for req, c in zip(chunk, comps, strict=True):
                if not self.grammar.accepts(c, request_fields(req)[1]):
                    raise RuntimeError(f"decoder produced a plan outside the grammar: {c}")
                plans.append([id_to_step[i] for i in c if i in id_to_step])
            confs += [float(np.exp(x)) for x in logps]
        return plans, confs

    def warmup(self, batch_sizes: Sequence[int] = (1, 8, 64)) -> float:
        """Compile every (batch, prompt-length) bucket a request can reach (`warm.py`);
        returns seconds."""
        return warm_router(self, batch_sizes)

    # -- decisions: calibrated, abstaining, memory-aware routing ---------------------------------

    def analyse(self, requests: Sequence[Any]) -> tuple[list[list[int]], Analysis]:
        """Greedy constrained plans (completion ids) and their analysis (`analysis.py`):
        from the decoding pass itself with the sampler, else by one scoring pass; long
        requests' plans re-ranked by the prior (`prior.py`)."""
        _, comps, an = self._analyse_requests(requests)
        return comps, an

    def _analyse_requests(
        self, requests: Sequence[Any]
    ) -> tuple[list[list[int]], list[list[int]], Analysis]:
        prompts, inits = self.encode(requests)
        comps, an = self._analyse(prompts, inits)
        comps, _, reranked = rerank(self, requests, prompts, inits, comps, None, an)
        assert reranked is not None
        return prompts, comps, reranked

    def _analyse(
        self, prompts: list[list[int]], inits: list[int]
    ) -> tuple[list[list[int]], Analysis]:
        comps, _, an = self._decode(prompts, inits)
        return comps, an if an is not None else analyse(self, prompts, comps, inits)

    def embed(
        self, requests: Sequence[Any], *, batch_size: int = 64, pad_to: int = 1
    ) -> np.ndarray:
        """The memory's key of each request [N, D] (`memory_keys`), the same numbers as
        `decide`'s lookups. Chunks are padded to at least `pad_to` rows (a server passes
        its smallest batch bucket, so feedback never reaches a batch shape that warm-up
        did not compile)."""
        out = []
        for s in range(0, len(requests), batch_size):
            chunk = list(requests[s : s + batch_size])
            padded = chunk + [chunk[-1]] * (pad_to - len(chunk))
            prompts, inits = self.encode(padded)
            if self.memory_key == "sentence" and self._sentence_fn is not None:
                keys = self.memory_keys(prompts)
            else:
                keys = self.memory_keys(prompts, self._analyse(prompts, inits)[1])
            out.append(keys[: len(chunk)])
        return np.concatenate(out) if out else np.zeros((0, 0), np.float32)

    def plan_states(self, requests: Sequence[Any], *, batch_size: int = 64) -> np.ndarray:
        """The decoder's state at `<plan>` of each request [N, D], from the decoding pass
        (what the unfamiliarity model of `calibration.py` measures distances in)."""
        out = []
        for s in range(0, len(requests), batch_size):
            out.append(self.analyse(list(requests[s : s + batch_size]))[1].hidden)
        return np.concatenate(out) if out else np.zeros((0, 0), np.float32)

    def model_decisions(self, chunk: Sequence[Any]) -> tuple[list[dict[str, Any]], np.ndarray]:
        """The model's own decision for each request (before the memory) and the
        embeddings the memory compares, from one pass."""
        id_to_step = dict(zip(self.grammar.step_ids, self.catalog.names, strict=True))
        prompts, comps, an = self._analyse_requests(chunk)
        raw = np.exp(plan_logprob(an.step_logits, an.actions, 1.0))
        cal = self.calibration
        unfam = cal.unfamiliarity(an.hidden) if cal is not None else np.zeros(len(chunk))
        conf = (
            cal.adjust(cal.confidence(an.step_logits, an.actions), unfam)
            if cal is not None
            else raw
        )
        out = []
        for i, (comp, req) in enumerate(zip(comps, chunk, strict=True)):
            if not self.grammar.accepts(comp, request_fields(req)[1]):
                raise RuntimeError(f"decoder produced a plan outside the grammar: {comp}")
            plan = [id_to_step[t] for t in comp if t in id_to_step]
            out.append({
                "plan": plan,
                "confidence": float(conf[i]),
                "model_plan": plan,
                "model_confidence": float(raw[i]),
                "unfamiliarity": float(unfam[i]),
                "source": "model",
                "memory_similarity": None,
            })  # fmt: skip
        return out, self.memory_keys(prompts, an)

    def decide(
        self,
        requests: Sequence[Any],
        *,
        creators: Sequence[str | None] | None = None,
        sources: Sequence[str | None] | None = None,
        batch_size: int = 64,
    ) -> list[dict[str, Any]]:
        """One decision per request (see module docstring). `sources`: each asker's
        source (its platform), whose creators' exemplars may vote (`memory.py`)."""
        creators = list(creators) if creators is not None else [None] * len(requests)
        sources = list(sources) if sources is not None else [None] * len(requests)
        if not len(creators) == len(sources) == len(requests):
            raise ValueError(f"{len(requests)} requests but {len(creators)} creators "
                             f"and {len(sources)} sources")  # fmt: skip
        out: list[dict[str, Any]] = []
        cal = self.calibration
        for s in range(0, len(requests), batch_size):
            chunk = list(requests[s : s + batch_size])
            ds, hidden = self.model_decisions(chunk)
            atts_of = [request_fields(req)[1] for req in chunk]
            window = slice(s, s + len(chunk))
            hits = (
                self.memory.lookup_many(hidden, creators[window], atts_of, sources=sources[window])
                if self.memory is not None
                else [None] * len(chunk)
            )
            for d, hit, atts in zip(ds, hits, atts_of, strict=True):
                if hit is not None and self.plan_allowed(hit.plan, atts):
                    d.update(
                        plan=list(hit.plan),
                        confidence=float(hit.similarity),
                        source=hit.source,
                        memory_similarity=float(hit.similarity),
                    )
                d["confidence"] = float(np.clip(d["confidence"], 0.0, 1.0))
                reason = cal.decide(d["confidence"], d["unfamiliarity"]) if cal else None
                d["abstain"] = reason is not None
                d["reason"] = reason
                out.append(d)
        return out

    def plan_allowed(self, plan: Sequence[str], attachments: Sequence[str]) -> bool:
        """True when the router itself could have produced `plan`: catalog grammar for
        these attachments and at most `max_steps` steps."""
        return 0 < len(plan) <= self.max_steps and self.catalog.is_valid(list(plan), attachments)

    def remember(
        self,
        requests: Sequence[Any],
        plans: Sequence[Sequence[str]],
        creators: Sequence[str | None],
        *,
        sources: Sequence[str] | None = None,
        pad_to: int = 1,
    ) -> int:
        """Add accepted / re-routed outcomes (the creator's final plans) to the memory;
        creates an empty memory when there is none. Plans the router could not produce
        (`plan_allowed`) are skipped. Returns how many were added. `pad_to`: see `embed`."""
        if self.memory is None:
            self.memory = ExemplarMemory()
        keep = [
            i
            for i, (req, plan) in enumerate(zip(requests, plans, strict=True))
            if self.plan_allowed(list(plan), request_fields(req)[1])
        ]
        if not keep:
            return 0
        emb = self.embed([requests[i] for i in keep], pad_to=pad_to)
        for e, i in zip(emb, keep, strict=True):
            atts = request_fields(requests[i])[1]
            source = sources[i] if sources is not None else ""
            self.memory.add(e, list(plans[i]), creators[i], atts, source=source)
        return len(keep)

    def save_state(self, directory: str | Path) -> None:
        """Persist the memory, calibration and prior beside the checkpoint (reloaded by
        `load`)."""
        if self.memory is not None:
            self.memory.save(directory)
        if self.calibration is not None:
            self.calibration.save(directory)
        if self.prior is not None:
            self.prior.save(directory)
