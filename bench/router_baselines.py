"""The semantic-router recipe on the router's own data: what the router must beat.

    nice python bench/router_baselines.py [--seeds 0 1 2] [--json F] [--router ROUTERS.json] [--sets NAME ...]

Two baselines over Universal Sentence Encoder multilingual v3 vectors (the flax port,
`models/encoders/use.py`) of the request text, with the attachments as three extra
features, trained on the quickstart's training split (`demo_splits`, the quickstart's
default size: sft.steps x batch_size = 19,200 examples) of each seed:

- **nearest neighbour**: the plan of the most similar training request (cosine) among
  those whose plan is valid for the request's attachments; confidence = the share of the
  10 nearest such requests that carry that plan;
- **logistic regression**: multinomial over the training plans (L2, full-batch L-BFGS);
  plans invalid for the attachments are masked and the rest renormalised. The L2 weight
  is chosen on validation only (the generator's validation split plus the packaged
  validation sets, `eval.VAL_SETS`, as the router's settings are).

Both are scored by `router.evaluate.evaluate_routes`, the function behind `eval router`,
on the generator's held-out phrasings and every hand-written evaluation set: exact-plan
accuracy and step F1 by language, ECE, coverage at 95 % selective accuracy. Neither
abstains (abstain rate 0). Figures are averaged over the seeds, each seed's data drawn
from that seed, as the quickstart's are. With `--router`, the JSON that
`router_quickstart_seeds.py --json` wrote for the same seeds, it ends with the SFT and
served routers' exact-plan lead over each baseline, per set.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.catalog import default_catalog
from studio_align.quickstart.config import QuickstartConfig
from studio_align.router import eval as packaged
from studio_align.router.evaluate import evaluate_routes
from studio_align.router.frozen import fit_logistic
from studio_align.router.prior import prior_features
from studio_align.simulate.router.requests import demo_splits

CATALOG = default_catalog()
EVAL = ("heldout", *packaged.EVAL_SETS)
L2_GRID = (1e-7, 1e-6, 1e-5, 1e-4, 1e-3)


def feats(rows: Sequence[dict[str, Any]]) -> np.ndarray:
    """USE vectors of the request texts + attachment flags: the plan prior's features."""
    return prior_features([r["request"] for r in rows])


def valid_mask(rows: Sequence[dict[str, Any]], plans: Sequence[tuple[str, ...]]) -> np.ndarray:
    return np.array(
        [[CATALOG.is_valid(p, r["request"].get("attachments", [])) for p in plans] for r in rows]
    )


def nearest_neighbour(train_x, train_y, n_plans, x, mask, k: int = 10):
    tx = train_x[:, :-3] / np.linalg.norm(train_x[:, :-3], axis=1, keepdims=True)
    q = x[:, :-3] / np.linalg.norm(x[:, :-3], axis=1, keepdims=True)
    sims = q @ tx.T
    sims = np.where(mask[:, train_y], sims, -np.inf)  # only neighbours whose plan is valid
    top = np.argsort(-sims, axis=1)[:, :k]
    labels = train_y[top]
    pred = labels[:, 0]
    conf = (labels == pred[:, None]).mean(1)
    return pred, conf


def fit_logreg(x: np.ndarray, y: np.ndarray, n_plans: int, l2: float, steps: int = 200):
    return fit_logistic(x, y, n_plans, l2, steps)  # the plan prior's regression (router/prior.py)


def logreg_predict(params, x, mask):
    w, b = params
    logits = np.asarray(x @ np.asarray(w) + np.asarray(b))
    logits = np.where(mask, logits, -np.inf)
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return p.argmax(1), p.max(1)


def figures(rows, pred, conf, plans) -> dict[str, Any]:
    f = evaluate_routes(rows, [list(plans[i]) for i in pred], [float(c) for c in conf],
                        catalog=CATALOG)  # fmt: skip
    lang = f["by_language"]
    return {
        "exact": f["exact_plan_accuracy"],
        "f1": f["step_f1"],
        "en": lang.get("en", {}).get("exact_plan_accuracy", float("nan")),
        "zh": lang.get("zh", {}).get("exact_plan_accuracy", float("nan")),
        "f1_en": lang.get("en", {}).get("step_f1", float("nan")),
        "f1_zh": lang.get("zh", {}).get("step_f1", float("nan")),
        "ece": f["ece"],
        "cov95": f["selective"]["coverage_at_target"],
        "abstain": 0.0,
    }


