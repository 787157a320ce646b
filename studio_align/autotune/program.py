"""`program.md`: the arena described for an external coding agent.

The agent proposer rewrites this file before every request, so an agent that reads it
always sees the current best, the rules it is held to and where to write its next
config. The agent drives the same loop, ledger and acceptance rule as any sampler; it
cannot change locked keys or the seed, and its wins must clear the same noise margin.
"""

from __future__ import annotations

from pathlib import Path

from studio_align.autotune.history import History
from studio_align.autotune.space import Space, _fmt


def render_program(space: Space, history: History) -> str:
    spec = space.spec
    m = space.metric
    lines = [
        f"# Autotune arena: {space.name}",
        "",
        "You propose training configs; this loop runs them, measures them and keeps or",
        "reverts them. You never run training yourself.",
        "",
        "## Objective",
        "",
        f"- metric: `{m.name}` from the evaluation JSON, to **{m.direction}**",
        f"- selection uses the validation split `{spec.data.validation}`; the final best is "
        "confirmed once on a held-out split you never see.",
        "",
        "## What you may change",
        "",
        "| key | values | baseline | active when |",
        "|---|---|---|---|",
    ]
    base = history.baseline
    for key, p in space.params.items():
        when = ", ".join(f"`{k}` in {v}" for k, v in p.when.items()) or "always"
        lines.append(f"| `{key}` | {p.describe()} | {_fmt(base.get(key, '(inactive)'))} | {when} |")
    lines += ["", "## Locked (may not change)", ""]
    lines += [f"- `{k}` = {v!r}" for k, v in space.locked.items()] or ["- (none)"]
    lines += [
        f"- `{spec.command.seed_key}`: owned by the loop. Every config runs on the loop's "
        "seeds; changing seeds is not an improvement.",
        "",
        "## Acceptance",
        "",
        f"The baseline ran on seeds {spec.seeds.baseline}; their spread estimates the noise "
        "sigma. A candidate first runs on seeds "
        f"{spec.seeds.candidate} and is kept only if it beats the best mean by more than "
        f"`{spec.acceptance.k} * sigma * sqrt(1/n_best + 1/n_candidate)`. When it is "
        f"better but within that margin it is re-run on extra seeds {spec.seeds.extra}, "
        "one at a time. Crashes, timeouts and NaN metrics are recorded as such.",
        "",
        "## Budget",
        "",
        f"- {spec.budget.trials} candidate trials, {spec.budget.wall_clock_s:g} s of "
        f"wall-clock, {spec.budget.trial_timeout_s:g} s per trial (train + evaluate).",
        "",
        "## Current state",
        "",
    ]
    if history.best_mean is not None:
        lines.append(f"- best mean {m.name} = {history.best_mean:.6g} with:")
        lines += [f"  - `{k}` = {_fmt(v)}" for k, v in history.best.items()]
    lines += [
        f"- finished trials: {len(history.trials)}; see `results.tsv` (one row per trial)",
        "  and `ledger.jsonl` (full configs, per-seed metrics); logs under",
        "  `trials/NNNN/seed-S/`.",
        "",
        "## Protocol",
        "",
        "1. Read `agent/request.json`: it names the trial number and the file to write.",
        "2. Write that file, `agent/trial-NNNN.toml`, with the keys you set (unset keys take",
        "   their baseline value) and a one-line `description` of the idea, e.g.:",
        "",
        "   ```toml",
        '   description = "halve the learning rate"',
    ]
    for key, p in list(space.params.items())[:2]:
        lines.append(f'   "{key}" = {_example(p.baseline())}')
    lines += [
        "   ```",
        "",
        "   Write it to a temporary name and rename it, so it is never read half-written.",
        "3. A rejected file is renamed `.toml.rejected`, with the reason in",
        "   `agent/trial-NNNN.error.txt`; write a corrected file under the same name.",
        "4. Wait for the next `agent/request.json` (its trial number increases).",
        "",
    ]
    return "\n".join(lines)


def _example(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return repr(v)


def write_program(space: Space, out: str | Path, history: History) -> Path:
    path = Path(out) / "program.md"
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(render_program(space, history), encoding="utf-8")
    tmp.replace(path)
    return path
