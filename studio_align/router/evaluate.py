"""Router evaluation: pure metric functions over gold and predicted plans.

Everything here takes plain lists (gold plans, predicted plans, confidences, requests)
and returns plain dicts of floats and ints, so the CLI, the report, the pipeline and
tests share one implementation and its output serialises to JSON as is.

- exact-plan accuracy: the predicted step list equals the gold one;
- step F1: ordered-step (LCS) F1, the same partial credit as the `intent_accuracy`
  reward, averaged over examples;
- validity rate: the predicted plan is valid under the catalog for the request's
  attachments;
- slices by language (CJK ideographs present -> `zh`, else `en`), gold plan length and
  intent (the gold plan's signature, `a+b`), each with count, exact accuracy and F1;
- a confusion matrix of first steps (gold rows, predicted columns, `<none>` for an
  empty plan);
- calibration: a reliability curve of equal-width confidence bins (mean confidence vs
  exact accuracy per bin) and the expected calibration error
  ECE = sum_b n_b / N * |acc_b - conf_b|.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from studio_align.catalog import Catalog, default_catalog
from studio_align.router.format import is_cjk, request_fields
from studio_align.router.rewards import ordered_step_f1
from studio_align.router.selective import selective_summary

Plan = Sequence[str]
NONE_STEP = "<none>"


def exact_matches(gold: Sequence[Plan], pred: Sequence[Plan]) -> list[bool]:
    return [list(g) == list(p) for g, p in zip(gold, pred, strict=True)]


def step_f1s(gold: Sequence[Plan], pred: Sequence[Plan]) -> list[float]:
    return [ordered_step_f1(list(p), list(g)) for g, p in zip(gold, pred, strict=True)]


def _mean(xs: Sequence[float]) -> float:
    return float(sum(xs) / len(xs)) if xs else float("nan")


def validity(pred: Sequence[Plan], requests: Sequence[Any], catalog: Catalog) -> list[bool]:
    return [
        catalog.is_valid(list(p), request_fields(r)[1]) for p, r in zip(pred, requests, strict=True)
    ]


def language_of(request: Any) -> str:
    return "zh" if is_cjk(request_fields(request)[0]) else "en"


def plan_signature(plan: Plan) -> str:
    return "+".join(plan) if plan else NONE_STEP


def sliced(
    keys: Sequence[str], exact: Sequence[bool], f1: Sequence[float]
) -> dict[str, dict[str, float]]:
    """Per-key count, exact accuracy and mean step F1, keys sorted."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, k in enumerate(keys):
        groups[k].append(i)
    return {
        k: {
            "n": len(idx),
            "exact_plan_accuracy": _mean([float(exact[i]) for i in idx]),
            "step_f1": _mean([f1[i] for i in idx]),
        }
        for k, idx in sorted(groups.items())
    }


def first_step_confusion(
    gold: Sequence[Plan], pred: Sequence[Plan], labels: Sequence[str]
) -> dict[str, Any]:
    """Counts of (gold first step, predicted first step); `<none>` for empty plans."""
    labels = [*labels, NONE_STEP]
    index = {lab: i for i, lab in enumerate(labels)}
    m = [[0] * len(labels) for _ in labels]
    for g, p in zip(gold, pred, strict=True):
        gi = index.get(g[0] if g else NONE_STEP, index[NONE_STEP])
        pi = index.get(p[0] if p else NONE_STEP, index[NONE_STEP])
        m[gi][pi] += 1
    return {"labels": labels, "matrix": m}


def calibration(
    confidences: Sequence[float], correct: Sequence[bool], n_bins: int = 10
) -> dict[str, Any]:
    """Reliability curve over `n_bins` equal-width bins in [0, 1] and the ECE."""
    bins: list[dict[str, float]] = []
    total = len(confidences)
    ece = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        idx = [
            i for i, c in enumerate(confidences) if (lo <= c < hi) or (b == n_bins - 1 and c == hi)
        ]
        if not idx:
            bins.append(
                {"lo": lo, "hi": hi, "n": 0, "confidence": float("nan"), "accuracy": float("nan")}
            )
            continue
        conf = _mean([float(confidences[i]) for i in idx])
        acc = _mean([float(correct[i]) for i in idx])
        ece += len(idx) / total * abs(acc - conf)
        bins.append({"lo": lo, "hi": hi, "n": len(idx), "confidence": conf, "accuracy": acc})
    return {"bins": bins, "ece": float(ece) if total else float("nan")}


def evaluate_routes(
    examples: Sequence[dict[str, Any]],
    plans: Sequence[Plan],
    confidences: Sequence[float] | None = None,
    *,
    catalog: Catalog | None = None,
    n_bins: int = 10,
) -> dict[str, Any]:
    """All router figures for labelled examples and the router's plans (JSON-ready)."""
    if len(examples) != len(plans):
        raise ValueError(f"{len(examples)} examples but {len(plans)} plans")
    cat = catalog or default_catalog()
    gold = [list(e["plan"]) for e in examples]
    requests = [e["request"] for e in examples]
    exact = exact_matches(gold, plans)
    f1 = step_f1s(gold, plans)
    valid = validity(plans, requests, cat)
    out: dict[str, Any] = {
        "n": len(examples),
        "exact_plan_accuracy": _mean([float(x) for x in exact]),
        "step_f1": _mean(f1),
        "validity_rate": _mean([float(v) for v in valid]),
        "by_language": sliced([language_of(r) for r in requests], exact, f1),
        "by_plan_length": sliced([str(len(g)) for g in gold], exact, f1),
        "by_intent": sliced([plan_signature(g) for g in gold], exact, f1),
        "first_step_confusion": first_step_confusion(gold, plans, cat.names),
    }
    if confidences is not None:
        cal = calibration(list(confidences), exact, n_bins)
        out["calibration"] = cal
        out["ece"] = cal["ece"]
        out["mean_confidence"] = _mean([float(c) for c in confidences])
        out["selective"] = selective_summary(list(confidences), exact)
    return out


