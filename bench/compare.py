"""studio-align's DPO and GRPO at the peer harness's dims, printing the harness's JSON lines.

    python bench/compare.py dpo            # cached reference (the default path)
    python bench/compare.py dpo_refstep    # reference forward inside every step (as TRL/Tunix)
    python bench/compare.py grpo           # synchronous rollout
    python bench/compare.py grpo_async     # overlapped rollout (max_staleness 1)
    python bench/compare.py all [--dims ../shared/peers/dims.json]
    python bench/compare.py dpo --grad-accum 2   # the same 16 pairs per update, in 2 micro-batches
    PEER_DIMS=dims_large python bench/compare.py all    # the harness's larger model

The sizes (model, prompt/completion lengths, batches, steps, lr, betas, seed) come from the
peer harness's dims file: `--dims PATH`, else `PEER_DIMS` read as the harness reads it (a
name beside its `common.py`, `dims` or `dims_large`, or a path), else its `dims.json`; and the data are drawn with the same generator calls as its `common.py`
(`dpo_batches`, `grpo_prompts`), so the lines can be put beside TRL's and Tunix's. This
file only needs studio-align: it rebuilds the harness's few helpers (data, word map,
even-fraction reward, step clock) instead of importing them.

Fields are the harness's (`pairs_per_s` / `completions_per_s`, `step_s` over the steps
after `warmup_steps`, `spread_s`, the GRPO split), plus:
- DPO `cached`: `precompute_s` (cold: digest, compile, all pairs, cache write) and
  `precompute_warm_s` (compiled, no cache), and the whole-run throughput counting the
  precompute over one and three epochs of the dataset (`epoch1_pairs_per_s`,
  `epoch3_pairs_per_s`, warm precompute; `_cold` with the cold one).
- DPO `grad_accum`: the micro-batches each step's pairs were split into (`--grad-accum`,
  default 1 as the peers run; the update is the same).
- DPO `mfu`: the FLOPs the step computes (`bench/engine.py`'s `pair_step_flops`: forward
  + backward of one shared-prompt row per pair, the vocabulary projection at the scored
  positions only, attention over the row; the reference forward, a third of that, added
  for `refstep`) over the step time, as a fraction of this machine's f32 matmul peak
  measured just before and after the run (the higher, best over a few GEMM shapes).
  `dense_mfu` counts instead what a plain implementation computes for the same pairs
  (`model_flops_per_token` for both 64-token sequences of every pair): it exceeds `mfu`
  by what prefix sharing and the completion-only projection save, and can exceed 1.
- GRPO: `rollout_s` (the policy's `sample`), `ref_s`, `collect_s` (rollout + rewards),
  `experience_s` = collect + ref, `update_s` = `step_s - experience_s` in sync mode; in
  async mode experience overlaps the update, so `wait_s` (time the step waited for its
  rollout) is what is not hidden.
Step ends are stamped when `GRPOStep.step` returns (the loop, logging every step, then
fetches its metrics before the next one starts) and, for DPO, by the metrics hook with `log_every = 1`, exactly as the harness does.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT.parent / "shared" / "peers"


def dims_path(env: dict[str, str] | None = None) -> Path:
    """The dims file `PEER_DIMS` names, as the harness's `common.py` resolves it."""
    name = (os.environ if env is None else env).get("PEER_DIMS", "dims")
    if os.path.sep in name:
        return Path(name)
    return PEERS / (name.removesuffix(".json") + ".json")


PAD, EOS, FIRST_WORD = 0, 1, 4
SPECIAL = ("<pad>", "<eos>", "<unk>", "<unused>")


class Clock:
    """Wall-clock stamp per finished step (first wins), as the harness's StepClock."""

    def __init__(self, warmup: int):
        self.warmup, self.stamps = warmup, {}  # type: ignore[var-annotated]

    def tick(self, step: int) -> None:
        self.stamps.setdefault(int(step), time.perf_counter())

    def step_s(self) -> float:
        n = max(self.stamps)
        return (self.stamps[n] - self.stamps[self.warmup]) / (n - self.warmup)

    def intervals(self) -> list[float]:
        t = [self.stamps[k] for k in sorted(self.stamps) if k >= self.warmup]
        return [round(b - a, 3) for a, b in itertools.pairwise(t)]

    def spread(self) -> list[float]:
        d = self.intervals()
        return [min(d), max(d)]


