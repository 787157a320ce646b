"""Why is the grading win rate where it is? Diagnosis on a validation data set.

For a `train grading` checkpoint and logs written by `data demo-grading` (simulated
creators, whose hidden utility is known), on the held-out (creator, session) groups of
the run's split, per creator:

- `win`: the tuned grade's win rate against the untuned one under the creator's
  selections (`eval grading`'s pixel measure), with its 95 % Wilson interval;
- `oracle`: the same win rate for the grade that maximises the creator's own hidden
  utility (style request included) on each source, found by coordinate ascent on the
  noiseless utility. No model can beat it under this measure, so it is the ceiling the
  selections themselves allow;
- `population` / `other_creator`: the tuned model asked with the population slot or with
  another creator's slot, to see whether the policy's conditioning on creator matters;
- `bc`: a behaviour-cloning-only checkpoint (`--bc`), to see how much of the gain BC gives;
- `utility`: the creator's mean hidden utility of each grade's rendering, and
  `choice_consistency`: how often the creator's logged pick is the candidate with the
  highest noiseless utility (the noise in the selections by construction).

Only for simulated creators (it reads their hidden tastes); never run it on the logs a
reported figure is measured on when choosing settings.

Usage: `python bench/grading_diagnose.py --checkpoint RUN/model --logs DEV/logs.jsonl
[--bc BCRUN/model]`; prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from studio_align.reward_models.color_stats import color_statistics
from studio_align.simulate.grading.platform import StyledCreator, demo_creators
from studio_align.verticals.grading.dataset import load_thumbs
from studio_align.verticals.grading.evaluate import (
    heldout_selections,
    selection_agreement,
    wilson_interval,
    win_rate,
)
from studio_align.verticals.grading.logs import read_grading_logs
from studio_align.verticals.grading.model import GradingModel
from studio_align.verticals.grading.renderer import N_PARAMS, render


def _utilities(
    imgs: np.ndarray, styles: list[str], who: list[str], pool: dict[str, StyledCreator]
) -> np.ndarray:
    """Each row's creator's noiseless utility [N] of `imgs` [N, ...] under its style:
    colour statistics once for the whole batch, then each (creator, style)'s taste."""
    st = color_statistics(imgs)
    u = np.zeros(len(imgs))
    for key in set(zip(who, styles, strict=True)):
        rows = np.array([(w, s) == key for w, s in zip(who, styles, strict=True)])
        u[rows] = (
            pool[key[0]].taste_for(key[1]).utility_of_stats({k: v[rows] for k, v in st.items()})
        )
    return u


def oracle_grades(
    srcs: np.ndarray, styles: list[str], who: list[str], pool: dict[str, StyledCreator]
) -> np.ndarray:
    """[N, P] grades maximising each creator's noiseless utility of `render(src, grade)`:
    coordinate ascent over the parameters, sweeps with shrinking steps, all sources at once."""
    small = srcs[:, ::2, ::2]
    n = len(srcs)
    best = np.zeros((n, N_PARAMS), np.float32)
    steps = np.linspace(-1.0, 1.0, 11, dtype=np.float32)
    rep_who = [w for w in who for _ in steps]
    rep_styles = [s for s in styles for _ in steps]
    for scale in (0.8, 0.4, 0.2, 0.1, 0.05):
        for k in range(N_PARAMS):
            tries = np.repeat(best[:, None], len(steps), axis=1)
            tries[:, :, k] = np.clip(best[:, k][:, None] + scale * steps, -1, 1)
            imgs = render(np.repeat(small, len(steps), axis=0), tries.reshape(-1, N_PARAMS))
            u = _utilities(imgs, rep_styles, rep_who, pool).reshape(n, len(steps))
            best = tries[np.arange(n), u.argmax(1)]
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True, type=Path)
    ap.add_argument("--logs", required=True)
    ap.add_argument("--bc", type=Path, help="a behaviour-cloning-only checkpoint (same split)")
    a = ap.parse_args()
    tuned = GradingModel.load(a.checkpoint)
    base = GradingModel.load(a.checkpoint / "base")
    split = tuned.meta["split"]
    data = read_grading_logs(
        [a.logs], seed=int(split["seed"]), heldout_fraction=float(split["heldout_fraction"]),
        strict=False,
    )  # fmt: skip
    sel = heldout_selections(data)
    paths = sorted({s.source for s in sel if s.source} | {p for s in sel for p in s.images})
    th, _ = load_thumbs(paths, tuned.thumbnail, skip_bad=True, progress=False)
    src = th.pixels[th.rows([s.source for s in sel if s.source is not None])]
    who, styles = [s.creator for s in sel], [s.prompt for s in sel]
    creators = sorted(set(who))
    other = [creators[(creators.index(c) + 1) % len(creators)] for c in who]
    pool = demo_creators()
    grades = {
        "tuned": tuned.predict(src, styles, who),
        "untuned": base.predict(src, styles, who),
        "identity": np.zeros((len(sel), N_PARAMS), np.float32),
        "oracle": oracle_grades(src, styles, who, pool),
        "population": tuned.predict(src, styles, [None] * len(sel)),
        "other_creator": tuned.predict(src, styles, other),
    }
    if a.bc:
        grades["bc"] = GradingModel.load(a.bc).predict(src, styles, who)
    pixel, look = selection_agreement(sel, th, grades)
    util = {k: _utilities(render(src, g), styles, who, pool) for k, g in grades.items()}
    n_cand = len(sel[0].images)
    cand = th.pixels[th.rows([p for s in sel for p in s.images])]
    cu = _utilities(cand, [s for s in styles for _ in range(n_cand)],
                    [w for w in who for _ in range(n_cand)], pool).reshape(len(sel), n_cand)  # fmt: skip
    consistent = cu.argmax(1) == np.array([s.chosen[0] for s in sel])
    out: dict[str, dict] = {}
    for c in creators:
        m = np.array([w == c for w in who])
        row: dict = {"selections": int(m.sum()), "choice_consistency": float(consistent[m].mean())}
        for k in grades:
            if k == "untuned":
                continue
            row[k] = {
                "win": win_rate(pixel[k][m], pixel["untuned"][m]),
                "ci95": [round(x, 3) for x in wilson_interval(pixel[k][m], pixel["untuned"][m])],
                "look_win": win_rate(look[k][m], look["untuned"][m]),
            }
        row["utility"] = {k: round(float(v[m].mean()), 2) for k, v in util.items()}
        out[c] = row
    print(json.dumps({"checkpoint": str(a.checkpoint), "creators": out}, indent=1))


if __name__ == "__main__":
    main()
