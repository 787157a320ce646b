"""Bytes of parameters plus optimizer state per device, at Gemma 3 270M dimensions, on an
8-device mesh: replicated, tensor parallelism alone, FSDP, and FSDP with tensor parallelism.

The layouts are the trainer's own: `TrainState.create` (the engine's `Transformer`,
random weights, `ModelConfig.gemma3_270m()`, vocabulary 262,144, AdamW) places the
parameters by their logical axes through `models/sharding.py:LOGICAL_RULES` and the Adam
moments like their parameters. For each layout this prints, per device, the bytes of
the arrays it holds (parameters, optimizer state, their sum) and the total over devices.

`--materialize` builds the state for real on the 8 forced CPU devices and sums the
bytes of each device's addressable shards (`jax.Array.addressable_shards`); layouts whose
total would not fit in `--max-gib` of host memory (replicated needs 8 full copies: about
26 GiB in float32) are instead computed from the same shardings without allocating
(`NamedSharding.shard_shape` of each leaf of `jax.eval_shape`), which the materialised
layouts check: both ways give the same bytes where both run.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu \
      nice -n 10 .venv/bin/python bench/sharding_memory.py --materialize
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from typing import Any

import jax
import numpy as np
from flax import nnx

from studio_align.models.config import ModelConfig
from studio_align.models.sharding import MeshConfig, make_mesh, opt_state_sharding, state_sharding
from studio_align.models.transformer import Transformer
from studio_align.training.optim import OptimConfig, make_optimizer
from studio_align.training.state import TrainState

LAYOUTS = {
    "replicated": MeshConfig(data=8, fsdp=1, model=1, min_shard_size=0),
    "tp": MeshConfig(data=4, fsdp=1, model=2, min_shard_size=0),
    "fsdp": MeshConfig(data=1, fsdp=8, model=1, min_shard_size=0),
    "fsdp+tp": MeshConfig(data=1, fsdp=4, model=2, min_shard_size=0),
}
GIB = float(1 << 30)


def _abstract(cfg: MeshConfig, model_cfg: ModelConfig) -> dict[str, float]:
    """Per-device bytes from the shardings alone (nothing allocated)."""
    mesh = make_mesh(cfg)
    model = nnx.eval_shape(lambda: Transformer(model_cfg, rngs=nnx.Rngs(0)))
    params = nnx.state(model, nnx.Param)
    tx, _ = make_optimizer(OptimConfig(), 10)
    p_shard = state_sharding(mesh, params, cfg)
    opt = jax.eval_shape(tx.init, params)
    o_shard = opt_state_sharding(mesh, tx, opt, p_shard)

    def per_device(tree: Any, shardings: Any) -> float:
        leaves = jax.tree.leaves(tree)
        shards = jax.tree.leaves(shardings, is_leaf=lambda x: hasattr(x, "shard_shape"))
        assert len(leaves) == len(shards)
        return float(
            sum(
                int(np.prod(s.shard_shape(x.shape))) * np.dtype(x.dtype).itemsize
                for x, s in zip(leaves, shards, strict=True)
            )
        )

    return {"params": per_device(params, p_shard), "opt_state": per_device(opt, o_shard)}


def _measured(cfg: MeshConfig, model_cfg: ModelConfig) -> dict[str, Any]:
    """Per-device bytes of the arrays `TrainState.create` really placed."""
    model = Transformer(model_cfg, rngs=nnx.Rngs(0))
    state = TrainState.create(model, OptimConfig(), 10, cfg)
    del model
    out: dict[str, Any] = {}
    for name, tree in (("params", state.params), ("opt_state", state.opt_state)):
        per: dict[Any, int] = defaultdict(int)
        for leaf in jax.tree.leaves(tree):
            for shard in leaf.addressable_shards:
                per[shard.device] += shard.data.nbytes
        values = sorted(per.values())
        out[name] = float(values[-1])
        out[f"{name}_spread"] = values[-1] - values[0]  # 0: every device holds the same
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--materialize", action="store_true", help="place the state for real")
    ap.add_argument("--max-gib", type=float, default=8.0, help="largest total to materialise")
    args = ap.parse_args()
    if jax.device_count() != 8:
        raise SystemExit("needs 8 devices: XLA_FLAGS=--xla_force_host_platform_device_count=8")
    model_cfg = ModelConfig.gemma3_270m()
    rows = {}
    for name, cfg in LAYOUTS.items():
        t0 = time.perf_counter()
        row: dict[str, Any] = {"mesh": cfg.model_dump(exclude={"min_shard_size"})}
        calc = _abstract(cfg, model_cfg)
        row["computed"] = calc
        total = 8 * (calc["params"] + calc["opt_state"]) / GIB
        if args.materialize and total <= args.max_gib:
            row["measured"] = _measured(cfg, model_cfg)
            assert row["measured"]["params"] == calc["params"], (name, row)
            assert row["measured"]["opt_state"] == calc["opt_state"], (name, row)
        src = row.get("measured", calc)
        row["per_device_gib"] = {
            "params": src["params"] / GIB,
            "opt_state": src["opt_state"] / GIB,
            "total": (src["params"] + src["opt_state"]) / GIB,
        }
        row["all_devices_gib"] = total
        row["seconds"] = round(time.perf_counter() - t0, 1)
        rows[name] = row
    base = rows["replicated"]["per_device_gib"]["total"]
    for row in rows.values():
        row["vs_replicated"] = row["per_device_gib"]["total"] / base
    print(
        json.dumps(
            {
                "model": "gemma3_270m (random weights, vocab 262144, float32, AdamW)",
                "params": sum(
                    int(np.prod(x.shape))
                    for x in jax.tree.leaves(
                        nnx.state(
                            nnx.eval_shape(lambda: Transformer(model_cfg, rngs=nnx.Rngs(0))),
                            nnx.Param,
                        )
                    )
                ),
                "layouts": rows,
                "load_average": os.getloadavg(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
