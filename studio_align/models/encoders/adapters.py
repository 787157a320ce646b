"""`EncoderLora`: how low-rank adapters fine-tune a pretrained encoder (no JAX here, so
settings and configs can name it without loading the numerics)."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from studio_align.config import Strict


class EncoderLora(Strict):
    """Low-rank adapters on the encoder: `W + (alpha / rank) * A @ B` for every matrix, and
    with `table`, the piece table's rows plus `(alpha / rank) * A[ids] @ B`."""

    model_config = ConfigDict(extra="forbid", frozen=True)  # hashable: part of the graph

    rank: int = Field(8, ge=1)
    alpha: float = Field(16.0, gt=0)
    table: bool = False

    @property
    def scale(self) -> float:
        return self.alpha / self.rank
