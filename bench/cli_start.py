"""CPU seconds of a `studio-align` start: `--help` by default (goal: at most 0.5 s).

Runs the command in a fresh interpreter `--repeats` times and prints one JSON object:
the median, min and max of user+system CPU seconds of each child (from `os.wait4`, so
the figure does not depend on how loaded the machine's cores are the way wall time
does), the wall seconds, the modules of note the command imported, and the load
average. CPU, not wall time: on a shared machine the wall time mostly measures the
neighbours.

    python bench/cli_start.py [--repeats 5] [-- plugins list]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CODE = (
    "import sys\n"
    "from studio_align.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:], prog_name='studio-align')\n"
    "except SystemExit:\n"
    "    pass\n"
    "heavy = [m for m in ('jax', 'flax', 'optax', 'orbax', 'torch', 'PIL', 'scipy') if m in sys.modules]\n"
    "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n"
)


def run_once(args: list[str]) -> tuple[float, float, str]:
    """(CPU seconds, wall seconds, heavy modules imported) of one start."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", CODE, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"`studio-align {' '.join(args)}` failed:\n{err}")
    heavy = next((ln[6:] for ln in err.splitlines() if ln.startswith("HEAVY=")), "")
    return usage.ru_utime + usage.ru_stime, wall, heavy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("command", nargs="*", default=["--help"], help="arguments (after --)")
    a = ap.parse_args()
    runs = [run_once(a.command) for _ in range(a.repeats)]
    cpu = [r[0] for r in runs]
    print(
        json.dumps(
            {
                "command": "studio-align " + " ".join(a.command),
                "repeats": a.repeats,
                "cpu_s_median": round(statistics.median(cpu), 3),
                "cpu_s_min": round(min(cpu), 3),
                "cpu_s_max": round(max(cpu), 3),
                "wall_s_median": round(statistics.median(r[1] for r in runs), 3),
                "heavy_imports": runs[-1][2].split(",") if runs[-1][2] else [],
                "goal_cpu_s": 0.5,
                "loadavg": [round(x, 2) for x in os.getloadavg()],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
