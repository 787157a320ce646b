"""CIEDE2000 colour difference, vectorised numpy, for grading evaluation and LUT checks.

`delta_e2000(lab1, lab2)` follows Sharma, Wu and Dalal (2005), "The CIEDE2000
colour-difference formula: implementation notes, supplementary test data and
mathematical observations" (kL = kC = kH = 1), including the hue-mean and hue-difference
cases the notes single out; the tests check it against the notes' published pairs.
`mean_delta_e(rgb1, rgb2)` is the per-image mean over pixels of sRGB images in [0, 1]
(converted with `reward_models.color_stats.srgb_to_lab`, D65), which is what the grading
evaluation and the LUT-fidelity check report.
"""

from __future__ import annotations

import numpy as np

from studio_align.reward_models.color_stats import srgb_to_lab


def delta_e2000(lab1: np.ndarray, lab2: np.ndarray) -> np.ndarray:
    """CIEDE2000 between Lab arrays [..., 3] (broadcasting); returns [...] float64."""
    lab1 = np.asarray(lab1, np.float64)
    lab2 = np.asarray(lab2, np.float64)
    L1, a1, b1 = lab1[..., 0], lab1[..., 1], lab1[..., 2]
    L2, a2, b2 = lab2[..., 0], lab2[..., 1], lab2[..., 2]
    c1 = np.hypot(a1, b1)
    c2 = np.hypot(a2, b2)
    cbar7 = ((c1 + c2) / 2.0) ** 7
    g = 0.5 * (1.0 - np.sqrt(cbar7 / (cbar7 + 25.0**7)))
    a1p, a2p = (1.0 + g) * a1, (1.0 + g) * a2
    c1p, c2p = np.hypot(a1p, b1), np.hypot(a2p, b2)
    h1p = np.degrees(np.arctan2(b1, a1p)) % 360.0
    h2p = np.degrees(np.arctan2(b2, a2p)) % 360.0
    h1p = np.where((a1p == 0) & (b1 == 0), 0.0, h1p)
    h2p = np.where((a2p == 0) & (b2 == 0), 0.0, h2p)

    dLp = L2 - L1
    dCp = c2p - c1p
    zero = c1p * c2p == 0
    dh = h2p - h1p
    dh = np.where(dh > 180.0, dh - 360.0, np.where(dh < -180.0, dh + 360.0, dh))
    dh = np.where(zero, 0.0, dh)
    dHp = 2.0 * np.sqrt(c1p * c2p) * np.sin(np.radians(dh) / 2.0)

    Lbar = (L1 + L2) / 2.0
    Cbar = (c1p + c2p) / 2.0
    hsum = h1p + h2p
    hbar = np.where(
        np.abs(h1p - h2p) <= 180.0,
        hsum / 2.0,
        np.where(hsum < 360.0, (hsum + 360.0) / 2.0, (hsum - 360.0) / 2.0),
    )
    hbar = np.where(zero, hsum, hbar)
    t = (
        1.0
        - 0.17 * np.cos(np.radians(hbar - 30.0))
        + 0.24 * np.cos(np.radians(2.0 * hbar))
        + 0.32 * np.cos(np.radians(3.0 * hbar + 6.0))
        - 0.20 * np.cos(np.radians(4.0 * hbar - 63.0))
    )
    d_theta = 30.0 * np.exp(-(((hbar - 275.0) / 25.0) ** 2))
    cbar7p = Cbar**7
    rc = 2.0 * np.sqrt(cbar7p / (cbar7p + 25.0**7))
    sl = 1.0 + 0.015 * (Lbar - 50.0) ** 2 / np.sqrt(20.0 + (Lbar - 50.0) ** 2)
    sc = 1.0 + 0.045 * Cbar
    sh = 1.0 + 0.015 * Cbar * t
    rt = -np.sin(np.radians(2.0 * d_theta)) * rc
    tl, tc, th = dLp / sl, dCp / sc, dHp / sh
    return np.sqrt(np.maximum(tl * tl + tc * tc + th * th + rt * tc * th, 0.0))


def mean_delta_e(rgb1: np.ndarray, rgb2: np.ndarray) -> np.ndarray:
    """Mean CIEDE2000 over pixels of sRGB images [..., H, W, 3] in [0, 1]; returns [...]."""
    d = delta_e2000(srgb_to_lab(np.asarray(rgb1)), srgb_to_lab(np.asarray(rgb2)))
    return d.mean(axis=(-2, -1))
