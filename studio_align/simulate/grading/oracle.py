"""The simulated creators' own view of a tuned grading run: how far from their best grade.

Only the demo can say this, because only a simulated creator's taste is known. For a
tuned checkpoint and the demo's logs, on the run's held-out retouches:

- **oracle grade**: per photo and creator, the grade maximising the creator's noiseless
  utility (coordinate sweeps over the sliders, started from no grade, the model's grade
  and the creator's own retouch, keeping the best; a maximiser, so never below any of
  them);
- **utility gap**: `u(oracle) - u(grade)` for the tuned, base and no grade and for the
  creator's own logged retouch, on that creator's held-out photos (0 = as good as it gets;
  the creator's own retouch is noisy, so its gap is what a careful person leaves);
- **taste distance**: on the same pooled held-out photos, the mean ΔE2000 between two
  creators' oracle grades (how far apart their hidden tastes put the picture) beside the
  ΔE2000 between the model's grades for the two (how far apart the model puts it).

`taste_section` renders these as HTML plus a sheet (rows: photo x {tuned, oracle},
columns: creators) to append to the `eval grading` report.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from studio_align.simulate.grading.platform import THUMB, StyledCreator
from studio_align.verticals.contact_sheet import contact_sheet, save_sheet
from studio_align.verticals.grading.color import mean_delta_e
from studio_align.verticals.grading.evaluate import HeldOut, creator_spread
from studio_align.verticals.grading.renderer import N_PARAMS, render
from studio_align.verticals.grading.report import display_image

SWEEPS = 2
POSITIONS = np.linspace(-1.0, 1.0, 17, dtype=np.float32)
MAX_PHOTOS = 6  # pooled photos for the taste distances


def _thumb(path: str) -> np.ndarray:
    """The creator's view of a file: `THUMB` px, bilinear (as the demo's creators judge)."""
    with Image.open(path) as im:
        rgb = im.convert("RGB").resize((THUMB, THUMB), Image.Resampling.BILINEAR)
    return np.asarray(rgb, np.float32) / 255.0


def oracle_grade(
    creator: StyledCreator, thumb: np.ndarray, starts: Sequence[np.ndarray]
) -> np.ndarray:
    """The best grade [P] found for `thumb` by coordinate sweeps from each of `starts`
    (sweeps on a half-size copy, as the demo's creators retouch; starts compared at full
    size)."""
    small = thumb[::2, ::2]
    batch = np.broadcast_to(small, (len(POSITIONS), *small.shape))
    best, best_u = np.zeros(N_PARAMS, np.float32), -np.inf
    for start in starts:
        g = np.clip(np.asarray(start, np.float32), -1, 1)
        for _ in range(SWEEPS):
            for k in range(N_PARAMS):
                tries = np.repeat(g[None], len(POSITIONS), axis=0)
                tries[:, k] = POSITIONS
                tries = np.vstack([tries, g[None]])  # the current value stays a candidate
                u = creator.utility(render(np.vstack([batch, small[None]]), tries))
                g = tries[int(np.argmax(u))]
        u_g = float(creator.utility(render(thumb[None], g[None]))[0])
        if u_g > best_u:
            best, best_u = g, u_g
    return best


def utility_gaps(held: HeldOut, creators: Mapping[str, StyledCreator]) -> dict[str, dict[str, Any]]:
    """Per creator on their held-out retouches: mean `u(oracle) - u(x)` for x in tuned,
    base, identity and the creator's own retouch, and the oracle's mean utility."""
    out: dict[str, dict[str, Any]] = {}
    for c in sorted({r.creator for r in held.data.retouches} & set(creators)):
        rs = [r for r in held.data.retouches if r.creator == c]
        small = held.thumbs.pixels[held.thumbs.rows([r.image for r in rs])]
        grades = {
            "tuned": held.tuned.predict(small, [""] * len(rs), [c] * len(rs)),
            "base": held.base.predict(small, [""] * len(rs), [c] * len(rs)),
            "identity": np.zeros((len(rs), N_PARAMS), np.float32),
            "own retouch": np.stack([r.after for r in rs]),
        }
        views = np.stack([_thumb(r.image) for r in rs])
        sc = creators[c]
        oracle = np.stack([oracle_grade(sc, v, [grades["identity"][i], grades["tuned"][i],
                                                grades["own retouch"][i]])
                           for i, v in enumerate(views)])  # fmt: skip
        u_or = sc.utility(render(views, oracle))
        out[c] = {
            "photos": len(rs),
            "utility/oracle": float(u_or.mean()),
            "gap": {
                k: float((u_or - sc.utility(render(views, g))).mean()) for k, g in grades.items()
            },
        }
    return out


def taste_distances(held: HeldOut, creators: Mapping[str, StyledCreator]) -> dict[str, Any]:
    """Mean ΔE2000 between creators' oracle grades and between the model's grades of the
    same pooled held-out photos, with the correlation over creator pairs."""
    names = sorted({r.creator for r in held.data.retouches} & set(creators))
    paths = list(dict.fromkeys(r.image for r in held.data.retouches))[:MAX_PHOTOS]
    if len(names) < 2 or not paths:
        return {}
    views = np.stack([_thumb(p) for p in paths])
    small = held.thumbs.pixels[held.thumbs.rows(paths)]
    rendered, grades = [], {}
    for c in names:
        tuned = held.tuned.predict(small, [""] * len(paths), [c] * len(paths))
        grades[c] = np.stack(
            [oracle_grade(creators[c], v, [np.zeros(N_PARAMS, np.float32), tuned[i]])
             for i, v in enumerate(views)]
        )  # fmt: skip
        rendered.append(render(views, grades[c]))
    oracle = np.zeros((len(names), len(names)))
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            oracle[i, j] = oracle[j, i] = float(mean_delta_e(rendered[i], rendered[j]).mean())
    model = creator_spread(held.tuned, views, names)
    iu = np.triu_indices(len(names), 1)
    corr = float(np.corrcoef(oracle[iu], model[iu])[0, 1]) if len(iu[0]) > 1 else float("nan")
    return {"creators": names, "photos": len(paths), "oracle_delta_e": oracle.tolist(),
            "model_delta_e": model.tolist(), "pair_correlation": corr,
            "paths": paths, "oracle_grades": {c: g.tolist() for c, g in grades.items()}}  # fmt: skip


def _pairs_html(d: Mapping[str, Any]) -> str:
    names, o, m = d["creators"], d["oracle_delta_e"], d["model_delta_e"]
    rows = "".join(
        f"<tr><td>{html.escape(names[i])} – {html.escape(names[j])}</td>"
        f"<td>{o[i][j]:.1f}</td><td>{m[i][j]:.1f}</td></tr>"
        for i in range(len(names))
        for j in range(i + 1, len(names))
    )
    return (
        f"<table><caption>mean ΔE2000 between two creators' grades of the same {d['photos']} "
        "held-out photos: their oracle grades (how far apart the hidden tastes are) and the "
        f"model's tuned grades; correlation over pairs {d['pair_correlation']:.2f}</caption>"
        "<tr><th>pair</th><th>tastes (oracle)</th><th>model (tuned)</th></tr>" + rows + "</table>"
    )


def taste_section(
    held: HeldOut, creators: Mapping[str, StyledCreator], out: Path
) -> tuple[str, dict[str, Any]]:
    """The HTML section (and its figures) the demo appends to the `eval grading` report."""
    gaps = utility_gaps(held, creators)
    dist = taste_distances(held, creators)
    rows = "".join(
        f"<tr><td>{html.escape(c)}</td><td>{v['photos']}</td><td>{v['utility/oracle']:.1f}</td>"
        + "".join(f"<td>{v['gap'][k]:.1f}</td>" for k in ("tuned", "base", "identity",
                                                          "own retouch"))
        + "</tr>"
        for c, v in gaps.items()
    )  # fmt: skip
    parts = [
        "<h2>Against the simulated creators' hidden tastes</h2>",
        "<p>Only a simulated creator's taste is known, so only the demo can show this: the "
        "utility gap <code>u(oracle) − u(grade)</code> on each creator's held-out photos "
        "(0 = the best grade for that creator).</p>",
        "<table><tr><th>creator</th><th>photos</th><th>u(oracle)</th><th>gap tuned</th>"
        "<th>gap base</th><th>gap no grade</th><th>gap own retouch</th></tr>" + rows + "</table>",
    ]
    if dist:
        parts.append(_pairs_html(dist))
        sheet = _oracle_sheet(held, dist, out)
        parts.append(f"<img src='{sheet.name}' alt='tuned and oracle grade per creator'>")
    return "\n".join(parts), {"utility_gap": gaps, "taste_distance": dist}


def _oracle_sheet(held: HeldOut, dist: Mapping[str, Any], out: Path) -> Path:
    names, paths = dist["creators"], dist["paths"][:2]
    small = held.thumbs.pixels[held.thumbs.rows(paths)]
    cells, labels = [], []
    for i, p in enumerate(paths):
        big = display_image(p, 128)
        tuned_row, oracle_row = [big], [big]
        for c in names:
            tuned_row.append(render(big, held.tuned.predict(small[i : i + 1], [""], [c])[0]))
            oracle_row.append(render(big, np.asarray(dist["oracle_grades"][c][i], np.float32)))
        cells += [tuned_row, oracle_row]
        labels += [f"photo {i + 1}, tuned", f"photo {i + 1}, oracle"]
    sheet = contact_sheet(cells, columns=["original", *names], rows=labels, cell=112, smooth=True,
                          title="tuned grade vs each creator's oracle grade")  # fmt: skip
    return save_sheet(sheet, out / "grid_oracle.png")
