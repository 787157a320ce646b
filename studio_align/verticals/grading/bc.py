"""Behaviour cloning of the grading policy from retouch logs.

Each retouch event gives (source image, the creator's `after` parameters). BC maximises
the policy's Gaussian log-likelihood of `after` given the source's features (and the
request embedding, empty for retouches, which carry no request). Parameters missing from
a retouch are treated as 0 (the identity) for that event. The log-std is learnt too, so
the cloned policy's spread reflects how consistent the creator's retouches are: GRPO
starts exploring from there.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from studio_align.data.compile import InvalidLogError
from studio_align.data.reader import LogReader
from studio_align.data.schemas import RetouchEvent
from studio_align.errors import DataError
from studio_align.reward_models.color_stats import color_features
from studio_align.reward_models.images import as_float_array, load_image
from studio_align.verticals.grading.policy import GradingPolicy, request_features
from studio_align.verticals.grading.renderer import params_to_vector


@dataclass
class RetouchSet:
    sources: np.ndarray  # [N, S, S, 3] float32
    targets: np.ndarray  # [N, P]
    creators: list[str]
    paths: list[str]


def read_retouches(
    logs: list[str], *, size: int = 64, creator: str | None = None, quarantine: str | None = None
) -> RetouchSet:
    """Load retouch events (optionally of one creator) with their source images resized."""
    reader = LogReader(logs, quarantine=quarantine)
    srcs, tgts, who, paths = [], [], [], []
    for entry in reader:
        ev = entry.event
        if not isinstance(ev, RetouchEvent) or (creator is not None and ev.creator != creator):
            continue
        path = entry.image_path(ev.image)
        try:
            tgts.append(params_to_vector(ev.after))
        except KeyError as e:
            raise DataError(f"{entry.path}:{entry.line}: {e.args[0]}") from None
        im = load_image(path, max_side=4 * size).resize((size, size))
        srcs.append(as_float_array(im))
        who.append(ev.creator)
        paths.append(path)
    if reader.summary.invalid_count and quarantine is None:
        raise InvalidLogError(reader.summary)
    if not srcs:
        raise DataError(
            f"{', '.join(map(str, logs))}: no retouch events"
            + (f" for creator {creator!r}" if creator else "")
        )
    return RetouchSet(np.stack(srcs), np.clip(np.stack(tgts), -1, 1), who, paths)


def behaviour_clone(
    policy: GradingPolicy,
    data: RetouchSet,
    *,
    steps: int = 300,
    learning_rate: float = 3e-3,
    weight_decay: float = 1e-4,
    seed: int = 0,
) -> list[float]:
    """Fit `policy` to the retouches in place; returns the NLL curve."""
    feats = color_features(data.sources)
    policy.set_input_stats(feats)
    req = request_features([""] * len(feats), policy.request_dim)
    f, r, a = jnp.asarray(feats), jnp.asarray(req), jnp.asarray(data.targets, jnp.float32)
    opt = nnx.Optimizer(
        policy, optax.adamw(learning_rate, weight_decay=weight_decay), wrt=nnx.Param
    )

    @nnx.jit
    def step(policy: GradingPolicy, opt: nnx.Optimizer) -> jax.Array:
        def loss_fn(p: GradingPolicy) -> jax.Array:
            return -jnp.mean(jnp.sum(p.log_probs(f, r, a), axis=-1))

        loss, grads = nnx.value_and_grad(loss_fn)(policy)
        opt.update(policy, grads)
        return loss

    del seed
    return [float(step(policy, opt)) for _ in range(steps)]
