"""Router report: PNG plots (matplotlib, Agg) and one self-contained HTML page.

The page leads with one sentence stating the gain (first stage -> last, in points), then
the headline figures as large numbers, then pictures: each stage's figures and time
(every stage, including those outside the router's own, such as the grading vertical),
accuracy by intent, by language and plan length, the reliability curve and the
first-step confusion matrix. Tables follow for those who want the numbers, the most
confident mistakes, and a glossary of the abbreviations the page uses.

Presentation choices: every key is shown through `report_text.words` (never a raw key);
every chart has axis titles and a legend for each colour or line style; charts are drawn
at 11 pt on figures sized for a 1,100 px column, and tables scroll inside their own box
rather than widen the page (no horizontal overflow at 1,280 px).
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
from matplotlib.patches import Patch

from studio_align.intents.report_text import SET_LABELS, glossary_html, headline, words

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
    ax.set_title(f"Time per stage (total {sum(train) + sum(ev):.0f} s)")
    ax.set_xlim(0, max(1.0, max(t + e for t, e in zip(train, ev, strict=True))) * 1.15)
    ax.legend(loc="lower right")
    return _save(fig, path)


def _real(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "–" if math.isnan(v) else f"{v:.3f}"
    return html.escape(str(v))


def _cell(row: dict[str, Any], col: str) -> str:
    v = row.get(col, "")
    if col == "stage":
        return _fmt(words(str(v)))
    if col in ("seconds", "eval_seconds") and _real(v):
        return f"{v:.0f}"
    return _fmt(v)


def _table(rows: Sequence[dict[str, Any]], cols: Sequence[str]) -> str:
    head = "".join(f"<th>{html.escape(words(c))}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(r, c)}</td>" for c in cols) + "</tr>" for r in rows
    )
    return f"<div class='scroll'><table><tr>{head}</tr>{body}</table></div>"


def _slice_table(sl: dict[str, dict[str, float]], key_name: str) -> str:
    rows = [{key_name: k, **v} for k, v in sl.items()]
    return _table(rows, [key_name, "n", "exact_plan_accuracy", "step_f1"])


CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;margin:2em auto;color:#222;padding:0 1em;line-height:1.45}
h1{font-weight:600}.headline{font-size:1.25em;background:#eef4ea;border-left:5px solid #6a9f58;padding:.7em 1em;border-radius:6px}
.cards{display:flex;gap:1em;flex-wrap:wrap;margin:1em 0 2em}
.card{background:#f3f6fa;border-radius:10px;padding:.8em 1.2em;flex:1 1 180px;max-width:260px}
.card .v{font-size:2em;font-weight:600;color:#3b6fb6}.card .k{color:#444;font-size:.9em}
img{max-width:100%;height:auto;border:1px solid #eee;border-radius:6px;margin:.5em 0}
.grid{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:1em}
@media (max-width:900px){.grid{grid-template-columns:minmax(0,1fr)}}
.scroll{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.92em}
td,th{border-bottom:1px solid #e3e3e3;padding:.3em .7em;text-align:left;overflow-wrap:break-word}th{background:#fafafa}
.note{color:#444;font-size:.95em}
dl.glossary{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.3em 1.2em}
dl.glossary dt{font-weight:600}dl.glossary dd{margin:0}
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
    main_set: str | None = None,
    timings: Sequence[tuple[str, float]] = (),
) -> Path:
    """Write PNGs, `metrics.json` and `index.html` into `out_dir`; return the page's path.

    `extra_metrics` maps a set name (`heldout`, `handwritten_majority`, ...) to another
    `evaluate_routes` result, shown as an extra headline card and slice table. `main_set`
    names the set `metrics` was measured on (e.g. `creators`), so the first card says what
    it is. `timings` adds stages outside `stages` to the time chart (`("data", 1.3)`,
    `("grading", 133.0)`), in the order they ran.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with plt.rc_context(STYLE):
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
        time_rows = [
            (str(s["stage"]), float(s.get("seconds") or 0.0), float(s.get("eval_seconds") or 0.0))
            for s in stages
        ] + [(name, float(sec), 0.0) for name, sec in timings]
        time_img = plot_times(time_rows, out / "times.png") if time_rows else None
    (out / "metrics.json").write_text(
        json.dumps(
            {"main": metrics, "extra": extra_metrics or {}, "stages": list(stages)}, indent=1
        ),
        encoding="utf-8",
    )

    what = SET_LABELS.get(main_set or "", main_set.replace("_", " ") if main_set else "")
    cards = [
        (f"exact-plan accuracy: {what}" if what else "exact-plan accuracy",
         metrics["exact_plan_accuracy"]),
        ("step F1", metrics["step_f1"]),
        ("valid plans", metrics["validity_rate"]),
    ]  # fmt: skip
    if "ece" in metrics:
        cards.append(("calibration error (ECE)", metrics["ece"]))
    if "selective" in metrics:
        sel = metrics["selective"]
        cards.append((f"kept at {sel['target_accuracy']:.0%} accuracy", sel["coverage_at_target"]))
    for name, m in (extra_metrics or {}).items():
        cards.append((f"exact-plan accuracy: {words(name)}", m["exact_plan_accuracy"]))
    lead = headline(stages, metrics["exact_plan_accuracy"])
    body = [
        f"<p class='headline'>{html.escape(lead)}</p>" if lead else "",
        f"<p class='note'>Main set: {metrics['n']} requests"
        + (f" ({html.escape(what)})" if what else "")
        + ". Figures are shares from 0 to 1.</p>",
        "<div class='cards'>",
        *(
            f"<div class='card'><div class='v'>{_fmt(v)}</div><div class='k'>{html.escape(k)}</div></div>"
            for k, v in cards
        ),
        "</div>",
        *(f"<p class='note'>{html.escape(n)}</p>" for n in notes),
    ]
    if stage_img:
        cols = [
            "stage", "creator_agreement", "heldout_exact", "heldout_majority_exact",
            "handwritten_exact", "handwritten_majority_exact", "validity_rate", "seconds",
            "eval_seconds", "status",
        ]  # fmt: skip
        body += [
            "<h2>Stage by stage</h2>",
            f"<img src='{stage_img}' alt='figures after each stage'>",
            _table(stages, [c for c in cols if any(c in s for s in stages)]),
        ]
    if time_img:
        body += [f"<img src='{time_img}' alt='time per stage'>"]
    body += [
        "<h2>Where it is right and wrong</h2>",
        f"<img src='{imgs[0]}' alt='accuracy by intent'>",
        f"<img src='{imgs[1]}' alt='accuracy by language and plan length'>",
        f"<div class='grid'><div><img src='{imgs[3]}' alt='reliability'></div>"
        if len(imgs) > 3
        else "<div class='grid'>",
        f"<div><img src='{imgs[2]}' alt='first-step confusion'></div></div>",
        *(f"<img src='{i}' alt='risk-coverage'>" for i in imgs[4:]),
        "<h2>Tables</h2><div class='grid'><div>",
        _slice_table(metrics["by_language"], "language"),
        _slice_table(metrics["by_plan_length"], "plan length"),
        "</div><div>",
        _slice_table(metrics["by_intent"], "intent"),
        "</div></div>",
    ]
    for name, m in (extra_metrics or {}).items():
        body += [
            f"<h3>{html.escape(words(name))}</h3>",
            _slice_table(m["by_language"], "language"),
            _slice_table(m["by_intent"], "intent"),
        ]
    for caption, src in extra_images:
        if Path(src).exists():
            dst = out / f"extra_{Path(src).name}"
            dst.write_bytes(Path(src).read_bytes())
            body += [f"<h2>{html.escape(caption)}</h2>", f"<img src='{dst.name}' alt=''>"]
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
        body += [
            "<h2>Most confident mistakes</h2>",
            _table(rows, ["request", "attachments", "gold", "predicted", "confidence"]),
        ]
    text = "\n".join(body) + " " + " ".join(notes) + " " + " ".join(c for c, _ in extra_images)
    body.append(glossary_html(text + (" BC" if extra_images else "")))  # BC: in the grading grid
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title)}</title>",
        f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>",
        *body,
        "</body></html>",
    ]
    page = out / "index.html"
    page.write_text("\n".join(p for p in parts if p), encoding="utf-8")
    return page
