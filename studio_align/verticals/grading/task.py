"""The grading vertical as a `studio_align.tasks.Task`, registered as `grading`.

What it declares, and why:
- `algorithms = {"grpo"}`: the generic GRPO trainer needs only a `Policy` (sample +
  log-probs) and prompt records, which a continuous policy provides (`grpo_prompts`,
  `policy`, `reward_context` below). The generic SFT, DPO and KTO trainers pack
  *token-id* sequences (`sft_pairs`, `preference_pairs`, `kto_samples`); a grade is 9
  real numbers, not tokens, so declaring them would be a lie the engine could only
  discover by crashing. Behaviour cloning and DPO over grades exist, as pure losses
  (`objectives.bc_loss`, `objectives.make_dpo_grade_loss`) that the shared
  `train_loop` trains; `losses()` hands them to any caller, and `train grading` runs
  the whole pipeline (`pipeline()`).
- `record_kinds = {"grpo": "retouch"}`: `data compile` writes retouch records, whose
  images are the GRPO prompt sources and whose `after` grades the evaluation target.

Records are `data.schemas.RetouchRecord` dicts (absolute `image`, `creator`, `after`).
`StartingPoint.state["grading"]` holds the `GradingModel` (policy + creator table);
`state["reward_model"]` an `AestheticScorer` for the `aesthetic` reward, when set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.errors import DataError
from studio_align.tasks import StartingPoint
from studio_align.verticals.grading.color import mean_delta_e
from studio_align.verticals.grading.dataset import load_thumbs
from studio_align.verticals.grading.model import GradingModel, copy_policy
from studio_align.verticals.grading.objectives import (
    ConditionedRolloutPolicy,
    bc_loss,
    make_dpo_grade_loss,
)
from studio_align.verticals.grading.renderer import params_to_vector, render
from studio_align.verticals.grading.run_config import GradingRunConfig
from studio_align.verticals.grading.train import train_grading


class GradingTask:
    """Film grading: source image + style + creator -> a Gaussian over grade parameters."""

    name = "grading"
    algorithms = frozenset({"grpo"})
    record_kinds: Mapping[str, str] = {"grpo": "retouch"}

    def __init__(self, *, thumbnail: int = 64, hidden: int = 64) -> None:
        self.thumbnail = thumbnail
        self.hidden = hidden

    # -- Task ------------------------------------------------------------------------------

    def start(
        self, model: Any, *, seed: int, records: Sequence[Mapping[str, Any]] = (),
        reference: bool = True,
    ) -> StartingPoint:  # fmt: skip
        """From `model.init_from` (a grading model dir) or a fresh policy over the records'
        creators, input statistics fitted on the records' images."""
        init = getattr(model, "init_from", None)
        if init:
            gm = GradingModel.load(init)
        else:
            creators = sorted({str(r["creator"]) for r in records})
            gm = GradingModel.create(
                creators, hidden=self.hidden, thumbnail=self.thumbnail, seed=seed
            )
            if records:
                th, _ = load_thumbs(
                    sorted({str(r["image"]) for r in records}), gm.thumbnail, skip_bad=True,
                    progress=False,
                )  # fmt: skip
                gm.policy.set_input_stats(th.feats)
        ref = copy_policy(gm.policy) if reference else None
        return StartingPoint(model=gm.policy, reference=ref, state={"grading": gm})

    def evaluate(
        self, start: StartingPoint, records: Sequence[Mapping[str, Any]]
    ) -> dict[str, float]:
        """`loss`: mean ΔE2000 of the model's grade to the records' `after` grades."""
        gm: GradingModel = start.state["grading"]
        if not records:
            return {}
        th, bad = load_thumbs([str(r["image"]) for r in records], gm.thumbnail, skip_bad=True,
                              progress=False)  # fmt: skip
        keep = [r for r in records if str(r["image"]) not in bad]
        if not keep:
            raise DataError("grading evaluation: no readable images among the records")
        src = th.pixels[th.rows([str(r["image"]) for r in keep])]
        pred = gm.predict(src, [""] * len(keep), [str(r["creator"]) for r in keep])
        after = np.stack([np.clip(params_to_vector(r["after"]), -1, 1) for r in keep])
        de = mean_delta_e(render(src, pred), render(src, after))
        return {"loss": float(de.mean()), "delta_e2000": float(de.mean()), "n": float(len(keep))}

    def save(
        self, start: StartingPoint, path: Path, *, trained_by: str, metrics: Mapping[str, float]
    ) -> Path:
        gm: GradingModel = start.state["grading"]
        gm.policy = start.model
        return gm.save(path, trained_by=trained_by, metrics=dict(metrics))

    # -- GRPO ------------------------------------------------------------------------------

    def grpo_prompts(
        self, start: StartingPoint, records: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        gm: GradingModel = start.state["grading"]
        th, bad = load_thumbs(sorted({str(r["image"]) for r in records}), gm.thumbnail,
                              skip_bad=True, progress=False)  # fmt: skip
        keep = [r for r in records if str(r["image"]) not in bad]
        rows = th.rows([str(r["image"]) for r in keep])
        styles = [str(r.get("prompt", "")) for r in keep]
        who = [str(r["creator"]) for r in keep]
        start.state["rollout"] = ConditionedRolloutPolicy(
            th.pixels[rows], th.feats[rows], gm.conditioning(styles, who)
        )
        return [
            {"prompt": i, "sources": th.pixels[rows[i]], "requests": styles[i], "creators": who[i]}
            for i in range(len(keep))
        ]

    def policy(self, start: StartingPoint, sampling: Any, *, max_prompt_len: int) -> Any:
        if "rollout" not in start.state:
            raise DataError("grading task: call grpo_prompts before policy")
        return start.state["rollout"]

    def reward_context(self, start: StartingPoint) -> dict[str, Any]:
        rm = start.state.get("reward_model")
        return {"aesthetic_model": rm} if rm is not None else {}

    # -- beyond the protocol ---------------------------------------------------------------

    def losses(self, *, dpo_beta: float = 0.05) -> dict[str, Any]:
        """The pure losses over grade batches that `training.loop.train_loop` trains."""
        return {"bc": bc_loss, "dpo": make_dpo_grade_loss(beta=dpo_beta)}

    def pipeline(self, cfg: GradingRunConfig, *, host: Any = None) -> dict[str, Any]:
        """The whole `train grading` run (reward model, BC, GRPO or DPO, save)."""
        return train_grading(cfg, host=host)
