"""Minimal safetensors reading by slice, and writing with bfloat16, over numpy.

Why not `safetensors.numpy`: it cannot hand out bfloat16 tensors (numpy has no such
dtype) and it reads whole tensors. Sharded loading needs the opposite: each device's
shard of a parameter read straight from disk, whatever the stored dtype. The format is
small (an 8-byte little-endian header length, a JSON header mapping each name to its
`dtype`, `shape` and byte `data_offsets`, then the raw bytes), so this module reads it
with `numpy.memmap`: slicing a tensor touches only the pages of that slice.
bfloat16 comes from `ml_dtypes`, which JAX itself uses.

`SafetensorsDir` presents a whole Hugging Face checkpoint (one `model.safetensors`, a
sharded set with `model.safetensors.index.json`, or any `*.safetensors` files) as one
name -> tensor mapping.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from studio_align.errors import ModelLoadError
from studio_align.textfiles import read_json_object

_DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype(np.float64),
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "I64": np.dtype(np.int64),
    "I32": np.dtype(np.int32),
    "I16": np.dtype(np.int16),
    "I8": np.dtype(np.int8),
    "U8": np.dtype(np.uint8),
    "BOOL": np.dtype(np.bool_),
}
_NAMES = {v: k for k, v in _DTYPES.items()}


class SafetensorsFile:
    """One `.safetensors` file: `names`, `shape(name)`, `dtype(name)`, `get(name)[idx]`."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            size = self.path.stat().st_size
            with open(self.path, "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                if n > size - 8:  # not safetensors, or cut short: never read a bogus length
                    raise ValueError(f"header length {n} exceeds the file's {size} bytes")
                header = json.loads(f.read(n))
            if not isinstance(header, dict):
                raise ValueError("the header is not a JSON object")
        except (OSError, struct.error, ValueError) as e:
            raise ModelLoadError(f"{self.path}: not a readable safetensors file ({e})") from e
        metadata = header.pop("__metadata__", None) or {}
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            raise ModelLoadError(f"{self.path}: __metadata__ is not a map of strings")
        self.metadata: dict[str, str] = metadata
        self._header: dict[str, dict[str, Any]] = header
        self._base = 8 + n
        for name, info in header.items():
            self._check(name, info, size - self._base)

    def _check(self, name: str, info: Any, data_bytes: int) -> None:
        """Refuse a tensor entry that is malformed or points past the end of the file."""
        at = f"{self.path}: tensor {name}"
        if not isinstance(info, dict) or info.get("dtype") not in _DTYPES:
            dtype = info.get("dtype") if isinstance(info, dict) else info
            raise ModelLoadError(f"{at} has unsupported dtype {dtype!r}")
        shape, offsets = info.get("shape"), info.get("data_offsets")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise ModelLoadError(f"{at}: shape {shape!r} is not a list of sizes")
        if not (
            isinstance(offsets, list)
            and len(offsets) == 2
            and all(isinstance(o, int) for o in offsets)
            and 0 <= offsets[0] <= offsets[1]
        ):
            raise ModelLoadError(f"{at}: data_offsets {offsets!r} are not [start, end]")
        if offsets[1] > data_bytes:
            raise ModelLoadError(
                f"{at} ends at byte {offsets[1]} of the data, which has {data_bytes} "
                "(the file is truncated)"
            )

    @property
    def names(self) -> list[str]:
        return list(self._header)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._header[name]["shape"])

    def dtype(self, name: str) -> np.dtype:
        return _DTYPES[self._header[name]["dtype"]]

    def get(self, name: str) -> np.ndarray:
        """A read-only memory map of the tensor (index it to read only a slice)."""
        info = self._header[name]
        start, end = info["data_offsets"]
        shape = tuple(info["shape"])
        dtype = _DTYPES[info["dtype"]]
        if end - start != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            raise ModelLoadError(f"{self.path}: tensor {name} has inconsistent byte offsets")
        if end == start:
            return np.zeros(shape, dtype)
        return np.memmap(self.path, dtype=dtype, mode="r", offset=self._base + start, shape=shape)


class SafetensorsDir(Mapping[str, np.ndarray]):
    """Every tensor of a checkpoint directory, by name (values are memory maps)."""

    def __init__(self, directory: str | Path):
        d = Path(directory)
        index = d / "model.safetensors.index.json"
        if index.exists():
            weight_map = read_json_object(index, ModelLoadError).get("weight_map")
            if not isinstance(weight_map, dict) or not all(
                isinstance(v, str) for v in weight_map.values()
            ):
                raise ModelLoadError(f"{index}: weight_map is not a map of tensor -> file name")
            files = sorted(set(weight_map.values()))
            missing = [f for f in files if not (d / f).exists()]
            if missing:
                raise ModelLoadError(f"{index}: shard file(s) {missing} not found in {d}")
        else:
            files = sorted(p.name for p in d.glob("*.safetensors"))
            if not files:
                raise ModelLoadError(
                    f"{d}: no *.safetensors weights (convert .bin checkpoints to safetensors first)"
                )
        self.directory = d
        self.files = [SafetensorsFile(d / f) for f in files]
        self._where: dict[str, SafetensorsFile] = {}
        for f in self.files:
            for name in f.names:
                if name in self._where:
                    raise ModelLoadError(f"{d}: tensor {name} stored twice ({f.path.name})")
                self._where[name] = f

    def __getitem__(self, name: str) -> np.ndarray:
        return self._where[name].get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def shape(self, name: str) -> tuple[int, ...]:
        return self._where[name].shape(name)

    def dtype(self, name: str) -> np.dtype:
        return self._where[name].dtype(name)


def save_safetensors(
    tensors: Mapping[str, np.ndarray], path: str | Path, metadata: Mapping[str, str] | None = None
) -> Path:
    """Write `tensors` (any of the dtypes above, bfloat16 included) to one file."""
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    arrays = []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        if a.dtype not in _NAMES:
            raise ValueError(f"tensor {name}: dtype {a.dtype} cannot be stored in safetensors")
        header[name] = {
            "dtype": _NAMES[a.dtype],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + a.nbytes],
        }
        offset += a.nbytes
        arrays.append(a)
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # data aligned to 8 bytes, as the reference writer does
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for a in arrays:
            f.write(a.tobytes())
    return p
