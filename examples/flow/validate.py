"""Choose Flow-GRPO's anti-hacking settings on a validation split, never on the reported one.

    PYTHONPATH=. python examples/flow/validate.py --out runs/flow/val --seed 100 \
        --configs base ceil ceil+anchor

Validation = selections, reward model and GRPO noise from seed `--seed` (the reported
experiment uses seeds 0-2) and evaluation on the training tag sets only, from evaluation
noise `--eval-seed` (the report uses 1234); the held-out tag sets are not generated.
Prints one JSON line per (config, creator): win rate, diversity and FD ratios.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import jax

from studio_align.plugins import PluginHost
from studio_align.verticals.flow.align import FlowDPOConfig, FlowGRPOConfig
from studio_align.verticals.flow.evaluate import compare
from studio_align.verticals.flow.experiment import align, prepare
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
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/flow/val")
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--eval-seed", type=int, default=777)
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS))
    ap.add_argument("--creators", nargs="+", default=["lumen", "noir"])
    ap.add_argument("--n-eval", type=int, default=16)
    args = ap.parse_args()
    jax.config.update("jax_compilation_cache_dir", "/tmp/studio_align_jax_cache")
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    host = PluginHost.default()
    host.load_module("studio_align.verticals.flow.plugin", origin="builtin")
    root = Path(args.out) / f"seed{args.seed}"
    prep = prepare(root, seed=args.seed, host=host, creators=args.creators)
    cache: dict = {}
    for name in args.configs:
        upd, guard = CONFIGS[name]
        g = FlowGRPOConfig(seed=args.seed).model_copy(update=upd)
        for taste in prep["tastes"]:
            t0 = time.perf_counter()
            model, extra = align(
                prep,
                taste,
                "grpo",
                root / name / taste.name,
                host=host,
                grpo=g,
                dpo=FlowDPOConfig(),
                guards=GuardConfig(**guard),
            )
            secs = time.perf_counter() - t0
            rep = compare(prep["base"], model, taste, data_images=prep["data"],
                          n_per_set=args.n_eval, scorer=prep["scorer"], base_samples=cache,
                          seed=args.eval_seed, splits=("train",))["train"]  # fmt: skip
            up = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
            print(json.dumps({"config": name, "creator": taste.name,
                              "win": rep["win_rate"], "div": rep["diversity/ratio"],
                              "fd": rep["fd/ratio"], "reward": [rep["reward/base"],
                              rep["reward/aligned"]], "extra": extra, "seconds": secs,
                              "uptime": up}, default=float), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
