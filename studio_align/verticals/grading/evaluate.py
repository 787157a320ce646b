"""`eval grading`: a tuned grading model against the creators' own held-out logs.

Per creator, on the held-out (creator, session) groups of the run's split (events of
training groups are left out and counted, so passing the training logs is safe):

- **reward model**: held-out pairwise accuracy of the run's reward model on the
  creator's held-out selections (chosen ≻ each unchosen candidate);
- **win rates under the creator's selections**: for each held-out selection whose
  source is logged, the tuned grade of the source is judged against the untuned grade
  (and the identity) by the creator's own choice. A grade's agreement with the choice is
  how much closer its rendering lands to the candidate the creator picked than to the
  ones they passed over: `mean_j ΔE(g, rejected_j) - ΔE(g, chosen)` (mean ΔE2000 over
  pixels). The grade with the larger agreement wins; ties count half. Measuring against
  chosen *and* rejected matters: distance to the chosen one alone favours a grade at the
  centre of the candidates (the identity, for candidates sampled around it), whatever
  the creator picked. The same agreement is also measured in *look space* (the
  colour-statistics encoder's 15 scalars, z-scored over the held-out candidates:
  brightness, contrast, shadow/mid/highlight levels, saturation, warmth, tint, ...),
  which is what a grade changes and what a creator judges; pixel ΔE also counts
  differences no one chooses on. No simulator and no reward model is involved;
- **ΔE2000 to the creator's retouches**: mean ΔE2000 between the model's grade and the
  creator's own `after` grade of each held-out retouch, for the tuned model, the base
  (untuned) policy and the identity.

`report_dir` gets `index.html` with the figures and a before/after grid per creator
(source | untuned | tuned | the creator's own grade).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from studio_align.errors import CheckpointError
from studio_align.reward_models.color_stats import SCALAR_NAMES, color_statistics
from studio_align.reward_models.scorer import AestheticScorer
from studio_align.verticals.grading.color import mean_delta_e
from studio_align.verticals.grading.dataset import Thumbs, load_thumbs
from studio_align.verticals.grading.logs import GradingLogs, Selection, read_grading_logs
from studio_align.verticals.grading.model import GradingModel
from studio_align.verticals.grading.renderer import N_PARAMS, render


def win_rate(a: np.ndarray, b: np.ndarray) -> float:
    """Fraction of cases where agreement `a` beats (is above) `b`; ties count half."""
    return float(np.mean((a > b) + 0.5 * (a == b))) if len(a) else float("nan")


def wilson_interval(a: np.ndarray, b: np.ndarray) -> list[float]:
    """95% Wilson interval of the win rate of `a` over `b` (ties as half a win), so a
    per-creator figure on few held-out selections is read with its uncertainty."""
    n = len(a)
    if not n:
        return [float("nan"), float("nan")]
    p, z = win_rate(a, b), 1.96
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [float(mid - half), float(mid + half)]


def _by_creator(creators: list[str], values: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for c in sorted(set(creators)):
        m = np.array([x == c for x in creators])
        out[c] = {k: v[m] for k, v in values.items()}
    return out


def heldout_selections(data: GradingLogs) -> list[Selection]:
    """The held-out selections that can be evaluated (their ungraded source is logged)."""
    return [s for s in data.selections if s.split == "heldout" and s.source is not None]


def selection_agreement(
    sel: list[Selection], th: Thumbs, grades: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per named grade array [len(sel), P] of the selections' sources: the agreement with
    each creator's choice [len(sel)] in pixels (ΔE2000) and in look space (module
    docstring). Any grades can be compared this way, e.g. an oracle's in a diagnosis."""
    src = th.pixels[th.rows([s.source for s in sel if s.source is not None])]
    picked = th.pixels[th.rows([s.images[s.chosen[0]] for s in sel])]
    passed = [th.pixels[th.rows([p for j, p in enumerate(s.images) if j not in s.chosen])]
              for s in sel]  # fmt: skip
    # the look space: the colour-statistics encoder's 15 scalars, z-scored over the
    # held-out candidates (a fixed encoder: no learned model, no simulator)
    cand_stats = _look([p for s in sel for p in th.pixels[th.rows(s.images)]])
    mu, sd = cand_stats.mean(0), cand_stats.std(0) + 1e-6
    chosen_z = (_look(list(picked)) - mu) / sd
    passed_z = [(_look(list(p)) - mu) / sd for p in passed]
    pixel, look = {}, {}
    for k, g in grades.items():
        out_img = render(src, g)
        to_chosen = mean_delta_e(out_img, picked)
        to_passed = np.array(
            [mean_delta_e(out_img[i][None], p).mean() if len(p) else to_chosen[i]
             for i, p in enumerate(passed)]
        )  # fmt: skip
        pixel[k] = to_passed - to_chosen
        z = (_look(list(out_img)) - mu) / sd
        look[k] = np.array(
            [np.dot(z[i] - np.vstack([pz, chosen_z[i]]).mean(0), chosen_z[i] - pz.mean(0))
             for i, pz in enumerate(passed_z)]
        )  # fmt: skip
    return pixel, look