def run_seed(seed: int, extra: Sequence[str] = ()) -> dict[str, Any]:
    q = QuickstartConfig()
    n_train = q.n_train or q.sft.steps * q.sft.batch_size
    splits = demo_splits(seed=seed, n_train=n_train, n_val=q.n_val, n_heldout=q.n_heldout)
    train = splits["train"]
    plans = sorted({tuple(r["plan"]) for r in train})
    index = {p: i for i, p in enumerate(plans)}
    tx, ty = feats(train), np.array([index[tuple(r["plan"])] for r in train])
    val = splits["val"] + [r for name in packaged.VAL_SETS for r in packaged.load(name)]
    names = (*packaged.EVAL_SETS, *extra)
    sets = {"heldout": splits["heldout"], **{n: packaged.load(n) for n in names}}

    def exact_on(rows, pred):
        return float(
            np.mean([list(plans[i]) == list(r["plan"]) for r, i in zip(rows, pred, strict=True)])
        )

    vx, vm = feats(val), valid_mask(val, plans)
    chosen, best, fitted = L2_GRID[0], -1.0, {}
    for l2 in L2_GRID:
        fitted[l2] = fit_logreg(tx, ty, len(plans), l2)
        acc = exact_on(val, logreg_predict(fitted[l2], vx, vm)[0])
        print(f"  seed {seed} logreg l2={l2:g}: validation exact {acc:.3f}", file=sys.stderr)
        if acc > best:
            chosen, best = l2, acc
    out: dict[str, Any] = {"l2": chosen, "nn": {}, "logreg": {}}
    for name, rows in sets.items():
        x, m = feats(rows), valid_mask(rows, plans)
        out["nn"][name] = figures(rows, *nearest_neighbour(tx, ty, len(plans), x, m), plans)
        out["logreg"][name] = figures(rows, *logreg_predict(fitted[chosen], x, m), plans)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--router", type=Path, default=None,
                    help="`router_quickstart_seeds.py --json` of the same seeds: print the "
                         "routers' lead over each baseline")  # fmt: skip
    ap.add_argument("--sets", nargs="+", default=[], metavar="NAME",
                    help="also score these packaged sets (validation sets among them; the "
                         "L2 weight is still chosen on every validation set)")  # fmt: skip
    args = ap.parse_args(argv)
    per_seed = {s: run_seed(s, args.sets) for s in args.seeds}
    scored = (*EVAL, *args.sets)
    mean: dict[str, Any] = {}
    for method in ("nn", "logreg"):
        mean[method] = {}
        for name in scored:
            keys = per_seed[args.seeds[0]][method][name]
            mean[method][name] = {
                k: float(np.mean([per_seed[s][method][name][k] for s in args.seeds])) for k in keys
            }
    cols = ("exact", "en", "zh", "f1_en", "f1_zh", "ece", "cov95")
    print(f"seeds {args.seeds}; logreg L2 per seed "
          f"{[per_seed[s]['l2'] for s in args.seeds]} (chosen on validation)")  # fmt: skip
    print(f"{'baseline':8} {'set':16} " + " ".join(f"{c:>6}" for c in cols))
    for method in ("nn", "logreg"):
        for name in scored:
            r = mean[method][name]
            print(f"{method:8} {name:16} " + " ".join(f"{r[c]:6.3f}" for c in cols))
    if args.json:
        args.json.write_text(json.dumps({"seeds": per_seed, "mean": mean}, indent=1))
    if args.router is not None:
        print_lead(json.loads(args.router.read_text(encoding="utf-8")), mean, args.seeds, scored)
    return 0


def print_lead(
    routers: dict[str, Any], mean: dict[str, Any], seeds: Sequence[int], scored: Sequence[str]
) -> None:
    """Exact-plan accuracy of the quickstart's SFT and served routers (seed means) minus each
    baseline's, in points, per set: the lead the router must keep."""
    missing = [s for s in seeds if str(s) not in routers]
    if missing:
        raise SystemExit(f"--router: no figures for seeds {missing} (run it with the same seeds)")
    print(f"{'router':8} {'set':16} {'exact':>6} {'- nn':>6} {'- logreg':>8}")
    for who in ("sft", "final"):
        for name in (n for n in scored if n in routers[str(seeds[0])][who]):
            exact = float(np.mean([routers[str(s)][who][name]["exact"] for s in seeds]))
            lead = [100 * (exact - mean[m][name]["exact"]) for m in ("nn", "logreg")]
            print(f"{who:8} {name:16} {exact:6.3f} {lead[0]:+6.1f} {lead[1]:+8.1f}")


if __name__ == "__main__":
    sys.exit(main())
