"""The grading demo: a simulated creator's logs -> reward model -> BC -> GRPO -> evaluation.

`run_grading_demo(out_dir, seed=0, quick=True)` runs in process against a simulator's
hidden utility (the quickstart instead runs the file-based path, `quickstart.grading`).
Every figure it reports is measured against the simulated creator's hidden utility,
which no model sees:

- reward model: held-out pairwise accuracy on the main creator's held-out sessions,
  against the creator's consistency ceiling (how often the noiseless utility agrees with
  the creator's own noisy choices on the same pairs);
- grading: win rates of the GRPO-tuned policy over the untuned (randomly initialised)
  policy, the behaviour-cloned policy and the identity grade on fresh held-out scenes,
  by hidden utility (ties count half);
- a before/after grid PNG (source | untuned | BC | GRPO) in `out_dir`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np
from flax import nnx
from PIL import Image

from studio_align.plugins import get_host
from studio_align.reward_models.color_stats import color_features
from studio_align.reward_models.images import load_image
from studio_align.reward_models.scorer import AestheticScorer
from studio_align.reward_models.train import RewardTrainConfig, read_selection_pairs, train_reward
from studio_align.verticals.grading.bc import behaviour_clone, read_retouches
from studio_align.verticals.grading.creator import (
    COOL_TASTE,
    STYLE_REQUESTS,
    WARM_TASTE,
    SimulatedCreator,
    consistency_ceiling,
    write_creator_logs,
)
from studio_align.verticals.grading.policy import GradingPolicy, request_features
from studio_align.verticals.grading.renderer import N_PARAMS, render, vector_to_params
from studio_align.verticals.grading.scenes import make_scene
from studio_align.verticals.grading.tune import GradingTuneConfig, tune_grading

SIZE = 64


def _scenes(seed: int, n: int, size: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([make_scene(rng, (size, size)) for _ in range(n)])


def _win_rate(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean((a > b) + 0.5 * (a == b)))


def _policy_grades(policy: GradingPolicy, sources: np.ndarray, requests: list[str]) -> np.ndarray:
    f = jnp.asarray(color_features(sources))
    r = jnp.asarray(request_features(requests, policy.request_dim))
    return np.clip(np.asarray(policy.mode(f, r)), -1, 1)


def _grid(rows: list[list[np.ndarray]], path: Path, labels: list[str]) -> None:
    tile = rows[0][0].shape[0]
    pad = 4
    h = len(rows) * (tile + pad) + pad + 14
    w = len(rows[0]) * (tile + pad) + pad
    canvas = np.full((h, w, 3), 1.0, np.float32)
    for i, row in enumerate(rows):
        for j, im in enumerate(row):
            y, x = 14 + pad + i * (tile + pad), pad + j * (tile + pad)
            canvas[y : y + tile, x : x + tile] = im
    img = Image.fromarray((canvas * 255 + 0.5).astype(np.uint8))
    from PIL import ImageDraw

    d = ImageDraw.Draw(img)
    for j, lab in enumerate(labels):
        d.text((pad + j * (tile + pad) + 2, 2), lab, fill=(0, 0, 0))
    img.save(path)


def run_grading_demo(
    out_dir: str | Path, *, seed: int = 0, quick: bool = True, tune: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Run the whole grading loop on a simulated creator; returns (and writes) the report.

    `tune` overrides `GradingTuneConfig` fields (e.g. `{"beta": 0.1, "steps": 100}`).
    """
    t_start = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n_sel, n_ret, steps = (320, 80, 60) if quick else (800, 200, 150)
    main = SimulatedCreator("warm", WARM_TASTE, temperature=3.0)
    other = SimulatedCreator("cool", COOL_TASTE, temperature=3.0)
    timings: dict[str, float] = {}

    t = time.perf_counter()
    log = write_creator_logs(
        out / "logs", [(main, n_sel, n_ret), (other, n_sel // 5, 0)], seed=seed, size=(SIZE, SIZE)
    )
    timings["logs"] = time.perf_counter() - t

    t = time.perf_counter()
    rm_cfg = RewardTrainConfig.model_validate(
        {
            "logs": [str(log)],
            "out": str(out / "reward_model"),
            "seed": seed,
            "encoder": {
                "name": "color-stats",
                "options": {"size": SIZE},
                "cache_dir": str(out / "cache"),
            },
            "head": {"hidden": 32, "per_creator": True},
            "train": {"steps": 300, "weight_decay": 1e-2},
            "gate": {"min_heldout_accuracy": 0.6},
        }
    )
    rm = train_reward(rm_cfg)
    timings["reward_model"] = time.perf_counter() - t
    pairs, _ = read_selection_pairs([str(log)], seed=seed, heldout_fraction=rm_cfg.heldout_fraction)
    held = [p for p in pairs if p["split"] == "heldout" and p["creator"] == main.name]

    def load(p: str) -> np.ndarray:
        return np.asarray(load_image(p), np.float32) / 255.0

    ceiling = consistency_ceiling(
        main,
        np.stack([load(p["chosen_image"]) for p in held]),
        np.stack([load(p["rejected_image"]) for p in held]),
    )
    rm_acc = rm["heldout"]["by_creator"][main.name]["accuracy"]

    t = time.perf_counter()
    retouches = read_retouches([str(log)], size=SIZE, creator=main.name)
    untuned = GradingPolicy(rngs=nnx.Rngs(seed))
    untuned.set_input_stats(color_features(retouches.sources))
    bc = nnx.clone(untuned)
    bc_curve = behaviour_clone(bc, retouches, steps=300, seed=seed)
    timings["bc"] = time.perf_counter() - t

    t = time.perf_counter()
    scorer = AestheticScorer.load(out / "reward_model", require_gate=True)

    host = get_host()
    tuned = nnx.clone(bc)
    train_src = _scenes(seed + 1, 256, SIZE)
    rng = np.random.default_rng(seed + 1)
    train_req = [STYLE_REQUESTS[int(i)] for i in rng.integers(len(STYLE_REQUESTS), size=256)]
    tune_cfg = GradingTuneConfig.model_validate({"steps": steps, "seed": seed, **(tune or {})})
    history = tune_grading(
        tuned,
        bc,
        train_src,
        train_req,
        tune_cfg,
        rewards=host.rewards,
        context={"aesthetic_model": scorer},
        creator=main.name,
    )
    timings["grpo"] = time.perf_counter() - t

    n_eval = 128
    ev_src = _scenes(seed + 2, n_eval, SIZE)
    ev_req = [STYLE_REQUESTS[i % len(STYLE_REQUESTS)] for i in range(n_eval)]
    grades = {
        "identity": np.zeros((n_eval, N_PARAMS), np.float32),
        "untuned": _policy_grades(untuned, ev_src, ev_req),
        "bc": _policy_grades(bc, ev_src, ev_req),
        "grpo": _policy_grades(tuned, ev_src, ev_req),
    }
    util = {k: main.utility(render(ev_src, v)) for k, v in grades.items()}
    report: dict[str, Any] = {
        "reward_model": {
            "heldout_accuracy": rm_acc,
            "heldout_pairs": len(held),
            "consistency_ceiling": ceiling,
            "fraction_of_ceiling": rm_acc / ceiling if ceiling > 0 else float("nan"),
            "heldout_all_creators": rm["heldout"]["accuracy"],
            "by_creator": rm["heldout"]["by_creator"],
            "by_session": rm["heldout"].get("by_session", {}),
        },
        "grading": {
            "eval_images": n_eval,
            "mean_utility": {k: float(v.mean()) for k, v in util.items()},
            "win_rate_grpo_vs_untuned": _win_rate(util["grpo"], util["untuned"]),
            "win_rate_grpo_vs_bc": _win_rate(util["grpo"], util["bc"]),
            "win_rate_grpo_vs_identity": _win_rate(util["grpo"], util["identity"]),
            "win_rate_bc_vs_identity": _win_rate(util["bc"], util["identity"]),
            "bc_nll": {"first": bc_curve[0], "last": bc_curve[-1]},
            "grpo_reward": {
                "first": float(np.mean([h["reward/total/mean"] for h in history[:5]])),
                "last": float(np.mean([h["reward/total/mean"] for h in history[-5:]])),
            },
            "example_grade": vector_to_params(grades["grpo"][0]),
        },
        "sizes": {"selections": n_sel + n_sel // 5, "retouches": n_ret, "grpo_steps": steps},
        "seconds": {**timings, "total": time.perf_counter() - t_start},
    }
    # before/after grid at a larger size: the same scenes re-drawn at 160 px
    big = _scenes(seed + 2, 6, 160)
    rows = [
        [big[i]] + [render(big[i], grades[k][i]) for k in ("untuned", "bc", "grpo")]
        for i in range(6)
    ]
    _grid(rows, out / "grading_grid.png", ["source", "untuned", "BC", "GRPO"])
    report["grid"] = str(out / "grading_grid.png")
    (out / "grading_report.json").write_text(json.dumps(report, indent=2, default=float))
    with open(out / "grpo_history.jsonl", "w") as f:
        for h in history:
            f.write(json.dumps(h) + "\n")
    return report
