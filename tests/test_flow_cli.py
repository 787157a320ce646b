"""`generate` and `train flow` from the command line (tiny runs)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from flow_helpers import tiny_model
from PIL import Image

from studio_align.cli import main
from studio_align.verticals.flow.checkpoint import load_flow, save_flow

# minutes of CPU in subprocesses or training runs: opt-in (`pytest -m slow`), so the
# default suite stays under 15 minutes on 2 cores
pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("name", "tags", "size"), [
    ("base", "product: lifestyle, top-down", 32), ("base64", "storyboard: close-up", 64)])  # fmt: skip
def test_generate_writes_pngs_from_a_packaged_base(tmp_path, name, tags, size):
    out = tmp_path / "png"
    args = ["generate", "--checkpoint", name, "--tags", tags, "--n", "2", "--steps", "2",
            "--out", str(out)]  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    files = sorted(out.glob("*.png"))
    assert len(files) == 2 and Image.open(files[0]).size == (size, size)


def test_generate_rejects_an_unknown_tag_in_one_line(tmp_path):
    args = ["generate", "--checkpoint", "base", "--tags", "storyboard: sunset",
            "--out", str(tmp_path)]  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2 and "sunset" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize(
    "model",
    [
        'arch = "dit"\npatch = 4\nwidth = 32\ndepth = 1\nheads = 2',
        "width = 8\nlevels = 2",
        "width = 8\nlevels = 2\nspace_to_depth = 2",
    ],
)
def test_train_flow_tiny_run(tmp_path, model):
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        f'run_dir = "{tmp_path / "run"}"\nout = "{tmp_path / "base"}"\n'
        f"[model]\nimage_size = 8\n{model}\n"
        "[data]\nprocedural = 16\n[train]\nsteps = 2\nbatch_size = 4\nprogress = false\n"
        "metrics_hook = false\n[checkpoint]\nevery = 0\n"
    )
    res = CliRunner().invoke(main, ["train", "flow", "--config", str(cfg), "--json"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "base" / "model.safetensors").is_file()
    _, meta = load_flow(tmp_path / "base")
    assert meta["flow_arch"] == ("dit" if "dit" in model else "unet")  # the default: unet


def test_eval_flow_names_a_base_of_another_size_in_one_line(tmp_path):
    from flax import nnx

    from studio_align.models.flow_unet import FlowUNet, UNetConfig

    for size in (8, 16):
        cfg = UNetConfig(image_size=size, width=8, levels=2)
        save_flow(FlowUNet(cfg, rngs=nnx.Rngs(0)), tmp_path / f"m{size}")
    args = ["eval", "flow", "--checkpoint", str(tmp_path / "m16"), "--base", str(tmp_path / "m8")]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2 and "draws 16x16 images and the base" in res.output
    assert "Traceback" not in res.output


def test_eval_flow_reports_sample_quality_for_both_models(tmp_path):
    """The command end to end: creator-free figures, then the sample-quality section for the
    base and the aligned model at guidance 1 and 3, with its labelled sheets in the report."""
    save_flow(tiny_model(0, arch="unet"), tmp_path / "base")
    save_flow(tiny_model(0, perturb=0.05, arch="unet"), tmp_path / "aligned")
    args = ["eval", "flow", "--checkpoint", str(tmp_path / "aligned"), "--base",
            str(tmp_path / "base"), "--n-per-set", "4", "--json", "--report", str(tmp_path / "r")]  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert set(out) == {"all", "sample_quality"}
    figures = out["sample_quality"]["figures"]
    assert set(figures) == {"base", "aligned"}
    for by_g in figures.values():
        assert len(by_g) == 2  # guidance 1 and 3
        for q in by_g.values():
            assert q["seam_ratio"] is None  # an 8x8 image has no boundary of the 8x8 grid
            for key in ("noise_ratio", "recognisability"):
                assert 0.0 <= q[key] < 100.0, (key, q)
            assert 0.0 < q["tag_accuracy/real"] <= 1.0
    for name in ("quality_g1.png", "quality_g3.png", "flow_eval.json"):
        assert (tmp_path / "r" / name).stat().st_size > 0
