"""The quickstart's flow stage: the packaged flow generator aligned to the simulated
creators (`verticals.flow.experiment.quickstart_stage`: a simulated selection round
(`simulate.flow.selections.collect_selections`), `train reward`, Flow-GRPO with the
anti-hacking guards, evaluation under the `flow_taste` judge) and one before/after grid
per creator in the report. Kept apart from the router and grading parts of the quickstart.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

from studio_align.plugins import get_host
from studio_align.quickstart.config import QuickstartConfig
from studio_align.simulate.flow.creators import CREATORS
from studio_align.simulate.flow.selections import collect_selections
from studio_align.training.progress import heartbeat
from studio_align.verticals.flow.align import FlowGRPOConfig
from studio_align.verticals.flow.experiment import quickstart_stage

Log = Any


def run_flow(
    out: Path, cfg: QuickstartConfig, log: Log, missing: list[str]
) -> dict[str, Any] | None:
    """Run the stage into `out/flow`; a failure is reported, never raised."""
    t = time.perf_counter()
    try:
        with heartbeat("flow", "creators select, reward model, Flow-GRPO per creator"):
            rep = quickstart_stage(out, host=get_host(), collect=collect_selections,
                                   creators=tuple(CREATORS), judge="flow_taste", seed=cfg.seed,
                                   grpo=FlowGRPOConfig.model_validate(
                                       {"train": {"steps": cfg.flow_grpo_steps}}))  # fmt: skip
    except Exception as e:
        missing.append(f"flow: failed ({type(e).__name__}: {e})")
        (out / "flow_error.txt").write_text(traceback.format_exc(), encoding="utf-8")
        log(f"      flow: FAILED ({type(e).__name__}: {e})")
        return None
    rep["seconds"] = time.perf_counter() - t
    log(f"      flow ok {rep['seconds']:.0f}s: " + flow_line(rep))
    return rep


def flow_line(rep: dict[str, Any]) -> str:
    """Per creator: win rate under the hidden taste (training / held-out tag sets),
    diversity and Fréchet distance relative to the base."""
    parts = []
    for key, win in rep["win_rate"].items():
        parts.append(
            f"{key.split('/')[0]} win {win:.2f} (held-out tags {rep['heldout_win_rate'][key]:.2f}), "
            f"diversity {rep['diversity_ratio'][key]:.2f}x, FD {rep['fd_ratio'][key]:.2f}x"
        )
    return "; ".join(parts)


def flow_report_parts(rep: dict[str, Any]) -> tuple[list[str], list[tuple[str, Path]]]:
    """The report's note and images (one before/after grid per creator)."""
    note = (
        f"Flow vertical ({rep['seconds']:.0f}s): Flow-GRPO from the packaged generator, per "
        f"creator vs the base under the creator's hidden taste: {flow_line(rep)}. Grids: rows = "
        "training tag sets, left four = base, right four = aligned, same noise."
    )
    images = [(f"Flow generator, {name}: before / after", Path(p))
              for name, p in rep["grids"].items()]  # fmt: skip
    return [note], images
