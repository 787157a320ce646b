"""`studio-align plugins list [--json]`: every plugin, its origin, hooks and registrations."""

from __future__ import annotations

import json

import click

from studio_align.plugins import PluginInfo, get_host


@click.group("plugins")
def plugins() -> None:
    """Inspect the loaded plugins."""


def format_plugins(infos: list[PluginInfo]) -> str:
    """Human-readable listing: one block per plugin."""
    lines: list[str] = []
    for info in infos:
        lines.append(f"{info.name}  [{info.origin}] {info.source}")
        lines.append(f"  hooks: {', '.join(info.hooks) or '-'}")
        for kind in ("tasks", "rewards", "encoders", "engines", "commands"):
            names = getattr(info, kind)
            if names:
                lines.append(f"  {kind}: {', '.join(names)}")
    return "\n".join(lines)


@plugins.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the plugins as JSON.")
def list_plugins(as_json: bool) -> None:
    """List each plugin with its origin, hooks and what it registered."""
    infos = get_host().describe()
    if as_json:
        click.echo(json.dumps([i.as_dict() for i in infos], indent=2))
    else:
        click.echo(format_plugins(infos))
