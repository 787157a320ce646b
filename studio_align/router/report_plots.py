"""The router report's charts (matplotlib, Agg): one function per picture, each saving a
PNG and returning its file name; `report.py` lays them out in the HTML page."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Patch

from studio_align.router.report_text import words


def _real(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


ACCENT, MUTED, BAD, GOOD = "#3b6fb6", "#a9b8cc", "#d0603f", "#6a9f58"
STYLE: Any = {
    "font.size": 11,
    "axes.titlesize": 13,
    "axes.labelsize": 11,
    "legend.fontsize": 10,
}


def _save(fig: Any, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name


def _short(step: str) -> str:
    return (
        step.replace("ideogram.", "ideo.")
        .replace("ecommerce.", "ecom.")
        .replace("storyboard.", "sb.")
    )


def plot_by_intent(metrics: dict[str, Any], path: Path) -> str:
    items = sorted(metrics["by_intent"].items(), key=lambda kv: kv[1]["exact_plan_accuracy"])
    names = [f"{'+'.join(_short(s) for s in k.split('+'))}  (n={v['n']})" for k, v in items]
    acc = [v["exact_plan_accuracy"] for _, v in items]
    fig, ax = plt.subplots(figsize=(10.5, 0.36 * len(items) + 1.8))
    ax.barh(names, acc, color=[ACCENT if a >= 0.95 else BAD if a < 0.8 else MUTED for a in acc])
    ax.set_xlim(0, 1)
    ax.axvline(0.95, color="grey", lw=1, ls="--")
    ax.set_xlabel("exact-plan accuracy (share of requests with the whole plan right)")
    ax.set_ylabel("intent: the reference plan (n = requests)")
    ax.set_title("Accuracy by intent")
    ax.tick_params(axis="y", labelsize=10)
    ax.legend(
        handles=[
            Patch(color=ACCENT, label="≥ 0.95"),
            Patch(color=MUTED, label="0.80 – 0.95"),
            Patch(color=BAD, label="< 0.80"),
            plt.Line2D([], [], color="grey", ls="--", label="target 0.95"),
        ],
        loc="lower right",
    )
    return _save(fig, path)


def plot_slices(metrics: dict[str, Any], path: Path) -> str:
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.2))
    for ax, key, title, xlabel in (
        (axes[0], "by_language", "By language", "language of the request (n = requests)"),
        (axes[1], "by_plan_length", "By plan length", "steps in the reference plan"),
    ):
        sl = metrics[key]
        labels = [f"{k}\n(n={v['n']})" for k, v in sl.items()]
        ax.bar(
            labels, [v["exact_plan_accuracy"] for v in sl.values()], color=ACCENT,
            label="exact-plan accuracy",
        )  # fmt: skip
        ax.plot(labels, [v["step_f1"] for v in sl.values()], "o", color=BAD, ms=8, label="step F1")
        ax.set_ylim(0, 1.05)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("share (0 – 1)")
        ax.legend(loc="lower left")
    return _save(fig, path)


def plot_confusion(metrics: dict[str, Any], path: Path) -> str:
    conf = metrics["first_step_confusion"]
    labels, m = conf["labels"], conf["matrix"]
    keep = [i for i in range(len(labels)) if sum(m[i]) or sum(row[i] for row in m)]
    mm = [[m[i][j] for j in keep] for i in keep]
    names = [_short(labels[i]) for i in keep]
    fig, ax = plt.subplots(figsize=(9, 7.5))
    # row-normalised colours, raw counts as text
    norm = [[c / max(1, sum(row)) for c in row] for row in mm]
    im = ax.imshow(norm, cmap="Blues", vmin=0, vmax=1)
    fig.colorbar(im, ax=ax, label="share of the wanted first step's requests")
    for i, row in enumerate(mm):
        for j, c in enumerate(row):
            if c:
                ax.text(
                    j,
                    i,
                    str(c),
                    ha="center",
                    va="center",
                    fontsize=9,
                    color="white" if norm[i][j] > 0.6 else "black",
                )
    ax.set_xticks(range(len(names)), names, rotation=50, ha="right", fontsize=10)
    ax.set_yticks(range(len(names)), names, fontsize=10)
    ax.set_xlabel("the router's first step")
    ax.set_ylabel("the wanted first step")
    ax.set_title("First-step confusion (numbers: requests)")
    return _save(fig, path)


def plot_reliability(metrics: dict[str, Any], path: Path) -> str:
    cal = metrics["calibration"]
    bins = [b for b in cal["bins"] if b["n"]]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(6, 6.5), height_ratios=[3, 1], sharex=True)
    ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=0.8, label="perfect calibration")
    ax.plot(
        [b["confidence"] for b in bins],
        [b["accuracy"] for b in bins],
        "o-",
        color=ACCENT,
        label="router",
    )
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("exact-plan accuracy in the bin")
    ax.set_title(f"Reliability (ECE = {cal['ece']:.3f})")
    ax.legend(loc="upper left")
    centers = [(b["lo"] + b["hi"]) / 2 for b in cal["bins"]]
    ax2.bar(centers, [b["n"] for b in cal["bins"]], width=0.09, color=MUTED, label="requests")
    ax2.set_xlabel("confidence (probability of the decoded plan)")
    ax2.set_ylabel("requests")
    ax2.legend(loc="upper left")
    ax2.set_xlim(0, 1)
    return _save(fig, path)


def plot_risk_coverage(metrics: dict[str, Any], path: Path) -> str:
    """Selective accuracy of the requests kept against the fraction kept."""
    sel = metrics["selective"]
    curve = sel["curve"]
    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.plot([p["coverage"] for p in curve], [p["selective_accuracy"] for p in curve], "o-",
            color=ACCENT, ms=3)  # fmt: skip
    ax.axhline(sel["target_accuracy"], ls="--", color="grey", lw=0.8)
    ax.set_xlabel("coverage (fraction of requests routed)")
    ax.set_ylabel("accuracy of routed requests")
    ax.set_xlim(0, 1.02)
    ax.set_title(
        f"Risk-coverage: {sel['coverage_at_target']:.0%} kept at "
        f"{sel['target_accuracy']:.0%} accuracy"
    )
    return _save(fig, path)


STAGE_SERIES = (
    ("creator_agreement", ACCENT),
    ("heldout_exact", MUTED),
    ("handwritten_majority_exact", GOOD),
    ("validity_rate", "grey"),
)


def plot_stages(stages: Sequence[dict[str, Any]], path: Path) -> str:
    """Per pipeline stage: agreement with creators, held-out, handwritten and validity."""
    names = [words(str(s["stage"])) for s in stages]
    series = [(key, color) for key, color in STAGE_SERIES if any(_real(s.get(key)) for s in stages)]
    fig, ax = plt.subplots(figsize=(10.5, 4.6))
    width = 0.8 / max(1, len(series))
    for k, (key, color) in enumerate(series):
        vals = [s.get(key, float("nan")) for s in stages]
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(stages))]
        ax.bar(xs, vals, width=width, color=color, label=words(key))
        for x, v in zip(xs, vals, strict=True):
            if _real(v):
                ax.text(x, v + 0.015, f"{v:.2f}", ha="center", fontsize=9)
    ax.set_xticks(range(len(stages)), names)
    ax.set_xlabel("stage (in the order they ran)")
    ax.set_ylabel("share of requests (0 – 1)")
    ax.set_ylim(0, 1.12)
    ax.set_title("Figures after each stage")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, path)


def plot_times(rows: Sequence[tuple[str, float, float]], path: Path) -> str:
    """Seconds per stage, training and evaluation stacked; every stage that ran."""
    names = [words(n) for n, _, _ in rows][::-1]
    train = [t for _, t, _ in rows][::-1]
    ev = [e for _, _, e in rows][::-1]
    fig, ax = plt.subplots(figsize=(10.5, 0.5 * len(rows) + 1.6))
    ax.barh(names, train, color=ACCENT, label="training (or the whole stage)")
    ax.barh(names, ev, left=train, color=MUTED, label="evaluation")
    for y, (t, e) in enumerate(zip(train, ev, strict=True)):
        ax.text(t + e, y, f"  {t + e:.0f} s", va="center", fontsize=10)
    ax.set_xlabel("seconds (wall clock)")
    ax.set_title(f"Time per stage (sum {sum(train) + sum(ev):.0f} s)")  # stages may overlap
    ax.set_xlim(0, max(1.0, max(t + e for t, e in zip(train, ev, strict=True))) * 1.15)
    ax.legend(loc="lower right")
    return _save(fig, path)