def errors(
    examples: Sequence[dict[str, Any]],
    plans: Sequence[Plan],
    confidences: Sequence[float] | None = None,
    limit: int = 30,
) -> list[dict[str, Any]]:
    """The first `limit` mistakes, most confident first (for the report's table)."""
    conf = list(confidences) if confidences is not None else [float("nan")] * len(plans)
    rows = [
        {"request": e["request"], "gold": list(e["plan"]), "predicted": list(p), "confidence": c}
        for e, p, c in zip(examples, plans, conf, strict=True)
        if list(e["plan"]) != list(p)
    ]

    def key(r: dict[str, Any]) -> float:
        return -(r["confidence"] if r["confidence"] == r["confidence"] else 0)

    return sorted(rows, key=key)[:limit]


def abstention_figures(
    examples: Sequence[dict[str, Any]], decisions: Sequence[dict[str, Any]], cal: Any
) -> dict[str, Any]:
    """With a calibration: the uncalibrated ECE, the risk-coverage curve of the combined
    keep score, and what the default abstain thresholds do on these examples."""
    gold = [list(e["plan"]) for e in examples]
    exact = exact_matches(gold, [d["plan"] for d in decisions])
    raw = calibration([d["model_confidence"] for d in decisions], exact)
    keep = cal.keep_scores(
        [d["confidence"] for d in decisions], [d["unfamiliarity"] for d in decisions]
    )
    routed = [x for x, d in zip(exact, decisions, strict=True) if not d["abstain"]]
    reasons: dict[str, int] = defaultdict(int)
    for d in decisions:
        if d["abstain"]:
            reasons[d["reason"]] += 1
    return {
        "ece_uncalibrated": raw["ece"],
        "temperature": cal.temperature,
        "selective": selective_summary(list(keep), exact, target=cal.target_accuracy),
        "abstain_rate": _mean([float(d["abstain"]) for d in decisions]),
        "abstain_reasons": dict(reasons),
        "accuracy_when_routed": _mean([float(x) for x in routed]),
    }


# -- glue: a router on a labelled file ----------------------------------------------------------


def _route(router: Any, requests: Sequence[Any], batch_size: int) -> tuple[list, list, Any]:
    """Plans, confidences and (with a calibration) the full decisions for `requests`."""
    if getattr(router, "calibration", None) is None:
        plans, confs = router.route(requests, batch_size=batch_size)
        return plans, confs, None
    decisions = router.decide(requests, batch_size=batch_size)
    return [d["plan"] for d in decisions], [d["confidence"] for d in decisions], decisions


def _score(router: Any, examples: Sequence[dict[str, Any]], plans: list, confs: list,
           decisions: Any, seconds: float, routed: int) -> dict[str, Any]:  # fmt: skip
    """Figures of `examples`, plus the routing pass's time (`routed` requests in `seconds`)."""
    figures = evaluate_routes(examples, plans, confs, catalog=router.catalog)
    if decisions is not None:
        figures.update(abstention_figures(examples, decisions, router.calibration))
    figures["seconds"] = seconds
    figures["requests_per_s"] = routed / seconds if seconds > 0 else float("nan")
    return figures


def evaluate_router(
    router: Any, examples: Sequence[dict[str, Any]], *, batch_size: int = 64
) -> tuple[dict[str, Any], list[list[str]], list[float]]:
    """Route every example's request with `router` and score the plans (figures, plans, confs)."""
    t0 = time.perf_counter()
    plans, confs, decisions = _route(router, [e["request"] for e in examples], batch_size)
    seconds = time.perf_counter() - t0
    return _score(router, examples, plans, confs, decisions, seconds, len(examples)), plans, confs


def evaluate_router_sets(
    router: Any, sets: Mapping[str, Sequence[dict[str, Any]]], *, batch_size: int = 64
) -> dict[str, tuple[dict[str, Any], list[list[str]], list[float]]]:
    """`evaluate_router` for several sets, routing each distinct request once.

    Why: evaluation sets share requests (the same held-out requests scored against labels
    and against creators' majority plans), and routing is the whole cost. Each set's
    `seconds` and `requests_per_s` are those of the one shared pass over every distinct
    request; its figures are exactly what `evaluate_router` gives (routing is per request).
    """
    keys = {name: [_request_key(e["request"]) for e in rows] for name, rows in sets.items()}
    index: dict[str, int] = {}
    unique: list[Any] = []
    for name, rows in sets.items():
        for key, e in zip(keys[name], rows, strict=True):
            if key not in index:
                index[key] = len(unique)
                unique.append(e["request"])
    t0 = time.perf_counter()
    plans, confs, decisions = _route(router, unique, batch_size)
    seconds = time.perf_counter() - t0
    out = {}
    for name, rows in sets.items():
        at = [index[k] for k in keys[name]]
        p, c = [plans[i] for i in at], [confs[i] for i in at]
        d = None if decisions is None else [decisions[i] for i in at]
        out[name] = (_score(router, rows, p, c, d, seconds, len(unique)), p, c)
    return out


def _request_key(request: Any) -> str:
    return json.dumps(request, sort_keys=True, ensure_ascii=False)