def model(dims: dict) -> Any:
    from flax import nnx

    from studio_align.models.config import ModelConfig
    from studio_align.models.transformer import Transformer

    m = dims["model"]
    cfg = ModelConfig(
        vocab_size=m["vocab_size"], d_model=m["hidden_size"], num_layers=m["num_layers"],
        num_heads=m["num_heads"], num_kv_heads=m["num_kv_heads"], head_dim=m["head_dim"],
        d_ff=m["mlp_dim"], query_pre_attn_scalar=m["head_dim"], rope_theta=m["rope_global_base"],
        rope_local_base_freq=m["rope_local_base"], sliding_window=m["sliding_window"],
        sliding_window_pattern=6, max_seq_len=1024, dtype="float32", param_dtype="float32",
    )  # fmt: skip
    return Transformer(cfg, rngs=nnx.Rngs(dims["seed"]))


def _ids(rng: np.random.Generator, vocab: int, *shape: int) -> np.ndarray:
    return rng.integers(FIRST_WORD, vocab, size=shape)


def dpo_pairs(dims: dict, steps: int) -> dict[str, np.ndarray]:
    """The harness's DPO pairs for `steps` steps (`common.dpo_batches`, call for call),
    packed by `pack_pairs` with the shared-prompt layout."""
    from studio_align.training.packing import pack_pairs

    b, p_len, c_len = dims["dpo"]["pairs"], dims["prompt_len"], dims["completion_len"]
    vocab = dims["model"]["vocab_size"]
    rng = np.random.default_rng(dims["seed"])
    prompts, chosen, rejected = [], [], []
    for _ in range(steps):
        c, r = _ids(rng, vocab, b, c_len), _ids(rng, vocab, b, c_len)
        c[:, -1] = r[:, -1] = EOS
        prompts += _ids(rng, vocab, b, p_len).tolist()
        chosen += c.tolist()
        rejected += r.tolist()
    return pack_pairs(prompts, chosen, rejected, pad_id=PAD)


def words(ids: list[int]) -> str:
    return " ".join(SPECIAL[i] if i < FIRST_WORD else f"t{i}" for i in ids)


def even_fraction(texts: list[str]) -> list[float]:
    out = []
    for c in texts:
        ids = [int(w[1:]) for w in c.split() if w[:1] == "t" and w[1:].isdigit()]
        out.append(sum(i % 2 == 0 for i in ids) / max(len(ids), 1))
    return out


