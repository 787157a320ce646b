"""Creator logs: schemas, streaming reading with quarantine, compiling into training records.

- `schemas`: pydantic models of the four events and of the compiled records.
- `reader`: `LogReader` / `validate_logs`, every invalid line reported with its reason.
- `compile`: `compile_logs`, what each event teaches, written per train/held-out split.
- `split`: the deterministic (creator, session) group split.
- `synth`: schema-valid synthetic logs for tests and benchmarks.

See docs/data.md.
"""

from studio_align.data.compile import InvalidLogError, compile_logs, load_manifest, read_records
from studio_align.data.reader import InvalidLine, LogReader, ReadSummary, Reason, validate_logs
from studio_align.data.split import assign_split

__all__ = [
    "InvalidLine",
    "InvalidLogError",
    "LogReader",
    "ReadSummary",
    "Reason",
    "assign_split",
    "compile_logs",
    "load_manifest",
    "read_records",
    "validate_logs",
]
