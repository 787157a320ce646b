"""Bring your own base model: Hugging Face Gemma 3 checkpoints in and out of the engine.

`load_hf(dir)` reads a local model directory (`config.json`, `*.safetensors`, sharded or
not, `tokenizer.json`) into the engine's `Transformer`; `save_hf(model, dir)` writes one
back (LoRA merged) that transformers, vLLM or Tunix load. Nothing is fetched from a hub:
the user downloads the directory once (docs/base_models.md).

Design choices:

- The engine's module tree mirrors `Gemma3ForCausalLM`, so the weight map is a rename:
  `model.X.weight` is `X.kernel` transposed for projections (torch stores `[out, in]`,
  the engine `[in, out]`), `X.scale` for RMSNorms (both are used as `1 + w`, so no
  offset), `embed_tokens.embedding` for the embedding (the sqrt(hidden) input scaling
  and the tied output head are code, not weights, on both sides). A multimodal `gemma3`
  checkpoint contributes its language model (prefix `language_model.model.` or
  `model.language_model.`); its vision tower is skipped.
- Loading never materialises a randomly initialised model: the module is built
  abstractly (`nnx.eval_shape`) and every parameter is created with
  `jax.make_array_from_callback` from memory-mapped safetensors slices. Given a mesh,
  each parameter gets the `NamedSharding` the training mesh rules assign it
  (`models.sharding.state_sharding`) and every device reads only its own shard from disk,
  so a model larger than one device loads straight into its shards.
- Every checkpoint tensor must be used and every parameter found, with the expected
  shape; otherwise `ModelLoadError` names the tensor (and both shapes).
- New special tokens (the router's `<plan>`, `<att:*>`, `<step:*>`) are added to the base
  tokenizer as single-id special tokens and the embedding grows to match
  (`extend_vocab`); new rows start at the mean embedding, which keeps the model's
  existing predictions nearly unchanged (the choice transformers makes by default).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, SingleDeviceSharding

from studio_align.errors import ModelLoadError
from studio_align.models.bundle import load_model_bundle
from studio_align.models.config import LoraConfig, ModelConfig
from studio_align.models.hf_config import read_hf_config, to_hf_config, to_model_config
from studio_align.models.lora import add_lora, merge_lora
from studio_align.models.safetensors_io import SafetensorsDir, save_safetensors
from studio_align.models.sharding import MeshConfig, state_sharding
from studio_align.models.tokenizer import Tokenizer
from studio_align.models.transformer import Transformer

_TEXT_PREFIXES = ("model.", "language_model.model.", "model.language_model.")
_SKIPPED_PREFIXES = ("vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                     "model.multi_modal_projector.")  # fmt: skip
_HEADS = ("lm_head.weight", "language_model.lm_head.weight")
# files copied next to a saved model when it came from a HF directory
_AUX_FILES = ("tokenizer_config.json", "special_tokens_map.json", "generation_config.json",
              "chat_template.jinja", "chat_template.json")  # fmt: skip


@dataclass
class HFModel:
    """What `load_hf` returns."""

    model: Transformer
    tokenizer: Any | None  # models.tokenizer.Tokenizer
    config: ModelConfig
    hf_config: dict[str, Any] = field(default_factory=dict)  # the text config as read
    path: Path | None = None


# -- names ------------------------------------------------------------------------------------


def hf_name(engine_path: Sequence[Any]) -> tuple[str, bool]:
    """(HF tensor name without the `model.` prefix, whether it is transposed) of a param."""
    *mod, leaf = (str(p) for p in engine_path)
    base = ".".join(mod)
    if leaf == "kernel":
        return f"{base}.weight", True
    if leaf in ("scale", "embedding"):
        return f"{base}.weight", False
    raise KeyError(".".join((*mod, leaf)))


def _prefix(names: Sequence[str], where: Path) -> str:
    for p in _TEXT_PREFIXES:
        if f"{p}embed_tokens.weight" in names:
            return p
    raise ModelLoadError(
        f"{where}: missing weight model.embed_tokens.weight (no Gemma 3 embedding found)"
    )


# -- loading ----------------------------------------------------------------------------------


def load_hf(
    directory: str | Path,
    *,
    dtype: str = "float32",
    param_dtype: str | None = None,
    mesh: Mesh | None = None,
    mesh_config: Any | None = None,
    lora: LoraConfig | None = None,
    tokenizer: bool | None = None,
    seed: int = 0,
) -> HFModel:
    """Load a local Gemma 3 (or FunctionGemma) model directory into the engine.

    `dtype` is the compute dtype, `param_dtype` (default: `dtype`) the stored one; with
    `mesh` (and optionally a `models.sharding.MeshConfig`) parameters are placed sharded.
    `lora` attaches fresh adapters (B = 0, so the function is unchanged). `tokenizer`:
    True requires `tokenizer.json`, None loads it when present, False skips it.
    """
    d = Path(directory)
    if not d.is_dir():
        raise ModelLoadError(f"{d}: model directory not found")
    hf = read_hf_config(d)
    cfg = to_model_config(hf, dtype=dtype, param_dtype=param_dtype, where=str(d / "config.json"))
    weights = SafetensorsDir(d)
    names = list(weights)
    prefix = _prefix(names, d)

    abstract = nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0)))
    graphdef, state = nnx.split(abstract)
    shardings = _shardings(state, mesh, mesh_config)
    target = np.dtype(cfg.jnp_param_dtype)
    used: set[str] = set()
    flat = nnx.to_flat_state(state)
    for path, var in flat:
        name, transpose = hf_name(path)
        full = prefix + name
        want = tuple(var.get_value().shape)
        expect = want[::-1] if transpose else want  # HF layout
        if full not in weights:
            raise ModelLoadError(
                f"{d}: missing weight {full} (the config needs shape {list(expect)})"
            )
        have = weights.shape(full)
        if have != expect:
            raise ModelLoadError(
                f"{d}: weight {full} has shape {list(have)}, the config needs {list(expect)}"
            )
        var.set_value(_read(weights, full, transpose, want, target, shardings[path]))
        used.add(full)
    _check_head(weights, d, prefix, used)
    extra = [n for n in names if n not in used and not n.startswith(_SKIPPED_PREFIXES)]
    if extra:
        raise ModelLoadError(
            f"{d}: unexpected weight(s) {extra[:5]}{'...' if len(extra) > 5 else ''} "
            "that the Gemma 3 text model does not have"
        )
    model = nnx.merge(graphdef, nnx.from_flat_state(flat))
    if lora is not None:
        add_lora(model, lora, rngs=nnx.Rngs(seed))
    tok = None
    if tokenizer or (tokenizer is None and (d / "tokenizer.json").exists()):
        # a tokenizer may know ids past the embedding (multimodal Gemma 3's image token);
        # `extend_vocab` covers them when tokens are added for training
        tok = Tokenizer.load(d)
    return HFModel(model=model, tokenizer=tok, config=model.cfg, hf_config=hf, path=d)


def _shardings(state: Any, mesh: Mesh | None, mesh_config: Any | None) -> dict:
    flat = nnx.to_flat_state(state)
    if mesh is None:
        one = SingleDeviceSharding(jax.devices()[0])
        return {path: one for path, _ in flat}

    fallback = MeshConfig(fsdp=int(mesh.shape["fsdp"]), model=int(mesh.shape.get("model", 1)))
    tree = state_sharding(mesh, state, mesh_config or fallback)
    return {path: var.get_value() for path, var in nnx.to_flat_state(tree)}


def _read(
    weights: SafetensorsDir,
    name: str,
    transpose: bool,
    shape: tuple[int, ...],
    dtype: np.dtype,
    sharding: NamedSharding | SingleDeviceSharding,
) -> jax.Array:
    """The parameter as a (possibly sharded) array; each shard read from its slice only."""
    src = weights[name]

    def shard(index: tuple[slice, ...] | None) -> np.ndarray:
        if index is None:
            index = tuple(slice(None) for _ in shape)
        if transpose:
            return np.ascontiguousarray(np.asarray(src[index[::-1]]).T.astype(dtype))
        return np.asarray(src[index]).astype(dtype)

    return jax.make_array_from_callback(shape, sharding, shard)


def _check_head(weights: SafetensorsDir, d: Path, prefix: str, used: set[str]) -> None:
    """A stored output head is accepted only when it is the tied embedding itself."""
    for head in _HEADS:
        if head not in weights:
            continue
        emb = weights[prefix + "embed_tokens.weight"]
        if weights.shape(head) != emb.shape or not np.array_equal(weights[head], emb):
            raise ModelLoadError(
                f"{d}: weight {head} differs from the embedding; untied output heads are "
                "not supported"
            )
        used.add(head)


# -- vocabulary -------------------------------------------------------------------------------


def add_special_tokens(tokenizer: Any, tokens: Sequence[str]) -> list[int]:
    """Add `tokens` missing from `tokenizer` as single-id special tokens; return all ids."""
    from tokenizers import AddedToken

    missing = [t for t in dict.fromkeys(tokens) if tokenizer.token_to_id(t) is None]
    if missing:
        tokenizer.backend.add_special_tokens(
            [AddedToken(t, special=True, normalized=False) for t in missing]
        )
    return [int(tokenizer.token_to_id(t)) for t in tokens]


def extend_vocab(model: Transformer, vocab_size: int) -> Transformer:
    """Grow the (tied) embedding to `vocab_size` rows in place; new rows = mean embedding."""
    var = model.embed_tokens.embedding
    old = var.get_value()
    n = int(old.shape[0])
    if vocab_size < n:
        raise ValueError(f"extend_vocab: {vocab_size} < current vocab_size {n}")
    if vocab_size == n:
        return model
    mean = jnp.mean(old.astype(jnp.float32), axis=0, keepdims=True).astype(old.dtype)
    new = jnp.concatenate([old, jnp.repeat(mean, vocab_size - n, axis=0)])
    sharding = getattr(old, "sharding", None)
    if isinstance(sharding, NamedSharding):
        new = jax.device_put(new, sharding)
    var.set_value(new)
    model.cfg = model.cfg.model_copy(update={"vocab_size": vocab_size})
    return model


def describe_token(token: str) -> str:
    """Plain words for a special token: `<step:wan.image_to_video>` -> `wan image to video`."""
    words = token.strip("<>").split(":", 1)[-1]
    return " ".join(words.replace(".", " ").replace("_", " ").replace("-", " ").split())


def init_token_rows(model: Transformer, tokenizer: Any, ids: Sequence[int]) -> None:
    """Start each new token's embedding at the mean embedding of its description's tokens.

    The embedding is tied to the output head, so tokens sharing one initial row would get
    identical logits forever when only LoRA adapters train; a row made from the token's
    own words (`describe_token`) is distinct and already points near related text. The
    mean is rescaled to the typical row norm (a mean of many rows is shorter, which would
    handicap the new tokens' logits). Rows whose description encodes to nothing known
    keep the mean embedding.
    """
    var = model.embed_tokens.embedding
    emb = var.get_value()
    known = min(int(i) for i in ids) if ids else int(emb.shape[0])
    norm = jnp.mean(jnp.linalg.norm(emb[:known].astype(jnp.float32), axis=-1))
    rows, values = [], []
    for i in ids:
        token = tokenizer.id_to_token(int(i)) or ""
        words = tokenizer.encode(describe_token(token), allow_special=False)
        parts = [j for j in words if j < known]
        if parts:
            v = jnp.mean(emb[jnp.asarray(parts)].astype(jnp.float32), axis=0)
            rows.append(int(i))
            values.append(v * norm / jnp.maximum(jnp.linalg.norm(v), 1e-6))
    if rows:
        new = emb.at[jnp.asarray(rows)].set(jnp.stack(values).astype(emb.dtype))
        var.set_value(new)


# -- saving -----------------------------------------------------------------------------------


def save_hf(
    model: Transformer,
    directory: str | Path,
    *,
    tokenizer: Any | None = None,
    base_config: dict[str, Any] | None = None,
    source: str | Path | None = None,
    dtype: str | None = None,
) -> Path:
    """Write `model` (LoRA merged) as a `Gemma3ForCausalLM` directory.

    Files: `config.json` (`base_config`'s extra keys kept), `model.safetensors` in
    `dtype` (default: the model's parameter dtype), `tokenizer.json` when a tokenizer is
    given, and from `source` (the directory the base came from) the tokenizer config,
    generation config and chat template, so chat formatting survives the round trip.
    """

    cfg: ModelConfig = model.cfg
    if cfg.lora is not None:
        model = cast(Transformer, merge_lora(model))
        cfg = model.cfg
    out_dtype = np.dtype(jnp.dtype(dtype or cfg.param_dtype))
    torch_dtype = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}[
        out_dtype.name
    ]
    tensors: dict[str, np.ndarray] = {}
    for path, var in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        name, transpose = hf_name(path)
        a = np.asarray(jax.device_get(var.get_value()))
        if transpose:
            a = a.T
        tensors["model." + name] = np.ascontiguousarray(a.astype(out_dtype))
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    save_safetensors(tensors, d / "model.safetensors", metadata={"format": "pt"})
    hf = to_hf_config(cfg, base_config, torch_dtype=torch_dtype)
    if tokenizer is not None:
        for role in ("pad", "bos", "eos"):
            i = getattr(tokenizer, f"{role}_id", None)
            if i is not None:
                hf[f"{role}_token_id"] = int(i)
    (d / "config.json").write_text(json.dumps(hf, indent=2, sort_keys=True), encoding="utf-8")
    if tokenizer is not None:
        tokenizer.save(d / "tokenizer.json")
        _write_tokenizer_config(d, tokenizer, source)
    if source is not None:
        for name in _AUX_FILES[2:]:
            src = Path(source) / name
            if src.exists() and src.resolve() != (d / name).resolve():
                shutil.copyfile(src, d / name)
    return d


def _write_tokenizer_config(d: Path, tokenizer: Any, source: str | Path | None) -> None:
    """tokenizer_config.json: the source's (when any) with the special tokens in use."""
    cfg: dict[str, Any] = {}
    if source is not None and (Path(source) / "tokenizer_config.json").exists():
        cfg = json.loads((Path(source) / "tokenizer_config.json").read_text(encoding="utf-8"))
        if source is not None and (Path(source) / "special_tokens_map.json").exists():
            shutil.copyfile(Path(source) / "special_tokens_map.json", d / "special_tokens_map.json")
    else:
        cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    for role in ("pad", "bos", "eos", "unk"):
        tok = getattr(tokenizer, f"{role}_token", None)
        if tok is not None and tokenizer.token_to_id(tok) is not None:
            cfg[f"{role}_token"] = tok
    (d / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")


def export_hf(
    checkpoint: str | Path,
    out: str | Path,
    *,
    source: str | Path | None = None,
    dtype: str | None = None,
) -> Path:
    """Write a model bundle (e.g. a router checkpoint) as a Hugging Face directory.

    LoRA is merged; `router.json` is copied when present, so the exported directory
    still carries the catalog and plan-grammar settings next to the weights.
    """

    bundle = load_model_bundle(checkpoint)
    if not isinstance(bundle.model, Transformer):
        raise ModelLoadError(f"{checkpoint}: holds a {type(bundle.model).__name__}, not a decoder")
    base_config = read_hf_config(source) if source is not None else None
    d = save_hf(
        bundle.model,
        out,
        tokenizer=bundle.tokenizer,
        base_config=base_config,
        source=source,
        dtype=dtype,
    )
    router = Path(checkpoint) / "router.json"
    if router.exists():
        shutil.copyfile(router, d / "router.json")
    return d
