"""Engine benchmark: training step, MFU, sampler decode throughput, compile time, tokenizer.

Prints one JSON object. Everything is measured in this run on this machine:

- `matmul_peak`: the best timed f32 `jnp.dot` rate over a few shapes (squares and the
  transformer's own GEMM shapes, `PEAK_SHAPES`), at the start and
  at the end of the run (the machine is shared); the higher is the MFU reference (the
  machine's achievable f32 matmul rate, not a datasheet number).
- `train`: the default router config (or `--preset`), AdamW, a jitted step with donated
  parameters and optimiser state, batch `--batch` x `--seq` tokens. Model FLOPs per token
  are counted analytically: 6 * (non-embedding params + tied output head V*D) for the
  matmuls, plus 12 * layers * heads * head_dim * seq for attention scores and values
  (full T x T, which is what the kernel computes), i.e. forward + backward.
- `decode`: the KV-cache sampler at batch 1 and batch `--decode-batch`, prompt 16 tokens,
  `--new-tokens` generated tokens (end id disabled so every row runs the full length);
  tokens/s counts generated tokens over the whole call (prefill included).
- `tokenizer`: byte-level BPE trained on the demo router requests, average tokens per
  request on a separate hand-written bilingual sample (`BILINGUAL_SAMPLE`).

Usage: `python bench/engine.py [--preset router] [--batch 32 --seq 64] [--steps 20]`
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from studio_align.generation.sampler import Sampler
from studio_align.models.config import ModelConfig
from studio_align.models.tokenizer import Tokenizer
from studio_align.models.transformer import Transformer

BILINGUAL_SAMPLE = {
    "zh": [
        "把这张图做成10秒的视频并配乐",
        "帮我给这段视频调一个电影感的色调",
        "根据这段描述生成一张海报：夏日海边的冰淇淋店",
        "把产品照片换成干净的白色背景，适合电商主图",
        "给这个动漫分镜配一段轻快的背景音乐",
        "用这张人像照片生成一段慢动作的短视频",
        "帮我把这段视频转成赛博朋克风格",
        "生成一张水墨风格的山水画，然后做成动态视频",
        "为新品口红拍一组高级感的产品图",
        "给这段旁白配上温柔的女声朗读",
        "把这张老照片修复一下，颜色调得暖一点",
        "做一个三格漫画分镜，讲小猫第一次看雪",
    ],
    "en": [
        "turn this picture into a 10 second video with music",
        "give this clip a warm cinematic colour grade",
        "make a poster of an ice cream shop by the sea in summer",
        "put the product photo on a clean white background for the store",
        "add some upbeat background music to this anime storyboard",
        "create a slow motion short video from this portrait",
        "restyle this video as cyberpunk with neon lights",
        "paint an ink wash landscape and then animate it",
        "shoot a premium product set for the new lipstick",
        "read this narration in a gentle female voice",
        "restore this old photo and make the colours warmer",
        "draw a three panel storyboard of a kitten seeing snow for the first time",
    ],
}


def _best_time(fn, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
    return best


PEAK_SHAPES = ((1024, 1024, 1024), (2048, 2048, 2048), (1024, 640, 3072), (2048, 256, 1024))


def matmul_peak(shapes: tuple[tuple[int, int, int], ...] = PEAK_SHAPES, reps: int = 6) -> dict:
    """The best f32 `jnp.dot` rate over `shapes` (m, k, n): squares and the transformer's own
    GEMM shapes, so a peak taken from one shape that XLA's CPU dot handles worse than the
    model's cannot put MFU above 1."""
    best: dict = {"flops": 0.0}
    f = jax.jit(jnp.dot)
    for m, k, n in shapes:
        a = jax.random.normal(jax.random.key(0), (m, k), jnp.float32)
        b = jax.random.normal(jax.random.key(1), (k, n), jnp.float32)
        jax.block_until_ready(f(a, b))
        t = _best_time(lambda a=a, b=b: f(a, b), reps)
        if 2 * m * k * n / t > best["flops"]:
            best = {"shape": [m, k, n], "seconds": t, "flops": 2 * m * k * n / t}
    return best


