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

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.errors import CheckpointError
from studio_align.reward_models.color_stats import SCALAR_NAMES, color_statistics
from studio_align.reward_models.scorer import AestheticScorer
from studio_align.verticals.grading.color import mean_delta_e
from studio_align.verticals.grading.dataset import Thumbs, load_thumbs
from studio_align.verticals.grading.logs import GradingLogs, Selection, read_grading_logs
from studio_align.verticals.grading.model import GradingModel
from studio_align.verticals.grading.renderer import N_PARAMS, render
from studio_align.verticals.grading.report import write_report


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
) -> dict[str, dict[str, Any]]:
    rs = [r for r in data.retouches if r.split == "heldout"]
    if not rs:
        return {}
    src = th.pixels[th.rows([r.image for r in rs])]
    who = [r.creator for r in rs]
    target = render(src, np.stack([r.after for r in rs]))
    imgs = {
        "untuned": render(src, base.predict(src, [""] * len(rs), who)),
        "tuned": render(src, tuned.predict(src, [""] * len(rs), who)),
        "identity": src,
    }
    de = {k: mean_delta_e(v, target) for k, v in imgs.items()}
    out = {}
    for c, d in _by_creator(who, de).items():
        out[c] = {
            "retouches": len(d["tuned"]),
            "delta_e": {k: float(v.mean()) for k, v in d.items()},
            "tuned_below_base": bool(d["tuned"].mean() < d["untuned"].mean()),
        }
    return out


def creator_spread(model: GradingModel, sources: np.ndarray, creators: Sequence[str]) -> np.ndarray:
    """Mean ΔE2000 [C, C] between the grades `model` gives each pair of `creators` for the
    same `sources` [N, S, S, 3]: how far apart the model's tastes are. Near 0 everywhere
    means one grade for everyone, whatever the creators' logs showed."""
    rendered = [
        render(sources, model.predict(sources, [""] * len(sources), [c] * len(sources)))
        for c in creators
    ]
    m = np.zeros((len(creators), len(creators)))
    for i in range(len(creators)):
        for j in range(i + 1, len(creators)):
            m[i, j] = m[j, i] = float(mean_delta_e(rendered[i], rendered[j]).mean())
    return m


@dataclass
class HeldOut:
    """A tuned checkpoint, its base, and the held-out events of its own split."""

    tuned: GradingModel
    base: GradingModel
    data: GradingLogs
    thumbs: Thumbs
    left_out: dict[str, int]

    def retouch_sources(self) -> np.ndarray:
        """Thumbnails [N, S, S, 3] of the held-out retouches' images, in log order."""
        return self.thumbs.pixels[self.thumbs.rows([r.image for r in self.data.retouches])]


def load_heldout(
    checkpoint: str | Path, logs: list[str], *, quarantine: str | Path | None = None
) -> HeldOut:
    """The checkpoint, its `base/` and the held-out events of `logs` under the run's split
    (training events are dropped and counted in `left_out`; unreadable images skipped;
    invalid lines stop it, or with `quarantine` are copied there and left out)."""
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
        quarantine=None if quarantine is None else str(quarantine),
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
    return HeldOut(tuned, base, data, th, left_out)


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
    checkpoint: str | Path, logs: list[str], *, report_dir: str | Path | None = None,
    sections: Sequence[str] = (), quarantine: str | Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Every figure of the module docstring, by creator and overall; optional HTML report
    (`sections`: extra HTML appended to it, e.g. a simulator's view of the same run;
    `quarantine`: where invalid log lines go instead of stopping the evaluation)."""
    held = load_heldout(checkpoint, logs, quarantine=quarantine)
    tuned, base, data, th = held.tuned, held.base, held.data, held.thumbs
    sel = _selection_figures(tuned, base, data, th)
    ret = _retouch_figures(tuned, base, data, th)
    rm = _reward_figures(tuned.meta, data, th)
    creators = sorted(set(sel) | set(ret) | set(rm))
    by_creator = {
        c: {"reward_model": rm.get(c), "selections": sel.get(c), "retouches": ret.get(c)}
        for c in creators
    }
    wins = [v["win_rate_vs_untuned"] for v in sel.values()]
    look_wins = [v["look_win_rate_vs_untuned"] for v in sel.values()]
    below = [v["tuned_below_base"] for v in ret.values()]
    spread_names = sorted(ret)
    sources = held.retouch_sources()
    spread = creator_spread(tuned, sources, spread_names) if len(sources) else np.zeros((0, 0))
    fig: dict[str, Any] = {
        "checkpoint": str(checkpoint),
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
        "creator_spread": {
            "creators": spread_names,
            "delta_e": spread.tolist(),
            "images": len(sources),
        },
        "left_out_training_events": held.left_out,
        "skipped": dict(data.skipped),
    }
    if report_dir is not None:
        fig["report"] = str(write_report(Path(report_dir), fig, held, sections=sections))
    return fig
