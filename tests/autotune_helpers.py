"""Shared by the autotune tests: write a space TOML that drives `autotune_objective.py`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import tomli_w

OBJECTIVE = Path(__file__).with_name("autotune_objective.py")


def write_space(tmp: Path, **sections: Any) -> Path:
    """A space over the shipped objective; keyword arguments replace whole sections."""
    (tmp / "validation.json").write_text(json.dumps({"split": "validation"}))
    (tmp / "heldout.json").write_text(json.dumps({"split": "heldout", "shift": -0.01}))
    py = sys.executable
    data: dict[str, Any] = {
        "name": "toy",
        "metric": {"name": "score", "direction": "maximize"},
        "budget": {"trials": 4, "wall_clock_s": 600, "trial_timeout_s": 20},
        "seeds": {"baseline": [0, 1, 2], "candidate": [0], "extra": [1, 2]},
        "acceptance": {"k": 2.0},
        "command": {
            "train": f"{py} {OBJECTIVE} train {{sets}} --set run_dir={{trial_dir}}",
            "evaluate": f"{py} {OBJECTIVE} eval --checkpoint {{trial_dir}} --data {{data}} --json",
        },
        "data": {"validation": "validation.json", "heldout": "heldout.json"},
        "locked": {"noise": 0.02},
        "params": {
            "x": {"type": "float", "low": 0.0, "high": 1.0, "default": 0.3},
            "lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True, "default": 1e-3},
            "layers": {"type": "int", "low": 1, "high": 8, "default": 2},
            "opt": {"type": "choice", "values": ["adam", "sgd"]},
            "momentum": {"type": "float", "low": 0.5, "high": 0.99, "when": {"opt": "sgd"}},
        },
    }
    for key, value in sections.items():
        data[key] = value
    path = tmp / "space.toml"
    path.write_text(tomli_w.dumps(data))
    return path
