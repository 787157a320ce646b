"""Served-router abstention study: re-mix and re-calibrate existing quickstart checkpoints,
scored on validation only (handwritten_val2 and gen val[80:], which calibration never sees;
plus handwritten_val for the agreed-subset exact).

Usage: `python bench/router_served_abstention.py SEED CKPT:CAL[,CKPT:CAL...] RUNS` over the
quickstart run RUNS/qsSEED; CKPT is sft, served or wX (GRPO mixed with SFT at X),
CAL labels, kept, agreed, majority, logs or labels+logs (docs/experiments/router-served-abstention.md).
Rows are appended to RUNS/qsSEED/abstain/results.jsonl."""

import json
import shutil
import sys
import time
from pathlib import Path

from studio_align.models.interpolate import interpolate_bundles
from studio_align.router import eval as packaged
from studio_align.router.calibration import fit_calibration
from studio_align.router.data import read_examples
from studio_align.router.evaluate import evaluate_router_sets
from studio_align.router.router import Router
from studio_align.simulate.router.creators import majority_plans

seed = int(sys.argv[1])
variants = sys.argv[2].split(",")
qs = Path(sys.argv[3]) / f"qs{seed}"
work = qs / "abstain"
work.mkdir(parents=True, exist_ok=True)
train = read_examples(qs / "data/train.jsonl")
gval = read_examples(qs / "data/val.jsonl")
hv1, hv2 = packaged.load("handwritten_val"), packaged.load("handwritten_val2")
cal_val = hv1 + gval[:80]


def agreed(rows):
    m = majority_plans(rows)
    return [r for r, q in zip(rows, m, strict=True) if list(r["plan"]) == list(q["plan"])]


def maj(rows):
    return majority_plans(rows)


sets = {
    "hv2": hv2,
    "gval_rest": gval[80:],
    "hv1": hv1,
    "hv_agreed": agreed(hv1 + hv2),
    "gval_agreed": agreed(gval),
    "hv_major": maj(hv1 + hv2),
}


def ckpt(name):
    if name == "sft":
        return qs / "stages/sft/model"
    if name == "served":
        return qs / "stages/grpo/mixed"
    if name.startswith("w"):  # w0.5: grpo/model mixed with sft at this weight
        out = work / f"grpo_{name}"
        if not out.exists():
            interpolate_bundles(
                qs / "stages/sft/model", qs / "stages/grpo/model", weight=float(name[1:]), out=out
            )
        return out
    if name.startswith("d"):  # d0.5: dpo/model mixed with sft
        out = work / f"dpo_{name}"
        if not out.exists():
            interpolate_bundles(
                qs / "stages/sft/model", qs / "stages/dpo/model", weight=float(name[1:]), out=out
            )
        return out
    raise ValueError(name)


logs = read_examples(qs / "data/compiled/heldout/routing_examples.jsonl")
calibs = {
    "labels": cal_val,
    "agreed": agreed(cal_val),
    "majority": maj(cal_val),
    "logs": logs,
    "labels+logs": cal_val + logs,
}
for v in variants:
    cname, calname = v.split(":")
    src = ckpt(cname)
    d = work / f"{cname}_{calname}"
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(src, d)
    t = time.perf_counter()
    r = Router.load(d)
    r.calibration = None
    cv = calibs.get(calname)
    if (
        cv is None
    ):  # kept: rows whose plan the tuning did not change; off_label: drop rows moved away from the label
        req = [x["request"] for x in cal_val]
        sp, _ = Router.load(qs / "stages/sft/model").route(req, batch_size=128)
        tp, _ = r.route(req, batch_size=128)
        if calname == "kept":
            cv = [x for x, a, b in zip(cal_val, sp, tp, strict=True) if list(a) == list(b)]
        else:
            cv = [
                x
                for x, a, b in zip(cal_val, sp, tp, strict=True)
                if list(a) == list(b) or list(b) == list(x["plan"])
            ]
    calibs[calname] = cv
    cal = fit_calibration(r, train, cv, target=0.95)
    cal.save(d)
    r = Router.load(d)
    res = evaluate_router_sets(r, sets, batch_size=128)
    row = {
        "seed": seed,
        "ckpt": cname,
        "cal": calname,
        "T": cal.temperature,
        "thr": cal.confidence_threshold,
        "n_cal": len(calibs[calname]),
        "s": round(time.perf_counter() - t, 1),
    }
    for k, (f, _, _) in res.items():
        row[k + "_exact"] = round(f["exact_plan_accuracy"], 4)
        row[k + "_abst"] = round(f["abstain_rate"], 4)
        row[k + "_accr"] = round(f["accuracy_when_routed"], 4)
    print(json.dumps(row), flush=True)
    with open(work / "results.jsonl", "a") as fh:
        fh.write(json.dumps(row) + "\n")
    shutil.rmtree(d)
