"""Flow-GRPO's options against its default: reward reached per wall-clock second.

    python bench/flow_grpo_options.py                         # seeds 0 1 2, 20 steps
    python bench/flow_grpo_options.py --seeds 0 --steps 8 --variants default fast2

One selection round and one reward model (the quickstart's: simulated creators pick
among the packaged base's candidates, `train reward` fits their heads), then, per seed
and variant (interleaved, so all see the same load), Flow-GRPO from the base against the
`--creator`'s `aesthetic` reward with the experiment's defaults (4 tag sets x 8 samples
per step, 8 SDE steps, Adam 5e-5, KL 0.05), no guards (an early stop would cut runs
short by different amounts). Variants:

- `default`: every SDE step trained on, CFG-free rollouts (guidance 1);
- `fast2`, `fast1`: Flow-GRPO-Fast, `sde_window` 2 or 1;
- `ratio_norm`: each step's log-ratio scaled to one scale across timesteps;
- `cfg3`: rollouts and updates with classifier-free guidance 3 (a doubled batch);
- `fast2_norm`: `fast2` with `ratio_norm`.

- `fast2_long`: `fast2` for twice the steps.

The rollouts' own rewards are not comparable across variants (a window's rollout is
mostly ODE steps, which draw cleaner images than the all-SDE default), so the reward
reached is measured the same way for every run, after training: the reward model's
score for the creator of 16 ODE samples (20 steps, guidance 1, fixed noise) per
training tag set, against the base's on the same noise. Per run one JSON line:
`wall_s` (the whole `flow_grpo` call, the first run of each variant's shapes
compiling), `steady_step_s` (median step time after step 2), `train_s` = steps x
steady_step_s, `reward_base` and `reward_end`, `gain_per_s` = (end - base) / train_s,
the win rate over the base under the creator's hidden taste (the simulated judge, which
training never sees) on the training and the held-out tag sets, and the held-out Fréchet
and diversity ratios. Then a summary: seed means, and each variant's `gain_per_s` over
the first variant's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.plugins import get_host
from studio_align.simulate.flow.creators import CREATORS
from studio_align.simulate.flow.selections import collect_selections
from studio_align.verticals.flow.align import FlowGRPOConfig, flow_grpo
from studio_align.verticals.flow.checkpoint import clone
from studio_align.verticals.flow.evaluate import TRAIN_TAG_SETS, compare, conditions
from studio_align.verticals.flow.experiment import prepare

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "fast2": {"sde_window": 2},
    "fast1": {"sde_window": 1},
    "ratio_norm": {"ratio_norm": True},
    "cfg3": {"guidance": 3.0},
    "fast2_norm": {"sde_window": 2, "ratio_norm": True},
    "fast2_long": {"sde_window": 2},
}
STEPS_FACTOR = {"fast2_long": 2}


def run(prep: dict, creator: str, variant: str, seed: int, steps: int, host: Any) -> dict:
    steps *= STEPS_FACTOR.get(variant, 1)
    cfg = FlowGRPOConfig.model_validate(
        {"train": {"steps": steps, "seed": seed}, **VARIANTS[variant]}
    )
    verts, tags = conditions(TRAIN_TAG_SETS)
    model = clone(prep["base"])
    stamps: list[float] = []

    def stamp(model: Any) -> bool:
        stamps.append(time.perf_counter())
        return False

    t0 = time.perf_counter()
    flow_grpo(model, prep["base"], verts, tags, cfg, rewards=host.rewards, creator=creator,
              context={"aesthetic_model": prep["scorer"]}, stop=stamp, check_every=1)  # fmt: skip
    wall = time.perf_counter() - t0
    step_s = float(np.median(np.diff(stamps[1:])))
    rep = compare(prep["base"], model, creator, host.reward("flow_taste"),
                  data_images=prep["data"], n_per_set=16, seed=1234, scorer=prep["scorer"],
                  base_samples=prep.setdefault("base_samples", {}))  # fmt: skip
    tr, ho = rep["train"], rep["heldout"]
    gain = tr["reward/aligned"] - tr["reward/base"]
    return {
        "variant": variant, "seed": seed, "steps": steps, "wall_s": round(wall, 2),
        "steady_step_s": round(step_s, 3), "train_s": round(steps * step_s, 2),
        "reward_base": round(tr["reward/base"], 4), "reward_end": round(tr["reward/aligned"], 4),
        "gain_per_s": round(gain / (steps * step_s), 5), "train_win": round(tr["win_rate"], 3),
        "heldout_win": round(ho["win_rate"], 3), "heldout_fd_ratio": round(ho["fd/ratio"], 3),
        "heldout_diversity_ratio": round(ho["diversity/ratio"], 3),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--creator", default="lumen")
    ap.add_argument("--variants", nargs="+", choices=sorted(VARIANTS),
                    default=["default", "fast2", "fast1", "ratio_norm", "cfg3", "fast2_long"])  # fmt: skip
    ap.add_argument("--out", type=Path, default=None, help="default: a temporary folder")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    host = get_host()
    root = args.out or Path(tempfile.mkdtemp(prefix="sa-flow-options-"))
    prep = prepare(root, seed=0, host=host, collect=collect_selections, creators=list(CREATORS))
    rows = []
    for seed in args.seeds:
        for variant in args.variants:
            rows.append(run(prep, args.creator, variant, seed, args.steps, host))
            print(json.dumps(rows[-1]), flush=True)
    keys = ("steady_step_s", "train_s", "reward_end", "gain_per_s", "train_win", "heldout_win",
            "heldout_fd_ratio", "heldout_diversity_ratio")  # fmt: skip
    mean = {v: {k: round(statistics.mean(r[k] for r in rows if r["variant"] == v), 4) for k in keys}
            for v in args.variants}  # fmt: skip
    base = mean[args.variants[0]]["gain_per_s"]
    print(json.dumps({
        "summary": mean,
        "gain_per_s_vs_first": {v: round(m["gain_per_s"] / base, 2) if base else None
                                for v, m in mean.items()},
        "load_avg_1m": [round(load, 2), round(os.getloadavg()[0], 2)],
    }))  # fmt: skip


if __name__ == "__main__":
    main()
