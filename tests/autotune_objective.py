"""A small real objective for autotune tests: a trainer and an evaluator in one script.

    python autotune_objective.py train --set x=0.5 --set lr=0.01 --set seed=3 --set run_dir=D
    python autotune_objective.py eval --checkpoint D --data split.json --json

`train` writes `D/checkpoint.json` (after sleeping `work_s`, to stand in for training time);
`eval` prints `{"score": ...}`: a smooth function of the parameters plus Gaussian noise
that depends only on (seed, split), with standard deviation `noise`. Failure modes are
deterministic in the parameters: `mode = "crash" | "hang" | "nan" | "eval_crash"`, and
`x > crash_above` crashes training. The split file is JSON: `{"split": name, "shift": s}`;
`"crash": true` in it makes evaluation fail. Only the standard library is used, so each
call starts fast.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
import tomllib
from pathlib import Path


def _parse(text: str) -> object:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def score(cfg: dict, seed: int, split: str, shift: float) -> float:
    x = float(cfg.get("x", 0.5))
    lr = float(cfg.get("lr", 0.01))
    clean = 1.0 - (x - 0.7) ** 2 - 0.05 * (math.log10(lr) + 2.0) ** 2
    if cfg.get("opt") == "sgd":
        clean -= 0.02 + 0.1 * (float(cfg.get("momentum", 0.9)) - 0.9) ** 2
    clean += 0.002 * int(cfg.get("layers", 2))
    noise = float(cfg.get("noise", 0.02)) * random.Random(f"{seed}/{split}").gauss(0.0, 1.0)
    return clean + shift + noise


def train(args: list[str]) -> int:
    cfg: dict = {}
    it = iter(args)
    for a in it:
        if a == "--set":
            key, _, val = next(it).partition("=")
            cfg[key] = _parse(val)
    run_dir = Path(cfg.pop("run_dir"))
    mode = cfg.get("mode", "none")
    time.sleep(float(cfg.get("work_s", 0.0)))
    if mode == "crash" or float(cfg.get("x", 0.0)) > float(cfg.get("crash_above", 9e9)):
        print("training diverged: loss exploded", file=sys.stderr)
        return 1
    if mode == "hang":  # says who it is, so a test can check it was killed
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "hang.pid").write_text(str(os.getpid()))
        time.sleep(3600)
    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / "train_count").open("a") as f:
        f.write("1\n")
    (run_dir / "checkpoint.json").write_text(json.dumps(cfg))
    print(f"trained {cfg}")
    return 0


def evaluate(args: list[str]) -> int:
    ckpt = Path(args[args.index("--checkpoint") + 1])
    data = json.loads(Path(args[args.index("--data") + 1]).read_text())
    cfg = json.loads((ckpt / "checkpoint.json").read_text())
    if data.get("crash") or cfg.get("mode") == "eval_crash":
        print("evaluation failed: cannot read data", file=sys.stderr)
        return 3
    value = score(cfg, int(cfg["seed"]), data["split"], float(data.get("shift", 0.0)))
    if cfg.get("mode") == "nan":
        value = float("nan")
    print(json.dumps({"score": value, "split": data["split"], "n": 10}))
    return 0


if __name__ == "__main__":
    cmd, rest = sys.argv[1], sys.argv[2:]
    sys.exit(train(rest) if cmd == "train" else evaluate(rest))