def _selection_figures(
    tuned: GradingModel, base: GradingModel, data: GradingLogs, th: Thumbs
) -> dict[str, dict[str, Any]]:
    sel = heldout_selections(data)
    if not sel:
        return {}
    src = th.pixels[th.rows([s.source for s in sel if s.source is not None])]
    who, styles = [s.creator for s in sel], [s.prompt for s in sel]
    grades = {
        "tuned": tuned.predict(src, styles, who),
        "untuned": base.predict(src, styles, who),
        "identity": np.zeros((len(sel), N_PARAMS), np.float32),
    }
    pixel, look = selection_agreement(sel, th, grades)
    out = {}
    for c, d in _by_creator(who, {**pixel, **{f"look/{k}": v for k, v in look.items()}}).items():
        out[c] = {
            "selections": len(d["tuned"]),
            "win_rate_vs_untuned": win_rate(d["tuned"], d["untuned"]),
            "win_rate_vs_untuned_ci95": wilson_interval(d["tuned"], d["untuned"]),
            "win_rate_vs_identity": win_rate(d["tuned"], d["identity"]),
            "look_win_rate_vs_untuned": win_rate(d["look/tuned"], d["look/untuned"]),
            "look_win_rate_vs_untuned_ci95": wilson_interval(d["look/tuned"], d["look/untuned"]),
            "look_win_rate_vs_identity": win_rate(d["look/tuned"], d["look/identity"]),
            "agreement": {k: float(v.mean()) for k, v in d.items()},
        }
    return out


def _look(images: list[np.ndarray]) -> np.ndarray:
    st = color_statistics(np.stack(images))
    return np.stack([st[k] for k in SCALAR_NAMES], axis=1).astype(np.float64)


def _retouch_figures(
    tuned: GradingModel, base: GradingModel, data: GradingLogs, th: Thumbs
) -> tuple[dict[str, dict[str, Any]], dict[str, list[np.ndarray]]]:
    rs = [r for r in data.retouches if r.split == "heldout"]
    if not rs:
        return {}, {}
    src = th.pixels[th.rows([r.image for r in rs])]
    who = [r.creator for r in rs]
    target = render(src, np.stack([r.after for r in rs]))
    imgs = {
        "untuned": render(src, base.predict(src, [""] * len(rs), who)),
        "tuned": render(src, tuned.predict(src, [""] * len(rs), who)),
        "identity": src,
    }
    de = {k: mean_delta_e(v, target) for k, v in imgs.items()}
    out, grids = {}, {}
    for c, d in _by_creator(who, de).items():
        out[c] = {
            "retouches": len(d["tuned"]),
            "delta_e": {k: float(v.mean()) for k, v in d.items()},
            "tuned_below_base": bool(d["tuned"].mean() < d["untuned"].mean()),
        }
        rows = [i for i, w in enumerate(who) if w == c][:4]
        grids[c] = [
            np.concatenate([src[i], imgs["untuned"][i], imgs["tuned"][i], target[i]], 1)
            for i in rows
        ]
    return out, grids


def _reward_figures(meta: dict[str, Any], data: GradingLogs, th: Thumbs) -> dict[str, Any]:
    path = meta.get("reward_model")
    if not path or not (Path(path) / "meta.json").exists():
        return {}
    scorer = AestheticScorer.load(path, require_gate=False)
    right: dict[str, list[bool]] = {}
    for s in data.selections:
        if s.split != "heldout":
            continue
        sc = scorer.score_images(list(th.pixels[th.rows(s.images)]), [s.creator] * len(s.images))
        for c in s.chosen:
            for j in range(len(s.images)):
                if j not in s.chosen:
                    right.setdefault(s.creator, []).append(bool(sc[c] > sc[j]))
    return {c: {"pairs": len(v), "accuracy": float(np.mean(v))} for c, v in right.items()}


