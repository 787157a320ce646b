"""Built-in plugin of `reward_models`: rewards `aesthetic`, `clip_critic`, `identity`
(`reward_models.rewards`); encoders `color-stats` and `clip`; the command `train reward`.

Everything is registered by `"module:attribute"` reference and imported on first use:
the scorer needs JAX and the `clip` encoder torch, which listing plugins must not load.
"""

from __future__ import annotations

from typing import Any

from studio_align.hookspecs import EncoderSpec, hookimpl

_REWARDS = "studio_align.reward_models.rewards"


@hookimpl
def studio_align_register_rewards(register: Any) -> None:
    register(f"{_REWARDS}:aesthetic")
    register(f"{_REWARDS}:clip_critic")
    register(f"{_REWARDS}:identity")


@hookimpl
def studio_align_register_encoders(register: Any) -> None:
    register(
        EncoderSpec(
            "color-stats",
            "studio_align.reward_models.color_stats:ColorStatsEncoder",
            "Lab histograms, brightness, contrast, saturation, warmth, sharpness (numpy)",
        )
    )
    register(
        EncoderSpec(
            "clip",
            "studio_align.reward_models.clip:ClipEncoder",
            "open_clip image/text encoder; options: model, weights (local path), random_init",
        )
    )


@hookimpl
def studio_align_register_commands(cli: Any) -> None:
    cli.lazy(
        "train reward", "studio_align.reward_models.commands:reward",
        "Train an aesthetic reward model from selection logs.",
    )  # fmt: skip
