"""Router report: PNG plots (matplotlib, Agg) and one self-contained HTML page.

The page leads with the headline figures as large numbers, then pictures: accuracy by
intent, by language and plan length, the first-step confusion matrix, the reliability
curve, and (for a pipeline run) each stage's figures side by side. Tables follow for
those who want the numbers, and the most confident mistakes last, since they are what a
person should read first when deciding whether to trust the router.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ACCENT, MUTED, BAD = "#3b6fb6", "#a9b8cc", "#d0603f"


def _save(fig: Any, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
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
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(items) + 1.2))
    ax.barh(names, acc, color=[ACCENT if a >= 0.95 else BAD if a < 0.8 else MUTED for a in acc])
    ax.set_xlim(0, 1)
    ax.axvline(0.95, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("exact-plan accuracy")
    ax.set_title("Accuracy by intent (reference plan of each request)")
    ax.tick_params(axis="y", labelsize=8)
    return _save(fig, path)


def plot_slices(metrics: dict[str, Any], path: Path) -> str:
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    for ax, key, title in (
        (axes[0], "by_language", "By language"),
        (axes[1], "by_plan_length", "By plan length (reference plan)"),
    ):
        sl = metrics[key]
        labels = [f"{k}\n(n={v['n']})" for k, v in sl.items()]
        ax.bar(labels, [v["exact_plan_accuracy"] for v in sl.values()], color=ACCENT, label="exact")
        ax.plot(labels, [v["step_f1"] for v in sl.values()], "o", color=BAD, label="step F1")
        ax.set_ylim(0, 1.05)
        ax.set_title(title)
    axes[0].legend(loc="lower left", fontsize=8)
    return _save(fig, path)


def plot_confusion(metrics: dict[str, Any], path: Path) -> str:
    conf = metrics["first_step_confusion"]
    labels, m = conf["labels"], conf["matrix"]
    keep = [i for i in range(len(labels)) if sum(m[i]) or sum(row[i] for row in m)]
    mm = [[m[i][j] for j in keep] for i in keep]
    names = [_short(labels[i]) for i in keep]
    fig, ax = plt.subplots(figsize=(7, 6))
    # row-normalised colours, raw counts as text
    norm = [[c / max(1, sum(row)) for c in row] for row in mm]
    ax.imshow(norm, cmap="Blues", vmin=0, vmax=1)
    for i, row in enumerate(mm):
        for j, c in enumerate(row):
            if c:
                ax.text(
                    j,
                    i,
                    str(c),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if norm[i][j] > 0.6 else "black",
                )
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.set_xlabel("predicted first step")
    ax.set_ylabel("gold first step")
    ax.set_title("First-step confusion")
    return _save(fig, path)


def plot_reliability(metrics: dict[str, Any], path: Path) -> str:
    cal = metrics["calibration"]
    bins = [b for b in cal["bins"] if b["n"]]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(5, 5.5), height_ratios=[3, 1], sharex=True)
    ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=0.8, label="perfect calibration")
    ax.plot(
        [b["confidence"] for b in bins],
        [b["accuracy"] for b in bins],
        "o-",
        color=ACCENT,
        label="router",
    )
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("exact accuracy in bin")
    ax.set_title(f"Reliability (ECE = {cal['ece']:.3f})")
    ax.legend(loc="upper left", fontsize=8)
    centers = [(b["lo"] + b["hi"]) / 2 for b in cal["bins"]]
    ax2.bar(centers, [b["n"] for b in cal["bins"]], width=0.09, color=MUTED)
    ax2.set_xlabel("confidence (probability of the decoded plan)")
    ax2.set_ylabel("count")
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


def plot_stages(stages: Sequence[dict[str, Any]], path: Path) -> str:
    """Per pipeline stage: held-out accuracy, creator agreement, validity, and seconds."""
    names = [s["stage"] for s in stages]
    series = [
        ("heldout_exact", "held-out exact (gold labels)", ACCENT),
        ("creator_agreement", "agreement with creators", BAD),
        ("handwritten_exact", "handwritten set exact", "#6a9f58"),
        ("validity_rate", "validity", "grey"),
    ]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4.2), width_ratios=[3, 2])
    width = 0.8 / len(series)
    for k, (key, label, color) in enumerate(series):
        vals = [s.get(key, float("nan")) for s in stages]
        xs = [i + (k - 1.5) * width for i in range(len(stages))]
        ax.bar(xs, vals, width=width, color=color, label=label)
        for x, v in zip(xs, vals, strict=True):
            if v == v:
                ax.text(x, v + 0.01, f"{v:.2f}", ha="center", fontsize=6.5, rotation=90)
    ax.set_xticks(range(len(stages)), names)
    ax.set_ylim(0, 1.15)
    ax.set_title("Figures after each stage")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)
    ax2.barh(names[::-1], [s.get("seconds", 0.0) for s in stages][::-1], color=MUTED)
    ax2.set_xlabel("seconds")
    ax2.set_title("Time per stage")
    return _save(fig, path)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "–" if math.isnan(v) else f"{v:.3f}"
    return html.escape(str(v))


def _table(rows: Sequence[dict[str, Any]], cols: Sequence[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{_fmt(r.get(c, ''))}</td>" for c in cols) + "</tr>" for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _slice_table(sl: dict[str, dict[str, float]], key_name: str) -> str:
    rows = [{key_name: k, **v} for k, v in sl.items()]
    return _table(rows, [key_name, "n", "exact_plan_accuracy", "step_f1"])


CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;margin:2em auto;color:#222;padding:0 1em}
h1{font-weight:600}.cards{display:flex;gap:1em;flex-wrap:wrap;margin:1em 0 2em}
.card{background:#f3f6fa;border-radius:10px;padding:.8em 1.2em;min-width:150px}
.card .v{font-size:2em;font-weight:600;color:#3b6fb6}.card .k{color:#666;font-size:.85em}
img{max-width:100%;border:1px solid #eee;border-radius:6px;margin:.5em 0}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:1em}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}
td,th{border-bottom:1px solid #e3e3e3;padding:.3em .7em;text-align:left}th{background:#fafafa}
.note{color:#555;font-size:.9em}
"""


