"""Robust image loading for reward models and the grading vertical.

Creator logs point at whatever the platform stored: PNG with alpha, greyscale scans,
16-bit TIFF/PNG from raw converters, enormous panoramas, truncated uploads. Everything
that reaches an encoder or the renderer goes through `load_image`, which returns an
8-bit RGB `PIL.Image` no larger than `max_side` on its longest side, or raises
`DataError` naming the file. Nothing downstream ever sees a mode it must special-case.

Design choices:
- Transparency is composited onto mid-grey (not black or white), so alpha does not shift
  the colour statistics towards an extreme.
- 16-bit and float images are rescaled by their nominal range (65535 / 1.0), not by the
  image's own maximum, so a dark 16-bit photo stays dark.
- Huge images are decoded with JPEG draft mode when possible and then downscaled;
  Pillow's decompression-bomb guard is replaced by header checks: `max_pixels`, and a
  memory budget `max_decode_bytes` for the decode's peak (`decode_bytes`: the decoded
  pixels at their mode's bytes per pixel, counted per channel, plus the RGB copy and any
  intermediate array), checked after draft mode has reduced the size. A 1 MB PNG of
  20000 x 20000 zeros is within 4e8 pixels but ~1.6 GB to decode: refused, naming the
  file, before a byte is decoded.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from studio_align.errors import DataError

DEFAULT_MAX_SIDE = 1024
DEFAULT_MAX_PIXELS = 400_000_000
DEFAULT_MAX_DECODE_BYTES = 512 << 20
# bytes per pixel of a decoded Pillow mode (channels x bytes per channel)
_MODE_BYTES = {"1": 1, "L": 1, "P": 1, "LA": 2, "La": 2, "PA": 2, "RGB": 3, "YCbCr": 3,
               "LAB": 3, "HSV": 3, "RGBA": 4, "RGBa": 4, "RGBX": 4, "CMYK": 4, "I": 4,
               "F": 4, "I;16": 2, "I;16L": 2, "I;16B": 2, "I;16N": 2}  # fmt: skip
_GREY_BG = (128, 128, 128)


def decode_bytes(mode: str, width: int, height: int) -> int:
    """The peak bytes `load_image` needs for an image of this mode and size: the decoded
    pixels, the 8-bit RGB result, and the intermediate of a conversion (a float32 array
    for 16-bit and float greys, an RGBA pair for alpha)."""
    n = width * height
    extra = {"I": 4, "F": 4, "RGBA": 8, "LA": 8, "PA": 8, "RGBa": 8, "La": 8}.get(mode, 0)
    if mode.startswith("I;16"):
        extra = 4
    return n * (_MODE_BYTES.get(mode, 4) + 3 + extra)


def load_image(
    path: str | Path,
    *,
    max_side: int = DEFAULT_MAX_SIDE,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    max_decode_bytes: int = DEFAULT_MAX_DECODE_BYTES,
) -> Image.Image:
    """Open `path` as an 8-bit RGB image with its longest side at most `max_side`,
    refusing (`DataError`) what would take more than `max_decode_bytes` to decode."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: image file not found")
    old_limit = Image.MAX_IMAGE_PIXELS
    try:
        Image.MAX_IMAGE_PIXELS = None  # checked below against max_pixels, from the header
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(p) as im:
                if im.width * im.height > max_pixels:
                    raise DataError(
                        f"{p}: image is {im.width}x{im.height}, above the {max_pixels} pixel limit"
                    )
                if im.format == "JPEG" and max(im.size) > max_side:
                    im.draft("RGB", (max_side, max_side))  # decode at 1/2 .. 1/8 scale
                need = decode_bytes(im.mode, *im.size)
                if need > max_decode_bytes:
                    raise DataError(
                        f"{p}: image is {im.width}x{im.height} {im.mode}, {need >> 20} MiB to "
                        f"decode, above the {max_decode_bytes >> 20} MiB budget"
                    )
                im.load()
                out = to_rgb(im, source=str(p))
    except DataError:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise DataError(f"{p}: cannot decode image ({type(e).__name__}: {e})") from None
    except Image.DecompressionBombError as e:
        raise DataError(f"{p}: image too large: {e}") from None
    finally:
        Image.MAX_IMAGE_PIXELS = old_limit
    return downscale(out, max_side)


def to_rgb(im: Image.Image, *, source: str = "<image>") -> Image.Image:
    """Convert any Pillow mode to 8-bit RGB (alpha over grey, 16-bit and float rescaled)."""
    mode = im.mode
    if mode == "RGB":
        return im.copy()
    if mode in ("I;16", "I;16L", "I;16B", "I;16N", "I"):
        arr = np.asarray(im, dtype=np.float32)
        scale = 65535.0 if mode.startswith("I;16") or arr.max(initial=0) > 255 else 255.0
        return _grey_to_rgb(arr / scale)
    if mode == "F":
        arr = np.asarray(im, dtype=np.float32)
        scale = 1.0 if arr.max(initial=0) <= 1.0 else 255.0
        return _grey_to_rgb(arr / scale)
    if mode in ("RGBA", "LA", "PA", "RGBa", "La") or (mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        bg = Image.new("RGBA", rgba.size, (*_GREY_BG, 255))
        return Image.alpha_composite(bg, rgba).convert("RGB")
    try:
        return im.convert("RGB")
    except (ValueError, OSError) as e:
        raise DataError(f"{source}: unsupported image mode {mode!r}: {e}") from None


def _grey_to_rgb(arr: np.ndarray) -> Image.Image:
    g = (np.clip(arr, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    return Image.fromarray(np.stack([g, g, g], axis=-1), mode="RGB")


def downscale(im: Image.Image, max_side: int) -> Image.Image:
    """Shrink `im` (keeping aspect) so its longest side is at most `max_side`."""
    if max(im.size) <= max_side:
        return im
    s = max_side / max(im.size)
    size = (max(1, round(im.width * s)), max(1, round(im.height * s)))
    return im.resize(size, Image.Resampling.BILINEAR, reducing_gap=2.0)


def as_rgb_image(image: Image.Image | np.ndarray) -> Image.Image:
    """Accept a PIL image or an array (HxWx3 float in [0,1] or uint8) and return RGB PIL."""
    if isinstance(image, Image.Image):
        return image if image.mode == "RGB" else to_rgb(image)
    arr = np.asarray(image)
    if arr.ndim == 2:
        arr = np.stack([arr] * 3, axis=-1)
    if arr.ndim != 3 or arr.shape[-1] not in (3, 4):
        raise DataError(f"image array has shape {arr.shape}; expected HxWx3")
    arr = arr[..., :3]
    if arr.dtype != np.uint8:
        arr = (np.clip(arr.astype(np.float32), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    return Image.fromarray(arr, mode="RGB")


def as_float_array(image: Image.Image | np.ndarray) -> np.ndarray:
    """Return an HxWx3 float32 array in [0, 1] from a PIL image or array."""
    if isinstance(image, np.ndarray) and image.dtype in (np.float32, np.float64):
        arr = image.astype(np.float32, copy=False)
        if arr.ndim == 2:
            arr = np.stack([arr] * 3, axis=-1)
        return arr[..., :3]
    return np.asarray(as_rgb_image(image), dtype=np.float32) / 255.0
