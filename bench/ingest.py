"""Creator-log ingestion benchmark: read a generated N-line log, report speed and memory.

    .venv/bin/python bench/ingest.py                       # 1,000,000 lines, both modes
    .venv/bin/python bench/ingest.py --lines 200000 --check-images --long-line-mb 32
    .venv/bin/python bench/ingest.py --mode events         # one mode only

Two modes, each a fresh `LogReader` over the same log: `validate` is `LogReader.run()`
(what `studio-align data validate` runs: every check, no event objects built) and
`events` iterates the reader (the pydantic events `data compile` and the trainers use).

The log (mixed valid events of all four types, one invalid line in `--invalid-every`,
optionally one over-long line) is generated into a temporary directory by a child
process, so generation memory is not counted. This process then imports the reader,
records its baseline RSS, reads the log streaming (invalid lines quarantined to a temp
file) and reports wall and CPU time (on a shared machine `lines_per_cpu_s` is the rate
undisturbed by other processes), peak RSS (`ru_maxrss`, the honest high-water mark of
the process) and its delta over the baseline. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

INVALID = (
    b"{truncated json\n",
    b'{"type": "rating", "id": "x", "prompt": "\xff\xfe"}\n',
    b'{"type": "rating", "id": 5, "ts": "2026-11-01T10:00:00Z", "creator": "c1", '
    b'"prompt": "p", "image": "img/p0.png", "label": "up"}\n',
)


def _max_rss_mb() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return kb / 1024 if sys.platform != "darwin" else kb / 2**20


def _rss_now_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


def generate(path: Path, lines: int, invalid_every: int, long_line_mb: int, seed: int) -> None:
    from studio_align.testing.synth import image_pool, synthetic_lines

    images = image_pool(path.parent, 8)
    with open(path, "wb", buffering=1 << 20) as f:
        for i, raw in enumerate(synthetic_lines(lines, seed=seed, images=images), 1):
            if invalid_every and i % invalid_every == 0:
                raw = INVALID[(i // invalid_every) % len(INVALID)]
            elif long_line_mb and i == lines // 2 + 1:
                pad = b"x" * (long_line_mb << 20)
                raw = b'{"type": "rating", "prompt": "' + pad + b'"}\n'
            f.write(raw)


def measure(log: Path, tmp: Path, mode: str, check_images: bool, baseline: float) -> dict:
    """Read `log` once in `mode`; speed, counts and memory (peak RSS so far, so the second
    mode's peak includes the first's)."""
    from studio_align.data.reader import LogReader

    quarantine = tmp / f"quarantine-{mode}.jsonl"
    reader = LogReader(log, check_images=check_images, quarantine=quarantine)
    t, cpu = time.perf_counter(), time.process_time()
    n = None
    if mode == "validate":
        reader.run()
    else:
        n = sum(1 for _ in reader)
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    peak = _max_rss_mb()
    s = reader.summary
    assert n is None or n == s.valid
    return {
        "lines": s.total_lines,
        "valid": s.valid,
        "invalid": s.invalid_count,
        "blank": s.blank,
        "by_type": dict(s.by_type),
        "by_reason": {str(k): v for k, v in s.by_reason.items()},
        "quarantine_bytes": quarantine.stat().st_size,
        "read_seconds": round(seconds, 2),
        "lines_per_s": round(s.total_lines / seconds),
        "mb_per_s": round(log.stat().st_size / 2**20 / seconds, 1),
        "read_cpu_seconds": round(cpu, 2),
        "lines_per_cpu_s": round(s.total_lines / cpu),
        "rss_baseline_mb": round(baseline, 1),
        "rss_peak_mb": round(peak, 1),
        "rss_delta_mb": round(peak - baseline, 1),
        "rss_end_mb": round(_rss_now_mb(), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument(
        "--invalid-every", type=int, default=1000, help="one invalid line per K (0: none)"
    )
    ap.add_argument("--long-line-mb", type=int, default=0, help="insert one line of this many MiB")
    ap.add_argument(
        "--check-images", action="store_true", help="check image existence (default off)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mode", choices=("validate", "events", "both"), default="both")
    ap.add_argument("--log", type=Path, help="read this log instead of generating one")
    ap.add_argument("--generate", type=Path, help=argparse.SUPPRESS)  # child-process mode
    args = ap.parse_args()

    if args.generate:
        generate(args.generate, args.lines, args.invalid_every, args.long_line_mb, args.seed)
        return

    with tempfile.TemporaryDirectory(prefix="ingest-bench-") as tmp:
        log = args.log
        gen_s = None
        if log is None:
            log = Path(tmp) / "creator.jsonl"
            t = time.perf_counter()
            cmd = [sys.executable, __file__, "--generate", str(log), "--lines", str(args.lines)]
            cmd += [
                "--invalid-every",
                str(args.invalid_every),
                "--long-line-mb",
                str(args.long_line_mb),
            ]
            cmd += ["--seed", str(args.seed)]
            subprocess.run(cmd, check=True)
            gen_s = time.perf_counter() - t

        import pydantic

        import studio_align.data.reader  # noqa: F401 (imported before the baseline RSS)

        baseline = _max_rss_mb()
        report: dict = {"log_mb": round(log.stat().st_size / 2**20, 1)}
        modes = ("validate", "events") if args.mode == "both" else (args.mode,)
        for mode in modes:
            report[mode] = measure(log, Path(tmp), mode, args.check_images, baseline)
        report.update(
            check_images=args.check_images,
            load_avg_1m=round(os.getloadavg()[0], 2),
            generate_seconds=None if gen_s is None else round(gen_s, 1),
            python=platform.python_version(),
            pydantic=pydantic.VERSION,
        )
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
