"""`studio-align autotune`: the experiment loop over a search-space TOML.

Thin: options map onto `LoopOptions`, the loop is `studio_align.autotune.run_autotune`;
library errors become `Error: ...` and exit code 2 in the root group.
Progress goes to stderr; the final summary to stdout (JSON with `--json`).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from studio_align.autotune import PROPOSERS, LoopOptions, Space, run_autotune
from studio_align.commands import FiniteRange


@click.command("autotune")
@click.option(
    "--space",
    "space_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="Search-space TOML (parameters, metric, budget, commands, data).",
)
@click.option(
    "--out",
    default=None,
    type=click.Path(file_okay=False),
    help="Output directory (ledger, results.tsv, trials, report). "
    "Default: autotune-<name> beside the space file.",
)
@click.option("--resume", is_flag=True, help="Continue the ledger in --out.")
@click.option("--proposer", type=click.Choice(PROPOSERS), default="tpe", show_default=True)
@click.option("--trials", type=int, default=None, help="Override budget.trials.")
@click.option(
    "--wall-clock",
    "wall_clock",
    type=FiniteRange(0.0, min_open=True),
    default=None,
    help="Override budget.wall_clock_s (seconds).",
)
@click.option("--git", "use_git", is_flag=True, help="Commit each kept config to a branch.")
@click.option(
    "--git-repo",
    default=".",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Repository that --git commits to (its checkout is not touched).",
)
@click.option("--git-branch", default=None, help="Branch for --git (default autotune/<name>).")
@click.option(
    "--agent-wait",
    "agent_wait",
    type=FiniteRange(0.0, min_open=True),
    default=3600.0,
    show_default=True,
    help="Seconds the agent proposer waits for each proposal file.",
)
@click.option("--no-confirm", is_flag=True, help="Skip the held-out confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def autotune(
    space_path: str,
    out: str | None,
    resume: bool,
    proposer: str,
    trials: int | None,
    wall_clock: float | None,
    use_git: bool,
    git_repo: str,
    git_branch: str | None,
    agent_wait: float,
    no_confirm: bool,
    as_json: bool,
) -> None:
    """Propose, train, evaluate and keep configs that beat seed noise; resumable."""
    space = Space.load(space_path)
    out_dir = Path(out) if out else Path(space_path).parent / f"autotune-{space.name}"
    options = LoopOptions(
        proposer=proposer,
        resume=resume,
        trials=trials,
        wall_clock_s=wall_clock,
        git=use_git,
        git_repo=git_repo,
        git_branch=git_branch,
        agent_wait_s=agent_wait,
        confirm=not no_confirm,
        log=lambda m: click.echo(m, err=True),
    )
    summary = run_autotune(space, out_dir, options)  # StudioAlignError: exit 2 in `main`
    if as_json:
        click.echo(json.dumps(summary.to_dict(), indent=2))
        return
    click.echo(f"{summary.metric} ({summary.direction}); stopped: {summary.stopped}")
    click.echo(
        f"baseline {summary.baseline_mean:.6g} ± {summary.baseline_std:.3g} "
        f"(noise sigma {summary.sigma:.3g})"
    )
    click.echo(
        f"best trial {summary.best_trial}: {summary.best_mean:.6g} on seeds {summary.best_seeds}"
    )
    for t, c in summary.heldout.items():
        click.echo(f"held-out trial {t}: {c['mean']} ± {c['std']}")
    click.echo("counts: " + ", ".join(f"{k} {v}" for k, v in summary.counts.items()))
    click.echo(f"ledger, results.tsv and report in {summary.out}")
