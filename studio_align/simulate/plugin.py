"""Built-in plugin of the simulators: the `data demo-*` commands that write a simulated
platform's logs, as a platform would export them, and the judges that know the simulated
creators' hidden tastes.

- reward `flow_taste(images, creators)`: a simulated flow creator's hidden utility
  (`simulate.flow.creators`); the flow product takes it by name as the judge of its
  win rates (`eval flow --judge flow_taste`, `[model] options.judge`, the experiment);
- `data demo-grading`, `data demo-flow`: a simulated grading platform's export, a
  simulated flow selection round (`simulate.commands`).

Declared in studio-align's own entry points like the products' plugins; registered by
reference, so listing commands or rewards imports no simulator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from studio_align.hookspecs import hookimpl


@hookimpl
def studio_align_register_rewards(register: Callable[..., None]) -> None:
    register(
        "studio_align.simulate.flow.creators:flow_taste",
        description="a simulated flow creator's hidden taste (judge of eval flow's win rate)",
    )


@hookimpl
def studio_align_register_commands(cli: Any) -> None:
    cli.lazy(
        "data demo-grading", "studio_align.simulate.commands:demo_grading",
        "Write a simulated grading platform (logs and images).",
    )  # fmt: skip
    cli.lazy(
        "data demo-flow", "studio_align.simulate.commands:demo_flow",
        "Write a simulated flow selection round (logs and images).",
    )  # fmt: skip
