"""`studio-align model ...`: bring a Hugging Face base model in, take a tuned one out.

Thin wrappers over `studio_align.models.hf`:

    studio-align model inspect-hf DIR [--json]     # does this directory load? what is it?
    studio-align model export-hf --checkpoint RUN/model --out DIR [--base DIR] [--dtype bfloat16]

The router adds `model ensemble-router` and `model calibrate-router` (`router/commands.py`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from studio_align.commands import deferred

export_hf = deferred("studio_align.models.hf:export_hf")
load_hf = deferred("studio_align.models.hf:load_hf")


@click.command("inspect-hf")
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


@click.command("export-hf")
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
