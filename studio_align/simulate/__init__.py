"""Simulators: seeded demo platforms whose creators' tastes are known, so that alignment
can be measured where no real creator is at hand.

One place per product: `simulate.router` (labelled requests, simulated creators and
their route logs, the demo platform the quickstart trains on), `simulate.grading` (photo
scenes, creators with a hidden colour taste, a platform export of their logs),
`simulate.flow` (creators with a hidden taste over key and composition).

Simulators sit above the products and write what a platform would export (JSON Lines
logs, images); the products and the engine never import them (an import-linter
contract), so nothing a product does depends on knowing a creator's hidden taste. The
quickstart and the benchmarks run a simulator, then each product's pipeline.
"""
