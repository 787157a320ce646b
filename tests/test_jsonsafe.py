import json
import math

from studio_align.jsonsafe import json_safe


def test_non_finite_floats_become_null_everywhere() -> None:
    obj = {"a": math.nan, "b": [1.0, math.inf, {"c": -math.inf}], "d": (2, "x"), "e": 0.5}
    out = json_safe(obj)
    assert out == {"a": None, "b": [1.0, None, {"c": None}], "d": [2, "x"], "e": 0.5}
    json.dumps(out, allow_nan=False)  # strict JSON
