"""`data demo-grading`, `train grading`, `grade`, `eval grading` through the CLI, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image, ImageCms

from studio_align.cli import main
from studio_align.verticals.grading.lut import read_cube

# minutes of CPU in subprocesses or training runs: opt-in (`pytest -m slow`), so the
# default suite stays under 15 minutes on 2 cores
pytestmark = pytest.mark.slow

TINY = """
run_dir = "{run}"
logs = ["{logs}"]
heldout_fraction = 0.3
[train]
steps = 2
[policy]
thumbnail = 32
hidden = 16
[bc]
steps = 30
batch_size = 16
[grpo]
prompts_per_step = 4
group_size = 4
[reward.train]
steps = 40
[reward.gate]
min_heldout_accuracy = 0.0
[checkpoint]
every = 1
"""


def run(*args: str) -> str:
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    return res.stdout


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("grading")
    out = run("data", "demo-grading", "--out", str(root / "platform"), "--retouches", "10",
              "--selections", "10", "--ratings", "4", "--size", "40")  # fmt: skip
    logs = Path(out.strip().splitlines()[-1])
    cfg = root / "run.toml"
    cfg.write_text(TINY.format(run=root / "run", logs=logs))
    report = json.loads(run("train", "grading", "--config", str(cfg), "--json"))
    return {"root": root, "logs": logs, "cfg": cfg, "model": Path(report["model"]),
            "report": report}  # type: ignore[dict-item]  # fmt: skip


def test_train_grading_writes_a_model_and_counts_what_it_skipped(trained):
    rep = trained["report"]
    assert (trained["model"] / "grading.json").exists() and (trained["model"] / "base").is_dir()
    assert rep["data"]["skipped"].get("rare_creator") == 1  # the one-event newcomer
    assert "newcomer" not in rep["creators"] and len(rep["creators"]) == 6
    assert rep["stages"]["bc"]["steps"] == 30 and rep["stages"]["grpo"]["steps"] == 2
    assert rep["reward_model"]["ratings"]["train"] > 0  # ratings reached the reward model
    assert (trained["root"] / "run" / "grpo" / "checkpoints").is_dir()
    metrics = (trained["root"] / "run" / "bc" / "metrics.jsonl").read_text().splitlines()
    assert json.loads(metrics[-1])["step"] == 30


def _jpeg_with_exif_and_icc(path: Path) -> None:
    arr = (np.random.default_rng(0).random((30, 50, 3)) * 255).astype(np.uint8)
    im = Image.fromarray(arr)
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90 CW
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    im.save(path, exif=exif.tobytes(), icc_profile=icc, quality=95)


def test_grade_keeps_size_exif_icc_alpha_and_skips_corrupt_files(trained, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _jpeg_with_exif_and_icc(src / "photo.jpg")
    Image.new("RGBA", (20, 12), (200, 100, 50, 77)).save(src / "alpha.png")
    Image.new("L", (16, 16), 90).save(src / "grey.png")
    (src / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
    out = run("grade", "--checkpoint", str(trained["model"]), "--creator", "ana",
              "--style", "warm film look", str(src), "--out", str(tmp_path / "out"),
              "--export-lut", str(tmp_path / "luts"), "--json")  # fmt: skip
    st = json.loads(out)
    assert st["images"] == 3 and list(st["skipped"]) == [str(src / "broken.jpg")]
    with Image.open(tmp_path / "out" / "photo.jpg") as g, Image.open(src / "photo.jpg") as o:
        assert g.size == o.size
        assert g.getexif()[0x0112] == 6
        assert g.info["icc_profile"] == o.info["icc_profile"]
    with Image.open(tmp_path / "out" / "alpha.png") as g:
        assert (
            g.mode == "RGBA" and g.size == (20, 12) and g.getchannel("A").getextrema() == (77, 77)
        )
    assert Image.open(tmp_path / "out" / "grey.png").size == (16, 16)
    assert read_cube(tmp_path / "luts" / "photo.cube").shape == (33, 33, 33, 3)
    neutral = json.loads(run("grade", "--checkpoint", str(trained["model"]), "--creator", "bo",
                             "--reference", "neutral", "--export-lut", str(tmp_path / "n"),
                             "--lut-size", "17", "--json"))  # fmt: skip
    assert read_cube(neutral["reference_lut"]).shape == (17, 17, 17, 3)


def test_eval_grading_reports_per_creator(trained, tmp_path):
    fig = json.loads(run("eval", "grading", "--checkpoint", str(trained["model"]), "--logs",
                         str(trained["logs"]), "--report", str(tmp_path / "rep"), "--json"))  # fmt: skip
    assert fig["creators"] and fig["left_out_training_events"]["retouches"] > 0
    one = next(v for v in fig["creators"].values() if v["retouches"])
    assert set(one["retouches"]["delta_e"]) == {"tuned", "untuned", "identity"}
    html = (tmp_path / "rep" / "index.html").read_text()
    assert "win vs untuned" in html and list((tmp_path / "rep").glob("grid_*.png"))
    # labelled sheets at a legible size, and the creators' grades of the same photos
    with Image.open(tmp_path / "rep" / f"grid_{one_name(fig)}.png") as im:
        assert im.width >= 4 * 160 and im.height >= 160
    spread = fig["creator_spread"]
    n = len(spread["creators"])
    assert n >= 2 and np.allclose(spread["delta_e"], np.transpose(spread["delta_e"]))
    assert all(spread["delta_e"][i][i] == 0 for i in range(n)) and "different grades" in html


def one_name(fig: dict) -> str:
    return next(c for c, v in fig["creators"].items() if v["retouches"])


def test_unknown_parameter_is_one_line_error_or_skipped_and_counted(trained, tmp_path):
    lines = trained["logs"].read_text().splitlines()
    k = next(i for i, x in enumerate(lines) if '"retouch"' in x)
    ev = json.loads(lines.pop(k))
    ev["after"]["glow"] = 0.3
    ev["before"]["glow"] = 0.0
    bad = trained["logs"].parent / "bad.jsonl"
    bad.write_text("\n".join([json.dumps(ev), *lines]) + "\n")
    cfg = tmp_path / "bad.toml"
    cfg.write_text(TINY.format(run=tmp_path / "run", logs=bad))
    res = CliRunner().invoke(main, ["train", "grading", "--config", str(cfg)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert f"{bad}:1" in res.output and "glow" in res.output
    res = CliRunner().invoke(
        main, ["train", "grading", "--config", str(cfg), "--set", "strict=false",
               "--set", "bc.steps=2", "--set", "algorithm=bc", "--json"]
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["data"]["skipped"]["invalid_grade"] == 1


def test_corrupt_image_in_logs_is_skipped_and_counted(trained, tmp_path):
    ev = next(json.loads(x) for x in trained["logs"].read_text().splitlines() if '"retouch"' in x)
    broken = trained["logs"].parent / "img" / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    ev["image"] = "img/broken.png"
    log = trained["logs"].parent / "corrupt.jsonl"
    log.write_text(json.dumps(ev) + "\n" + trained["logs"].read_text())
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY.format(run=tmp_path / "run", logs=log))
    res = CliRunner().invoke(
        main, ["train", "grading", "--config", str(cfg), "--set", "algorithm=bc",
               "--set", "bc.steps=2", "--json"]
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["data"]["skipped"]["unreadable_image"] == 1 and rep["images"]["unreadable"] == 1
    strict = CliRunner().invoke(
        main, ["train", "grading", "--config", str(cfg), "--set", "skip_bad_images=false"]
    )
    assert (
        strict.exit_code == 2 and "broken.png" in strict.output and "Traceback" not in strict.output
    )


def test_eval_grading_sets_invalid_lines_aside_with_quarantine(trained, tmp_path):
    log = trained["logs"].parent / "torn.jsonl"
    log.write_text(trained["logs"].read_text() + '{"type": "retouch", "torn\n')
    args = ["eval", "grading", "--checkpoint", str(trained["model"]), "--logs", str(log)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2 and f"{log}:" in res.output and "--quarantine FILE" in res.output
    q = tmp_path / "q.jsonl"
    fig = json.loads(run(*args, "--quarantine", str(q), "--json"))
    assert fig["creators"] and q.read_text() == '{"type": "retouch", "torn\n'
