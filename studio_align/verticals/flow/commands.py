"""`train flow`, `generate`, `eval flow`: thin commands over `studio_align.verticals.flow`.

- `studio-align train flow --config RUN.toml [--set key=value ...]`: pretrain the
  generator (`verticals.flow.pretrain.pretrain_flow`), writing `out/model.safetensors`.
- `studio-align generate --checkpoint DIR --tags "storyboard: close-up, night" --n N
  --out DIR`: PNGs from the ODE sampler (`--checkpoint base` = the packaged weights).
- `studio-align eval flow --checkpoint DIR --judge REWARD --creator NAME ...`: per
  creator, the win rate against the base under the judge (a reward over `images` and
  `creators` taken by name from the plugin host, e.g. the demo's `flow_taste`),
  diversity and Fréchet-distance ratios, on training and held-out tag sets
  (`verticals.flow.evaluate.compare`); without `--judge`, the creator-free figures
  alone (key `all`); then the sample-quality section (`evaluate.sample_quality_section`;
  `--no-quality` skips it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import numpy as np

from studio_align.commands import (
    FiniteRange,
    deferred,
    echo_result,
    load_run_config,
    resolve,
    run_config_options,
)
from studio_align.errors import ConfigError
from studio_align.jsonsafe import json_safe
from studio_align.plugins import get_host

load_flow = deferred("studio_align.verticals.flow.checkpoint:load_flow")
make_dataset = deferred("studio_align.verticals.flow.data:make_dataset")
write_png = deferred("studio_align.verticals.flow.data:write_png")
compare = deferred("studio_align.verticals.flow.evaluate:compare")
generate = deferred("studio_align.verticals.flow.evaluate:generate")
sample_quality_section = deferred("studio_align.verticals.flow.evaluate:sample_quality_section")
pretrain_flow = deferred("studio_align.verticals.flow.pretrain:pretrain_flow")
parse_prompt = deferred("studio_align.verticals.flow.task:parse_prompt")


@click.command("flow")
@run_config_options
def train_flow(config: Path | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """Pretrain the rectified-flow generator (procedural verticals or a manifest)."""
    config_model = resolve("studio_align.verticals.flow.pretrain:FlowPretrainConfig")
    cfg = load_run_config(config_model, config, overrides)
    echo_result(pretrain_flow(cfg), as_json)


@click.command("generate")
@click.option(
    "--checkpoint", required=True,
    help="Flow checkpoint directory/file, or a packaged base: 'base' (32x32), 'base64' (64x64).",
)  # fmt: skip
@click.option("--tags", required=True, help='"vertical: tag, tag", e.g. "product: lifestyle".')
@click.option("--n", "n", type=click.IntRange(1, 4096), default=8, show_default=True)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--steps", type=click.IntRange(1, 1000), default=20, show_default=True)
@click.option("--guidance", type=FiniteRange(0.0, 50.0), default=1.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
def generate_cmd(
    checkpoint: str, tags: str, n: int, out: Path, steps: int, guidance: float, seed: int
) -> None:
    """Write N PNGs sampled for a tag set (Euler ODE, classifier-free guidance)."""
    vertical, tag_set = parse_prompt(tags)
    model, _ = load_flow(checkpoint)
    images = generate(model, [(vertical, tag_set)], n, seed=seed, steps=steps,
                      guidance=guidance)[0]  # fmt: skip
    for i, im in enumerate(images):
        write_png(im, out / f"{i:04d}.png")
    click.echo(f"wrote {n} images to {out}")


@click.command("flow")
@click.option("--checkpoint", required=True, help="Aligned flow checkpoint.")
@click.option(
    "--base", default="base", show_default=True, help="Base checkpoint ('base' = packaged)."
)
@click.option(
    "--judge", default=None, help="Reward that scores images per creator (e.g. flow_taste)."
)
@click.option("--creator", "creators", multiple=True, help="Creator to judge for (repeatable).")
@click.option("--n-per-set", type=click.IntRange(2, 1024), default=16, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print every figure as JSON.")
@click.option("--report", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option(
    "--quality/--no-quality", default=True, show_default=True,
    help="Sample-quality section: seam, noise and tag recognisability vs real images.",
)  # fmt: skip
def eval_flow(
    checkpoint: str, base: str, judge: str | None, creators: tuple[str, ...], n_per_set: int,
    as_json: bool, report: Path | None, quality: bool,
) -> None:  # fmt: skip
    """Per creator: win rate vs base under the judge, diversity and Fréchet distance ratios;
    sample quality of base and aligned against fresh real images at guidance 1 and 3."""
    if (judge is None) != (not creators):
        raise ConfigError(
            "eval flow: --judge and --creator go together (a judge scores per creator)"
        )
    judge_reward = get_host().reward(judge) if judge is not None else None
    aligned, _ = load_flow(checkpoint)
    ref, _ = load_flow(base)
    size = ref.cfg.image_size
    if aligned.cfg.image_size != size:
        raise ConfigError(
            f"eval flow: {checkpoint} draws {aligned.cfg.image_size}x{aligned.cfg.image_size} "
            f"images and the base {base} {size}x{size}; compare a model with its own base"
        )
    data = make_dataset(1024, seed=0, size=size)[0].astype(np.float32) / 255.0
    cache: dict[str, np.ndarray] = {}
    common: dict[str, Any] = {"data_images": data, "n_per_set": n_per_set, "base_samples": cache}
    out = (
        {name: compare(ref, aligned, name, judge_reward, **common) for name in creators}
        if creators
        else {"all": compare(ref, aligned, **common)}
    )
    if report is not None:
        report.mkdir(parents=True, exist_ok=True)
    if quality:
        out["sample_quality"] = sample_quality_section(
            {"base": ref, "aligned": aligned}, n_per_set=max(n_per_set, 24), report_dir=report
        )
    if report is not None:
        (report / "flow_eval.json").write_text(json.dumps(json_safe(out), indent=2))
    if as_json:
        click.echo(json.dumps(json_safe(out), indent=2))
        return
    for name, rep in out.items():
        if name == "sample_quality":
            continue
        for split in ("train", "heldout"):
            m = rep[split]
            win = f"win_rate={m['win_rate']:.3f} " if "win_rate" in m else ""
            click.echo(
                f"{name:8s} {split:8s} {win}"
                f"diversity={m['diversity/ratio']:.2f}x fd={m['fd/ratio']:.2f}x"
            )
    if quality:
        for name, by_g in out["sample_quality"]["figures"].items():
            for g, q in by_g.items():
                seam = "n/a" if q["seam_ratio"] is None else f"{q['seam_ratio']:.2f}x"
                click.echo(
                    f"{name:8s} {g:12s} seam={seam} "
                    f"noise={q['noise_ratio']:.2f}x"
                    f" recognisability={q['recognisability']:.2f}x real"
                    f" ({q['tag_accuracy/generated']:.2f} vs {q['tag_accuracy/real']:.2f})"
                )
