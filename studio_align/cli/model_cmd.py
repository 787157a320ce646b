"""`studio-align model ...`: bring a Hugging Face base model in, take a tuned one out.

Thin wrappers over `studio_align.models.hf`:

    studio-align model inspect-hf DIR [--json]     # does this directory load? what is it?
    studio-align model export-hf --checkpoint RUN/model --out DIR [--base DIR] [--dtype bfloat16]
    studio-align model ensemble-router --out DIR ROUTER ROUTER [ROUTER ...]
    studio-align model calibrate-router CHECKPOINT --val VAL.jsonl --train TRAIN.jsonl [--target 0.95]
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from studio_align.cli import main
from studio_align.errors import CheckpointError
from studio_align.models.hf import export_hf, load_hf
from studio_align.router.checkpoint_calibrate import calibrate_checkpoint
from studio_align.router.ensemble import save_ensemble
from studio_align.router.router import load_router_meta


@main.group("model")
def model() -> None:
    """Load Hugging Face Gemma 3 directories and export tuned models to that layout."""


@model.command("inspect-hf")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--dtype", type=click.Choice(["float32", "bfloat16"]), default="float32")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def inspect_hf(directory: Path, dtype: str, as_json: bool) -> None:
    """Load DIRECTORY fully (every weight checked) and describe it."""

    t0 = time.perf_counter()
    h = load_hf(directory, dtype=dtype)
    cfg = h.config
    info = {
        "directory": str(directory),
        "params": cfg.num_params(),
        "vocab_size": cfg.vocab_size,
        "tokenizer_vocab": h.tokenizer.vocab_size if h.tokenizer is not None else None,
        "layers": cfg.num_layers,
        "local_layers": sum(cfg.is_local(i) for i in range(cfg.num_layers)),
        "sliding_window": cfg.sliding_window,
        "dtype": dtype,
        "load_s": round(time.perf_counter() - t0, 2),
        "config": cfg.model_dump(mode="json"),
    }
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    for k, v in info.items():
        if k != "config":
            click.echo(f"{k}: {v}")


@model.command("export-hf")
@click.option("--checkpoint", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A model bundle, e.g. RUN_DIR/model of `train sft`.")  # fmt: skip
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--base", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="The HF directory the model was tuned from (keeps its tokenizer config, chat template).")  # fmt: skip
@click.option("--dtype", type=click.Choice(["float32", "bfloat16"]), default=None,
              help="Stored dtype (default: the model's).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def export_hf_cmd(
    checkpoint: Path, out: Path, base: Path | None, dtype: str | None, as_json: bool
) -> None:
    """Write CHECKPOINT (LoRA merged) as a Gemma3ForCausalLM directory."""

    d = export_hf(checkpoint, out, source=base, dtype=dtype)
    files = sorted(p.name for p in d.iterdir())
    if as_json:
        click.echo(json.dumps({"out": str(d), "files": files}, indent=2))
    else:
        click.echo(f"wrote {d}: {', '.join(files)}")


@model.command("ensemble-router")
@click.argument("routers", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))  # fmt: skip
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path))
def ensemble_router(routers: tuple[Path, ...], out: Path) -> None:
    """Combine ROUTERS (router checkpoints trained alike from different seeds) into one
    ensemble directory that routes by their mean plan probability; score it with
    `eval router --checkpoint OUT`."""

    catalogs = [load_router_meta(r)["catalog"] for r in routers]  # one line if not a router
    if any(c != catalogs[0] for c in catalogs):
        raise CheckpointError(f"{routers[0]} and the other routers route over different catalogs")
    d = save_ensemble(routers, out)
    click.echo(f"wrote {d}: {len(routers)} members")


@model.command("calibrate-router")
@click.argument("checkpoint", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--val", "validation", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Labelled validation requests (JSONL: request, plan); never the evaluation set.")  # fmt: skip
@click.option("--train", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Labelled training requests, for the unfamiliarity model (single routers).")  # fmt: skip
@click.option("--target", type=float, default=None,
              help="Selective accuracy the abstain thresholds keep on validation (0.95).")  # fmt: skip
@click.option("--unfamiliarity-in-confidence", is_flag=True,
              help="Fit the confidence on log-odds and unfamiliarity together (docs/router.md).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def calibrate_router(
    checkpoint: Path,
    validation: Path,
    train: Path | None,
    target: float | None,
    unfamiliarity_in_confidence: bool,
    as_json: bool,
) -> None:
    """Fit CHECKPOINT's temperature, unfamiliarity model and abstain thresholds (an
    ensemble: its temperature) on validation, and save them for `serve router`."""

    res = calibrate_checkpoint(
        checkpoint,
        validation,
        train=train,
        target=target,
        unfamiliarity_in_confidence=unfamiliarity_in_confidence,
    )
    if as_json:
        click.echo(json.dumps(res, indent=2))
        return
    if res["kind"] == "ensemble":
        click.echo(
            f"{checkpoint}: temperature {res['temperature']:.3f} ({res['validation']} validation requests)"
        )
        return
    ood = "none" if res["ood_threshold"] is None else f"{res['ood_threshold']:.2f}"
    click.echo(
        f"{checkpoint}: temperature {res['temperature']:.3f}, abstain below confidence "
        f"{res['confidence_threshold']:.3f} or above unfamiliarity {ood} "
        f"(target {res['target_accuracy']:.2f} on {res['validation']} validation requests, "
        f"accuracy {res['validation_accuracy']:.3f})"
    )
