"""Film colour grading: the first vertical generation model.

`renderer` applies grading parameters to pixels, `scenes` draws procedural source images,
`creator` simulates a creator with a hidden taste and writes their logs, `policy` maps a
source image and a style request to a Gaussian over parameters, `bc` clones retouches,
`tune` runs GRPO through `studio_align.algorithms.grpo`, and `demo` ties it together.
"""
