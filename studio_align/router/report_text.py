"""The words of the router report: human labels for every key, the headline, a glossary.

Design choices:
- The report's data keeps its machine keys (`heldout_majority`, `creator_agreement`, ...);
  this module is the one place they become words, so a figure is never shown under a
  raw key. An unknown key falls back to its words (`my_set` -> "my set"), never fails.
- The headline is computed from the stage rows, not written by the caller: the first
  and the last stage that ran, on the figure that matters most (agreement with unseen
  creators when there is one), as `before -> after (+gain points)`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

SET_LABELS = {
    "creators": "unseen creators' preferred plans",
    "heldout": "held-out requests (labelled plans)",
    "heldout_majority": "held-out requests (majority creator's plan)",
    "handwritten": "handwritten requests (labelled plans)",
    "handwritten_majority": "handwritten requests (majority creator's plan)",
}

COLUMN_LABELS = {
    "stage": "stage",
    "status": "status",
    "seconds": "training (s)",
    "eval_seconds": "evaluation (s)",
    "creator_agreement": "agreement with unseen creators",
    "heldout_exact": "held-out, labels",
    "heldout_majority_exact": "held-out, majority plan",
    "handwritten_exact": "handwritten, labels",
    "handwritten_majority_exact": "handwritten, majority plan",
    "validity_rate": "valid plans",
    "exact_plan_accuracy": "exact-plan accuracy",
    "step_f1": "step F1",
    "n": "requests",
    "language": "language",
    "plan length": "plan length (steps)",
    "intent": "intent (reference plan)",
    "request": "request",
    "attachments": "attachments",
    "gold": "wanted plan",
    "predicted": "router's plan",
    "confidence": "confidence",
}

STAGE_LABELS = {
    "sft": "SFT",
    "dpo": "DPO",
    "kto": "KTO",
    "grpo": "GRPO",
    "data": "data",
    "grading": "grading vertical",
    "report": "report",
}

GLOSSARY = {
    "SFT": "supervised fine-tuning on labelled requests",
    "DPO": "direct preference optimisation on creators' re-routes (final plan ≻ proposed)",
    "KTO": "Kahneman-Tversky optimisation on accepted (good) and abandoned (bad) plans",
    "GRPO": "group relative policy optimisation: sampled plans scored by reward plugins",
    "BC": "behaviour cloning: imitating the creator's own retouches (grading vertical)",
    "exact-plan accuracy": "share of requests whose whole plan is right, steps and order",
    "step F1": "partial credit: F1 of the plan's steps in order (longest common subsequence)",
    "ECE": "expected calibration error: mean gap between confidence and accuracy",
    "majority plan": "the plan most simulated creators would want; the best one router can do",
}


def words(key: str) -> str:
    """A key as words: `heldout_majority` -> "held-out requests (majority creator's plan)"."""
    for table in (SET_LABELS, COLUMN_LABELS, STAGE_LABELS):
        if key in table:
            return table[key]
    return key.replace("_", " ")


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def headline(stages: Sequence[Mapping[str, Any]], main_value: float | None = None) -> str:
    """One sentence: the gain from the first to the last stage that ran, in points."""
    ok = [s for s in stages if s.get("status", "ok") == "ok"]
    if len(ok) < 2:
        if main_value is not None:
            return f"Exact-plan accuracy {main_value:.1%}."
        return ""
    first, last = ok[0], ok[-1]
    a, b = words(str(first["stage"])), words(str(last["stage"]))
    parts = []
    for key, what in (
        ("creator_agreement", "agreement with creators it never saw"),
        ("handwritten_majority_exact", "handwritten requests, against the majority creator's plan"),
        ("heldout_exact", "held-out requests, against their labels"),
    ):
        x, y = first.get(key), last.get(key)
        if isinstance(x, int | float) and isinstance(y, int | float) and _finite(x) and _finite(y):
            parts.append(f"{what} {x:.1%} → {y:.1%} ({(y - x) * 100:+.1f} points)")
    if not parts:
        return ""
    lead = f"From {a} to {b}: " + parts[0] + "."
    rest = "; ".join(parts[1:])
    return lead + (f" Also {rest}." if rest else "")


def glossary_html(used: str) -> str:
    """A definition list of the abbreviations that occur in `used` (the page's text)."""
    items = [(k, v) for k, v in GLOSSARY.items() if k in used]
    if not items:
        return ""
    rows = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in items)
    return f"<h2>Terms</h2><dl class='glossary'>{rows}</dl>"