def model_flops_per_token(cfg: ModelConfig, seq: int) -> float:
    n_matmul = cfg.num_params(include_embedding=False) + cfg.vocab_size * cfg.d_model
    attn = 12 * cfg.num_layers * cfg.num_heads * cfg.head_dim * seq
    return 6 * n_matmul + attn


def pair_step_flops(cfg: ModelConfig, arrays: dict, pairs: int, *, reference: bool) -> float:
    """Forward + backward FLOPs of one DPO step over `pairs` pairs, counting the positions
    the step computes: one shared-prompt row per pair (`shared_tokens`) or both sequences,
    the vocabulary projection at the scored positions only (`shared_pred` or the
    completion windows), attention over the row. `reference` adds the reference's forward
    (a third of forward + backward)."""
    if "shared_tokens" in arrays:
        rows, width, proj = pairs, arrays["shared_tokens"].shape[1], arrays["shared_pred"].shape[1]
    else:
        rows, width = 2 * pairs, arrays["chosen_tokens"].shape[1]
        proj = arrays["chosen_window"].shape[1] if "chosen_window" in arrays else width
    body = cfg.num_params(include_embedding=False) * width + cfg.vocab_size * cfg.d_model * proj
    attn = 2 * cfg.num_layers * cfg.num_heads * cfg.head_dim * width * width
    flops = 6.0 * rows * (body + attn)
    return flops * 4 / 3 if reference else flops


def bench_train(cfg: ModelConfig, batch: int, seq: int, steps: int) -> dict:
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model, nnx.Param)
    tx = optax.adamw(3e-4, weight_decay=0.01)
    opt_state = tx.init(params)
    positions = jnp.broadcast_to(jnp.arange(seq), (batch, seq))

    @partial(jax.jit, donate_argnums=(0, 1))
    def step(params, opt_state, tokens):
        def loss_fn(p):
            logits = nnx.merge(graphdef, p)(tokens, positions)
            ce = optax.softmax_cross_entropy_with_integer_labels(logits[:, :-1], tokens[:, 1:])
            return ce.mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    rng = np.random.default_rng(0)
    data = [jnp.asarray(rng.integers(0, cfg.vocab_size, (batch, seq)), jnp.int32) for _ in range(4)]
    t0 = time.perf_counter()
    params, opt_state, loss = step(params, opt_state, data[0])
    jax.block_until_ready(loss)
    first = time.perf_counter() - t0
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        params, opt_state, loss = step(params, opt_state, data[i % 4])
        jax.block_until_ready(loss)
        times.append(time.perf_counter() - t0)
    med = float(np.median(times))
    tokens = batch * seq
    fpt = model_flops_per_token(cfg, seq)
    return {
        "batch": batch,
        "seq": seq,
        "params": cfg.num_params(),
        "step_seconds_median": med,
        "step_seconds_min": float(min(times)),
        "compile_seconds": first - med,
        "tokens_per_second": tokens / med,
        "model_flops_per_token": fpt,
        "achieved_flops": fpt * tokens / med,
        "final_loss": float(loss),
    }


def bench_decode(cfg: ModelConfig, batch: int, new_tokens: int, prompt_len: int = 16) -> dict:
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    sampler = Sampler(model, eos_id=cfg.vocab_size, pad_id=0)  # end id never drawn
    rng = np.random.default_rng(1)
    prompts = [rng.integers(4, cfg.vocab_size, prompt_len).tolist() for _ in range(batch)]

    def run(seed: int):
        return sampler.sample(prompts, max_new_tokens=new_tokens, temperature=1.0, seed=seed)

    t0 = time.perf_counter()
    out = run(0)
    first = time.perf_counter() - t0
    assert int(out.lengths.min()) == new_tokens
    times = []
    for s in range(1, 4):
        t0 = time.perf_counter()
        run(s)
        times.append(time.perf_counter() - t0)
    t = float(np.median(times))
    return {
        "batch": batch,
        "prompt_len": prompt_len,
        "new_tokens": new_tokens,
        "seconds": t,
        "compile_seconds": first - t,
        "tokens_per_second": batch * new_tokens / t,
        "ms_per_step": 1e3 * t / new_tokens,
    }


