"""Who may teach the memory and read a creator's exemplars: platforms that sign requests.

The scheme (docs/serving.md, "Authentication"): every platform has a secret key, known
to its backend and to the server (`feedback_keys_file`). The backend signs each request
it sends on a creator's behalf:

    X-Studio-Platform:  <platform id>
    X-Studio-Timestamp: <unix seconds>
    X-Studio-Signature: hex(HMAC-SHA256(key, "<timestamp>.<METHOD>.<path>." + body))

Design choices:
- HMAC over the exact body, not a bearer token: a signature cannot be replayed for
  another body or another route, a leaked log of requests holds no credential, and the
  creator id inside a signed body is vouched for by the platform that owns it.
- A creator is a platform's: the memory keys exemplars by `<platform>:<creator>`, so one
  platform cannot reach another platform's creators even with the same id.
- Replay is bounded: the timestamp must be within `MAX_SKEW_S` of the server's clock and a
  signature is accepted once (signatures seen within the window are remembered).
- Each event the server writes carries a MAC over its own content with the platform's
  key (`seal`), and the memory counts a logged event only when that MAC verifies
  (`opened_by`): a line added to the log by hand, or by a platform whose key was revoked,
  teaches nothing.
- Keys are compared and MACs checked in constant time (`hmac.compare_digest`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
import time
import tomllib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from studio_align.errors import ConfigError

MIN_KEY_CHARS = 32
MAX_SKEW_S = 300.0
PLATFORM_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SEAL_FIELD = "auth"


class AuthError(Exception):
    """A request's credentials are missing (401) or wrong (403)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def load_keys(path: str | Path) -> dict[str, bytes]:
    """Platform keys from a TOML file: `[platforms]` then `<id> = "<secret>"` lines."""
    p = Path(path).expanduser()
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as e:
        raise ConfigError(f"{p}: cannot read the platform keys ({e})") from None
    platforms = data.get("platforms")
    if not isinstance(platforms, dict) or not platforms:
        raise ConfigError(f'{p}: needs a [platforms] table of `<id> = "<secret>"` entries')
    keys: dict[str, bytes] = {}
    for name, secret in platforms.items():
        if not PLATFORM_PATTERN.match(name):
            raise ConfigError(f"{p}: platforms.{name}: a platform id is [A-Za-z0-9._-], 1-64")
        if not isinstance(secret, str) or len(secret) < MIN_KEY_CHARS:
            raise ConfigError(
                f"{p}: platforms.{name}: the key must be text of at least {MIN_KEY_CHARS} chars"
            )
        keys[name] = secret.encode("utf-8")
    return keys


def signature(key: bytes, timestamp: str, method: str, path: str, body: bytes) -> str:
    """The request signature a platform's backend sends (see the module docstring)."""
    msg = f"{timestamp}.{method.upper()}.{path}.".encode() + body
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


def signed_headers(
    platform: str, key: bytes, method: str, path: str, body: bytes, *, now: float | None = None
) -> dict[str, str]:
    """The headers a client adds to sign a request (used by tests, benches and clients)."""
    ts = str(int(time.time() if now is None else now))
    return {
        "X-Studio-Platform": platform,
        "X-Studio-Timestamp": ts,
        "X-Studio-Signature": signature(key, ts, method, path, body),
    }


def creator_key(platform: str, creator: str) -> str:
    """The memory's key for a platform's creator."""
    return f"{platform}:{creator}"


def _canonical(event: Mapping[str, Any]) -> bytes:
    body = {k: v for k, v in event.items() if k != SEAL_FIELD}
    return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


class Verifier:
    """Checks request signatures and seals logged events for a set of platform keys."""

    def __init__(
        self, keys: Mapping[str, bytes], *, clock: Callable[[], float] = time.time
    ) -> None:
        self.keys = dict(keys)
        self.clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()  # signature -> expiry
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self.keys)

    def platform(
        self, headers: Mapping[str, str], method: str, path: str, body: bytes, *, once: bool = True
    ) -> str:
        """The platform that signed this request; `AuthError` when unsigned or wrong.
        `once`: refuse a signature seen before (for requests that change state)."""
        name = headers.get("x-studio-platform")
        ts = headers.get("x-studio-timestamp")
        sig = headers.get("x-studio-signature")
        if name is None and ts is None and sig is None:
            raise AuthError(401, "signed request required (X-Studio-Platform, -Timestamp, "
                            "-Signature: see docs/serving.md)")  # fmt: skip
        if name is None or ts is None or sig is None:
            raise AuthError(401, "X-Studio-Platform, X-Studio-Timestamp and X-Studio-Signature "
                            "go together")  # fmt: skip
        key = self.keys.get(name)
        if key is None:
            raise AuthError(403, "unknown platform or wrong signature")
        try:
            when = float(ts) if re.fullmatch(r"\d{1,12}", ts) else None
        except ValueError:
            when = None
        now = self.clock()
        if when is None or abs(now - when) > MAX_SKEW_S:
            raise AuthError(403, f"X-Studio-Timestamp must be unix seconds within "
                            f"{MAX_SKEW_S:.0f} s of the server's clock")  # fmt: skip
        expected = signature(key, ts, method, path, body)
        if not hmac.compare_digest(expected.encode(), sig.strip().lower().encode("latin-1")):
            raise AuthError(403, "unknown platform or wrong signature")
        if not once:
            return name
        with self._lock:
            while self._seen and next(iter(self._seen.values())) < now:
                self._seen.popitem(last=False)
            if expected in self._seen:
                raise AuthError(403, "this signature was already used (a replayed request)")
            self._seen[expected] = now + 2 * MAX_SKEW_S
        return name

    def seal(self, event: dict[str, Any], platform: str) -> dict[str, Any]:
        """`event` with a MAC over its content by `platform`'s key (checked by `opened_by`)."""
        mac = hmac.new(self.keys[platform], _canonical(event), hashlib.sha256).hexdigest()
        return {**event, SEAL_FIELD: {"platform": platform, "mac": mac}}

    def opened_by(self, event: Mapping[str, Any]) -> str | None:
        """The platform whose key sealed this logged event, or None (unsealed or forged)."""
        seal = event.get(SEAL_FIELD)
        if not isinstance(seal, dict):
            return None
        name, mac = seal.get("platform"), seal.get("mac")
        key = self.keys.get(name) if isinstance(name, str) else None
        if key is None or not isinstance(mac, str):
            return None
        expected = hmac.new(key, _canonical(event), hashlib.sha256).hexdigest()
        return (
            name if hmac.compare_digest(expected.encode(), mac.encode("utf-8", "replace")) else None
        )


class RateLimiter:
    """Token buckets per key (`rate` per second, `burst` at most), bounded in number: the
    least recently used bucket is forgotten beyond `max_keys` (a forgotten key starts
    full, so a flood of fresh keys gains at most `burst` each and the table stays small)."""

    def __init__(
        self, rate: float, burst: float, *, max_keys: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.rate, self.burst, self.max_keys, self.clock = rate, burst, max_keys, clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def allow(self, key: str) -> float:
        """0.0 when `key` may go now (one token taken), else seconds until it may."""
        now = self.clock()
        with self._lock:
            tokens, last = self._buckets.pop(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            wait = 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate
            self._buckets[key] = (tokens - 1.0 if wait == 0.0 else tokens, now)
            if len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)
        return wait
