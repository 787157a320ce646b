"""The `eval grading` HTML report: figures a colourist can check against pictures.

- a table per creator (`creator_rows`: reward-model accuracy, win rates, ΔE2000 to the
  creator's own retouches for tuned, untuned and identity);
- per creator, held-out retouches as labelled columns *original | creator's retouch |
  tuned | base*, rendered from the image files at `DISPLAY` px (grades are per-pixel
  functions, so the grade the model chose on its thumbnail applies at any size);
- one sheet with the same held-out photos graded for every creator, and the matrix of
  mean ΔE2000 between the creators' tuned grades (`creator_spread`): a reader sees
  whether the model follows tastes that differ or gives everyone one look.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from studio_align.verticals.contact_sheet import contact_sheet, save_sheet
from studio_align.verticals.grading.renderer import render

if TYPE_CHECKING:
    from studio_align.verticals.grading.evaluate import HeldOut

DISPLAY = 160  # px per grid cell
ROWS_PER_CREATOR = 3
SPREAD_PHOTOS = 3

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


def display_image(path: str, size: int = DISPLAY) -> np.ndarray:
    """The image file at `path` as floats [S, S', 3], its long side at most `size`."""
    with Image.open(path) as im:
        rgb = im.convert("RGB")
        scale = min(1.0, size / max(rgb.size))
        if scale < 1.0:
            new = (max(1, round(rgb.width * scale)), max(1, round(rgb.height * scale)))
            rgb = rgb.resize(new, Image.Resampling.BILINEAR)
        return np.asarray(rgb, np.float32) / 255.0


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)


def creator_sheets(held: HeldOut, out: Path) -> dict[str, Path]:
    """Per creator, up to `ROWS_PER_CREATOR` held-out retouches as labelled columns
    original | creator's retouch | tuned | base; returns the PNG paths by creator."""
    paths = {}
    for c in sorted({r.creator for r in held.data.retouches}):
        rs = [r for r in held.data.retouches if r.creator == c][:ROWS_PER_CREATOR]
        thumbs = held.thumbs.pixels[held.thumbs.rows([r.image for r in rs])]
        tuned = held.tuned.predict(thumbs, [""] * len(rs), [c] * len(rs))
        base = held.base.predict(thumbs, [""] * len(rs), [c] * len(rs))
        cells = []
        for i, r in enumerate(rs):
            src = display_image(r.image)
            cells.append([src, render(src, r.after), render(src, tuned[i]), render(src, base[i])])
        sheet = contact_sheet(
            cells, columns=["original", "creator's retouch", "tuned", "base (untuned)"],
            title=f"{c}: held-out photos", smooth=True,
        )  # fmt: skip
        paths[c] = save_sheet(sheet, out / f"grid_{_safe(c)}.png")
    return paths


def spread_sheet(held: HeldOut, creators: Sequence[str], out: Path) -> Path | None:
    """The same held-out photos (one per creator, first few) graded for every creator."""
    seen: dict[str, str] = {}
    for r in held.data.retouches:
        seen.setdefault(r.creator, r.image)
    photos = list(seen.values())[:SPREAD_PHOTOS]
    if not photos or not creators:
        return None
    thumbs = held.thumbs.pixels[held.thumbs.rows(photos)]
    cells = [[display_image(p)] for p in photos]
    for c in creators:
        g = held.tuned.predict(thumbs, [""] * len(photos), [c] * len(photos))
        for i in range(len(photos)):
            cells[i].append(render(cells[i][0], g[i]))
    sheet = contact_sheet(
        cells, columns=["original", *creators], cell=128, smooth=True,
        title="the same held-out photos, tuned grade for each creator",
    )  # fmt: skip
    return save_sheet(sheet, out / "grid_creators.png")


def _f(x: Any) -> str:
    return "–" if x is None else f"{x:.3f}"


def _matrix_html(names: Sequence[str], m: Any, caption: str) -> str:
    head = "".join(f"<th>{html.escape(n)}</th>" for n in names)
    body = "".join(
        f"<tr><th>{html.escape(a)}</th>"
        + "".join("<td>–</td>" if i == j else f"<td>{m[i][j]:.1f}</td>" for j in range(len(names)))
        + "</tr>"
        for i, a in enumerate(names)
    )
    return f"<table><caption>{caption}</caption><tr><th></th>{head}</tr>{body}</table>"


def write_report(
    out: Path, fig: dict[str, Any], held: HeldOut, *, sections: Sequence[str] = ()
) -> Path:
    """`out/index.html` with the figures, the sheets as PNG files and `figures.json`."""
    out.mkdir(parents=True, exist_ok=True)
    parts = [
        "<!doctype html><meta charset='utf-8'><title>studio-align: grading evaluation</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}td,th{padding:3px 8px}"
        "table{border-collapse:collapse;margin:8px 0}tr:nth-child(even){background:#f4f4f4}"
        "caption{text-align:left;font-style:italic}</style>",
        f"<h1>Grading evaluation</h1><p>checkpoint <code>{html.escape(fig['checkpoint'])}</code>"
        "; every figure is on the run's held-out sessions.</p><pre>"
        + html.escape(json.dumps(fig["summary"], indent=1))
        + "</pre>",
        "<table><tr><th>creator</th><th>RM held-out acc.</th><th>win vs untuned</th>"
        "<th>win vs identity</th><th>look win vs untuned</th><th>look win vs identity</th>"
        "<th>ΔE tuned</th><th>ΔE untuned</th><th>ΔE identity</th></tr>",
    ]
    for row in creator_rows(fig):
        cells = "".join(f"<td>{_f(row[k])}</td>" for k in ROW_KEYS)
        parts.append(f"<tr><td>{html.escape(row['creator'])}</td>{cells}</tr>")
    parts.append(
        "</table><p>ΔE: mean CIEDE2000 to the creator's own grade of the same held-out photo "
        "(lower is closer; about 2 is a just-noticeable difference).</p>"
    )
    spread = fig.get("creator_spread") or {}
    names = spread.get("creators") or []
    if len(names) > 1:
        parts.append("<h2>Do the creators get different grades?</h2>")
        parts.append(_matrix_html(
            names, spread["delta_e"],
            f"mean ΔE2000 between two creators' tuned grades of the same {spread['images']} "
            "held-out photos",
        ))  # fmt: skip
        sheet = spread_sheet(held, names, out)
        if sheet is not None:
            parts.append(f"<img src='{sheet.name}' alt='tuned grade per creator'>")
    parts.append("<h2>Held-out retouches</h2>")
    for c, path in creator_sheets(held, out).items():
        parts.append(f"<h3>{html.escape(c)}</h3><img src='{path.name}' alt='{html.escape(c)}'>")
    parts.extend(sections)
    (out / "figures.json").write_text(json.dumps(fig, indent=1, default=float))
    path = out / "index.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
