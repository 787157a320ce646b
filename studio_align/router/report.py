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

import matplotlib.pyplot as plt

from studio_align.router.report_plots import (
    STYLE,
    _real,
    plot_by_intent,
    plot_confusion,
    plot_reliability,
    plot_risk_coverage,
    plot_slices,
    plot_stages,
    plot_times,
)
from studio_align.router.report_text import SET_LABELS, glossary_html, headline, words


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
