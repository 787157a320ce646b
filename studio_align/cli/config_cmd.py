"""`studio-align config show KIND`, and the config keys at the foot of `train KIND --help`.

Both come from the run configs' pydantic models (`config.describe_keys`,
`config.commented_toml`), so they cannot drift from what `--config`/`--set` accept.

Design choices:
- The run-config classes are named here by module and class (`RUN_CONFIGS`) and imported
  only when asked for: `studio-align --help` must not pay for importing JAX.
- `train KIND --help` gets its key listing by wrapping each train subcommand's epilog
  formatter (`attach_config_help`), so the train commands themselves stay untouched; a
  trainer added later only needs a line in `RUN_CONFIGS`.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import click
from pydantic import BaseModel

from studio_align.config import commented_toml, describe_keys, toml_value

# train subcommand -> (module, run-config class)
RUN_CONFIGS: dict[str, tuple[str, str]] = {
    "sft": ("studio_align.training.sft_config", "SFTConfig"),
    "dpo": ("studio_align.training.dpo_config", "DPORunConfig"),
    "kto": ("studio_align.training.kto_config", "KTORunConfig"),
    "grpo": ("studio_align.training.grpo_run_config", "GRPORunConfig"),
    "ppo": ("studio_align.training.ppo_config", "PPORunConfig"),
    "distill": ("studio_align.training.distill_config", "DistillRunConfig"),
    "reward": ("studio_align.reward_models.config", "RewardTrainConfig"),
    "router": ("studio_align.router.settings", "FromLogsConfig"),
}


def run_config_class(kind: str) -> type[BaseModel]:
    """The run-config model of `studio-align train KIND`."""
    module, name = RUN_CONFIGS[kind]
    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls, type) and issubclass(cls, BaseModel)
    return cls


def _default_text(key: Any) -> str:
    if key.required:
        return "required"
    return "unset" if key.default is None else toml_value(key.default)


@click.group("config")
def config() -> None:
    """Run configs: every key, its default and what it means."""


@config.command("show")
@click.argument("kind", type=click.Choice(sorted(RUN_CONFIGS)))
@click.option("--json", "as_json", is_flag=True, help="List the keys as JSON instead.")
def show(kind: str, as_json: bool) -> None:
    """Print the default run config of `train KIND` as commented TOML.

    Save it, edit it and pass it back: `studio-align config show dpo > dpo.toml`, then
    `studio-align train dpo --config dpo.toml`.
    """
    cls = run_config_class(kind)
    if as_json:
        keys = [k._asdict() for k in describe_keys(cls)]
        click.echo(json.dumps(keys, indent=1, ensure_ascii=False))
        return
    click.echo(commented_toml(cls, title=f"studio-align train {kind}"), nl=False)


def attach_config_help(kind: str, cmd: click.Command) -> None:
    """Make `train KIND --help` end with every config key of KIND and its default."""
    if kind in RUN_CONFIGS and not getattr(cmd, "_config_help", False):
        original = cmd.format_epilog

        def format_epilog(
            ctx: click.Context,
            formatter: click.HelpFormatter,
            kind: str = kind,
            original: Any = original,
        ) -> None:
            original(ctx, formatter)
            keys = describe_keys(run_config_class(kind))
            with formatter.section(
                f"Config keys (TOML, or --set KEY=VALUE; `studio-align config show {kind}` "
                "prints them as a file)"
            ):
                formatter.write_dl(
                    [(k.key, f"{_default_text(k)}  {k.description}".rstrip()) for k in keys]
                )

        setattr(cmd, "format_epilog", format_epilog)  # noqa: B010 - per-instance override
        setattr(cmd, "_config_help", True)  # noqa: B010
