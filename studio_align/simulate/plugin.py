"""Built-in plugin of the simulators: the `data demo-*` commands that write a simulated
platform's logs, as a platform would export them.

Declared in studio-align's own entry points like the products' plugins; registered by
reference, so listing commands imports no simulator.
"""

from __future__ import annotations

from typing import Any

from studio_align.hookspecs import hookimpl


@hookimpl
def studio_align_register_commands(cli: Any) -> None:
    cli.lazy(
        "data demo-grading", "studio_align.simulate.commands:demo_grading",
        "Write a simulated grading platform (logs and images).",
    )  # fmt: skip
