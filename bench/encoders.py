"""Encoder throughput in images per second, embedding cache cold and warm; prints JSON.

`--n` procedural PNG images (`--size` px) are written to a temporary directory and
embedded from the files through `CachedEncoder` three ways: uncached (the encoder
alone, images already decoded), cache cold (empty cache: hash + decode + encode +
write) and cache warm (same files again: hash + read). Encoders: `color-stats`, and
`clip` on a tiny random open_clip architecture (`TINY_CONFIG`; pass `--clip-model` and
`--clip-weights` to measure a real checkpoint from a local file instead).

Usage: `python bench/encoders.py [--n 256] [--size 256]`
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from studio_align.reward_models.cache import CachedEncoder
from studio_align.reward_models.color_stats import ColorStatsEncoder
from studio_align.reward_models.images import load_image
from studio_align.simulate.grading.scenes import make_scenes


def _encoders(args: argparse.Namespace) -> dict[str, object]:
    encs: dict[str, object] = {"color-stats": ColorStatsEncoder()}
    try:
        from studio_align.reward_models.clip import TINY_CONFIG, ClipEncoder

        if args.clip_weights:
            encs[f"clip:{args.clip_model}"] = ClipEncoder(args.clip_model, args.clip_weights)
        else:
            encs["clip:tiny-random"] = ClipEncoder(
                "bench-tiny-clip", model_config=TINY_CONFIG, random_init=True
            )
    except ImportError:
        pass
    return encs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--clip-model", default="ViT-B-32")
    ap.add_argument("--clip-weights", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = []
        for i, im in enumerate(make_scenes(0, args.n, (args.size, args.size))):
            p = root / f"img{i:05d}.png"
            Image.fromarray((im * 255).astype(np.uint8)).save(p)
            paths.append(p)
        decoded = [load_image(p) for p in paths]
        res: dict[str, object] = {}
        for name, enc in _encoders(args).items():
            t = time.perf_counter()
            enc.encode_images(decoded)  # type: ignore[attr-defined]
            raw = time.perf_counter() - t
            cached = CachedEncoder(enc, root / f"cache-{len(res)}")  # type: ignore[arg-type]
            t = time.perf_counter()
            cached.encode_files(paths)
            cold = time.perf_counter() - t
            t = time.perf_counter()
            cached.encode_files(paths)
            warm = time.perf_counter() - t
            res[name] = {
                "dim": enc.dim,  # type: ignore[attr-defined]
                "images_per_s": {
                    "encoder_only": round(args.n / raw, 1),
                    "cache_cold": round(args.n / cold, 1),
                    "cache_warm": round(args.n / warm, 1),
                },
                "cache": {"hits": cached.stats.hits, "misses": cached.stats.misses},
            }
    print(
        json.dumps(
            {"n": args.n, "size": args.size, "cpus": os.cpu_count(), "encoders": res}, indent=2
        )
    )


if __name__ == "__main__":
    main()
