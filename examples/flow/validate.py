"""Choose Flow-GRPO's anti-hacking settings on a validation split, never on the reported one.

    PYTHONPATH=. python examples/flow/validate.py --out runs/flow/val --seed 100 \
        --configs base ceil ceil+anchor --curve 4 [--dpo-configs dpo dpo50] [--base base64]

Validation = selections, reward model and GRPO noise from seed `--seed` (the reported
experiment uses seeds 0-2) and evaluation on the training tag sets only, from evaluation
noise `--eval-seed` (the report uses 1234); the held-out tag sets are not generated.
Prints one JSON line per (config, creator): win rate, diversity and FD ratios, the FD ratio
to the creator's own picks (`fd_chosen`) and how far the picks themselves sit from the
pretraining colours (`taste_fd`, `experiment.taste_fd_ratio`). `--curve K` also prints the
same figures every K GRPO steps of each run (`"curve"` lines), so one run shows what fewer
steps would give.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import jax

from studio_align.plugins import PluginHost
from studio_align.simulate.flow.selections import collect_selections
from studio_align.verticals.flow.align import FlowDPOConfig, FlowGRPOConfig
from studio_align.verticals.flow.evaluate import compare
from studio_align.verticals.flow.experiment import (
    align,
    chosen_images,
    prepare,
    taste_fd_ratio,
)
from studio_align.verticals.flow.guards import GuardConfig

CONFIGS: dict[str, tuple[dict, dict]] = {  # name: (FlowGRPOConfig updates, GuardConfig)
    "base": ({}, {}),
    "stop1.3": ({}, {"stop_fd_ratio": 1.3, "stop_diversity_ratio": 0.9}),
    "stop1.3+kl0.05": ({"beta": 0.05}, {"stop_fd_ratio": 1.3, "stop_diversity_ratio": 0.9}),
    "stop1.3+anchor": (
        {},
        {"stop_fd_ratio": 1.3, "stop_diversity_ratio": 0.9, "anchor_weight": 1.0},
    ),
    "ceil": ({}, {"ceiling_quantile": 0.9}),
    "ceil+anchor": ({}, {"ceiling_quantile": 0.9, "anchor_weight": 1.0}),
    "ceil+anchor+div": (
        {},
        {"ceiling_quantile": 0.9, "anchor_weight": 1.0, "diversity_weight": 0.3},
    ),
    "anchor2": ({}, {"anchor_weight": 2.0}),
    "ceil+kl0.1": ({"beta": 0.1}, {"ceiling_quantile": 0.9}),
    "ceil+anchor+10steps": ({"steps": 10}, {"ceiling_quantile": 0.9, "anchor_weight": 1.0}),
    "ceil75+anchor": ({}, {"ceiling_quantile": 0.75, "anchor_weight": 1.0}),
    "ceil+anchor3": ({}, {"ceiling_quantile": 0.9, "anchor_weight": 3.0}),
    # round 4: stronger anchor and KL, lower ceiling, diversity, lower lr, looser stop
    "a5+kl0.05": ({"beta": 0.05}, {"anchor_weight": 5.0}),
    "a5+ceil0.5+kl0.05": ({"beta": 0.05}, {"anchor_weight": 5.0, "ceiling_quantile": 0.5}),
    "a10+kl0.1": ({"beta": 0.1}, {"anchor_weight": 10.0}),
    "a5+div0.5+kl0.05": ({"beta": 0.05}, {"anchor_weight": 5.0, "diversity_weight": 0.5}),
    "a5+kl0.05+lr1e-4": ({"beta": 0.05, "learning_rate": 1e-4}, {"anchor_weight": 5.0}),
    "a5+kl0.05+lr5e-5": ({"beta": 0.05, "learning_rate": 5e-5}, {"anchor_weight": 5.0}),
    "a5+kl0.05+lr2e-5": ({"beta": 0.05, "learning_rate": 2e-5}, {"anchor_weight": 5.0}),
    "kl0.05+lr5e-5": ({"beta": 0.05, "learning_rate": 5e-5}, {}),
    "kl0.05+lr1e-4": ({"beta": 0.05, "learning_rate": 1e-4}, {}),
    "a5+kl0.05+lr5e-5+stop1.5": (
        {"beta": 0.05, "learning_rate": 5e-5},
        {
            "anchor_weight": 5.0,
            "stop_fd_ratio": 1.5,
            "stop_diversity_ratio": 0.85,
            "check_every": 2,
            "check_samples": 16,
        },
    ),
    # round 4, lead: the default stop with a margin for the 16-sample check's noise
    "stop1.4": ({}, {"stop_fd_ratio": 1.4}),
    "a5+kl0.05+stop1.5": (
        {"beta": 0.05},
        {
            "anchor_weight": 5.0,
            "stop_fd_ratio": 1.5,
            "stop_diversity_ratio": 0.85,
            "check_every": 4,
            "check_samples": 16,
        },
    ),
    # the U-Net base (3 December): it moves faster per step than the DiT did
    "stop1.25": ({}, {"stop_fd_ratio": 1.25}),
    "lr2e-5": ({"learning_rate": 2e-5}, {}),
    "lr2e-5+stop1.25": ({"learning_rate": 2e-5}, {"stop_fd_ratio": 1.25}),
    "lr1e-5": ({"learning_rate": 1e-5}, {}),
    "lr1e-5+stop1.25+40steps": (
        {"learning_rate": 1e-5, "steps": 40},
        {"stop_fd_ratio": 1.25},
    ),
    # the quickstart's stage (4 December): fewer steps (the win is reached in 2-4 at 1e-5),
    # fewer and smaller early-stopping checks (a check samples 7 tag sets x 16 x 20 ODE steps)
    "qs-8steps": ({"steps": 8}, {}),
    "qs-8steps+check4": ({"steps": 8}, {"check_every": 4}),
    "qs-8steps+check4x8": ({"steps": 8}, {"check_every": 4, "check_samples": 8}),
    "qs-12steps+check4x8": ({"steps": 12}, {"check_every": 4, "check_samples": 8}),
    # on a failed check, bisect back to the latest step that passes (GuardConfig.backtrack)
    "qs-8steps+check4+backtrack": ({"steps": 8}, {"check_every": 4, "backtrack": True}),
    # the 64x64 base (5 December): the defaults, without the stop, as a curve; rollouts
    # nearer the evaluation's ODE samples (more SDE steps, less SDE noise); a larger step
    "noise0.3": ({"noise_level": 0.3}, {}),
    "nostop": ({}, {"stop_fd_ratio": None, "stop_diversity_ratio": None}),
    "nostop+sde16": ({"sde_steps": 16}, {"stop_fd_ratio": None, "stop_diversity_ratio": None}),
    "nostop+noise0.3": (
        {"noise_level": 0.3},
        {"stop_fd_ratio": None, "stop_diversity_ratio": None},
    ),
    "nostop+lr5e-5": (
        {"learning_rate": 5e-5},
        {"stop_fd_ratio": None, "stop_diversity_ratio": None},
    ),
    # both bases (5 December): a failed first check keeps no step; bisecting back keeps
    # the latest step that passes
    "backtrack": ({}, {"backtrack": True}),
    "noise0.3+backtrack": ({"noise_level": 0.3}, {"backtrack": True}),
    # a check also fails when the creator's reward model scores the samples below the base
    "rewardstop": ({}, {"stop_reward": True}),
    # four times the samples per step (a less noisy group advantage), same steps and lr
    "pps16": ({"prompts_per_step": 16}, {}),
    # the same 256 samples as the defaults' 8 steps of 32, in 2 steps of 128, at 4x the lr
    "pps16x2": ({"prompts_per_step": 16, "steps": 2, "learning_rate": 4e-5}, {}),
    # the stop's check on 32 samples per tag set (the default 16): a less noisy FD estimate
    "check32": ({}, {"check_samples": 32}),
    # the stop asked every 2 steps (the default 4): a run whose step 4 fails keeps step 2
    "check2": ({}, {"check_every": 2}),
    # on a stop, the steps not kept run again at half the learning rate (GuardConfig.retries)
    "retry": ({}, {"retries": 1}),
    # the retry with the reward check, so a retry that goes against the creator's own
    # reward model is not kept
    "retry+rewardstop": ({}, {"retries": 1, "stop_reward": True}),
}
DPO_CONFIGS: dict[str, dict] = {  # name: FlowDPOConfig updates
    "dpo": {},
    "dpo50": {"steps": 50},
    "dpo25": {"steps": 25},
    "dpo-beta5000": {"beta": 5000.0},
    "dpo-lr2e-5": {"learning_rate": 2e-5},
    "dpo-lr1e-5": {"learning_rate": 1e-5},
    "dpo-lr1e-5+beta5000": {"learning_rate": 1e-5, "beta": 5000.0},
    # the experiment's quality stop (GuardConfig: FD 1.25x, diversity 0.85x) every N steps
    "dpo+check10": {"check_every": 10},
    "dpo+check20": {"check_every": 20},
    # a slower Diffusion-DPO under the same stop, so a check sees a model near the last one
    "dpo-lr1e-5+check10": {"learning_rate": 1e-5, "check_every": 10},
    "dpo-lr2e-5+check10": {"learning_rate": 2e-5, "check_every": 10},
    # the velocity anchor to the reference (FlowDPOConfig.anchor), a KL to the base
    "dpo+anchor500": {"anchor": 500.0},
    "dpo+anchor2000": {"anchor": 2000.0},
    "dpo+anchor8000": {"anchor": 8000.0},
    # anchors 0, 2000, 8000 in turn until the quality stop (FD 1.25x, diversity 0.85x) passes
    "dpo+ladder": {"anchor_ladder": [0.0, 2000.0, 8000.0]},
}


def grpo_config(seed: int, upd: dict[str, Any]) -> FlowGRPOConfig:
    """`FlowGRPOConfig` from a CONFIGS entry (`steps`, `learning_rate` in their sections)."""
    flat = dict(upd)
    train = {"seed": seed, **({"steps": flat.pop("steps")} if "steps" in flat else {})}
    optim = FlowGRPOConfig().optim.model_dump()
    if "learning_rate" in flat:
        optim["learning_rate"] = flat.pop("learning_rate")
    return FlowGRPOConfig.model_validate({"train": train, "optim": optim, **flat})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/flow/val")
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--eval-seed", type=int, default=777)
    ap.add_argument("--configs", nargs="*", default=list(CONFIGS))
    ap.add_argument("--dpo-configs", nargs="+", default=[], choices=list(DPO_CONFIGS),
                    help="Diffusion-DPO settings to validate as well")  # fmt: skip
    ap.add_argument("--creators", nargs="+", default=["lumen", "noir"])
    ap.add_argument("--align", nargs="+", default=None,
                    help="align only these creators, in this order (selections: all)")  # fmt: skip
    ap.add_argument("--n-eval", type=int, default=16)
    ap.add_argument("--steps", type=int, default=None, help="GRPO steps (default: config's)")
    ap.add_argument("--curve", type=int, default=0, help="also evaluate every K GRPO steps")
    ap.add_argument("--base", default="base", help="base checkpoint: a path, base or base64")
    args = ap.parse_args()
    jax.config.update("jax_compilation_cache_dir", "/tmp/studio_align_jax_cache")
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    host = PluginHost.default()
    host.load_module("studio_align.verticals.flow.plugin", origin="builtin")
    root = Path(args.out) / f"seed{args.seed}"
    prep = prepare(root, seed=args.seed, host=host, collect=collect_selections,
                   creators=args.creators, base_path=args.base)  # fmt: skip
    judge = host.reward("flow_taste")
    cache: dict = {}

    def figures(model: Any, creator: str) -> dict[str, Any]:
        rep = compare(prep["base"], model, creator, judge, data_images=prep["data"],
                      n_per_set=args.n_eval, scorer=prep["scorer"], base_samples=cache,
                      seed=args.eval_seed, splits=("train",),
                      chosen=chosen_images(prep, creator))["train"]  # fmt: skip
        return {"win": rep["win_rate"], "div": rep["diversity/ratio"], "fd": rep["fd/ratio"],
                "fd_chosen": rep["fd_chosen/ratio"],
                "reward": [rep["reward/base"], rep["reward/aligned"]]}  # fmt: skip

    def report(name: str, creator: str, model: Any, extra: dict, secs: float) -> None:
        up = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        print(json.dumps({"config": name, "creator": creator, **figures(model, creator),
                          "taste_fd": taste_fd_ratio(prep, creator), "extra": extra,
                          "seconds": secs, "uptime": up}, default=float), flush=True)  # fmt: skip

    for name in args.configs:
        upd, guard = CONFIGS[name]
        if args.steps is not None:
            upd = {**upd, "steps": args.steps}
        if args.curve and "check_every" not in guard:
            guard = {**guard, "check_every": args.curve}
        g = grpo_config(args.seed, upd)
        for creator in args.align or prep["creators"]:
            t0 = time.perf_counter()
            checks: list[int] = []

            def curve(
                model: Any,
                creator: str = creator,
                checks: list[int] = checks,
                name: str = name,
                every: int = GuardConfig(**guard).check_every,
            ) -> None:
                checks.append(every * (len(checks) + 1))
                print(json.dumps({"curve": name, "creator": creator, "step": checks[-1],
                                  **figures(model, creator)}, default=float), flush=True)  # fmt: skip

            model, extra = align(
                prep,
                creator,
                "grpo",
                root / name / creator,
                host=host,
                grpo=g,
                dpo=FlowDPOConfig(),
                guards=GuardConfig(**guard),
                monitor=curve if args.curve else None,
            )
            report(name, creator, model, extra, time.perf_counter() - t0)

    for name in args.dpo_configs:
        for creator in args.align or prep["creators"]:
            t0 = time.perf_counter()
            d = FlowDPOConfig(**{"seed": args.seed, **DPO_CONFIGS[name]})
            model, extra = align(prep, creator, "dpo", root / name / creator, host=host,
                                 grpo=FlowGRPOConfig(), dpo=d, guards=GuardConfig())  # fmt: skip
            report(name, creator, model, extra, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
