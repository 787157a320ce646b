"""`ServeConfig` and the checks a server runs on it before it binds.

Design choices:

* **Admin access is refused rather than left open.** `/admin/*` can load a checkpoint,
  so a server bound to anything but a loopback address must have an `admin_token`
  (at least `MIN_TOKEN_CHARS` characters); without one it refuses to start and says
  why. On loopback with no token the admin routes stay open to local callers only.
* **Feedback is refused rather than trusted.** A server bound to anything but loopback
  must have platform keys (`feedback_keys_file`, `auth.py`); with keys, unsigned feedback
  is refused (401) and only signed events teach the memory. On loopback without keys,
  feedback is written to the log for training and teaches the memory nothing.
* **Reloads come only from configured roots** (`checkpoint_roots`, default: the parent
  folder of the starting checkpoint). A target is resolved (symlinks followed) before it
  is compared, so `..` and links cannot step outside; nothing is opened or stat-ed for a
  target outside the roots, so a refusal reveals nothing about what exists.
* **Nothing is written to the working directory by default**: the feedback log lives
  beside the checkpoint (`<checkpoint parent>/feedback/route_events.jsonl`), or under
  `feedback_dir` when that is set, or exactly at `feedback_log`.
* Slow clients are bounded: `request_timeout_s` is how long a connection may take to
  send one complete request, `keep_alive_s` how long it may idle between requests,
  `max_connections` how many may be open (uvicorn answers 503 beyond that).
"""

from __future__ import annotations

import hmac
import ipaddress
from pathlib import Path

from pydantic import Field

from studio_align.config import Strict
from studio_align.errors import ConfigError
from studio_align.router.memory import MemorySettings

MIN_TOKEN_CHARS = 16
FEEDBACK_FILE = "route_events.jsonl"


class ServeConfig(Strict):
    """`studio-align serve router` settings (TOML via `--config`, `--set key=value`)."""

    checkpoint: str
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    feedback_log: str | None = None  # default: feedback_dir / route_events.jsonl
    feedback_dir: str | None = None  # default: <checkpoint parent>/feedback
    # the log is closed as a segment beside it once it holds this many MiB (0: never), so a
    # reload reads at most two segments and retries are remembered for two (feedback.py)
    feedback_rotate_mb: float = Field(64.0, ge=0.0)
    # None: the checkpoint's own decision (thresholds fitted on validation and saved with
    # its calibration), 0.5 for a router without one; a number applies on top of either
    abstain_below: float | None = Field(None, ge=0.0, le=1.0)
    remember_feedback: bool = True  # signed accepted / re-routed feedback -> exemplar memory
    # TOML `[platforms]` id = "secret" (>= 32 chars): who may sign feedback (docs/serving.md)
    feedback_keys_file: str | None = None
    memory: MemorySettings | None = None  # None: the checkpoint memory's settings, or defaults
    # feedback posts per second (and burst) per source (a platform, or a client address
    # when unsigned), and per creator
    feedback_rate: float = Field(50.0, gt=0.0, le=1e6)
    feedback_burst: int = Field(200, ge=1)
    creator_feedback_rate: float = Field(1.0, gt=0.0, le=1e6)
    creator_feedback_burst: int = Field(30, ge=1)
    max_batch: int = Field(64, ge=1, le=1024)
    # Batches are padded up to one of these sizes (repeating the last request), so only a
    # few shapes are ever compiled; batch compute on CPU barely grows within a bucket.
    batch_buckets: list[int] = Field(default_factory=lambda: [1, 2, 4, 8, 16, 32, 64])
    max_wait_ms: float = Field(2.0, ge=0.0, le=1000.0)
    max_body_bytes: int = Field(64 * 1024, ge=1024, le=16 * 1024 * 1024)
    warmup: bool = True
    watch_seconds: float = Field(0.0, ge=0.0)  # > 0: poll the checkpoint dir, reload on change
    admin_token: str | None = None
    checkpoint_roots: list[str] = Field(default_factory=list)  # default: checkpoint's parent
    request_timeout_s: float = Field(10.0, gt=0.0, le=600.0)
    keep_alive_s: int = Field(5, ge=1, le=600)
    max_connections: int = Field(256, ge=1)
    max_connections_per_client: int = Field(32, ge=1)  # one address cannot take them all
    # numpy BLAS threads (memory lookup, calibration): the products are tiny and XLA's pool
    # already uses the cores, so more threads only spin; 0 keeps the library's default
    blas_threads: int = Field(1, ge=0)
    # XLA's persistent compilation cache: a restarted server warms up from disk in seconds.
    compile_cache_dir: str | None = "~/.cache/studio-align/xla"
    # programs compiling faster than this are not written to the cache (JAX's own knob)
    compile_cache_min_s: float = Field(0.5, ge=0.0)


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback IP literals; any other name counts as public."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(cfg: ServeConfig) -> None:
    """Refuse settings that would expose the admin routes (raises `ConfigError`)."""
    token = cfg.admin_token
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"admin_token: must be at least {MIN_TOKEN_CHARS} characters")
    if token is None and not is_loopback(cfg.host):
        raise ConfigError(
            f"host {cfg.host!r} is not a loopback address, so /admin/reload would be open to "
            "the network: set an admin token (STUDIO_ALIGN_ADMIN_TOKEN or --set admin_token=...)"
            " or bind 127.0.0.1"
        )
    if cfg.feedback_keys_file is None and not is_loopback(cfg.host):
        raise ConfigError(
            f"host {cfg.host!r} is not a loopback address, so /v1/feedback would let anyone "
            "teach the memory: set feedback_keys_file (platform keys, docs/serving.md) or "
            "bind 127.0.0.1"
        )


def token_matches(expected: str, given: str | None) -> bool:
    """Constant-time comparison of the admin token (header values are latin-1 text)."""
    if given is None:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), given.encode("latin-1", errors="replace"))


def reload_roots(cfg: ServeConfig) -> list[Path]:
    """The folders reloads may come from, resolved."""
    roots = cfg.checkpoint_roots or [str(Path(cfg.checkpoint).resolve().parent)]
    return [Path(r).expanduser().resolve() for r in roots]


def within_roots(target: str, roots: list[Path]) -> Path | None:
    """`target` resolved, if it lies inside (or is) one of `roots`; else None."""
    if not target or "\x00" in target:
        return None
    try:
        resolved = Path(target).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    for root in roots:
        if resolved.is_relative_to(root):
            return resolved
    return None


def feedback_path(cfg: ServeConfig) -> Path:
    """Where `/v1/feedback` appends: never the working directory unless asked."""
    if cfg.feedback_log:
        return Path(cfg.feedback_log).expanduser()
    base = (
        Path(cfg.feedback_dir).expanduser()
        if cfg.feedback_dir
        else Path(cfg.checkpoint).resolve().parent / "feedback"
    )
    return base / FEEDBACK_FILE
