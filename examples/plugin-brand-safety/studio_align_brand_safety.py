"""studio-align plugin: the `brand_safety` reward.

Penalises banned terms in what a creator asked for: each sample scores 0.0 when its
prompt and request text are clean and -1.0 per banned-term occurrence otherwise; a
sample with neither a prompt nor a request gets no opinion (`None`).

The banned list defaults to `DEFAULT_BANNED`; set `BRAND_SAFETY_BANNED` to a
comma-separated list to replace it. ASCII terms match whole words, case-insensitively;
other terms (Chinese, say) match as substrings, since such scripts have no spaces.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import Any

from studio_align.hookspecs import hookimpl

DEFAULT_BANNED: tuple[str, ...] = ("gore", "nsfw", "counterfeit", "knockoff", "盗版")


def banned_terms() -> tuple[str, ...]:
    env = os.environ.get("BRAND_SAFETY_BANNED")
    if env is None:
        return DEFAULT_BANNED
    return tuple(t.strip() for t in env.split(",") if t.strip())


def _pattern(terms: Sequence[str]) -> re.Pattern[str] | None:
    parts = [rf"\b{re.escape(t)}\b" if t.isascii() else re.escape(t) for t in terms]
    return re.compile("|".join(parts), re.IGNORECASE) if parts else None


def _text(request: Any) -> str:
    if request is None:
        return ""
    if isinstance(request, str):
        return request
    if isinstance(request, dict):
        return str(request.get("text", ""))
    return str(getattr(request, "text", ""))


def brand_safety(
    prompts: Sequence[str | None] | None = None, requests: Sequence[Any] | None = None
) -> list[float | None]:
    """0.0 for clean text, -1.0 per banned-term occurrence; None without any text."""
    n = len(prompts) if prompts is not None else len(requests) if requests is not None else 0
    pattern = _pattern(banned_terms())
    out: list[float | None] = []
    for i in range(n):
        prompt = prompts[i] if prompts is not None else None
        request = requests[i] if requests is not None else None
        if prompt is None and request is None:
            out.append(None)
            continue
        text = f"{prompt or ''}\n{_text(request)}"
        out.append(-float(len(pattern.findall(text))) if pattern else 0.0)
    return out


@hookimpl
def studio_align_register_rewards(register: Callable[..., None]) -> None:
    register(brand_safety)
