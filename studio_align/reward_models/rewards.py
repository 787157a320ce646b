"""The reward models' rewards: `aesthetic`, `clip_critic`, `identity` (registered by
`reward_models.plugin`).

- `aesthetic(images, creators=None, aesthetic_model=None)`: the trained preference
  model's score. `aesthetic_model` is a batch-wide context value (an `AestheticScorer`
  or the path of a `train reward` output); without it, the model set with `configure`
  or the `STUDIO_ALIGN_AESTHETIC_MODEL` environment variable is used. A model that
  failed its quality gate is refused.
- `clip_critic(images, requests, clip_encoder=None)`: cosine similarity between the CLIP
  embeddings of the request text and of the output image. `clip_encoder` is an encoder
  with `encode_texts`, or the options of the `clip` encoder (model, weights, ...).
- `identity(images, sources=None)`: SSIM of the output to its source image; stops the
  grading policy from over-editing. No opinion (None) where a sample has no source.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from studio_align.errors import RewardError
from studio_align.reward_models.encoders import make_encoder
from studio_align.reward_models.scorer import AestheticScorer
from studio_align.reward_models.ssim import ssim_pairs

ENV_MODEL = "STUDIO_ALIGN_AESTHETIC_MODEL"
_defaults: dict[str, Any] = {"aesthetic_model": None, "clip_encoder": None}


def configure(*, aesthetic_model: Any = None, clip_encoder: Any = None) -> None:
    """Set process-wide defaults for the rewards (a scorer/path, a clip encoder/options)."""
    _defaults["aesthetic_model"] = aesthetic_model
    _defaults["clip_encoder"] = clip_encoder


@functools.lru_cache(maxsize=4)
def _load_scorer_cached(path: str, stamp: int) -> Any:

    return AestheticScorer.load(path, require_gate=True)


def _load_scorer(path: str) -> Any:
    """Load (once per version: a retrained model at the same path is reloaded)."""
    meta = os.path.join(path, "meta.json")
    stamp = os.stat(meta).st_mtime_ns if os.path.exists(meta) else 0
    return _load_scorer_cached(path, stamp)


def _scorer(model: Any) -> Any:
    model = model if model is not None else _defaults["aesthetic_model"]
    if model is None:
        model = os.environ.get(ENV_MODEL) or None
    if model is None:
        raise RewardError(
            "reward 'aesthetic': no reward model; train one with `studio-align train reward` and "
            f"pass its directory as the aesthetic_model context value or set {ENV_MODEL}"
        )
    if isinstance(model, str | os.PathLike):
        return _load_scorer(str(model))
    return model


@functools.lru_cache(maxsize=2)
def _clip_from_options(key: tuple[tuple[str, Any], ...]) -> Any:

    return make_encoder("clip", dict(key))


def _clip(encoder: Any) -> Any:
    encoder = encoder if encoder is not None else _defaults["clip_encoder"]
    if encoder is None:
        raise RewardError(
            "reward 'clip_critic': no CLIP encoder; pass clip_encoder (an encoder or the `clip` "
            "encoder's options, e.g. {'model': 'ViT-B-32', 'weights': '/path/weights'})"
        )
    if isinstance(encoder, dict):
        return _clip_from_options(tuple(sorted(encoder.items())))
    if not hasattr(encoder, "encode_texts"):
        raise RewardError(f"reward 'clip_critic': encoder {encoder!r} has no text tower")
    return encoder


def _request_text(r: Any) -> str:
    if isinstance(r, str):
        return r
    if isinstance(r, dict):
        return str(r.get("text", ""))
    return str(getattr(r, "text", r))


def aesthetic(
    images: Sequence[Any], creators: Sequence[str | None] | None = None, aesthetic_model: Any = None
) -> list[float]:
    """Trained preference model score of each image (per-creator head when known)."""
    scorer = _scorer(aesthetic_model)
    return scorer.score_images(list(images), None if creators is None else list(creators)).tolist()


def clip_critic(
    images: Sequence[Any], requests: Sequence[Any], clip_encoder: Any = None
) -> list[float]:
    """CLIP cosine similarity between each request's text and its output image."""
    enc = _clip(clip_encoder)
    t = np.asarray(enc.encode_texts([_request_text(r) for r in requests]), np.float64)
    v = np.asarray(enc.encode_images(list(images)), np.float64)
    t /= np.linalg.norm(t, axis=1, keepdims=True) + 1e-12
    v /= np.linalg.norm(v, axis=1, keepdims=True) + 1e-12
    return np.sum(t * v, axis=1).tolist()


def identity(images: Sequence[Any], sources: Sequence[Any] | None = None) -> list[float | None]:
    """SSIM of each output image to its source image (None where there is no source)."""

    if sources is None:
        return [None] * len(images)
    idx = [i for i, s in enumerate(sources) if s is not None]
    out: list[float | None] = [None] * len(images)
    vals = ssim_pairs([images[i] for i in idx], [sources[i] for i in idx])
    for i, v in zip(idx, vals, strict=True):
        out[i] = float(v)
    return out
