"""The flow vertical's measured experiment: 3 seeds x creators x {Flow-GRPO, Diffusion-DPO}.

    PYTHONPATH=. python examples/flow/run_experiment.py --out runs/flow/experiment --seeds 0 1 2

Flow-GRPO runs with the defaults of `FlowGRPOConfig` and `GuardConfig`, chosen on the
validation split (`examples/flow/validate.py`, docs/flow.md "Guards"); each flag below
overrides one of them (`--no-guards`: none of the guards).

Writes `OUT/seed<k>/report.json` per seed and `OUT/summary.json` (seed mean and std).
The persistent XLA compilation cache makes later runs reuse the compiled steps.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import jax

from studio_align.plugins import PluginHost
from studio_align.simulate.flow.creators import CREATORS
from studio_align.simulate.flow.selections import collect_selections
from studio_align.verticals.flow.align import FlowDPOConfig, FlowGRPOConfig
from studio_align.verticals.flow.experiment import run_seed, summarise
from studio_align.verticals.flow.guards import GuardConfig


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/flow/experiment")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--base", default=None, help="base checkpoint (default: the shipped one)")
    ap.add_argument("--algorithms", nargs="+", default=["grpo", "dpo"])
    ap.add_argument("--grpo-steps", type=int, default=None)
    ap.add_argument("--grpo-lr", type=float, default=None, help="Flow-GRPO learning rate")
    ap.add_argument("--grpo-beta", type=float, default=None, help="Flow-GRPO KL coefficient")
    ap.add_argument("--dpo-steps", type=int, default=None, help="Diffusion-DPO steps")
    ap.add_argument("--dpo-lr", type=float, default=None, help="Diffusion-DPO learning rate")
    ap.add_argument("--dpo-beta", type=float, default=None, help="Diffusion-DPO beta")
    ap.add_argument("--dpo-anchor-ladder", type=float, nargs="+", default=None,
                    help="Diffusion-DPO anchor weights tried in turn (FlowDPOConfig.anchor_ladder)")  # fmt: skip
    ap.add_argument("--no-guards", action="store_true", help="GuardConfig.off()")
    ap.add_argument("--diversity", type=float, default=None, help="flow_diversity weight")
    ap.add_argument("--anchor", type=float, default=None, help="flow_anchor weight")
    ap.add_argument("--ceiling", type=float, default=None, help="aesthetic cap quantile")
    ap.add_argument("--stop-fd", type=float, default=None, help="early stop: FD ratio")
    ap.add_argument("--stop-diversity", type=float, default=None, help="early stop: div ratio")
    ap.add_argument("--check-every", type=int, default=None, help="early stop: steps per check")
    args = ap.parse_args()
    given = lambda **kw: {k: v for k, v in kw.items() if v is not None}  # noqa: E731
    grpo = FlowGRPOConfig.model_validate(
        {"train": given(steps=args.grpo_steps), "optim": {**FlowGRPOConfig().optim.model_dump(),
         **given(learning_rate=args.grpo_lr)}, **given(beta=args.grpo_beta)}
    )  # fmt: skip
    guards = (GuardConfig.off() if args.no_guards else GuardConfig()).model_copy(
        update=given(
            diversity_weight=args.diversity,
            anchor_weight=args.anchor,
            ceiling_quantile=args.ceiling,
            stop_fd_ratio=args.stop_fd,
            stop_diversity_ratio=args.stop_diversity,
            check_every=args.check_every,
        )
    )
    jax.config.update("jax_compilation_cache_dir", "/tmp/studio_align_jax_cache")
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    host = PluginHost.default()
    host.load_module("studio_align.verticals.flow.plugin", origin="builtin")
    out = Path(args.out)
    reports = []
    for seed in args.seeds:
        up = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        rep = run_seed(
            out / f"seed{seed}",
            seed=seed,
            host=host,
            collect=collect_selections,
            creators=tuple(CREATORS),
            judge="flow_taste",
            algorithms=args.algorithms,
            grpo=grpo,
            dpo=FlowDPOConfig(
                **given(
                    steps=args.dpo_steps,
                    learning_rate=args.dpo_lr,
                    beta=args.dpo_beta,
                    anchor_ladder=args.dpo_anchor_ladder,
                )
            ),
            guards=guards,
            **given(base_path=args.base),
        )
        rep["uptime"] = up
        (out / f"seed{seed}" / "report.json").write_text(json.dumps(rep, indent=2, default=float))
        reports.append(rep)
        (out / "summary.json").write_text(json.dumps(summarise(reports), indent=2))
        print(
            json.dumps(
                {
                    "seed": seed,
                    "seconds": rep["seconds"],
                    "uptime": up,
                    "win": {
                        k: (v["train"]["win_rate"], v["heldout"]["win_rate"])
                        for k, v in rep["results"].items()
                    },
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
