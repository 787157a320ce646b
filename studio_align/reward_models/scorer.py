"""A trained preference model bundled with its encoder: images in, scores out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from studio_align.errors import CheckpointError
from studio_align.reward_models.encoders import make_encoder
from studio_align.reward_models.preference import PreferenceModel, load_preference_model


class AestheticScorer:
    """Score images with a preference model over its encoder's embeddings."""

    def __init__(self, model: PreferenceModel, encoder: Any, meta: dict[str, Any] | None = None):
        if encoder.dim != model.dim:
            raise CheckpointError(
                f"encoder {encoder.identity} has dim {encoder.dim}, the reward model expects {model.dim}"
            )
        self.model = model
        self.encoder = encoder
        self.meta = meta or {}

    @classmethod
    def load(
        cls, path: str | Path, *, require_gate: bool = True, encoder: Any = None, host: Any = None
    ) -> AestheticScorer:
        """Load a `train reward` output directory; refuses a model that failed its gate."""
        model, meta = load_preference_model(path, require_gate=require_gate)
        if encoder is None:
            enc = meta.get("encoder") or {}
            encoder = make_encoder(
                enc.get("name", "color-stats"), enc.get("options") or {}, host=host
            )
            want = enc.get("identity")
            if want and encoder.identity != want:
                raise CheckpointError(
                    f"{path}: trained with encoder {want!r} but {encoder.identity!r} was built"
                )
        return cls(model, encoder, meta)

    def score_features(
        self, feats: np.ndarray, creators: list[str | None] | None = None
    ) -> np.ndarray:
        idx = self.model.creator_index(creators, feats.shape[0])
        return np.asarray(self.model(jnp.asarray(feats, jnp.float32), jnp.asarray(idx)), np.float64)

    def score_images(
        self, images: list[Any], creators: list[str | None] | None = None
    ) -> np.ndarray:
        return self.score_features(np.asarray(self.encoder.encode_images(list(images))), creators)
