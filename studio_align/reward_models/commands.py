"""`studio-align train reward --config RUN.toml`: aesthetic reward model from selections.

Added by the reward models' plugin (`plugin.py`), imported only when it runs.
"""

from __future__ import annotations

from pathlib import Path

import click

from studio_align.commands import deferred, echo_result, load_run_config, run_config_options
from studio_align.reward_models.config import RewardTrainConfig

train_reward = deferred("studio_align.reward_models.train:train_reward")


@click.command("reward")
@run_config_options
def reward(config: Path | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """Bradley-Terry reward model over image embeddings from selection logs.

    Exits non-zero with the held-out accuracy when the quality gate refuses the model.
    """

    cfg = load_run_config(RewardTrainConfig, config, overrides)
    rep = train_reward(cfg)
    payload = {
        "model": cfg.out,
        "pairs": rep["pairs"],
        "heldout": {
            "accuracy": rep["heldout"]["accuracy"],
            "pairs": rep["heldout"]["pairs"],
            **{f"creator:{c}": v["accuracy"] for c, v in rep["heldout"]["by_creator"].items()},
        },
        "gate": rep["gate"],
        "encoder": {k: rep["encoder"][k] for k in ("name", "cache_hits", "cache_misses")},
    }
    echo_result(payload if not as_json else rep, as_json)
