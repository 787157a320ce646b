"""Fixtures users need too: a toy preference/RL task (`toy`) and synthetic creator logs
(`synth`), used by the test suite and the benchmarks; not imported by the library."""
