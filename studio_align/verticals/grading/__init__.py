"""Film colour grading: the first vertical generation model.

Engine pieces: `renderer` (parameters -> pixels, per-pixel only), `lut` (`.cube` 3D LUTs),
`color` (CIEDE2000), `policy` (Gaussian over parameters), `objectives` (BC and DPO losses,
GRPO rollouts). From a platform's logs: `logs` (retouch, selection, rating events),
`dataset` (thumbnails and arrays), `model` (the served, creator-conditioned model),
`run_config` + `train` (`train grading`), `apply` (`grade`), `evaluate` (`eval grading`),
`task` + `plugin` (the `grading` task), `rollout` (GRPO's policy), `report`, `commands`.
Its simulator (scenes, creators with a hidden taste, a platform export, the oracle
comparison) is `studio_align.simulate.grading`. See docs/grading.md.
"""
