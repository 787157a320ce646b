"""What the router returns to a platform: a plan, a calibrated confidence, and whether to abstain.

`Router` inherits these methods (`RoutingDecisions`); they add calibration (temperature,
unfamiliarity, abstention: `calibration.py`) and the exemplar memory (`memory.py`) on top
of the model's greedy constrained decoding, without changing it:

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

import numpy as np

from studio_align.router.analysis import Analysis, analyse
from studio_align.router.calibration import plan_logprob
from studio_align.router.format import request_fields
from studio_align.router.memory import ExemplarMemory


class RoutingDecisions:
    """Mixin for `Router`: calibrated, abstaining, memory-aware routing."""

    calibration: Any
    memory: Any
    grammar: Any
    catalog: Any
    max_steps: int

    def analyse(self, requests: Sequence[Any]) -> tuple[list[list[int]], Analysis]:
        """Greedy constrained plans (completion ids) and their analysis (`analysis.py`):
        from the decoding pass itself with the sampler, else by one scoring pass."""
        prompts, inits = self.encode(requests)  # type: ignore[attr-defined]
        comps, _, an = self._decode(prompts, inits)  # type: ignore[attr-defined]
        return comps, an if an is not None else analyse(self, prompts, comps, inits)

    def embed(
        self, requests: Sequence[Any], *, batch_size: int = 64, pad_to: int = 1
    ) -> np.ndarray:
        """The router's embedding of each request: the hidden state at `<plan>` [N, D],
        from the same pass (and so the same numbers) as `decide`'s lookups. Chunks are
        padded to at least `pad_to` rows (a server passes its smallest batch bucket, so
        feedback never reaches a batch shape that warm-up did not compile)."""
        out = []
        for s in range(0, len(requests), batch_size):
            chunk = list(requests[s : s + batch_size])
            padded = chunk + [chunk[-1]] * (pad_to - len(chunk))
            out.append(self.analyse(padded)[1].hidden[: len(chunk)])
        return np.concatenate(out) if out else np.zeros((0, 0), np.float32)

    def model_decisions(self, chunk: Sequence[Any]) -> tuple[list[dict[str, Any]], np.ndarray]:
        """The model's own decision for each request (before the memory) and the
        embeddings the memory compares, from one pass."""
        id_to_step = dict(zip(self.grammar.step_ids, self.catalog.names, strict=True))
        comps, an = self.analyse(chunk)
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
        return out, an.hidden

    def decide(
        self,
        requests: Sequence[Any],
        *,
        creators: Sequence[str | None] | None = None,
        batch_size: int = 64,
    ) -> list[dict[str, Any]]:
        """One decision per request (see module docstring)."""
        creators = list(creators) if creators is not None else [None] * len(requests)
        if len(creators) != len(requests):
            raise ValueError(f"{len(requests)} requests but {len(creators)} creators")
        out: list[dict[str, Any]] = []
        cal = self.calibration
        for s in range(0, len(requests), batch_size):
            chunk = list(requests[s : s + batch_size])
            ds, hidden = self.model_decisions(chunk)
            atts_of = [request_fields(req)[1] for req in chunk]
            hits = (
                self.memory.lookup_many(hidden, creators[s : s + len(chunk)], atts_of)
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
        """Persist the memory and calibration beside the checkpoint (reloaded by `load`)."""
        if self.memory is not None:
            self.memory.save(directory)
        if self.calibration is not None:
            self.calibration.save(directory)
