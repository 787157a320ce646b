"""Pretraining the flow generator (`studio-align train flow --config RUN.toml`).

Data: the procedural demo verticals (`[data] procedural = N` images), or images plus tags
from a JSONL manifest (`[data] manifest = "FILE"`, lines `{"image": "rel/path.png",
"vertical": "storyboard", "tags": ["close-up", "night"]}`, paths relative to the
manifest), or a folder holding `manifest.jsonl`. Images are resized to the model size.

Training is the shared `training.loop.train_loop` (checkpoints, resume, metrics) on the
rectified-flow loss. The batch source is step-indexed (exact resume): each step draws its
images, noise, logit-normal times (SD3's sampling, which concentrates on mid-noise where
the velocity is hardest) and the classifier-free-guidance condition dropout from
`(seed, step)`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
from PIL import Image
from pydantic import Field

from studio_align.algorithms.flow import interpolate, rectified_flow_loss
from studio_align.config import Strict
from studio_align.errors import DataError
from studio_align.models.flow import FlowConfig, FlowDiT, param_count
from studio_align.models.flow_unet import FlowUNet, UNetConfig
from studio_align.textfiles import read_text
from studio_align.training.distributed import is_main_process, maybe_initialize, replicated
from studio_align.training.loop import TrainRunConfig, train_loop
from studio_align.training.supervised import supervised
from studio_align.verticals.flow.checkpoint import save_flow
from studio_align.verticals.flow.data import encode, make_dataset, to_model_space


class FlowModelSection(Strict):
    """`[model]`: `arch = "unet"` (`width`, `blocks`, `levels`, `attention`,
    `space_to_depth`) or `"dit"`
    (`patch`, `width`, `depth`, `heads`); fields of the other architecture are ignored.
    The defaults are the shipped base's: a three-level U-Net, width 32, attention at 8x8
    (`examples/flow/pretrain.toml` is its whole recipe)."""

    arch: Literal["dit", "unet"] = "unet"
    image_size: int = Field(32, ge=8)
    width: int | None = Field(None, ge=8)  # None: 32 for the U-Net, 128 for the DiT
    patch: int = Field(8, ge=1)
    depth: int = Field(4, ge=1)
    heads: int = Field(4, ge=1)
    blocks: int = Field(1, ge=1)
    levels: int = Field(3, ge=1)
    attention: bool = True
    space_to_depth: int = Field(1, ge=1)

    def config(self) -> FlowConfig | UNetConfig:
        if self.arch == "unet":
            return UNetConfig(image_size=self.image_size, width=self.width or 32,
                              blocks=self.blocks, levels=self.levels,
                              attention=self.attention,
                              space_to_depth=self.space_to_depth)  # fmt: skip
        return FlowConfig(image_size=self.image_size, patch=self.patch, width=self.width or 128,
                          depth=self.depth, heads=self.heads)  # fmt: skip

    def build(self, seed: int) -> Any:
        from flax import nnx

        cfg = self.config()
        if isinstance(cfg, UNetConfig):
            return FlowUNet(cfg, rngs=nnx.Rngs(seed))
        return FlowDiT(cfg, rngs=nnx.Rngs(seed))


class FlowDataSection(Strict):
    procedural: int = Field(6000, ge=1)  # images drawn from the demo verticals
    manifest: str | None = None  # JSONL manifest or a folder with manifest.jsonl
    seed: int = 0


class FlowPretrainConfig(TrainRunConfig):
    """`train flow` run config: `[model]`, `[data]`, `cond_dropout`, `out`, + the shared sections."""

    model: FlowModelSection = FlowModelSection()
    data: FlowDataSection = FlowDataSection()
    cond_dropout: float = Field(0.1, ge=0.0, lt=1.0)
    out: Path = Path("runs/flow/base")


def read_manifest(path: str | Path, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Images uint8 [N, size, size, 3], vertical ids, multi-hot tags from a JSONL manifest."""
    p = Path(path)
    if p.is_dir():
        p = p / "manifest.jsonl"
    if not p.is_file():
        raise DataError(f"{path}: no manifest (a JSONL file or a folder with manifest.jsonl)")
    images, verts, tags = [], [], []
    for i, line in enumerate(read_text(p).splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{p}:{i}: invalid JSON ({e})") from None
        problem = _malformed_entry(rec)
        if problem:
            raise DataError(f"{p}:{i}: {problem}")
        try:
            v, hot = encode(rec["vertical"], rec.get("tags", []))
            with Image.open(p.parent / rec["image"]) as im:
                rgb = im.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
        except Exception as e:  # an unknown tag, a missing or undecodable image
            raise DataError(f"{p}:{i}: {type(e).__name__}: {e}") from None
        images.append(np.asarray(rgb, np.uint8))
        verts.append(v)
        tags.append(hot)
    if not images:
        raise DataError(f"{p}: the manifest lists no images")
    return np.stack(images), np.asarray(verts, np.int32), np.stack(tags)


def _malformed_entry(rec: Any) -> str:
    """What is wrong with one manifest entry's shape, or "" (its values are checked on use)."""
    if not isinstance(rec, dict):
        return f"an entry is a JSON object, not {type(rec).__name__}"
    for key in ("image", "vertical"):
        if not isinstance(rec.get(key), str):
            return f"{key!r} must be a string, got {rec.get(key)!r}"
    tags = rec.get("tags", [])
    if not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
        return f"'tags' must be a list of strings, got {tags!r}"
    return ""


def load_data(cfg: FlowPretrainConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    size = cfg.model.image_size
    if cfg.data.manifest:
        return read_manifest(cfg.data.manifest, size)
    return make_dataset(cfg.data.procedural, seed=cfg.data.seed, size=size)


class PretrainBatches:
    """Step-indexed batches: x0, noise, t, condition (dropped to null with `p_drop`)."""

    def __init__(self, images: np.ndarray, verts: np.ndarray, tags: np.ndarray, *,
                 batch_size: int, p_drop: float, seed: int) -> None:  # fmt: skip
        self.images, self.verts, self.tags = images, verts, tags
        self.batch_size, self.p_drop, self.seed = batch_size, p_drop, seed

    def __call__(self, step: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng([self.seed, step])
        idx = rng.integers(0, len(self.images), self.batch_size)
        x0 = to_model_space(self.images[idx])
        keep = rng.uniform(size=self.batch_size) >= self.p_drop
        return {
            "x0": x0,
            "noise": rng.standard_normal(x0.shape).astype(np.float32),
            "t": (1.0 / (1.0 + np.exp(-rng.standard_normal(self.batch_size)))).astype(np.float32),
            "vertical": np.where(keep, self.verts[idx], 0).astype(np.int32),
            "tags": self.tags[idx] * keep[:, None].astype(np.float32),
        }


def flow_matching_loss(model: Any, batch: Mapping[str, Any]) -> tuple[Any, Mapping[str, Any]]:
    """`train_loop` loss: the velocity of the noised batch against `noise - x0`."""
    x_t = interpolate(batch["x0"], batch["noise"], batch["t"])
    v = model(x_t, batch["t"], batch["vertical"], batch["tags"])
    return rectified_flow_loss(v, batch["x0"], batch["noise"])


def pretrain_flow(cfg: FlowPretrainConfig, *, model: Any = None) -> dict[str, Any]:
    """Pretrain (or continue training `model`, any registered `FlowModel`; by default
    `[model]` builds one) and write `cfg.out/model.safetensors`."""
    from flax import nnx

    maybe_initialize(cfg.distributed)  # before anything touches a device
    t0 = time.perf_counter()
    images, verts, tags = load_data(cfg)
    model = model or cfg.model.build(cfg.train.seed)
    batches = PretrainBatches(
        images, verts, tags, batch_size=cfg.train.batch_size, p_drop=cfg.cond_dropout,
        seed=cfg.train.seed,
    )  # fmt: skip
    result = train_loop(model, cfg, supervised(flow_matching_loss, batches), name="flow")
    seconds = time.perf_counter() - t0
    meta = {
        "trained_by": "train flow",
        "steps": result.step,
        "loss": result.metrics.get("loss"),
        "images": len(images),
        "params": param_count(model),
        "seconds": seconds,
    }
    nnx.update(model, replicated(nnx.state(model)))  # every process: a collective
    path = save_flow(model, cfg.out, meta) if is_main_process() else Path(cfg.out)
    return {**meta, "path": str(path), "compiles": result.compiles}