def bench_tokenizer(vocab_size: int = 2048) -> dict:
    from studio_align.catalog import default_catalog
    from studio_align.router.format import normalize_text, special_tokens
    from studio_align.simulate.router.requests import generate_examples

    texts = [normalize_text(e["request"]["text"]) for e in generate_examples(3000, seed=0)]
    tok = Tokenizer.train(texts, vocab_size, special_tokens(default_catalog()))
    out: dict = {"train_requests": len(texts), "vocab_size": tok.vocab_size}
    for lang, reqs in BILINGUAL_SAMPLE.items():
        norm = [normalize_text(r) for r in reqs]
        n_tok = [len(tok.encode(r)) for r in norm]
        out[lang] = {
            "requests": len(reqs),
            "avg_tokens": float(np.mean(n_tok)),
            "avg_chars": float(np.mean([len(r) for r in norm])),
            "avg_utf8_bytes": float(np.mean([len(r.encode()) for r in norm])),
        }
        out[lang]["chars_per_token"] = out[lang]["avg_chars"] / out[lang]["avg_tokens"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="router", choices=["tiny", "router", "gemma3_270m"])
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--decode-batch", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--skip", nargs="*", default=[], choices=["train", "decode", "tokenizer"])
    args = ap.parse_args()
    preset = getattr(ModelConfig, args.preset)
    cfg = preset() if args.preset == "gemma3_270m" else preset(args.vocab)
    res: dict = {
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "load_avg_1m_before": os.getloadavg()[0],
            "jax": jax.__version__,
            "backend": jax.default_backend(),
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
        },
        "config": cfg.model_dump(mode="json"),
    }
    peak = matmul_peak()
    if "train" not in args.skip:
        res["train"] = bench_train(cfg, args.batch, args.seq, args.steps)
    if "decode" not in args.skip:
        d1 = bench_decode(cfg, 1, args.new_tokens)
        dn = bench_decode(cfg, args.decode_batch, args.new_tokens)
        res["decode"] = {
            "batch_1": d1,
            f"batch_{args.decode_batch}": dn,
            "speedup": dn["tokens_per_second"] / d1["tokens_per_second"],
        }
    # Peak again at the end: the machine is shared, so bracket the run and take the
    # higher of the two as the reference (the conservative MFU).
    peak_end = matmul_peak()
    best = max(peak["flops"], peak_end["flops"])
    res["matmul_peak"] = {"start": peak, "end": peak_end, "reference_flops": best}
    if "train" in res:
        res["train"]["mfu"] = res["train"]["achieved_flops"] / best
        res["train"]["mfu_vs_start_peak"] = res["train"]["achieved_flops"] / peak["flops"]
    if "decode" in res:
        key = f"batch_{args.decode_batch}"
        flops_step = 2 * cfg.num_params() * args.decode_batch  # matmul FLOPs per decode step
        res["decode"]["roofline"] = {
            "note": "batch-N step is compute-bound: 2*params*N FLOPs at the reference peak",
            "min_ms_per_step": 1e3 * flops_step / best,
            "max_tokens_per_second": args.decode_batch * best / flops_step,
            "max_speedup_vs_measured_batch_1": args.decode_batch
            * best
            / flops_step
            / res["decode"]["batch_1"]["tokens_per_second"],
            "achieved_fraction_of_peak": flops_step
            / (res["decode"][key]["ms_per_step"] / 1e3)
            / best,
        }
    if "tokenizer" not in args.skip:
        res["tokenizer"] = bench_tokenizer()
    res["machine"]["load_avg_1m_after"] = os.getloadavg()[0]
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
