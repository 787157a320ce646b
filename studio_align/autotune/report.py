"""Report of an autotune run, built only from its ledger: a running-best plot and a table.

`running_best.png` shows each trial's validation mean (coloured by status, failures
marked along the bottom), the running best as a step line and the baseline mean with its
seed-to-seed band. `report.md` and `report.html` hold the summary figures (baseline mean
and std, noise sigma, best, held-out confirmation, status counts) and one row per trial.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from studio_align.autotune.state import Summary

COLOURS = {
    "baseline": "tab:blue",
    "keep": "tab:green",
    "discard": "tab:gray",
    "crash": "tab:red",
    "timeout": "tab:orange",
    "nan": "tab:purple",
}


def _fmt(x: Any, digits: int = 4) -> str:
    return "-" if x is None else f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def plot_running_best(trials: list[dict[str, Any]], summary: Summary, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    ok = [t for t in trials if t["mean"] is not None]
    if ok:
        low = min(t["mean"] for t in ok)
        high = max(t["mean"] for t in ok)
        pad = (high - low) * 0.1 or 0.01
        floor = low - pad
    else:
        floor = 0.0
    seen: set[str] = set()
    for t in trials:
        st = t["status"]
        y = t["mean"] if t["mean"] is not None else floor
        ax.scatter(
            [t["trial"]],
            [y],
            color=COLOURS.get(st, "black"),
            marker="o" if t["mean"] is not None else "x",
            zorder=3,
            label=st if st not in seen else None,
        )
        seen.add(st)
    xs: list[int] = []
    ys: list[float] = []
    best = math.nan
    for t in trials:  # every keep beat the best before it, so the last keep is the best
        if t["status"] in ("baseline", "keep"):
            best = t["mean"] if t["mean"] is not None else math.nan
        xs.append(t["trial"])
        ys.append(best)
    if xs:
        ax.step(xs, ys, where="post", color="tab:green", lw=1.5, label="running best")
    if summary.baseline_mean is not None and summary.baseline_std is not None:
        m, s = summary.baseline_mean, summary.baseline_std
        ax.axhspan(m - s, m + s, color="tab:blue", alpha=0.12, label="baseline ± std")
    for trial_id, c in summary.heldout.items():
        if c["mean"] is not None:
            ax.scatter(
                [int(trial_id)],
                [c["mean"]],
                marker="*",
                s=140,
                color="black",
                zorder=4,
                label="held-out (confirmation)" if "held" not in seen else None,
            )
            seen.add("held")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trial")
    ax.set_ylabel(f"{summary.metric} (validation, mean over seeds)")
    ax.set_title(f"autotune: running best ({summary.direction})")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _summary_rows(summary: Summary) -> list[tuple[str, str]]:
    rows = [
        ("metric", f"{summary.metric} ({summary.direction})"),
        ("baseline (validation)", f"{_fmt(summary.baseline_mean)} ± {_fmt(summary.baseline_std)}"),
        ("noise sigma (pooled)", _fmt(summary.sigma)),
        ("best trial", _fmt(summary.best_trial)),
        (
            "best (validation)",
            f"{_fmt(summary.best_mean)} ± {_fmt(summary.best_std)} on seeds {summary.best_seeds}",
        ),
    ]
    for t, c in sorted(summary.heldout.items(), key=lambda kv: int(kv[0])):
        rows.append(
            (f"held-out, trial {t}", f"{_fmt(c['mean'])} ± {_fmt(c['std'])} on seeds {c['seeds']}")
        )
    rows.append(
        ("trials", f"{summary.trials} " + ", ".join(f"{k} {v}" for k, v in summary.counts.items()))
    )
    if summary.stopped:
        rows.append(("stopped", summary.stopped))
    return rows


COLUMNS = ["trial", "status", "mean", "std", "seeds", "diff", "description", "seconds"]


def _trial_row(t: dict[str, Any]) -> list[str]:
    return [
        str(t["trial"]),
        t["status"],
        _fmt(t["mean"]),
        _fmt(t["std"]),
        ",".join(map(str, t["seeds"])),
        t["diff"],
        t["description"],
        f"{t['seconds']:.1f}",
    ]


def write_report(out: str | Path, records: list[dict[str, Any]], summary: Summary) -> Path:
    """Write `running_best.png`, `report.md` and `report.html` into `out`; returns report.md."""
    out = Path(out)
    trials = sorted((r for r in records if r["kind"] == "trial"), key=lambda r: r["trial"])
    plot_running_best(trials, summary, out / "running_best.png")

    md = ["# Autotune report", "", "| | |", "|---|---|"]
    md += [f"| {k} | {v} |" for k, v in _summary_rows(summary)]
    md += [
        "",
        "![running best](running_best.png)",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for t in trials:
        md.append("| " + " | ".join(c.replace("|", "\\|") for c in _trial_row(t)) + " |")
    (out / "report.md").write_text("\n".join(md) + "\n", encoding="utf-8")

    e = html.escape
    parts = [
        "<!doctype html><meta charset='utf-8'><title>Autotune report</title>",
        "<style>body{font-family:sans-serif;max-width:72em;margin:2em auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;"
        "font-size:13px}</style>",
        "<h1>Autotune report</h1><table>",
    ]
    parts += [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in _summary_rows(summary)]
    parts += ["</table>", "<img src='running_best.png' alt='running best'>", "<table><tr>"]
    parts += [f"<th>{e(c)}</th>" for c in COLUMNS] + ["</tr>"]
    for t in trials:
        parts.append(
            f"<tr style='color:{COLOURS.get(t['status'], 'black')}'>"
            + "".join(f"<td>{e(c)}</td>" for c in _trial_row(t))
            + "</tr>"
        )
    parts.append("</table>")
    (out / "report.html").write_text("\n".join(parts) + "\n", encoding="utf-8")
    return out / "report.md"
