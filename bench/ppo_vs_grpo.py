"""PPO (learned critic, GAE) against GRPO and Dr.GRPO at the same seeds and reward calls.

    python bench/ppo_vs_grpo.py --task toy --seeds 0 1 2 --steps 20
    python bench/ppo_vs_grpo.py --task router --seeds 0 1 2 --steps 8 --ws DIR

`toy`: the LM answer task of `tests/test_training_grpo.py` (`<bos> a b` -> `[ANSWER0 +
a, <eos>]`, a tiny Transformer), 4 prompts x 8 samples per step, 2 passes per rollout,
lr 5e-3, no KL. `router`: simulated creators' route logs compiled as `train grpo` reads
them (`router.creators.demo_creator_data`, 6 training creators) and a tiny untrained
router, through `train_grpo` / `train_ppo` with the default rewards (intent_accuracy +
0.5 plan_validity), 4 prompts x 4 samples per step, lr 3e-3, KL 0.04 / 0.05 to the start.

Same reward calls: GRPO's dynamic sampling is off (it would draw extra rollouts), so
every algorithm scores `steps x prompts x samples` completions. Prints one JSON line per
run (reward of the first step, mean of the last 3 steps, held-out reward after for the
router task, wall seconds, reward calls), then per algorithm the mean and the spread
(min..max and sample std) over seeds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from flax import nnx

from studio_align.catalog import default_catalog
from studio_align.data.compile import compile_logs
from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.router.checkpoint import save_router
from studio_align.router.data import write_jsonl
from studio_align.router.format import build_tokenizer
from studio_align.simulate.router.creators import demo_creator_data
from studio_align.testing import toy
from studio_align.training.checkpoint import CheckpointConfig
from studio_align.training.grpo import GRPOConfig, GRPOStep, plugin_reward_fn
from studio_align.training.grpo_run import GRPORunConfig, train_grpo
from studio_align.training.loop import TrainConfig, TrainRunConfig, train_loop
from studio_align.training.optim import OptimConfig
from studio_align.training.policy import LMPolicy
from studio_align.training.ppo import (
    PPOConfig,
    PPOExperience,
    PPORunConfig,
    make_ppo_loss,
    train_ppo,
)
from studio_align.training.supervised import supervised
from studio_align.training.value_head import ValueModel, trainable

ALGOS = ("ppo", "grpo", "dr_grpo")
LAST = 3


def toy_run(algo: str, seed: int, steps: int, tmp: Path) -> dict[str, Any]:
    pol = LMPolicy(max_prompt_len=4, max_new_tokens=4, pad_id=toy.PAD, eos_id=toy.EOS)
    model = Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(seed))
    reward = plugin_reward_fn([toy.answer_reward])
    optim = OptimConfig(learning_rate=5e-3, decay="constant")
    t0 = time.perf_counter()
    if algo == "ppo":
        pc = PPOConfig(rollouts=steps, prompts_per_step=4, samples=8, epochs=2, kl_coef=0.0,
                       vf_coef=0.5, seed=seed)  # fmt: skip
        cfg = PPORunConfig.model_validate({
            "run_dir": str(tmp / f"ppo{seed}"), "ppo": pc.model_dump(), "checkpoint": {"every": 0},
            "optim": optim.model_dump(),
            "train": {"progress": False, "metrics_hook": False},
        })  # fmt: skip
        vm = ValueModel(model, pol.feature_dim(model), shared=True, rngs=nnx.Rngs(seed))
        src = PPOExperience(pol, [{"prompt": p} for p in toy.answer_prompts()], reward, pc,
                            ref_model=None)  # fmt: skip
        res = train_loop(vm, cfg.loop_config(), supervised(make_ppo_loss(pol, pc), src),
                         wrt=trainable(nnx.Param), name="ppo")  # fmt: skip
        curve = [h["reward/total/mean"] for h in res.history]
        calls = src.reward_calls
    else:
        gc = GRPOConfig(prompts_per_step=4, group_size=8, mu=2, estimator=algo,
                        dynamic_sampling=False)  # fmt: skip
        run = TrainRunConfig(
            run_dir=None, optim=optim, checkpoint=CheckpointConfig(enabled=False),
            train=TrainConfig(steps=steps, seed=seed, log_every=1, progress=False,
                              metrics_hook=False),
        )  # fmt: skip
        gres = train_loop(model, run, GRPOStep(pol, toy.answer_prompts(), reward, gc), name="grpo")
        curve = [h["reward/total/mean"] for h in gres.history]
        calls = steps * 4 * 8
    wall = time.perf_counter() - t0
    return {"curve": curve, "wall_s": wall, "reward_calls": calls}


def router_workspace(ws: Path) -> Path:
    """Compiled creator route logs and a tiny untrained router (as the resume tests use)."""
    if (ws / "router" / "router.json").exists():
        return ws
    data = demo_creator_data(seed=0, n_train_creators=6, n_eval_creators=2)
    logs = write_jsonl(ws / "logs" / "routes.jsonl", data["route_logs"])
    compile_logs(logs, ws / "compiled", seed=0, heldout_fraction=0.25)
    catalog = default_catalog()
    tok = build_tokenizer(
        [e["request"]["text"] for e in data["route_logs"]], catalog, vocab_size=400
    )
    model = Transformer(ModelConfig.tiny(tok.vocab_size), rngs=nnx.Rngs(0))
    save_router(ws / "router", model, tok, catalog, max_steps=3)
    return ws


def router_run(algo: str, seed: int, steps: int, tmp: Path, ws: Path) -> dict[str, Any]:
    common = {"model": {"init_from": str(ws / "router")}, "data": {"dir": str(ws / "compiled")},
              "optim": {"learning_rate": 3e-3, "decay": "constant"}, "checkpoint": {"every": 0}}  # fmt: skip
    t0 = time.perf_counter()
    if algo == "ppo":
        cfg = PPORunConfig.model_validate(common | {
            "run_dir": str(tmp / f"ppo{seed}"), "train": {"progress": False},
            "ppo": {"rollouts": steps, "prompts_per_step": 4, "samples": 4, "epochs": 2,
                    "kl_coef": 0.05, "seed": seed, "vf_coef": 0.5},
        })  # fmt: skip
        res = train_ppo(cfg)
        curve = [h["reward/total/mean"] for h in res.history]
        calls, after = res.reward_calls, res.heldout_after
    else:
        gcfg = GRPORunConfig.model_validate(common | {
            "run_dir": str(tmp / f"{algo}{seed}"),
            "train": {"steps": steps, "seed": seed},
            "grpo": {"prompts_per_step": 4, "group_size": 4, "mu": 2, "beta": 0.04,
                     "estimator": algo, "dynamic_sampling": False},
        })  # fmt: skip
        gres = train_grpo(gcfg)
        curve = [h["reward/total/mean"] for h in gres.history]
        calls, after = steps * 4 * 4, gres.heldout_after
    wall = time.perf_counter() - t0
    return {"curve": curve, "wall_s": wall, "reward_calls": calls,
            "heldout_after": after.get("reward/total/mean")}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", choices=("toy", "router"), default="toy")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--algos", nargs="+", default=list(ALGOS), choices=ALGOS)
    ap.add_argument("--ws", type=Path, default=None, help="router workspace (made if absent)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ppo-vs-grpo-"))
    ws = router_workspace(args.ws or tmp / "ws") if args.task == "router" else None
    rows: dict[str, list[dict[str, Any]]] = {a: [] for a in args.algos}
    try:
        for seed in args.seeds:
            for algo in args.algos:  # interleaved: every algorithm sees the same load
                out = (toy_run(algo, seed, args.steps, tmp) if ws is None
                       else router_run(algo, seed, args.steps, tmp, ws))  # fmt: skip
                c = out.pop("curve")
                row = {"task": args.task, "algo": algo, "seed": seed, "steps": args.steps,
                       "reward_first": round(c[0], 4),
                       "reward_last": round(statistics.mean(c[-LAST:]), 4),
                       **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items()}}  # fmt: skip
                rows[algo].append(row)
                print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for algo, rs in rows.items():
        summary: dict[str, Any] = {"summary": algo, "seeds": len(rs)}
        for key in ("reward_last", "wall_s", "heldout_after"):
            vals = [r[key] for r in rs if r.get(key) is not None]
            if vals:
                summary[key] = {"mean": round(statistics.mean(vals), 4),
                                "min": min(vals), "max": max(vals),
                                "std": round(statistics.stdev(vals), 4) if len(vals) > 1 else 0.0}  # fmt: skip
        summary["reward_calls"] = rs[0]["reward_calls"] if rs else 0
        print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
