"""Supervised fine-tuning: next-token loss on the completion only.

`train_sft(cfg)` trains the router (or any decoder with the engine's call contract) on
labelled routing examples: prompt = `<bos>` text attachment-markers `<plan>`,
completion = step tokens + `<eos>` (`intents.format`). The loss is the mean negative
log-likelihood over completion tokens; prompt and padding tokens carry no loss.

Design choices:
- The generic part works on `(prompt_ids, completion_ids)` pairs (`encode_pairs`,
  `sft_loss`); the routing glue is one function (`routing_pairs`). Other SFT data only
  needs another pair maker.
- Sequences are right-padded to one fixed length (the longest example, rounded up to a
  multiple of 8, unless `data.max_len` says otherwise), so every step has the same shape.
- The loss reports its token count as `metrics["weight"]`, which makes gradient
  accumulation exact for this token-weighted mean (see `accumulate.py`).
- The result is a model bundle plus `router.json` at `RUN_DIR/model`: the directory
  `eval router` and `serve router` take.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from pydantic import Field

from studio_align.config import Strict, dump_toml
from studio_align.errors import ConfigError, DataError
from studio_align.training.batches import ArrayBatches
from studio_align.training.distributed import is_main_process, maybe_initialize
from studio_align.training.loop import TrainResult, TrainRunConfig, train_loop

Pair = tuple[Sequence[int], Sequence[int]]


# -- config -------------------------------------------------------------------------------


class ModelSection(Strict):
    """`[model]`: a preset (sized to the tokenizer's vocabulary) plus field overrides.

    `config` holds `ModelConfig` fields that override the preset (with `preset = "none"`
    it must hold all required ones). `init_from` starts from a saved bundle instead.
    `base` starts from a local Hugging Face Gemma 3 directory (`models.hf.load_hf`) in
    `base_dtype`; its tokenizer is used and the router's tokens are added to it.
    """

    preset: Literal["tiny", "router", "gemma3_270m", "none"] = "router"
    config: dict[str, Any] = Field(default_factory=dict)
    lora: dict[str, Any] | None = None  # LoraConfig fields; set: train adapters only
    init_from: Path | None = None
    base: Path | None = None  # Hugging Face model directory (config.json, *.safetensors)
    base_dtype: Literal["float32", "bfloat16"] = "float32"


class SFTDataConfig(Strict):
    """`[data]`: labelled routing examples (JSONL) and the tokenizer."""

    train: Path | None = None
    heldout: Path | None = None
    tokenizer: Path | None = None  # tokenizer.json; None: train one on the training texts
    vocab_size: int = Field(2048, ge=64)  # for a tokenizer trained here
    max_len: int | None = Field(None, ge=2)  # None: longest example, rounded up to 8
    eval_batch_size: int = Field(64, ge=1)


class SFTConfig(TrainRunConfig):
    """The run config of `studio-align train sft`."""

    model: ModelSection = ModelSection()
    data: SFTDataConfig = SFTDataConfig()


@dataclass
class SFTResult:
    metrics: dict[str, float]  # last logged training window
    eval_metrics: dict[str, float]  # held-out loss / token accuracy / exact-plan accuracy
    checkpoint: Path  # the model bundle (router checkpoint) directory
    run_dir: Path
    train: TrainResult


# -- generic SFT --------------------------------------------------------------------------


def encode_pairs(pairs: Sequence[Pair], max_len: int, pad_id: int) -> dict[str, np.ndarray]:
    """Right-padded `tokens`, `attn_mask` and `loss_mask` (1 on completion tokens) arrays."""
    n = len(pairs)
    tokens = np.full((n, max_len), pad_id, np.int32)
    attn = np.zeros((n, max_len), np.bool_)
    loss = np.zeros((n, max_len), np.float32)
    for i, (prompt, completion) in enumerate(pairs):
        seq = [*prompt, *completion]
        if len(seq) > max_len:
            raise DataError(f"example {i}: {len(seq)} tokens exceed data.max_len = {max_len}")
        if not completion:
            raise DataError(f"example {i}: empty completion")
        tokens[i, : len(seq)] = seq
        attn[i, : len(seq)] = True
        loss[i, len(prompt) : len(seq)] = 1.0
    return {"tokens": tokens, "attn_mask": attn, "loss_mask": loss}


def padded_length(pairs: Sequence[Pair], multiple: int = 8) -> int:
    longest = max(len(p) + len(c) for p, c in pairs)
    return -(-longest // multiple) * multiple


def _completion_stats(model: nnx.Module, batch: Mapping[str, jax.Array]):
    from studio_align.models.logprobs import gather_logps
    from studio_align.models.transformer import positions_from_mask

    tokens, attn = batch["tokens"], batch["attn_mask"].astype(jnp.bool_)
    logits = model(tokens, positions_from_mask(attn), attn)[:, :-1]
    targets = tokens[:, 1:]
    mask = batch["loss_mask"][:, 1:].astype(jnp.float32)
    nll = -gather_logps(logits, targets) * mask
    correct = (jnp.argmax(logits, -1) == targets).astype(jnp.float32) * mask
    return nll, correct, mask


def sft_loss(model: nnx.Module, batch: Mapping[str, jax.Array]) -> tuple[jax.Array, dict]:
    """Mean NLL over completion tokens (`loss_mask`), with token accuracy and the count."""
    nll, correct, mask = _completion_stats(model, batch)
    n = mask.sum()
    denom = jnp.maximum(n, 1.0)
    return nll.sum() / denom, {"token_acc": correct.sum() / denom, "weight": n}


def make_eval_fn(arrays: Mapping[str, np.ndarray], batch_size: int):
    """`eval_fn(model) -> {loss, token_acc, exact}` over every held-out example.

    The last batch is padded with zero-loss rows, so all batches share one shape (one
    compile). `exact` is the fraction of examples whose whole completion is the argmax
    under teacher forcing.
    """
    n = len(next(iter(arrays.values())))
    nb = -(-n // batch_size)
    padded = {}
    for k, a in arrays.items():
        extra = np.zeros((nb * batch_size - n, *a.shape[1:]), a.dtype)
        padded[k] = np.concatenate([a, extra]).reshape(nb, batch_size, *a.shape[1:])
    if "attn_mask" in padded:  # keep padded rows attendable (one token) to avoid NaN rows
        padded["attn_mask"][..., 0] = True

    @jax.jit
    def sums(graphdef: Any, state: Any, batch: Any) -> jax.Array:
        nll, correct, mask = _completion_stats(nnx.merge(graphdef, state), batch)
        seq_ok = (correct.sum(-1) == mask.sum(-1)) & (mask.sum(-1) > 0)
        return jnp.stack([nll.sum(), correct.sum(), mask.sum(), seq_ok.sum()])

    def eval_fn(model: nnx.Module) -> dict[str, float]:
        graphdef, state = nnx.split(model)
        tot = np.zeros(4)
        for i in range(nb):
            tot += np.asarray(sums(graphdef, state, {k: v[i] for k, v in padded.items()}))
        return {
            "loss": tot[0] / max(tot[2], 1),
            "token_acc": tot[1] / max(tot[2], 1),
            "exact": tot[3] / n,
        }

    return eval_fn


# -- routing glue -------------------------------------------------------------------------


def routing_pairs(examples: Sequence[Mapping[str, Any]], tokenizer: Any) -> list[Pair]:
    """(prompt ids, plan ids) for labelled routing examples `{"request": ..., "plan": [...]}`."""
    from studio_align.intents.format import encode_plan, encode_prompt

    pairs: list[Pair] = []
    for i, ex in enumerate(examples):
        if "request" not in ex or "plan" not in ex:
            raise DataError(f"routing example {i}: needs 'request' and 'plan'")
        pairs.append((encode_prompt(tokenizer, ex["request"]), encode_plan(tokenizer, ex["plan"])))
    return pairs


def build_model(
    section: ModelSection, vocab_size: int, *, seed: int, tokenizer: Any | None = None
) -> nnx.Module:
    """The model `[model]` describes: from a HF base, a bundle, or a preset sized to `vocab_size`.

    With `model.base`, `tokenizer` is the base tokenizer plus added tokens: their new
    embedding rows start from their descriptions (`models.hf.init_token_rows`).
    """
    from studio_align.models.config import LoraConfig, ModelConfig
    from studio_align.models.lora import add_lora
    from studio_align.models.transformer import Transformer

    lora = LoraConfig.model_validate(section.lora) if section.lora is not None else None
    if section.base is not None:
        from studio_align.models.hf import extend_vocab, init_token_rows, load_hf

        if section.init_from is not None or section.config:
            raise ConfigError("model.base: do not combine with model.init_from or model.config")
        model = load_hf(section.base, dtype=section.base_dtype, tokenizer=False).model
        if vocab_size < model.cfg.vocab_size:
            vocab_size = model.cfg.vocab_size  # the tokenizer may not use every embedding row
        extend_vocab(model, vocab_size)  # rows for tokens added to the base tokenizer
        if tokenizer is not None and (section.base / "tokenizer.json").exists():
            from studio_align.models.tokenizer import Tokenizer

            added = range(Tokenizer.load(section.base).vocab_size, tokenizer.vocab_size)
            init_token_rows(model, tokenizer, list(added))
        if lora is not None:
            add_lora(model, lora, rngs=nnx.Rngs(seed))
        return model
    if section.init_from is not None:
        from studio_align.models.bundle import load_model_bundle

        model = cast(Transformer, load_model_bundle(section.init_from).model)
        if model.cfg.vocab_size != vocab_size:
            raise ConfigError(
                f"model.init_from: vocab_size {model.cfg.vocab_size} != tokenizer's {vocab_size}"
            )
        if lora is not None and model.cfg.lora is None:
            add_lora(model, lora, rngs=nnx.Rngs(seed))
        return model
    fields = {**section.config, "vocab_size": vocab_size, "lora": lora}
    try:
        if section.preset == "none":
            cfg = ModelConfig.model_validate(fields)
        else:
            cfg = getattr(ModelConfig, section.preset)(**fields)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"model.config: {e}") from None
    return Transformer(cfg, rngs=nnx.Rngs(seed))


def _catalog() -> Any:
    try:
        from studio_align.plugins import get_host
    except ImportError:
        from studio_align.catalog import default_catalog

        return default_catalog()
    return get_host().catalog


def train_sft(
    cfg: SFTConfig,
    *,
    examples: Sequence[Mapping[str, Any]] | None = None,
    heldout: Sequence[Mapping[str, Any]] | None = None,
    tokenizer: Any | None = None,
    catalog: Any | None = None,
) -> SFTResult:
    """Train a router by SFT; returns final metrics and the saved bundle's path.

    `examples` / `heldout` / `tokenizer` / `catalog` override what `cfg.data` and the
    plugin host would supply (library callers such as quickstart pass them in memory).
    """
    from studio_align.intents.demo import read_examples
    from studio_align.intents.format import build_tokenizer, request_fields
    from studio_align.intents.router import save_router

    maybe_initialize(cfg.distributed)
    catalog = catalog if catalog is not None else _catalog()
    if examples is None:
        if cfg.data.train is None:
            raise ConfigError("data.train: set the labelled routing examples file")
        examples = read_examples(cfg.data.train)
    if heldout is None and cfg.data.heldout is not None:
        heldout = read_examples(cfg.data.heldout)
    if not examples:
        raise DataError("no training examples")
    if tokenizer is None:
        if cfg.data.tokenizer is not None:
            from studio_align.models.tokenizer import Tokenizer

            tokenizer = Tokenizer.load(cfg.data.tokenizer)
        elif cfg.model.base is not None:
            from studio_align.intents.format import special_tokens
            from studio_align.models.hf import add_special_tokens
            from studio_align.models.tokenizer import Tokenizer

            tokenizer = Tokenizer.load(cfg.model.base)
            add_special_tokens(tokenizer, special_tokens(catalog))
        elif cfg.model.init_from is not None and (cfg.model.init_from / "tokenizer.json").exists():
            from studio_align.models.tokenizer import Tokenizer

            tokenizer = Tokenizer.load(cfg.model.init_from / "tokenizer.json")
        else:
            texts = [request_fields(ex["request"])[0] for ex in examples]
            tokenizer = build_tokenizer(texts, catalog, vocab_size=cfg.data.vocab_size)

    train_pairs = routing_pairs(examples, tokenizer)
    held_pairs = routing_pairs(heldout, tokenizer) if heldout else []
    max_len = cfg.data.max_len or padded_length(train_pairs + held_pairs)
    pad_id = tokenizer.pad_id
    if pad_id is None:
        raise DataError("the tokenizer has no <pad> token; SFT batches need one")
    arrays = encode_pairs(train_pairs, max_len, pad_id)
    batches = ArrayBatches(arrays, cfg.train.batch_size, seed=cfg.train.seed)
    eval_fn = (
        make_eval_fn(encode_pairs(held_pairs, max_len, pad_id), cfg.data.eval_batch_size)
        if held_pairs
        else None
    )
    model = build_model(cfg.model, tokenizer.vocab_size, seed=cfg.train.seed, tokenizer=tokenizer)
    has_lora = cast(Any, model).cfg.lora is not None
    wrt = nnx.LoRAParam if has_lora and cfg.model.lora is not None else nnx.Param

    run_dir = Path(cfg.run_dir)
    if is_main_process():
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.toml").write_text(dump_toml(cfg), encoding="utf-8")
    result = train_loop(
        model, cfg.optim, sft_loss, batches, cfg, eval_fn=eval_fn, wrt=wrt, name="sft"
    )
    bundle = run_dir / "model"
    if is_main_process():
        max_steps = max(3, *(len(ex["plan"]) for ex in examples))
        metrics = {**result.metrics, **{f"eval/{k}": v for k, v in result.eval_metrics.items()}}
        save_router(
            bundle,
            model,
            tokenizer,
            catalog,
            max_steps=max_steps,
            trained_by="sft",
            metrics=metrics,
        )
    return SFTResult(
        metrics=result.metrics,
        eval_metrics=result.eval_metrics,
        checkpoint=bundle,
        run_dir=run_dir,
        train=result,
    )
