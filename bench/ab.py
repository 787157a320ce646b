"""Interleaved A/B of `bench/compare.py` runs between two studio-align source trees.

    python bench/ab.py --a /tmp/sa-base --b . --runs dpo grpo --repeats 3 [--dims FILE]

Each repeat runs every named `compare.py` run once with `PYTHONPATH=A`, then once with
`PYTHONPATH=B` (A and B alternate, so a change in machine load hits both), each in its own
process. Prints every JSON line as it comes (with `"side"`), then one summary line per run
and side with the median of each numeric field and the load average before and after.
A run that only one side has (e.g. `grpo_async`) is run on the sides that accept it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--a", type=Path, required=True, help="source tree holding studio_align/ (before)"
    )
    ap.add_argument(
        "--b", type=Path, required=True, help="source tree holding studio_align/ (after)"
    )
    ap.add_argument("--runs", nargs="+", default=["dpo", "grpo"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dims", type=Path, default=None)
    args = ap.parse_args()
    lines: dict[tuple[str, str], list[dict]] = {}
    load_before = os.getloadavg()
    for rep in range(args.repeats):
        for run in args.runs:
            for side, tree in (("A", args.a), ("B", args.b)):
                cmd = [sys.executable, str(HERE / "compare.py"), run]
                if args.dims:
                    cmd += ["--dims", str(args.dims)]
                env = {**os.environ, "PYTHONPATH": str(tree.resolve()), "JAX_PLATFORMS": "cpu"}
                out = subprocess.run(cmd, env=env, capture_output=True, text=True)
                got = [x for x in out.stdout.splitlines() if x.startswith('{"lib"')]
                if out.returncode or not got:
                    print(json.dumps({"side": side, "run": run, "repeat": rep,
                                      "error": out.stderr.strip().splitlines()[-1:]}), flush=True)  # fmt: skip
                    continue
                line = {"side": side, "run": run, "repeat": rep, **json.loads(got[-1])}
                print(json.dumps(line), flush=True)
                lines.setdefault((run, side), []).append(line)
    for (run, side), xs in sorted(lines.items()):
        keys = [k for k, v in xs[0].items() if isinstance(v, int | float) and k != "repeat"]
        med = {k: round(statistics.median(x[k] for x in xs if k in x), 4) for k in keys}
        print(json.dumps({"summary": run, "side": side, "n": len(xs), **med}), flush=True)
    print(json.dumps({"load_before": load_before, "load_after": os.getloadavg()}), flush=True)


if __name__ == "__main__":
    main()