def write_report(
    out_dir: str | Path,
    metrics: dict[str, Any],
    *,
    title: str = "Router evaluation",
    mistakes: Sequence[dict[str, Any]] = (),
    stages: Sequence[dict[str, Any]] = (),
    extra_metrics: dict[str, dict[str, Any]] | None = None,
    notes: Sequence[str] = (),
    extra_images: Sequence[tuple[str, Path]] = (),
) -> Path:
    """Write PNGs, `metrics.json` and `index.html` into `out_dir`; return the page's path.

    `extra_metrics` maps a name (e.g. "handwritten set") to another `evaluate_routes`
    result, shown as an extra headline card and slice table.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    imgs = [
        plot_by_intent(metrics, out / "by_intent.png"),
        plot_slices(metrics, out / "slices.png"),
        plot_confusion(metrics, out / "confusion.png"),
    ]
    if "calibration" in metrics:
        imgs.append(plot_reliability(metrics, out / "reliability.png"))
    if metrics.get("selective", {}).get("curve"):
        imgs.append(plot_risk_coverage(metrics, out / "risk_coverage.png"))
    stage_img = plot_stages(stages, out / "stages.png") if stages else None
    (out / "metrics.json").write_text(
        json.dumps(
            {"main": metrics, "extra": extra_metrics or {}, "stages": list(stages)}, indent=1
        ),
        encoding="utf-8",
    )

    cards = [
        ("exact-plan accuracy", metrics["exact_plan_accuracy"]),
        ("step F1", metrics["step_f1"]),
        ("valid plans", metrics["validity_rate"]),
    ]
    if "ece" in metrics:
        cards.append(("calibration error (ECE)", metrics["ece"]))
    if "selective" in metrics:
        sel = metrics["selective"]
        cards.append((f"kept at {sel['target_accuracy']:.0%} accuracy", sel["coverage_at_target"]))
    for name, m in (extra_metrics or {}).items():
        cards.append((f"{name}: exact", m["exact_plan_accuracy"]))
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>",
        f"<p class='note'>{metrics['n']} labelled requests.</p>",
        "<div class='cards'>",
        *(
            f"<div class='card'><div class='v'>{_fmt(v)}</div><div class='k'>{html.escape(k)}</div></div>"
            for k, v in cards
        ),
        "</div>",
        *(f"<p class='note'>{html.escape(n)}</p>" for n in notes),
    ]
    if stage_img:
        parts += [
            "<h2>Pipeline stages</h2>",
            f"<img src='{stage_img}'>",
            _table(
                stages,
                [
                    "stage",
                    "heldout_exact",
                    "creator_agreement",
                    "handwritten_exact",
                    "validity_rate",
                    "seconds",
                    "status",
                ],
            ),
        ]
    parts += [
        "<h2>Where it is right and wrong</h2>",
        f"<img src='{imgs[0]}'>",
        f"<div class='grid'><div><img src='{imgs[1]}'></div>",
        f"<div><img src='{imgs[3]}'></div></div>" if len(imgs) > 3 else "</div>",
        f"<img src='{imgs[2]}'>",
        *(f"<img src='{i}'>" for i in imgs[4:]),
        "<h2>Tables</h2><div class='grid'><div>",
        _slice_table(metrics["by_language"], "language"),
        _slice_table(metrics["by_plan_length"], "plan length"),
        "</div><div>",
        _slice_table(metrics["by_intent"], "intent"),
        "</div></div>",
    ]
    for name, m in (extra_metrics or {}).items():
        parts += [
            f"<h3>{html.escape(name)}</h3>",
            _slice_table(m["by_language"], "language"),
            _slice_table(m["by_intent"], "intent"),
        ]
    for caption, src in extra_images:
        if Path(src).exists():
            dst = out / f"extra_{Path(src).name}"
            dst.write_bytes(Path(src).read_bytes())
            parts += [f"<h2>{html.escape(caption)}</h2>", f"<img src='{dst.name}'>"]
    if mistakes:
        rows = [
            {
                "request": r["request"]["text"],
                "attachments": ",".join(r["request"].get("attachments", [])),
                "gold": " → ".join(r["gold"]),
                "predicted": " → ".join(r["predicted"]) or "(none)",
                "confidence": r["confidence"],
            }
            for r in mistakes
        ]
        parts += [
            "<h2>Most confident mistakes</h2>",
            _table(rows, ["request", "attachments", "gold", "predicted", "confidence"]),
        ]
    parts.append("</body></html>")
    page = out / "index.html"
    page.write_text("\n".join(parts), encoding="utf-8")
    return page
