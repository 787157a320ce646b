"""Bradley-Terry preference heads over image embeddings (flax NNX, optax).

score(x, creator) = population(x) + delta[creator] . z(x)

- `population` is a linear layer or a one-hidden-layer MLP over standardised features
  z(x) (the mean/std are fitted on the training images and stored with the model);
- `delta` is an optional per-creator linear correction, initialised at zero and pulled
  towards zero by an L2 penalty (`creator_l2`), so a creator with few selections scores
  like the population and one with many departs from it as far as their data supports.
  Unknown creators (index -1) get the population score.
- with `ratings=True`, a learned scalar `reference`: the score of a "neutral" image that
  unpaired ratings (thumbs up/down) are compared against by the pointwise term
  (`algorithms.pointwise`: Bradley-Terry or KTO-style against the reference). Selections
  and ratings then train one head on one scale: `loss = BT(pairs) + w * pointwise(ratings)`.

Training (`fit.py`) runs through the shared `training.train_loop`. The model
is saved as `weights.npz` + `meta.json` in a directory; `meta.json` carries the
architecture, the encoder (name, options, identity), the held-out figures and the
quality-gate verdict, which `load_preference_model(..., require_gate=True)` enforces.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.errors import CheckpointError, QualityGateError
from studio_align.models.npz_state import load_state_npz, save_state_npz
from studio_align.textfiles import read_json_object


class Stat(nnx.Variable):
    """Non-trainable feature statistics (mean, std)."""


class PreferenceModel(nnx.Module):
    def __init__(
        self,
        dim: int,
        *,
        hidden: int = 64,
        creators: list[str] | None = None,
        ratings: bool = False,
        rngs: nnx.Rngs,
    ) -> None:
        self.dim = dim
        self.ratings = ratings
        if ratings:
            self.reference = nnx.Param(jnp.zeros((), jnp.float32))
        self.hidden = hidden
        self.creators = list(creators or [])
        self.mean = Stat(jnp.zeros((dim,), jnp.float32))
        self.std = Stat(jnp.ones((dim,), jnp.float32))
        if hidden > 0:
            self.l1 = nnx.Linear(dim, hidden, rngs=rngs)
            self.l2 = nnx.Linear(hidden, 1, rngs=rngs)
        else:
            self.l1 = nnx.Linear(dim, 1, rngs=rngs)
        n_c = max(1, len(self.creators))
        self.delta = nnx.Param(jnp.zeros((n_c, dim), jnp.float32))

    def standardise(self, x: jax.Array) -> jax.Array:
        return (x - self.mean.value) / self.std.value

    def population(self, z: jax.Array) -> jax.Array:
        if self.hidden > 0:
            return self.l2(nnx.gelu(self.l1(z)))[..., 0]
        return self.l1(z)[..., 0]

    def __call__(self, x: jax.Array, creator_idx: jax.Array | None = None) -> jax.Array:
        z = self.standardise(x)
        s = self.population(z)
        if creator_idx is None or not self.creators:
            return s
        known = creator_idx >= 0
        d = self.delta.value[jnp.clip(creator_idx, 0, None)]
        return s + jnp.where(known, jnp.sum(d * z, axis=-1), 0.0)

    def creator_index(self, creators: list[str | None] | None, n: int) -> np.ndarray:
        if creators is None:
            return np.full((n,), -1, np.int32)
        table = {c: i for i, c in enumerate(self.creators)}
        return np.array([table.get(c, -1) if c is not None else -1 for c in creators], np.int32)


@dataclass
class PairData:
    """Pairs as indices into a feature matrix: features[chosen[i]] ≻ features[rejected[i]].

    `creator` holds each pair's index into the model's creator table (-1 = unknown);
    `creators` and `sessions` hold each pair's creator and session names (for reports).
    """

    features: np.ndarray
    chosen: np.ndarray
    rejected: np.ndarray
    creator: np.ndarray
    sessions: list[str] = field(default_factory=list)
    creators: list[str] = field(default_factory=list)
    # unpaired ratings: feature rows, thumbs-up flags, creator indices (-1 = unknown)
    rated: np.ndarray = field(default_factory=lambda: np.zeros((0,), np.int32))
    rated_up: np.ndarray = field(default_factory=lambda: np.zeros((0,), bool))
    rated_creator: np.ndarray = field(default_factory=lambda: np.zeros((0,), np.int32))
    rated_creators: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.chosen.shape[0])


def rating_accuracy(model: PreferenceModel, data: PairData) -> dict[str, Any]:
    """Held-out ratings: how often `score > reference` agrees with thumbs up, by creator."""
    if not model.ratings or len(data.rated) == 0:
        return {"ratings": 0, "accuracy": float("nan"), "by_creator": {}}
    s = np.asarray(model(jnp.asarray(data.features[data.rated]), jnp.asarray(data.rated_creator)))
    right = (s > float(model.reference.value)) == data.rated_up
    by_c: dict[str, list[bool]] = {}
    for name, ok in zip(data.rated_creators or ["?"] * len(right), right, strict=True):
        by_c.setdefault(name, []).append(bool(ok))
    return {
        "ratings": len(right),
        "accuracy": float(right.mean()),
        "by_creator": {
            c: {"ratings": len(v), "accuracy": float(np.mean(v))} for c, v in by_c.items()
        },
    }


def pairwise_accuracy(model: PreferenceModel, data: PairData) -> dict[str, Any]:
    """Held-out figures: overall accuracy and accuracy by creator and by session."""
    if len(data) == 0:
        return {"pairs": 0, "accuracy": float("nan"), "by_creator": {}, "by_session": {}}
    k = data.creator
    sc = np.asarray(model(jnp.asarray(data.features[data.chosen]), jnp.asarray(k)))
    sr = np.asarray(model(jnp.asarray(data.features[data.rejected]), jnp.asarray(k)))
    right = sc > sr
    out: dict[str, Any] = {"pairs": len(data), "accuracy": float(right.mean())}
    by_c: dict[str, list[bool]] = {}
    for i, ci in enumerate(k):
        name = data.creators[i] if data.creators else str(ci)
        by_c.setdefault(name, []).append(bool(right[i]))
    out["by_creator"] = {
        c: {"pairs": len(v), "accuracy": float(np.mean(v))} for c, v in by_c.items()
    }
    if data.sessions:
        by_s: dict[str, list[bool]] = {}
        for i, s in enumerate(data.sessions):
            by_s.setdefault(s, []).append(bool(right[i]))
        accs = [float(np.mean(v)) for v in by_s.values()]
        out["by_session"] = {
            "sessions": len(by_s),
            "mean": float(np.mean(accs)),
            "min": float(np.min(accs)),
            "max": float(np.max(accs)),
        }
    return out


def check_quality_gate(accuracy: float, floor: float, *, what: str = "reward model") -> None:
    """Refuse a reward model whose held-out pairwise accuracy is below `floor`."""
    if not np.isfinite(accuracy) or accuracy < floor:
        raise QualityGateError(
            f"{what}: held-out pairwise accuracy {accuracy:.3f} is below the quality floor "
            f"{floor:.3f}; refused for tuning (more selections, another encoder, or lower "
            "gate.min_heldout_accuracy)"
        )


def save_preference_model(model: PreferenceModel, path: str | Path, meta: dict[str, Any]) -> Path:
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    save_state_npz(model, out / "weights.npz")
    full = {
        "format": "studio-align/preference-model",
        "version": 1,
        "dim": model.dim,
        "hidden": model.hidden,
        "creators": model.creators,
        "ratings": model.ratings,
        **meta,
    }
    (out / "meta.json").write_text(json.dumps(full, indent=2, sort_keys=True))
    return out


def _built_from(meta: dict[str, Any], meta_file: Path) -> PreferenceModel:
    """The untrained model `meta.json` describes."""
    if meta.get("format") != "studio-align/preference-model":
        raise CheckpointError(f"{meta_file}: not a studio-align preference model")
    try:
        return PreferenceModel(
            int(meta["dim"]),
            hidden=int(meta["hidden"]),
            creators=[str(c) for c in meta["creators"]],
            ratings=bool(meta.get("ratings", False)),
            rngs=nnx.Rngs(0),
        )
    except KeyError as e:
        raise CheckpointError(f"{meta_file}: missing key {e.args[0]!r}") from None
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{meta_file}: invalid value ({e})") from None


def load_preference_model(
    path: str | Path, *, require_gate: bool = False
) -> tuple[PreferenceModel, dict[str, Any]]:
    """Load a saved model; with `require_gate` a model that failed its gate is refused."""
    p = Path(path)
    meta_file, weights_file = p / "meta.json", p / "weights.npz"
    try:
        meta = read_json_object(meta_file, CheckpointError)
        model = _built_from(meta, meta_file)
        load_state_npz(model, weights_file, built_from="meta.json")
    except FileNotFoundError as e:
        raise CheckpointError(
            f"{p}: not a preference model directory ({e.filename} missing)"
        ) from None
    if require_gate:
        gate = meta.get("gate") or {}
        if not gate.get("passed", False):
            check_quality_gate(
                float(gate.get("accuracy", float("nan"))),
                float(gate.get("floor", 1.0)),
                what=f"reward model {p}",
            )
    return model, meta
