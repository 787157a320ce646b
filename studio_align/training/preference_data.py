"""Former name of `training.packing`, kept so existing scripts (the peers harness) import."""

from studio_align.training.packing import pack_completions, pack_pairs, pack_unpaired

__all__ = ["pack_completions", "pack_pairs", "pack_unpaired"]
