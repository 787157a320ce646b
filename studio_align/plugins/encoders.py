"""Built-in encoders `color-stats` and `clip`, registered through the public hook."""

from __future__ import annotations

from typing import Any

from studio_align.hookspecs import EncoderSpec, hookimpl


def _color_stats(**options: Any) -> Any:
    from studio_align.reward_models.color_stats import ColorStatsEncoder

    return ColorStatsEncoder(**options)


def _clip(**options: Any) -> Any:
    from studio_align.reward_models.clip import ClipEncoder

    return ClipEncoder(**options)


@hookimpl
def studio_align_register_encoders(register: Any) -> None:
    register(
        EncoderSpec(
            "color-stats",
            _color_stats,
            "Lab histograms, brightness, contrast, saturation, warmth, sharpness (numpy)",
        )
    )
    register(
        EncoderSpec(
            "clip",
            _clip,
            "open_clip image/text encoder; options: model, weights (local path), random_init",
        )
    )