def evaluate_grading(
    checkpoint: str | Path, logs: list[str], *, report_dir: str | Path | None = None
) -> dict[str, Any]:
    """Every figure of the module docstring, by creator and overall; optional HTML report."""
    ckpt = Path(checkpoint)
    tuned = GradingModel.load(ckpt)
    if not (ckpt / "base").is_dir():
        raise CheckpointError(f"{ckpt}: no base/ policy to compare against")
    base = GradingModel.load(ckpt / "base")
    split = tuned.meta.get("split") or {}
    data = read_grading_logs(
        logs,
        seed=int(split.get("seed", 0)),
        heldout_fraction=float(split.get("heldout_fraction", 0.2)),
        strict=False,
    )
    left_out = {k: len([e for e in v if e.split == "train"]) for k, v in (
        ("retouches", data.retouches), ("selections", data.selections), ("ratings", data.ratings)
    )}  # fmt: skip
    data.retouches = [r for r in data.retouches if r.split == "heldout"]
    data.selections = [s for s in data.selections if s.split == "heldout"]
    data.ratings = []
    th, bad = load_thumbs(data.images(), tuned.thumbnail, skip_bad=True)
    data.drop_images(bad)
    sel = _selection_figures(tuned, base, data, th)
    ret, grids = _retouch_figures(tuned, base, data, th)
    rm = _reward_figures(tuned.meta, data, th)
    creators = sorted(set(sel) | set(ret) | set(rm))
    by_creator = {
        c: {"reward_model": rm.get(c), "selections": sel.get(c), "retouches": ret.get(c)}
        for c in creators
    }
    wins = [v["win_rate_vs_untuned"] for v in sel.values()]
    look_wins = [v["look_win_rate_vs_untuned"] for v in sel.values()]
    below = [v["tuned_below_base"] for v in ret.values()]
    fig: dict[str, Any] = {
        "checkpoint": str(ckpt),
        "creators": by_creator,
        "summary": {
            "creators": len(creators),
            "heldout_selections_per_creator": {c: v["selections"] for c, v in sel.items()},
            "min_win_rate_vs_untuned": float(min(wins)) if wins else None,
            "creators_win_rate_at_least_0.75": int(sum(w >= 0.75 for w in wins)),
            "min_look_win_rate_vs_untuned": float(min(look_wins)) if look_wins else None,
            "creators_look_win_rate_at_least_0.75": int(sum(w >= 0.75 for w in look_wins)),
            "fraction_creators_delta_e_below_base": float(np.mean(below)) if below else None,
        },
        "left_out_training_events": left_out,
        "skipped": dict(data.skipped),
    }
    if report_dir is not None:
        fig["report"] = str(write_report(Path(report_dir), fig, grids))
    return fig


ROW_KEYS = (
    "rm_accuracy",
    "win_vs_untuned",
    "win_vs_identity",
    "look_win_vs_untuned",
    "look_win_vs_identity",
    "delta_e_tuned",
    "delta_e_untuned",
    "delta_e_identity",
)


def creator_rows(fig: dict[str, Any]) -> list[dict[str, Any]]:
    """One flat row per creator of `evaluate_grading`'s figures (`ROW_KEYS`, None where a
    creator has no such events), so the CLI table and the HTML report read the same."""
    rows = []
    for c, v in fig["creators"].items():
        s, r, m = v["selections"] or {}, v["retouches"] or {}, v["reward_model"] or {}
        de = r.get("delta_e", {})
        rows.append(
            {
                "creator": c,
                "rm_accuracy": m.get("accuracy"),
                "win_vs_untuned": s.get("win_rate_vs_untuned"),
                "win_vs_identity": s.get("win_rate_vs_identity"),
                "look_win_vs_untuned": s.get("look_win_rate_vs_untuned"),
                "look_win_vs_identity": s.get("look_win_rate_vs_identity"),
                "delta_e_tuned": de.get("tuned"),
                "delta_e_untuned": de.get("untuned"),
                "delta_e_identity": de.get("identity"),
            }
        )
    return rows


def write_report(out: Path, fig: dict[str, Any], grids: dict[str, list[np.ndarray]]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    parts = [
        "<!doctype html><meta charset='utf-8'><title>studio-align: grading evaluation</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}td,th{padding:3px 8px}"
        "table{border-collapse:collapse}tr:nth-child(even){background:#f4f4f4}</style>",
        f"<h1>Grading evaluation</h1><p>checkpoint <code>{html.escape(fig['checkpoint'])}</code>"
        "</p><pre>" + html.escape(json.dumps(fig["summary"], indent=1)) + "</pre>",
        "<table><tr><th>creator</th><th>RM held-out acc.</th><th>win vs untuned</th>"
        "<th>win vs identity</th><th>look win vs untuned</th><th>look win vs identity</th>"
        "<th>ΔE tuned</th><th>ΔE untuned</th><th>ΔE identity</th></tr>",
    ]

    def f(x: Any) -> str:
        return "–" if x is None else f"{x:.3f}"

    for row in creator_rows(fig):
        cells = "".join(f"<td>{f(row[k])}</td>" for k in ROW_KEYS)
        parts.append(f"<tr><td>{html.escape(row['creator'])}</td>{cells}</tr>")
    parts.append("</table><h2>Held-out retouches: source | untuned | tuned | creator</h2>")
    for c, rows in grids.items():
        if not rows:
            continue
        grid = np.concatenate(rows, 0)
        im = Image.fromarray((np.clip(grid, 0, 1) * 255 + 0.5).astype(np.uint8))
        im = im.resize((im.width * 2, im.height * 2), Image.Resampling.NEAREST)
        ImageDraw.Draw(im).text((4, 4), c, fill=(255, 255, 255))
        name = f"grid_{''.join(ch if ch.isalnum() else '_' for ch in c)}.png"
        im.save(out / name)
        parts.append(f"<h3>{html.escape(c)}</h3><img src='{name}' alt='{html.escape(c)}'>")
    (out / "figures.json").write_text(json.dumps(fig, indent=1, default=float))
    path = out / "index.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
