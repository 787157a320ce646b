"""Reward models over images: encoders, embedding cache, Bradley-Terry preference heads.

- `images`: robust loading (missing/corrupt files, alpha, greyscale, 16-bit, huge images)
- `color_stats`: the built-in `color-stats` encoder; `clip`: open_clip from local weights
- `cache`: on-disk embedding cache keyed by content hash + encoder identity
- `preference`: NNX Bradley-Terry heads (population + per-creator), save/load, quality gate
- `train`: `studio-align train reward` (selection logs -> pairs -> embeddings -> head)
- `scorer`: a trained head bundled with its encoder; `ssim`: the identity reward's metric
"""
