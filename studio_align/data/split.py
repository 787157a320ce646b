"""Deterministic train / held-out split by (creator, session) group.

Design choices:

- The unit of splitting is the **group** `(creator, session)`, never the line, so the
  events of one creator's session never land on both sides (no leakage from a session's
  selections or re-routes into its own held-out figures). Events without a session
  (retouches and ratings usually) form the group `(creator, None)`.
- The side is a pure function of `(seed, creator, session)`: a keyed hash mapped to
  [0, 1) and compared with `heldout_fraction`. No pass over the data is needed (the
  compiler streams), the order of lines does not matter, and when new logs arrive an
  existing group never changes side, so a model trained on an earlier compile is never
  evaluated on what it trained on. The price: the held-out share is `heldout_fraction`
  in expectation, not exactly; with few groups it can differ (the manifest records
  the actual counts and warns when one side is empty).
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

Split = Literal["train", "heldout"]
SPLITS: tuple[Split, Split] = ("train", "heldout")


def group_key(creator: str, session: str | None) -> str:
    """A stable, unambiguous key of a (creator, session) group."""
    return json.dumps([creator, session], ensure_ascii=False, separators=(",", ":"))


def group_score(creator: str, session: str | None, *, seed: int) -> float:
    """A uniform number in [0, 1) fixed by (seed, creator, session)."""
    h = hashlib.blake2b(
        group_key(creator, session).encode("utf-8"), digest_size=8, key=_seed_key(seed)
    )
    return int.from_bytes(h.digest(), "big") / 2.0**64


def assign_split(creator: str, session: str | None, *, seed: int, heldout_fraction: float) -> Split:
    """`"heldout"` for a `heldout_fraction` share of groups (in expectation), else `"train"`."""
    if not 0.0 <= heldout_fraction <= 1.0:
        raise ValueError(f"heldout_fraction must be in [0, 1], got {heldout_fraction}")
    return "heldout" if group_score(creator, session, seed=seed) < heldout_fraction else "train"


def _seed_key(seed: int) -> bytes:
    return str(int(seed)).encode("ascii")
