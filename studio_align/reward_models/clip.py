"""The `clip` encoder: any open_clip architecture with weights from a local path.

Weights are never downloaded: the model is built with `pretrained=None` and the state
dict is loaded from `weights` (a file, or a directory holding one). Without weights the
encoder refuses to start with a message saying how to provide them, unless the config
says `random_init = true` (tests and benchmarks use a tiny random architecture through
the very same code path). A custom architecture can be given inline as `model_config`
(the open_clip JSON config as a dict, or a path to the JSON file); it is registered
with open_clip under `model` before the model is built.

`identity` names the architecture and a sha256 of the weights file (or the random seed),
so the embedding cache never mixes embeddings from different weights.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from studio_align.errors import ModelLoadError
from studio_align.reward_models.cache import file_digest
from studio_align.reward_models.images import as_rgb_image

WEIGHT_FILE_NAMES = (
    "open_clip_model.safetensors",
    "open_clip_pytorch_model.bin",
    "model.safetensors",
    "pytorch_model.bin",
)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def _import_open_clip() -> Any:
    try:
        import open_clip
    except ImportError as e:
        raise ModelLoadError(
            "the clip encoder needs open-clip-torch: pip install 'studio-align[clip]'"
        ) from e
    return open_clip


def resolve_weights(weights: str | Path) -> Path:
    """A weights file, or the one weights file inside a directory."""
    p = Path(weights).expanduser()
    if p.is_file():
        return p
    if p.is_dir():
        for name in WEIGHT_FILE_NAMES:
            if (p / name).is_file():
                return p / name
        found = sorted(f for f in p.iterdir() if f.suffix in WEIGHT_SUFFIXES and f.is_file())
        if len(found) == 1:
            return found[0]
        if not found:
            raise ModelLoadError(f"{p}: no open_clip weights file ({', '.join(WEIGHT_SUFFIXES)})")
        raise ModelLoadError(
            f"{p}: several weights files ({', '.join(f.name for f in found)}); name one"
        )
    raise ModelLoadError(f"{p}: clip weights not found")


class ClipEncoder:
    """open_clip image/text encoder; embeddings are L2-normalised float32."""

    def __init__(
        self,
        model: str = "ViT-B-32",
        weights: str | None = None,
        *,
        model_config: dict[str, Any] | str | None = None,
        random_init: bool = False,
        seed: int = 0,
        device: str = "cpu",
        batch_size: int = 32,
    ) -> None:
        open_clip = _import_open_clip()
        import torch

        self._torch = torch
        self.model_name = model
        self.device = device
        self.batch_size = batch_size
        cfg_digest = ""
        if model_config is not None:
            cfg = (
                json.loads(Path(model_config).read_text())
                if isinstance(model_config, str | Path)
                else dict(model_config)
            )
            from open_clip import factory

            factory._MODEL_CONFIGS[model] = cfg
            cfg_digest = hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:12]
        elif model not in open_clip.list_models():
            raise ModelLoadError(
                f"clip encoder: unknown open_clip model {model!r}; give model_config "
                "(its JSON config) or one of open_clip.list_models()"
            )
        if weights is None and not random_init:
            raise ModelLoadError(
                f"clip encoder {model!r}: no weights given. studio-align never downloads "
                "weights: set the encoder option weights = '/path/to/open_clip_model.safetensors' "
                "(a local file, or a directory holding one, e.g. a Hugging Face snapshot of "
                f"the {model} open_clip checkpoint), or random_init = true for tests"
            )
        torch.manual_seed(seed)
        try:
            self.model, _, self.preprocess = open_clip.create_model_and_transforms(
                model, pretrained=None, device=device
            )
        except Exception as e:  # open_clip raises many kinds for bad configs
            raise ModelLoadError(f"clip encoder {model!r}: cannot build model: {e}") from e
        if weights is not None:
            path = resolve_weights(weights)
            try:
                open_clip.load_checkpoint(self.model, str(path), strict=True)
            except Exception as e:
                raise ModelLoadError(
                    f"{path}: cannot load weights into open_clip {model!r}: {e}"
                ) from e
            source = f"sha256={file_digest(path)[:16]}"
        else:
            source = f"random-seed={seed}"
        self.model.eval()
        self.tokenizer = open_clip.get_tokenizer(model)
        self.dim = (
            int(self.model.text_projection.shape[-1])
            if hasattr(self.model, "text_projection") and self.model.text_projection is not None
            else int(self.model.encode_text(self.tokenizer(["x"]).to(device)).shape[-1])
        )
        self.identity = f"clip:{model}:{cfg_digest}:{source}"

    def encode_images(self, images: list[Image.Image | np.ndarray]) -> np.ndarray:
        torch = self._torch
        out = []
        with torch.inference_mode():
            for s in range(0, len(images), self.batch_size):
                chunk = [
                    self.preprocess(as_rgb_image(im)) for im in images[s : s + self.batch_size]
                ]
                x = torch.stack(chunk).to(self.device)
                e = self.model.encode_image(x).float()
                out.append(torch.nn.functional.normalize(e, dim=-1).cpu().numpy())
        if not out:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.concatenate(out).astype(np.float32)

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        torch = self._torch
        out = []
        with torch.inference_mode():
            for s in range(0, len(texts), self.batch_size):
                tok = self.tokenizer(list(texts[s : s + self.batch_size])).to(self.device)
                e = self.model.encode_text(tok).float()
                out.append(torch.nn.functional.normalize(e, dim=-1).cpu().numpy())
        if not out:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.concatenate(out).astype(np.float32)

    def save_weights(self, path: str | Path) -> Path:
        """Write the model's state dict (used by tests and to snapshot a random init)."""
        p = Path(path)
        self._torch.save(self.model.state_dict(), p)
        return p

    def __repr__(self) -> str:
        return f"ClipEncoder({self.identity})"


TINY_CONFIG: dict[str, Any] = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 8, "head_width": 16},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}
"""A real open_clip ViT/transformer config, tiny enough for tests and CPU benchmarks."""