def info(dims: dict) -> dict[str, Any]:
    """Versions, the studio-align source that ran (it may be another tree: bench/ab.py)."""
    import flax
    import jax

    import studio_align

    source = Path(studio_align.__file__).resolve().parents[1]
    commit = subprocess.run(
        ["git", "-C", str(source), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "source": str(source),
        "commit": commit or None,
        "jax": jax.__version__,
        "flax": flax.__version__,
        "devices": jax.device_count(),
        "dims": dims.get("_name"),
        "load_1m": round(os.getloadavg()[0], 2),
    }


def report(algo: str, step_s: float, per_step: int, unit: str, **extra: Any) -> None:
    line = {"lib": "studio-align", "algo": algo, unit: round(per_step / step_s, 2),
            "step_s": round(step_s, 4), "version": None}  # fmt: skip
    line.update({k: round(v, 4) if isinstance(v, float) else v for k, v in extra.items()})
    print(json.dumps(line), flush=True)


def run_dpo(dims: dict, variant: str) -> None:
    import jax
    from engine import matmul_peak, model_flops_per_token, pair_step_flops  # bench/engine.py
    from flax import nnx

    from studio_align.plugins import get_host
    from studio_align.training.batches import ArrayBatches
    from studio_align.training.checkpoint import CheckpointConfig
    from studio_align.training.dpo import DPOConfig, make_dpo_loss, pair_logps, reference_logps
    from studio_align.training.loop import TrainConfig, TrainRunConfig, train_loop
    from studio_align.training.optim import OptimConfig
    from studio_align.training.supervised import supervised

    steps, b = dims["warmup_steps"] + dims["timed_steps"], dims["dpo"]["pairs"]
    p_len, c_len = dims["prompt_len"], dims["completion_len"]
    arrays = dpo_pairs(dims, steps)
    tmp = Path(tempfile.mkdtemp(prefix="sa-compare-dpo-"))
    dcfg = DPOConfig(loss_type="sigmoid", beta=dims["dpo"]["beta"])
    policy, ref = model(dims), model(dims)
    clock = Clock(dims["warmup_steps"])
    peak_before = matmul_peak()["flops"]

    class Hook:
        def studio_align_on_metrics(self, run: Any, step: int, metrics: Any) -> None:
            clock.tick(step)

    get_host().register(Hook(), name="compare-step-clock")
    run = TrainRunConfig(
        run_dir=tmp / "run",
        train=TrainConfig(
            steps=steps,
            batch_size=b,
            log_every=1,
            progress=False,
            seed=dims["seed"],
            grad_accum=dims.get("_grad_accum", 1),
        ),
        optim=OptimConfig(
            name="adamw",
            learning_rate=dims["lr"],
            decay="constant",
            weight_decay=0.0,
            clip_grad_norm=1.0,
        ),
        checkpoint=CheckpointConfig(every=0),
    )
    extra: dict[str, Any] = {"grad_accum": run.train.grad_accum}
    if variant == "cached":
        t0 = time.perf_counter()
        ref_lp, _ = reference_logps(
            ref, arrays, batch_size=dcfg.ref_batch_size, cache_dir=tmp / "ref_cache"
        )
        extra["precompute_s"] = time.perf_counter() - t0
        batches = ArrayBatches({**arrays, **ref_lp}, b, shuffle=False)
        res = train_loop(policy, run, supervised(make_dpo_loss(dcfg), batches), name="dpo")
        t0 = time.perf_counter()
        reference_logps(ref, arrays, batch_size=dcfg.ref_batch_size, cache_dir=None)
        extra["precompute_warm_s"] = time.perf_counter() - t0
    else:
        dpo = make_dpo_loss(dcfg)

        class Both(nnx.Module):
            def __init__(self, policy: Any, reference: Any):
                self.policy, self.reference = policy, reference

        def loss_fn(m: Any, batch: Any) -> Any:
            r = jax.lax.stop_gradient(pair_logps(m.reference, batch))
            return dpo(m.policy, {**batch, "ref_chosen_logps": r["chosen_logps"],
                                  "ref_rejected_logps": r["rejected_logps"]})  # fmt: skip

        wrt = nnx.All(nnx.Param, nnx.PathContains("policy"))
        batches = ArrayBatches(arrays, b, shuffle=False)  # with pack_pairs' layout
        res = train_loop(Both(policy, ref), run, supervised(loss_fn, batches), wrt=wrt, name="dpo")
    step_s = clock.step_s()
    peak = max(peak_before, matmul_peak()["flops"])
    seq, ref_fwd = p_len + c_len, 4 / 3 if variant != "cached" else 1.0
    dense = model_flops_per_token(policy.cfg, seq) * 2 * b * seq * ref_fwd
    step_flops = pair_step_flops(policy.cfg, arrays, b, reference=variant != "cached")
    extra |= {"model_gflop_per_step": step_flops / 1e9, "matmul_peak_gflops": peak / 1e9,
              "mfu": step_flops / step_s / peak,
              "dense_gflop_per_step": dense / 1e9, "dense_mfu": dense / step_s / peak}  # fmt: skip
    if variant == "cached":
        n = steps * b
        for epochs in (1, 3):
            train_s = epochs * (n // b) * step_s
            extra[f"epoch{epochs}_pairs_per_s"] = (
                epochs * n / (extra["precompute_warm_s"] + train_s)
            )
            extra[f"epoch{epochs}_pairs_per_s_cold"] = (
                epochs * n / (extra["precompute_s"] + train_s)
            )
    report("dpo", step_s, b, "pairs_per_s", variant=variant, steps_timed=max(clock.stamps) - clock.warmup,
           spread_s=clock.spread(), intervals_s=clock.intervals(), compiles=res.compiles, final_loss=res.metrics["loss"],
           **extra, **info(dims))  # fmt: skip


def run_grpo(dims: dict, overlapped: bool) -> None:
    import jax

    from studio_align.generation.sampler import bucket_prompt
    from studio_align.training.checkpoint import CheckpointConfig
    from studio_align.training.grpo import GRPOConfig, GRPOStep, plugin_reward_fn
    from studio_align.training.grpo_rollout import Rollouts
    from studio_align.training.loop import TrainConfig, TrainRunConfig, train_loop
    from studio_align.training.optim import OptimConfig
    from studio_align.training.policy import LMPolicy

    g = dims["grpo"]
    warm, steps = dims["warmup_steps"], dims["warmup_steps"] + dims["timed_steps"]
    vocab, p_len = dims["model"]["vocab_size"], dims["prompt_len"]
    rng = np.random.default_rng(dims["seed"] + 1)  # common.grpo_prompts
    prompts = _ids(rng, vocab, g["prompts"] * steps, p_len).tolist()
    policy = LMPolicy(max_prompt_len=p_len, max_new_tokens=dims["completion_len"], pad_id=PAD,
                      eos_id=EOS, temperature=g["temperature"], decode=words,
                      decoded_column="texts")  # fmt: skip
    options: dict[str, Any] = dict(
        prompts_per_step=g["prompts"], group_size=g["generations"], mu=1,
        minibatches=1, estimator="grpo", epsilon=0.2, epsilon_high=None, beta=g["beta"],
        kl="k3", aggregation="sequence-mean-token-mean", importance="token",
        dynamic_sampling=False,
    )  # fmt: skip
    if "async_rollout" in GRPOConfig.model_fields:
        options["async_rollout"] = overlapped
    elif overlapped:
        raise SystemExit("this studio-align has no async_rollout")
    optim = OptimConfig(name="adamw", learning_rate=dims["lr"], decay="constant",
                        weight_decay=0.0, clip_grad_norm=1.0)  # fmt: skip
    run = TrainRunConfig(
        run_dir=None,  # nothing written, as the harness's scripts
        train=TrainConfig(steps=steps, seed=dims["seed"], log_every=1, progress=False,
                          metrics_hook=False),
        optim=optim,
        checkpoint=CheckpointConfig(enabled=False),
    )  # fmt: skip
    step = GRPOStep(policy, prompts, plugin_reward_fn([even_fraction]), GRPOConfig(**options),
                    ref_model=model(dims))  # fmt: skip
    clock, rollout, ref = Clock(warm), list[float](), list[float]()

    def timed(obj: Any, name: str, sink: list, sync: Any = None, then: Any = None) -> None:
        fn = getattr(obj, name)

        def wrapper(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            out = fn(*a, **kw)
            if sync:
                sync(out)
            sink.append(time.perf_counter() - t)
            if then:
                then()
            return out

        setattr(obj, name, wrapper)

    done: list[float] = []
    timed(policy, "sample", rollout)
    timed(Rollouts, "reference_logps", ref, sync=jax.block_until_ready)  # unbound: self first
    timed(step, "step", done, then=lambda: clock.tick(len(done)))
    result = train_loop(model(dims), run, step, name="grpo")
    hist = result.history

    def steady(xs: list[float]) -> float:
        return float(np.mean(xs[warm:]))

    collect = [h["time/rollout_s"] for h in hist]
    step_s = clock.step_s()
    experience = steady(collect) + steady(ref)
    extra = dict(rollout_s=steady(rollout), experience_s=experience, collect_s=steady(collect),
                 ref_s=steady(ref), update_s=step_s - experience)  # fmt: skip
    if overlapped:
        extra["wait_s"] = steady([h.get("time/rollout_wait_s", 0.0) for h in hist])
        extra["update_s"] = step_s - extra["wait_s"]
    report("grpo", step_s, g["prompts"] * g["generations"], "completions_per_s",
           variant="async" if overlapped else "sync",
           mean_gen_len=float(np.mean([h["completion_length"] for h in hist])),
           final_reward=float(np.mean([h["reward/total/mean"] for h in hist[-5:]])),
           steps_timed=max(clock.stamps) - warm, spread_s=clock.spread(), intervals_s=clock.intervals(), compiles=result.compiles,
           sampler_traces=policy._sampler.compile_count, prefill_bucket=bucket_prompt(p_len),
           **extra, **info(dims))  # fmt: skip


RUNS = {
    "dpo": lambda d: run_dpo(d, "cached"),
    "dpo_refstep": lambda d: run_dpo(d, "refstep"),
    "grpo": lambda d: run_grpo(d, False),
    "grpo_async": lambda d: run_grpo(d, True),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", choices=[*RUNS, "all"], nargs="?", default="all")
    ap.add_argument("--dims", type=Path, default=None, help="default: PEER_DIMS, else dims.json")
    ap.add_argument("--grad-accum", type=int, default=1,
                    help="DPO: micro-batches per step (`[train] grad_accum`; the same pairs per update)")  # fmt: skip
    args = ap.parse_args()
    args.dims = args.dims or dims_path()
    if not args.dims.is_file():
        raise SystemExit(
            f"{args.dims}: no such dims file (PEER_DIMS is dims, dims_large or a path)"
        )
    dims = json.loads(args.dims.read_text())
    dims["_name"] = args.dims.stem  # reported on every line
    dims["_grad_accum"] = args.grad_accum
    if args.run != "all":
        RUNS[args.run](dims)
        return
    for name in RUNS:  # one process each, as the harness runs its scripts
        cmd = [sys.executable, __file__, name, "--dims", str(args.dims),
               "--grad-accum", str(args.grad_accum)]  # fmt: skip
        subprocess.run(cmd, check=False)


if __name__ == "__main__":
    main()
