"""`grade_files` on threads: the same bytes as one at a time, and what a file keeps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageCms

from studio_align.simulate.grading.scenes import make_scenes
from studio_align.verticals.grading.apply import _thumb, grade_files
from studio_align.verticals.grading.color import mean_delta_e
from studio_align.verticals.grading.model import GradingModel
from studio_align.verticals.grading.renderer import render

# loads and compiles a model twice (about a minute on a loaded 2-core machine): opt-in
pytestmark = pytest.mark.slow


def _inputs(root: Path) -> Path:
    src = root / "in"
    src.mkdir()
    scenes = make_scenes(3, 4, (48, 64))
    for i, sc in enumerate(scenes):
        Image.fromarray((sc * 255 + 0.5).astype(np.uint8)).save(src / f"s{i}.png")
    exif = Image.Exif()
    exif[0x0112] = 6
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    Image.fromarray((scenes[0] * 255).astype(np.uint8)).save(
        src / "photo.jpg", exif=exif.tobytes(), icc_profile=icc, quality=95
    )
    Image.new("RGBA", (20, 12), (200, 100, 50, 77)).save(src / "alpha.png")
    (src / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
    return src


def test_threaded_grade_matches_serial_and_keeps_size_exif_icc_alpha(tmp_path):
    model = GradingModel.create(["ana"], hidden=8, thumbnail=16, seed=1)
    ckpt = model.save(tmp_path / "model")
    src = _inputs(tmp_path)
    one = grade_files(ckpt, [src], tmp_path / "w1", creator="ana", workers=1, progress=False)
    many = grade_files(ckpt, [src], tmp_path / "w3", creator="ana", workers=3, progress=False)
    assert one["images"] == many["images"] == 6 and many["workers"] == 3
    assert list(many["skipped"]) == [str(src / "broken.jpg")]
    for f in sorted((tmp_path / "w1").iterdir()):
        assert f.read_bytes() == (tmp_path / "w3" / f.name).read_bytes(), f.name
    with Image.open(tmp_path / "w3" / "photo.jpg") as g, Image.open(src / "photo.jpg") as o:
        assert g.size == o.size and g.getexif()[0x0112] == 6
        assert g.info["icc_profile"] == o.info["icc_profile"]
    with Image.open(tmp_path / "w3" / "alpha.png") as g:
        assert g.mode == "RGBA" and g.getchannel("A").getextrema() == (77, 77)
    assert set(many["phase_seconds"]) == {"decode", "grade", "encode"}
    # the LUT path is the renderer up to interpolation, for the grade the model predicts
    with Image.open(src / "s1.png") as im:
        rgb = im.convert("RGB")
    params = model.predict(_thumb(rgb, 16)[None], [""], ["ana"])[0]
    exact = render(np.asarray(rgb, np.float32) / 255, params)
    with Image.open(tmp_path / "w3" / "s1.png") as g:
        graded = np.asarray(g.convert("RGB"), np.float32) / 255
    assert float(mean_delta_e(graded, exact)) < 1.0
