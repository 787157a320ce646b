"""Which validation rows the router's calibration should be fitted on, judged on validation.

    python bench/router_calibration_rows.py RUNS --seeds 20 21 22 [--json F]

RUNS/qsN is `studio-align quickstart --out RUNS/qsN --set seed=N --set flow=false --set
grading=false`. For the SFT router (`stages/sft/model`) and the served router (`router`,
fitted on the rows it plans as SFT does, as `router.stage_run.calibrate_stage` does), it
refits the calibration (temperature, unfamiliarity model, thresholds at 95 % selective
accuracy) on two choices of rows and scores each on validation rows that fit did not see:

- `one`: `handwritten_val` + the generator's `val[:80]` (the rows the quickstart used
  before this study);
- `all`: every packaged validation set (`eval.VAL_SETS`) but the one scored, + `val[:80]`.

Each of the other validation sets is scored in turn (leave one set out), and the generator's
`val[80:]`. Printed per (router, rows, set): ECE and the abstain rate, means over the seeds.
Evaluation sets are never read.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.router import eval as packaged
from studio_align.router.calibration import (
    Calibration,
    OODModel,
    fit_temperature,
    fit_thresholds,
)
from studio_align.router.data import read_examples
from studio_align.router.evaluate import calibration as reliability
from studio_align.router.evaluate import plan_signature
from studio_align.router.router import Router

SCORED = tuple(n for n in packaged.VAL_SETS if n != "handwritten_val")


@dataclass
class Rows:
    """One router's analysis of one set of validation rows."""

    logits: np.ndarray
    actions: np.ndarray
    hidden: np.ndarray
    correct: np.ndarray
    plans: list[tuple[str, ...]]

    def take(self, mask: np.ndarray) -> Rows:
        return Rows(self.logits[mask], self.actions[mask], self.hidden[mask], self.correct[mask],
                    [p for p, m in zip(self.plans, mask, strict=True) if m])  # fmt: skip


def analysed(router: Router, rows: list[dict[str, Any]], batch: int = 128) -> Rows:
    id_to_step = dict(zip(router.grammar.step_ids, router.catalog.names, strict=True))
    lg, ac, hid, ok, plans = [], [], [], [], []
    for s in range(0, len(rows), batch):
        chunk = rows[s : s + batch]
        comps, an = router.analyse([r["request"] for r in chunk])
        lg.append(an.step_logits)
        ac.append(an.actions)
        hid.append(an.hidden)
        for r, c in zip(chunk, comps, strict=True):
            plan = tuple(id_to_step[t] for t in c if t in id_to_step)
            plans.append(plan)
            ok.append(list(plan) == list(r["plan"]))
    return Rows(np.concatenate(lg), np.concatenate(ac), np.concatenate(hid), np.asarray(ok), plans)


def joined(parts: list[Rows]) -> Rows:
    return Rows(
        np.concatenate([p.logits for p in parts]), np.concatenate([p.actions for p in parts]),
        np.concatenate([p.hidden for p in parts]), np.concatenate([p.correct for p in parts]),
        [q for p in parts for q in p.plans],
    )  # fmt: skip


def fitted(fit_rows: Rows, ood: OODModel) -> Calibration:
    """What `fit_calibration` fits, from rows already analysed."""
    cal = Calibration(temperature=fit_temperature(fit_rows.logits, fit_rows.actions,
                                                  list(fit_rows.correct)), ood=ood)  # fmt: skip
    conf = cal.confidence(fit_rows.logits, fit_rows.actions)
    fit_thresholds(cal, conf, cal.unfamiliarity(fit_rows.hidden), fit_rows.correct, target=0.95)
    return cal


def scored(cal: Calibration, rows: Rows) -> dict[str, float]:
    conf = cal.confidence(rows.logits, rows.actions)
    unfam = cal.unfamiliarity(rows.hidden)
    abstain = [cal.decide(float(c), float(u)) is not None for c, u in zip(conf, unfam, strict=True)]
    return {
        "ece": reliability(list(conf), list(rows.correct))["ece"],
        "abstain": float(np.mean(abstain)),
        "temperature": cal.temperature,
    }


def study_run(qs: Path) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    train = read_examples(qs / "data/train.jsonl")[:2000]
    gen_val = read_examples(qs / "data/val.jsonl")
    sets = {n: packaged.load(n) for n in packaged.VAL_SETS}
    sets["gen_fit"], sets["gen_val"] = gen_val[:80], gen_val[80:]
    sft = Router.load(qs / "stages/sft/model")
    served = Router.load(qs / "router")
    out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    sft_rows = {n: analysed(sft, rows) for n, rows in sets.items()}
    for who, router in (("sft", sft), ("served", served)):
        hidden = router.plan_states([r["request"] for r in train], batch_size=128)
        ood = OODModel.fit(hidden, [plan_signature(r["plan"]) for r in train])
        rows = sft_rows if who == "sft" else {n: analysed(router, r) for n, r in sets.items()}
        agreed = {n: rows[n].take(np.asarray([a == b for a, b in zip(rows[n].plans,
                  sft_rows[n].plans, strict=True)])) for n in rows}  # fmt: skip
        fit_on = rows if who == "sft" else agreed
        res: dict[str, dict[str, dict[str, float]]] = {"one": {}, "all": {}}
        one = fitted(joined([fit_on["handwritten_val"], fit_on["gen_fit"]]), ood)
        for name in (*SCORED, "gen_val"):
            res["one"][name] = scored(one, rows[name])
            rest = [fit_on[n] for n in packaged.VAL_SETS if n != name]
            res["all"][name] = scored(fitted(joined([*rest, fit_on["gen_fit"]]), ood), rows[name])
        out[who] = res
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path)
    ap.add_argument("--seeds", type=int, nargs="+", default=[20, 21, 22])
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    per_seed = {s: study_run(args.runs / f"qs{s}") for s in args.seeds}
    if args.json is not None:
        args.json.write_text(json.dumps(per_seed, indent=1), encoding="utf-8")
    print(f"{'router':<7} {'rows':<4} {'set':<18} {'ECE':>6} {'abstain':>8} {'T':>6}")
    for who in ("sft", "served"):
        for arm in ("one", "all"):
            names = (*SCORED, "gen_val")
            for name in names:
                f = [per_seed[s][who][arm][name] for s in args.seeds]
                print(f"{who:<7} {arm:<4} {name:<18} {np.mean([x['ece'] for x in f]):>6.3f} "
                      f"{np.mean([x['abstain'] for x in f]):>8.3f} "
                      f"{np.mean([x['temperature'] for x in f]):>6.2f}")  # fmt: skip
            hw = [per_seed[s][who][arm][n] for s in args.seeds for n in SCORED]
            print(f"{who:<7} {arm:<4} {'six sets (mean)':<18} {np.mean([x['ece'] for x in hw]):>6.3f} "
                  f"{np.mean([x['abstain'] for x in hw]):>8.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
