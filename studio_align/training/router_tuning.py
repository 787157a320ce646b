"""Glue between the preference/RL trainers and the intent router.

The trainers in `dpo.py`, `kto.py` and `grpo.py` are model-agnostic; tuning the router
adds only: where the starting point comes from (a router checkpoint, usually the SFT
run's `RUN_DIR/model`, which is also the frozen reference), where the records come from
(a `data compile` output directory, or explicit JSONL files), and writing the tuned
router back as a checkpoint that `eval router` and `serve router` take.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from flax import nnx
from pydantic import Field

from studio_align.config import Strict
from studio_align.errors import ConfigError, DataError


class PolicySection(Strict):
    """`[model]`: the router checkpoint to start from (and to use as the reference)."""

    init_from: Path | None = None  # a router checkpoint directory (e.g. an SFT run's model/)
    base: Path | None = None  # or a Hugging Face Gemma 3 directory (router tokens are added)
    base_dtype: Literal["float32", "bfloat16"] = "float32"
    reference: Path | None = None  # default: init_from (or the base itself)
    lora: dict[str, Any] | None = None  # LoraConfig fields; set: train adapters only


class RecordsSection(Strict):
    """`[data]`: a compiled-logs directory, or explicit JSONL files (which win)."""

    dir: Path | None = None  # output of `studio-align data compile`
    train: Path | None = None
    heldout: Path | None = None
    max_len: int | None = Field(default=None, ge=4)  # packed length; None: longest, rounded up to 8
    eval_batch_size: int = Field(default=64, ge=1)


@dataclass
class StartingPoint:
    model: Any  # an nnx.Module with the engine call contract (Transformer)
    reference: Any
    tokenizer: Any
    catalog: Any
    max_steps: int
    wrt: Any


def load_starting_point(section: PolicySection, *, seed: int = 0) -> StartingPoint:
    """Policy (trainable) and reference (frozen) routers from checkpoints."""
    from studio_align.intents.router import load_router_meta
    from studio_align.models.bundle import load_model_bundle

    if section.base is not None:
        return _base_starting_point(section, seed=seed)
    if section.init_from is None:
        raise ConfigError(
            "model.init_from: set the router checkpoint to tune (e.g. an SFT run's model/), "
            "or model.base to a Hugging Face Gemma 3 directory"
        )
    meta = load_router_meta(section.init_from)
    policy: Any = load_model_bundle(section.init_from)
    reference = load_model_bundle(section.reference or section.init_from).model
    if policy.tokenizer is None:
        raise ConfigError(f"model.init_from: {section.init_from} has no tokenizer.json")
    wrt: Any = nnx.Param
    if section.lora is not None:
        from studio_align.models.config import LoraConfig
        from studio_align.models.lora import add_lora

        if policy.model.cfg.lora is None:
            add_lora(policy.model, LoraConfig.model_validate(section.lora), rngs=nnx.Rngs(seed))
        wrt = nnx.LoRAParam
    return StartingPoint(
        model=policy.model,
        reference=reference,
        tokenizer=policy.tokenizer,
        catalog=meta["catalog_obj"],
        max_steps=int(meta["max_steps"]),
        wrt=wrt,
    )


def _base_starting_point(section: PolicySection, *, seed: int) -> StartingPoint:
    """Policy and reference from a Hugging Face base: its tokenizer plus the router's tokens,
    embedding rows added for them (as `train sft` does with `model.base`)."""
    from studio_align.intents.format import special_tokens
    from studio_align.models.hf import add_special_tokens
    from studio_align.models.tokenizer import Tokenizer
    from studio_align.plugins import get_host
    from studio_align.training.sft import ModelSection, build_model

    if section.init_from is not None:
        raise ConfigError("model.base: do not combine with model.init_from")
    assert section.base is not None
    catalog = get_host().catalog  # the default engines plus any a plugin registers
    tok = Tokenizer.load(section.base)
    add_special_tokens(tok, special_tokens(catalog))

    def load(lora: dict[str, Any] | None) -> Any:
        ms = ModelSection(base=section.base, base_dtype=section.base_dtype, lora=lora)
        return build_model(ms, tok.vocab_size, seed=seed, tokenizer=tok)

    model = load(section.lora)
    if section.reference is not None:
        from studio_align.models.bundle import load_model_bundle

        reference = load_model_bundle(section.reference).model
    else:
        reference = load(None)
    return StartingPoint(
        model=model,
        reference=reference,
        tokenizer=tok,
        catalog=catalog,
        max_steps=3,
        wrt=nnx.LoRAParam if section.lora is not None else nnx.Param,
    )


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{i}: invalid JSON ({e})") from None
    return rows


def read_split(section: RecordsSection, name: str, split: str) -> list[Any]:
    """Records `name` (e.g. `route_dpo_pairs`) of `split` (train / heldout)."""
    explicit = section.train if split == "train" else section.heldout
    if explicit is not None:
        return _read_jsonl(explicit)
    if section.dir is None:
        if split == "train":
            raise ConfigError("data: set data.dir (a compiled-logs directory) or data.train")
        return []
    from studio_align.data.compile import read_records

    return [r.model_dump() for r in read_records(section.dir, name, split)]


def prepare_run_dir(cfg: Any) -> Path:
    """Create `cfg.run_dir` and record the resolved config there (main process only)."""
    from studio_align.config import dump_toml
    from studio_align.training.distributed import is_main_process

    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if is_main_process():
        (run_dir / "config.toml").write_text(dump_toml(cfg), encoding="utf-8")
    return run_dir


@dataclass
class PreferenceResult:
    """What a DPO or KTO run returns."""

    metrics: dict[str, float]  # last logged training window
    heldout_before: dict[str, float]  # held-out figures of the starting point
    heldout_after: dict[str, float]
    checkpoint: Path  # the tuned router checkpoint
    run_dir: Path
    reference_cache_hit: bool
    train: Any  # the loop's TrainResult


def save_tuned_router(
    run_dir: Path, start: StartingPoint, *, trained_by: str, metrics: Mapping[str, float]
) -> Path:
    """Write the tuned router to `RUN_DIR/model` (main process only; others just return it)."""
    from studio_align.intents.router import save_router
    from studio_align.training.distributed import is_main_process

    path = Path(run_dir) / "model"
    if not is_main_process():
        return path
    save_router(
        path,
        start.model,
        start.tokenizer,
        start.catalog,
        max_steps=start.max_steps,
        trained_by=trained_by,
        metrics=dict(metrics),
    )
    return path


def attachments_of(prompt: Iterable[int], tokenizer: Any) -> list[str]:
    """Attachment kinds whose marker tokens occur in an encoded router prompt."""
    from studio_align.catalog import ATTACHMENT_KINDS
    from studio_align.intents.format import attachment_token

    ids = set(prompt)
    return [k for k in ATTACHMENT_KINDS if tokenizer.token_to_id(attachment_token(k)) in ids]
