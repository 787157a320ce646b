"""On-disk embedding cache: an image is embedded once per encoder.

Key = sha256 of the image file's bytes (or, for in-memory images, of mode + size +
pixels) together with the encoder's `identity` string, which names the model and a
digest of its weights. Renaming or copying a file hits the cache; editing one pixel, or
switching encoder or weights, misses it. Entries are one small `.npy` per image under
`ROOT/<sha256(identity)[:16]>/<key[:2]>/<key>.npy`, written atomically (tmp + rename),
so concurrent writers and killed runs never leave a half-written entry that is read back.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from PIL import Image

from studio_align.errors import DataError
from studio_align.reward_models.images import DEFAULT_MAX_SIDE, load_image


class Encoder(Protocol):
    identity: str
    dim: int

    def encode_images(self, images: list[Any]) -> np.ndarray: ...


def file_digest(path: str | Path) -> str:
    """sha256 hex digest of a file's bytes; a missing file is a DataError naming it."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except FileNotFoundError:
        raise DataError(f"{path}: image file not found") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read image file: {e}") from None
    return h.hexdigest()


def image_digest(image: Image.Image | np.ndarray) -> str:
    """sha256 of an in-memory image's mode, shape and pixels."""
    h = hashlib.sha256()
    if isinstance(image, Image.Image):
        h.update(f"pil:{image.mode}:{image.size}".encode())
        h.update(image.tobytes())
    else:
        arr = np.ascontiguousarray(image)
        h.update(f"np:{arr.dtype}:{arr.shape}".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0


class EmbeddingCache:
    """Directory of cached embeddings keyed by (content digest, encoder identity)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, identity: str, digest: str) -> Path:
        ns = hashlib.sha256(identity.encode()).hexdigest()[:16]
        return self.root / ns / digest[:2] / f"{digest}.npy"

    def get(self, identity: str, digest: str) -> np.ndarray | None:
        p = self._path(identity, digest)
        try:
            return np.load(p, allow_pickle=False)
        except (FileNotFoundError, ValueError, OSError):
            return None

    def put(self, identity: str, digest: str, vector: np.ndarray) -> None:
        p = self._path(identity, digest)
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.save(f, np.asarray(vector, dtype=np.float32), allow_pickle=False)
            os.replace(tmp, p)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class CachedEncoder:
    """Wrap an `Encoder` with an `EmbeddingCache`; same protocol plus `encode_files`."""

    def __init__(
        self,
        encoder: Encoder,
        cache: EmbeddingCache | str | Path,
        *,
        max_side: int = DEFAULT_MAX_SIDE,
        batch_size: int = 64,
    ) -> None:
        self.encoder = encoder
        self.cache = cache if isinstance(cache, EmbeddingCache) else EmbeddingCache(cache)
        self.identity = encoder.identity
        self.dim = encoder.dim
        self.max_side = max_side
        self.batch_size = batch_size
        self.stats = CacheStats()

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        fn = getattr(self.encoder, "encode_texts", None)
        if fn is None:
            raise TypeError(f"encoder {self.identity} has no text tower")
        return fn(texts)

    def encode_files(self, paths: Sequence[str | Path]) -> np.ndarray:
        """Embeddings [N, D] of image files; each distinct content is encoded at most once.

        A missing or undecodable file raises `DataError` naming it, before any encoding
        of later chunks; use `encode_files_lenient` to skip such files instead.
        """
        digests = [file_digest(p) for p in paths]
        return self._encode(digests, lambda i: load_image(paths[i], max_side=self.max_side))

    def encode_files_lenient(
        self, paths: Sequence[str | Path]
    ) -> tuple[np.ndarray, dict[str, str]]:
        """Like `encode_files`, but bad files get a zero row and are returned as {path: reason}.

        Works chunk by chunk (`batch_size` files), so memory stays bounded by one chunk
        of decoded images however many files there are.
        """
        bad: dict[str, str] = {}
        out = np.zeros((len(paths), self.dim), dtype=np.float32)
        for start in range(0, len(paths), self.batch_size):
            rows: list[int] = []
            digests: list[str] = []
            images: dict[int, Any] = {}
            for i in range(start, min(start + self.batch_size, len(paths))):
                try:
                    d = file_digest(paths[i])
                    if self.cache.get(self.identity, d) is None:
                        images[len(rows)] = load_image(paths[i], max_side=self.max_side)
                except DataError as e:
                    bad[str(paths[i])] = str(e)
                    continue
                rows.append(i)
                digests.append(d)
            if rows:
                out[rows] = self._encode(digests, lambda k, images=images: images[k])
        return out, bad

    def encode_images(self, images: list[Image.Image | np.ndarray]) -> np.ndarray:
        digests = [image_digest(im) for im in images]
        return self._encode(digests, lambda i: images[i])

    def _encode(self, digests: list[str], load: Any) -> np.ndarray:
        out = np.zeros((len(digests), self.dim), dtype=np.float32)
        todo: dict[str, list[int]] = {}
        for i, d in enumerate(digests):
            if d in todo:
                todo[d].append(i)
                continue
            vec = self.cache.get(self.identity, d)
            if vec is not None and vec.shape == (self.dim,):
                out[i] = vec
                self.stats.hits += 1
            else:
                todo[d] = [i]
        keys = list(todo)
        for start in range(0, len(keys), self.batch_size):
            chunk = keys[start : start + self.batch_size]
            imgs = [load(todo[d][0]) for d in chunk]
            vecs = np.asarray(self.encoder.encode_images(imgs), dtype=np.float32)
            for d, v in zip(chunk, vecs, strict=True):
                self.cache.put(self.identity, d, v)
                out[todo[d]] = v
                self.stats.misses += 1
        return out
