"""Where the DPO step's time goes at the peer harness's dims: forward, backward, one layer.

    python bench/dpo_step_split.py [--dims ../shared/peers/dims.json] [--repeats 20]

Prints one JSON line: the milliseconds of the shared-prompt DPO loss's forward, its
`value_and_grad`, and the whole step with AdamW (no donation, the same 16 pairs each
call), then the same forward/gradient split for one decoder layer on the step's
activation shape and for its MLP and attention alone, with each part's GFLOP/s. Then what
the compiled step is made of (fusions by kind, dots outside fusions, remat barriers, the
logits' dtype), and the matmul share: the step's matmul FLOPs at the rate one GEMM of the
MLP's shape runs alone, over the step's time. Why: the step's MFU counts matmuls only, so
this says whether a gap to the matmul peak is in the matmuls (their rate at these shapes)
or around them (the backward's other work). Run it alone on the machine; figures under
load mean nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx

sys.path.insert(0, str(Path(__file__).parent))
from compare import dims_path, dpo_pairs, model
from engine import pair_step_flops

from studio_align.training.dpo import DPOConfig, make_dpo_loss


def ms(fn: Callable[[], Any], repeats: int) -> float:
    """Mean milliseconds per call after two warm calls (compile, first run)."""
    for _ in range(2):
        jax.block_until_ready(fn())
    t0 = time.perf_counter()
    for _ in range(repeats):
        out = fn()
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / repeats * 1e3


def split(module: nnx.Module, call: Callable, x: jax.Array, repeats: int) -> dict[str, float]:
    """Forward and gradient (parameters and input) milliseconds of `call(module, x)`."""
    gd, params, rest = nnx.split(module, nnx.Param, ...)  # type: ignore[misc]

    def f(p: Any, x: jax.Array) -> jax.Array:
        return call(nnx.merge(gd, p, rest), x)

    fwd = jax.jit(f)
    grad = jax.jit(jax.grad(lambda p, x: jnp.sum(f(p, x) ** 2), argnums=(0, 1)))
    return {"fwd_ms": ms(lambda: fwd(params, x), repeats),
            "grad_ms": ms(lambda: grad(params, x), repeats)}  # fmt: skip


def hlo_summary(text: str, vocab: int) -> dict[str, Any]:
    """What the compiled step is made of: fusions by kind, dots left outside fusions,
    optimisation barriers (where `jax.checkpoint` rematerialises) and the dtypes of every
    array with the vocabulary as its last dimension (the logits and their gradient)."""
    kinds: dict[str, int] = {}
    for kind in re.findall(r"\bfusion\(.*?kind=(k\w+)", text):
        kinds[kind] = kinds.get(kind, 0) + 1
    entry = text[text.find("ENTRY") :]
    logits = sorted(set(re.findall(rf"\b(\w+)\[[\d,]*,{vocab}\]", text)))
    return {
        "fusions": kinds,
        "dots_outside_fusions": len(re.findall(r"= \w+\[[\d,]*\]\{[\d,]*\} dot\(", entry)),
        "opt_barriers": text.count("opt-barrier("),
        "logits_dtypes": logits,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dims", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    dims = json.loads((args.dims or dims_path()).read_text())
    b, p_len, c_len = dims["dpo"]["pairs"], dims["prompt_len"], dims["completion_len"]
    batch = {k: jnp.asarray(v) for k, v in dpo_pairs(dims, steps=1).items()}  # one step's pairs
    batch |= {"ref_chosen_logps": jnp.zeros((b,)), "ref_rejected_logps": jnp.zeros((b,))}
    policy = model(dims)
    loss_fn = make_dpo_loss(DPOConfig(loss_type="sigmoid", beta=dims["dpo"]["beta"]))
    gd, params, rest = nnx.split(policy, nnx.Param, ...)  # type: ignore[misc]
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(dims["lr"], weight_decay=0.0))
    opt = tx.init(params)

    def loss(p: Any) -> jax.Array:
        return loss_fn(nnx.merge(gd, p, rest), batch)[0]

    @jax.jit
    def step(p: Any, o: Any) -> tuple:
        value, g = jax.value_and_grad(loss)(p)
        u, o = tx.update(g, o, p)
        return optax.apply_updates(p, u), o, value

    fwd, vg = jax.jit(loss), jax.jit(jax.value_and_grad(loss))
    out: dict[str, Any] = {
        "dims": str(args.dims or dims_path()),
        "loss_fwd_ms": ms(lambda: fwd(params), args.repeats),
        "value_and_grad_ms": ms(lambda: vg(params), args.repeats),
        "step_ms": ms(lambda: step(params, opt), args.repeats),
        "hlo": hlo_summary(
            step.lower(params, opt).compile().as_text() or "", policy.cfg.vocab_size
        ),
    }
    # the step's matmul FLOPs at the rate one GEMM of the MLP's shape runs alone: the share
    # of the step the matmuls would take, the rest being everything around them
    rows, d_model, d_ff = b * (p_len + 2 * c_len), policy.cfg.d_model, policy.cfg.d_ff
    a = jax.random.normal(jax.random.key(1), (rows, d_model))
    w = jax.random.normal(jax.random.key(2), (d_model, d_ff))
    gemm = jax.jit(lambda a, w: a @ w)
    out["gemm_gflops"] = 2 * rows * d_model * d_ff / ms(lambda: gemm(a, w), args.repeats) / 1e6
    step_gflop = pair_step_flops(policy.cfg, batch, b, reference=False) / 1e9
    out["step_matmul_gflop"] = step_gflop
    out["matmul_share"] = step_gflop / out["gemm_gflops"] / (out["step_ms"] / 1e3)
    # one layer on the step's activation shape: [pairs, prompt + 2 completions, d_model]
    t, d, f = p_len + 2 * c_len, policy.cfg.d_model, policy.cfg.d_ff
    x = jax.random.normal(jax.random.key(0), (b, t, d))
    pos = jnp.broadcast_to(jnp.arange(t), (b, t))
    idx = jnp.arange(t)
    masks = policy._masks(jnp.broadcast_to((idx[None] <= idx[:, None])[None], (b, t, t)), pos, pos)
    ropes = policy._ropes(pos)
    layer = policy.layers[0]
    local = layer.is_local
    parts = {
        "layer": (layer, lambda m, x: m(x, ropes[local], masks[local])[0]),
        "mlp": (layer.mlp, lambda m, x: m(x)),
        "attention": (layer.self_attn, lambda m, x: m(x, ropes[local], masks[local])[0]),
    }
    cfg = policy.cfg
    proj = (
        d * (cfg.num_heads + 2 * cfg.num_kv_heads) * cfg.head_dim + cfg.num_heads * cfg.head_dim * d
    )
    flops = {"mlp": 2 * b * t * 3 * d * f, "attention": 2 * b * t * proj}
    flops["layer"] = flops["mlp"] + flops["attention"]  # matmuls of the projections only
    for name, (module, call) in parts.items():
        s = split(module, call, x, args.repeats)
        s["fwd_gflops"] = flops[name] / s["fwd_ms"] / 1e6
        s["grad_gflops"] = 2 * flops[name] / (s["grad_ms"] - s["fwd_ms"]) / 1e6
        out[name] = s
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
