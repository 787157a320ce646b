"""The quickstart's grading stage: platform-shaped files, then the CLI's own library calls.

What a platform user does by hand, in order, with the same functions the commands wrap:

1. `studio-align data demo-grading --out OUT/grading/platform` ->
   `write_platform_demo`: procedural photos as PNG files and the simulated creators'
   retouch, selection and rating events as `logs.jsonl`;
2. `studio-align train grading --config OUT/grading/run.toml` -> the run config written
   as a TOML file, read back by `config.load_config` and run by `train_grading`;
3. `studio-align eval grading --checkpoint OUT/grading/run/model --logs ... --report
   OUT/grading/report` -> `evaluate_grading` on the run's held-out (creator, session)
   groups, with the before/after grid per creator the quickstart report shows;
4. the simulated creators' own view, which only a demo has: each creator's utility gap
   to their oracle grade, and how far apart their tastes are beside how far apart the
   model's grades for them are (`simulate.grading.oracle`), added to the same report.

The quickstart may not import `studio_align.cli` (a sibling layer), so it calls these
library functions; the commands are thin wrappers over the same calls, so the files and
figures are the ones a user would get. Sizes are small so the stage takes about two
minutes on an idle 2-core machine; the figures are per creator on few held-out events,
so they are a smoke test of the path, not the vertical's measured quality
(`docs/grading.md` has those, on larger logs).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from studio_align.config import load_config
from studio_align.quickstart.config import QuickstartConfig
from studio_align.simulate.grading.oracle import taste_section
from studio_align.simulate.grading.platform import demo_creators, write_platform_demo
from studio_align.training.progress import heartbeat
from studio_align.verticals.grading.evaluate import evaluate_grading, load_heldout
from studio_align.verticals.grading.run_config import GradingRunConfig
from studio_align.verticals.grading.train import train_grading

Log = Callable[[str], None]

# per creator, for the six demo creators (plus the one-event `newcomer`)
DEMO_EVENTS = {"retouches": 24, "selections": 24, "ratings": 8}
IMAGE_SIZE = 64

RUN_TOML = """# the run config a user writes for `studio-align train grading --config run.toml`
run_dir = "{run_dir}"
logs = ["{logs}"]
algorithm = "grpo"
heldout_fraction = 0.25

[train]
steps = 20                         # the tuned stage's (GRPO's)
seed = {seed}

[policy]
thumbnail = 32

[reward.train]
steps = 200

[bc]
steps = 200

[grpo]
prompts_per_step = 16
group_size = 8
"""


def run_grading(
    out: Path, cfg: QuickstartConfig, log: Log, missing: list[str]
) -> dict[str, Any] | None:
    """Files, `train grading`, `eval grading` (module docstring); None when it failed."""
    root = out / "grading"
    t = time.perf_counter()
    try:
        with heartbeat("grading", "demo files, train grading, eval grading"):
            n = DEMO_EVENTS
            logs = write_platform_demo(
                root / "platform", retouches=n["retouches"], selections=n["selections"],
                ratings=n["ratings"], size=IMAGE_SIZE, seed=cfg.seed,
            )  # fmt: skip
            run_toml = root / "run.toml"
            run_toml.write_text(
                RUN_TOML.format(run_dir=(root / "run").as_posix(), logs=logs.as_posix(),
                                seed=cfg.seed),
                encoding="utf-8",
            )  # fmt: skip
            rep = train_grading(load_config(GradingRunConfig, run_toml))
            # the simulated creators' view (oracle gap, taste distances) joins the report
            held = load_heldout(rep["model"], [str(logs)])
            section, tastes = taste_section(held, demo_creators(), root / "report")
            fig = evaluate_grading(rep["model"], [str(logs)], report_dir=root / "report",
                                   sections=[section])  # fmt: skip
    except Exception as e:  # a failed vertical must not hide the router's results
        missing.append(f"grading: failed ({type(e).__name__}: {e})")
        (out / "grading_error.txt").write_text(traceback.format_exc(), encoding="utf-8")
        log(f"      grading: FAILED ({type(e).__name__}: {e})")
        return None
    seconds = time.perf_counter() - t
    s = fig["summary"]
    log(
        f"      grading ok {seconds:.0f}s: {s['creators']} creators; held-out win rate vs "
        f"untuned (min over creators) {_f(s['min_win_rate_vs_untuned'])}; ΔE2000 to own "
        f"retouches below the untuned policy's for {_f(s['fraction_creators_delta_e_below_base'])}"
        " of creators"
    )
    return {
        "seconds": seconds,
        "summary": s,
        "creators": fig["creators"],
        "tastes": tastes,
        "dir": str(root),
        "report": fig.get("report"),
        "grids": sorted(str(p) for p in (root / "report").glob("grid_*.png")),
    }


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def grading_notes(grading: dict[str, Any]) -> list[str]:
    """The quickstart report's lines for the grading stage."""
    s = grading["summary"]
    rows = []
    for c, v in grading["creators"].items():
        sel, ret = v.get("selections") or {}, v.get("retouches") or {}
        de = ret.get("delta_e", {})
        rows.append(
            f"{c}: win vs untuned {_f(sel.get('win_rate_vs_untuned'))} "
            f"(n={sel.get('selections', 0)}), ΔE tuned {_f(de.get('tuned'))} / untuned "
            f"{_f(de.get('untuned'))}"
        )
    tastes = grading.get("tastes") or {}
    gaps = "; ".join(
        f"{c} {v['gap']['tuned']:.1f} (base {v['gap']['base']:.1f}, own retouch "
        f"{v['gap']['own retouch']:.1f})"
        for c, v in (tastes.get("utility_gap") or {}).items()
    )
    dist = tastes.get("taste_distance") or {}
    taste_line = (
        f"Utility gap to each simulated creator's oracle grade on held-out photos (0 = best): "
        f"{gaps}. Creator pairs' grades differ by ΔE2000 {_span(dist.get('model_delta_e'))} "
        f"(tuned model) where their hidden tastes differ by {_span(dist.get('oracle_delta_e'))} "
        f"(oracle grades); correlation over pairs {_f(dist.get('pair_correlation'))}."
    )
    return [
        f"Grading vertical ({grading['seconds']:.0f}s, through the files a platform exports: "
        f"data demo-grading, train grading, eval grading): min held-out win rate vs untuned "
        f"{_f(s['min_win_rate_vs_untuned'])}, ΔE2000 to own retouches below the untuned "
        f"policy's for {_f(s['fraction_creators_delta_e_below_base'])} of creators. "
        + "; ".join(rows),
        taste_line,
        f"Grading evaluation page: {grading['report']}",
    ]


def _span(m: list[list[float]] | None) -> str:
    """min–max of the off-diagonal of a pairwise matrix."""
    if not m or len(m) < 2:
        return "–"
    v = [m[i][j] for i in range(len(m)) for j in range(i + 1, len(m))]
    return f"{min(v):.1f}–{max(v):.1f}"
