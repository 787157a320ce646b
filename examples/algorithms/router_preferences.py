"""Router preference tuning on the simulated creators' logs: SFT, then DPO / KTO / GRPO.

The whole path a platform runs, from creator route logs to a tuned router checkpoint,
with the same library calls the CLI makes (`train sft`, `train dpo`, `train kto`,
`train grpo`). Prints one JSON object with the held-out figures:

- DPO: preference accuracy on held-out re-route pairs (creators/sessions never trained
  on): the fraction of pairs where the router gives the creator's final plan a higher
  log-probability than the plan it had proposed, before and after DPO.
- KTO: held-out accuracy of the implicit reward's sign on accepted/abandoned samples.
- GRPO: mean reward (intent_accuracy + 0.5 plan_validity) of sampled plans, per step.

Usage: `python examples/algorithms/router_preferences.py [--out DIR] [--sft-steps 300]`
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("runs/router_prefs"))
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--sft-steps", type=int, default=300)
    ap.add_argument("--dpo-steps", type=int, default=150)
    ap.add_argument("--grpo-steps", type=int, default=15)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from studio_align.config import validate
    from studio_align.data.compile import compile_logs
    from studio_align.router.data import write_jsonl
    from studio_align.simulate.router.creators import demo_creator_data
    from studio_align.training.dpo import DPORunConfig, train_dpo
    from studio_align.training.grpo_run import GRPORunConfig, train_grpo
    from studio_align.training.kto import KTORunConfig, train_kto
    from studio_align.training.sft import SFTConfig, train_sft

    out = args.out
    data = demo_creator_data(seed=args.seed)
    logs = write_jsonl(out / "logs" / "routes.jsonl", data["route_logs"])
    compiled = compile_logs(logs, out / "compiled", seed=args.seed, heldout_fraction=0.2)
    common = {
        "train": {"seed": args.seed, "progress": False},
        "checkpoint": {"every": 0, "resume": False},
    }
    sft = train_sft(
        validate(SFTConfig, {
            **common, "run_dir": str(out / "sft"),
            "model": {"preset": args.preset, "vocab_size": 1024},
            "data": {"train": str(out / "compiled/train/routing_examples.jsonl"),
                     "heldout": str(out / "compiled/heldout/routing_examples.jsonl")},
            "train": {**common["train"], "steps": args.sft_steps, "batch_size": 32, "log_every": 50},
            "optim": {"learning_rate": 3e-3},
        })
    )  # fmt: skip
    start = {"init_from": str(sft.checkpoint)}
    records = {"dir": str(out / "compiled")}
    dpo = train_dpo(
        validate(DPORunConfig, {
            **common, "run_dir": str(out / "dpo"), "model": start, "data": records,
            "train": {**common["train"], "steps": args.dpo_steps, "batch_size": 16, "log_every": 25},
            "optim": {"learning_rate": 1e-3, "decay": "constant"},
            "dpo": {"beta": 0.1},
        })
    )  # fmt: skip
    kto = train_kto(
        validate(KTORunConfig, {
            **common, "run_dir": str(out / "kto"), "model": start, "data": records,
            "train": {**common["train"], "steps": args.dpo_steps, "batch_size": 16, "log_every": 25},
            "optim": {"learning_rate": 1e-3, "decay": "constant"},
        })
    )  # fmt: skip
    grpo = train_grpo(
        validate(GRPORunConfig, {
            "run_dir": str(out / "grpo"), "model": start, "data": records,
            "train": {"steps": args.grpo_steps, "seed": args.seed},
            "grpo": {"prompts_per_step": 8, "group_size": 8, "beta": 0.04},
            "optim": {"learning_rate": 3e-4, "decay": "constant"},
        })
    )  # fmt: skip
    curve = [round(h["reward/total/mean"], 4) for h in grpo.history]
    report = {
        "records": compiled.manifest["records"],
        "sft_heldout": sft.eval_metrics,
        "dpo_heldout_before": dpo.heldout_before,
        "dpo_heldout_after": dpo.heldout_after,
        "kto_heldout_before": kto.heldout_before,
        "kto_heldout_after": kto.heldout_after,
        "grpo_reward_curve": curve,
        "grpo_heldout_before": grpo.heldout_before,
        "grpo_heldout_after": grpo.heldout_after,
        "checkpoints": {
            "dpo": str(dpo.checkpoint),
            "kto": str(kto.checkpoint),
            "grpo": str(grpo.checkpoint),
        },
    }
    print(json.dumps(report, indent=2, default=float))


if __name__ == "__main__":
    main()
