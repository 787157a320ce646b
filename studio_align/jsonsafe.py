"""Strict-JSON values: NaN and ±inf become null (Python's json would write `NaN`)."""

from __future__ import annotations

import math
from typing import Any


def json_safe(obj: Any) -> Any:
    """A copy of `obj` (dicts, lists, tuples, scalars) with non-finite floats as None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    return obj
