"""The served router re-calibrated by calibrate_stage(reference=SFT), on the eval sets (3 seeds).

Usage: `python bench/router_served_abstention_eval.py SEED RUNS` over the quickstart run
RUNS/qsSEED (`studio-align quickstart --out RUNS/qsSEED --set seed=SEED`); one JSON line per
(router, set) on stdout."""

import json
import shutil
import sys
from pathlib import Path

from studio_align.quickstart.config import QuickstartConfig, StageData
from studio_align.router import eval as packaged
from studio_align.router.data import read_examples
from studio_align.router.evaluate import evaluate_router_sets
from studio_align.router.router import Router
from studio_align.router.stage_run import calibrate_stage
from studio_align.simulate.router.creators import majority_plans

seed = int(sys.argv[1])
qs = Path(sys.argv[2]) / f"qs{seed}"
data = StageData(
    train=read_examples(qs / "data/train.jsonl"), val=read_examples(qs / "data/val.jsonl")
)
d = qs / "abstain" / "final"
if d.exists():
    shutil.rmtree(d)
shutil.copytree(qs / "stages/grpo/mixed", d)
calibrate_stage(d, QuickstartConfig(), data, qs / "stages/sft/model")
sets = {"heldout": read_examples(qs / "data/heldout.jsonl")}
for n in ("handwritten_v1", "handwritten_v2", "handwritten_v3"):
    sets[n] = packaged.load(n)
for n in list(sets):
    m = majority_plans(sets[n])
    sets[n + "_agreed"] = [
        r for r, q in zip(sets[n], m, strict=True) if list(r["plan"]) == list(q["plan"])
    ]
    sets[n + "_majority"] = m
for who, ck in (("sft", qs / "stages/sft/model"), ("final_old", qs / "router"), ("final_new", d)):
    res = evaluate_router_sets(Router.load(ck), sets, batch_size=128)
    for k, (f, _, _) in res.items():
        row = {
            "seed": seed,
            "router": who,
            "set": k,
            "n": f["n"],
            "exact": f["exact_plan_accuracy"],
            "abstain": f["abstain_rate"],
            "acc_routed": f["accuracy_when_routed"],
            "ece": f.get("ece"),
            "cov95": f["selective"].get("coverage_at_target") if "selective" in f else None,
        }
        print(json.dumps(row), flush=True)
