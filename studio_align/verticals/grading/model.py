"""The served grading model: one policy for every creator, conditioned on who and what.

`GradingModel` bundles a `GradingPolicy` with what it needs to be used on new files:
the creator table, the thumbnail size the grade is predicted at, and the run's split
settings (so `eval grading` never scores a model on the groups it trained on).

Conditioning: the policy's "request" input is `[style embedding | creator one-hot]`,
where the style embedding is `policy.request_features` of the style request (a hashed
bag of words) and the one-hot has one slot per creator plus a last *population* slot
for creators the model has not seen (or saw too rarely to get a slot). One model, with
per-creator behaviour; an unknown creator gets the population's grade, never an error.

Saved as `policy.npz` (the NNX state's leaves in tree order) and `grading.json`; a
mismatch between the two is a `CheckpointError`, not a silent partial load.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.errors import CheckpointError
from studio_align.models.npz_state import load_state_npz, save_state_npz
from studio_align.reward_models.color_stats import FEATURE_DIM, color_features
from studio_align.reward_models.images import as_rgb_image
from studio_align.textfiles import read_json_object
from studio_align.verticals.grading.policy import REQUEST_DIM, GradingPolicy, request_features
from studio_align.verticals.grading.renderer import PARAM_NAMES

FORMAT = "studio-align/grading-model"


def thumbnails(images: Sequence[Any], size: int) -> np.ndarray:
    """[N, size, size, 3] float32 thumbnails (bilinear, aspect squashed: colour statistics
    do not depend on it) of PIL images or arrays."""
    out = np.empty((len(images), size, size, 3), np.float32)
    for i, im in enumerate(images):
        pil = as_rgb_image(im)
        if pil.size != (size, size):
            pil = pil.resize((size, size), resample=2, reducing_gap=2.0)
        out[i] = np.asarray(pil, np.float32) / 255.0
    return out


class GradingModel:
    """A grading policy with its creator table; `predict` maps thumbnails to grades."""

    def __init__(
        self,
        policy: GradingPolicy,
        creators: Sequence[str],
        *,
        thumbnail: int = 64,
        style_dim: int = REQUEST_DIM,
        meta: dict[str, Any] | None = None,
    ) -> None:
        if policy.request_dim != style_dim + len(creators) + 1:
            raise CheckpointError(
                f"policy conditioning has {policy.request_dim} inputs; expected "
                f"{style_dim} style + {len(creators)} creators + 1 population"
            )
        self.policy = policy
        self.creators = list(creators)
        self.thumbnail = thumbnail
        self.style_dim = style_dim
        self.meta = dict(meta or {})
        self._table = {c: i for i, c in enumerate(self.creators)}

    @classmethod
    def create(
        cls,
        creators: Sequence[str],
        *,
        hidden: int = 64,
        init_log_std: float = -1.0,
        thumbnail: int = 64,
        style_dim: int = REQUEST_DIM,
        seed: int = 0,
    ) -> GradingModel:
        policy = GradingPolicy(
            FEATURE_DIM,
            style_dim + len(creators) + 1,
            hidden=hidden,
            init_log_std=init_log_std,
            rngs=nnx.Rngs(seed),
        )
        return cls(policy, creators, thumbnail=thumbnail, style_dim=style_dim)

    def knows(self, creator: str) -> bool:
        return creator in self._table

    def conditioning(self, styles: Sequence[str], creators: Sequence[str | None]) -> np.ndarray:
        """[N, style_dim + creators + 1]: style embedding and creator one-hot."""
        n = len(styles)
        onehot = np.zeros((n, len(self.creators) + 1), np.float32)
        for i, c in enumerate(creators):
            onehot[i, self._table.get(c, len(self.creators)) if c is not None else -1] = 1.0
        return np.concatenate([request_features(list(styles), self.style_dim), onehot], axis=1)

    def predict_features(
        self, feats: np.ndarray, styles: Sequence[str], creators: Sequence[str | None]
    ) -> np.ndarray:
        """Deterministic grades [N, P] in [-1, 1] (the policy's mean)."""
        cond = self.conditioning(styles, creators)
        mean = _mode(self.policy, jnp.asarray(feats, jnp.float32), jnp.asarray(cond))
        return np.clip(np.asarray(mean), -1.0, 1.0)

    def predict(
        self, thumbs: np.ndarray, styles: Sequence[str], creators: Sequence[str | None]
    ) -> np.ndarray:
        return self.predict_features(color_features(thumbs), styles, creators)

    # -- files ---------------------------------------------------------------------------

    def save(self, path: str | Path, **meta: Any) -> Path:
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        save_state_npz(self.policy, out / "policy.npz")
        full = {
            **self.meta,
            **meta,
            "format": FORMAT,
            "version": 1,
            "creators": self.creators,
            "thumbnail": self.thumbnail,
            "style_dim": self.style_dim,
            "hidden": self.policy.hidden,
            "params": list(PARAM_NAMES),
        }
        (out / "grading.json").write_text(json.dumps(full, indent=2, default=_json_default))
        self.meta = full
        return out

    @classmethod
    def _built_from(cls, meta: dict[str, Any], meta_file: Path) -> GradingModel:
        """The untrained model `grading.json` describes (checked against this version)."""
        if meta.get("format") != FORMAT:
            raise CheckpointError(f"{meta_file}: not a studio-align grading model")
        if meta.get("params") != list(PARAM_NAMES):
            raise CheckpointError(
                f"{meta_file}: params {meta.get('params')!r} are not this version's grading "
                f"parameters {list(PARAM_NAMES)}"
            )
        try:
            return cls.create(
                [str(c) for c in meta["creators"]],
                hidden=int(meta["hidden"]),
                thumbnail=int(meta["thumbnail"]),
                style_dim=int(meta["style_dim"]),
            )
        except KeyError as e:
            raise CheckpointError(f"{meta_file}: missing key {e.args[0]!r}") from None
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{meta_file}: invalid value ({e})") from None

    @classmethod
    def load(cls, path: str | Path) -> GradingModel:
        p = Path(path)
        meta_file, policy_file = p / "grading.json", p / "policy.npz"
        try:
            meta = read_json_object(meta_file, CheckpointError)
            model = cls._built_from(meta, meta_file)
            load_state_npz(model.policy, policy_file, built_from="grading.json")
        except FileNotFoundError as e:
            raise CheckpointError(
                f"{p}: not a grading model ({Path(e.filename).name} missing; "
                "expected the model/ directory that `studio-align train grading` writes)"
            ) from None
        model.meta = meta
        return model


def copy_policy(policy: GradingPolicy) -> GradingPolicy:
    """A deep copy with its own buffers (`nnx.clone` shares arrays, which a trainer that
    donates its inputs would delete under the copy)."""
    graphdef, state = nnx.split(policy)
    return nnx.merge(graphdef, jax.tree.map(lambda x: jnp.array(x, copy=True), state))


@nnx.jit
def _mode(policy: GradingPolicy, feats: jax.Array, cond: jax.Array) -> jax.Array:
    return policy.mode(feats, cond)


def _json_default(v: Any) -> Any:
    if isinstance(v, np.generic | np.ndarray):
        return v.tolist()
    if isinstance(v, Path):
        return str(v)
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")
