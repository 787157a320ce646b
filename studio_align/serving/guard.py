"""Raw ASGI middleware in front of the app: request limits, one error shape, metrics.

Design choices:

* **Headers are bytes and decoding never raises**: they are read as latin-1 (every byte
  maps to a character), as HTTP allows, so a header holding `\\xff` is just an odd value.
* **The body is read here, completely and bounded, before the app sees it.** A
  `Content-Length` over `max_body_bytes` is refused at once; a chunked body is counted as
  it arrives and refused as soon as it passes the limit. Either way the answer is 413 in
  the `{"error": ...}` shape. A POST body must be UTF-8 JSON (`application/json`): another
  content type is 415 and invalid UTF-8 is 400, before any parsing. The app then gets the
  buffered body replayed as a single message.
* **Every request is counted once**, labelled with the route template the router matched
  (starlette stores it in the scope) or `"unmatched"`, so raw paths never become labels.
* Anything the app lets escape becomes a 500 `{"error": "internal server error"}` and a
  log line, never a traceback to the client.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import MutableMapping
from typing import Any

from studio_align.serving.metrics import Metrics

log = logging.getLogger("studio_align.serving")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of header `name` (lower-case bytes) as latin-1 text, or None."""
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def send_error(send: Any, status: int, reason: str, headers: list[Any] | None = None) -> None:
    """Send a complete `{"error": reason}` JSON response."""
    body = json.dumps({"error": reason}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class Guard:
    """Wrap an ASGI app with the limits and accounting described in the module docstring."""

    def __init__(self, app: Any, *, metrics: Metrics, max_body_bytes: int) -> None:
        self.app = app
        self.metrics = metrics
        self.limit = max_body_bytes

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 500, "started": False}

        async def tracked_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
                status["started"] = True
            await send(message)

        try:
            try:
                body = await self._read_body(scope, receive)
            except _Refused as r:
                await send_error(tracked_send, r.status, r.reason, [(b"connection", b"close")])
                return
            await self.app(scope, _replay(body, receive), tracked_send)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if not status["started"]:
                await send_error(tracked_send, 500, "internal server error")
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) if route is not None else None
            self.metrics.record_request(
                template, str(scope.get("method", "")), status["code"], time.perf_counter() - start
            )

    async def _read_body(self, scope: Scope, receive: Any) -> bytes:
        length = header(scope, b"content-length")
        if length is not None:
            if not length.strip().isdigit():
                raise _Refused(400, "invalid Content-Length header")
            if int(length) > self.limit:
                raise _Refused(413, f"request body over {self.limit} bytes")
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.limit:
                raise _Refused(413, f"request body over {self.limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if scope["method"] == "POST":
            ctype = (header(scope, b"content-type") or "").split(";")[0].strip().lower()
            if ctype != "application/json":
                raise _Refused(415, f"content type must be application/json, got {ctype!r}")
            try:
                body.decode("utf-8")
            except UnicodeDecodeError as e:
                raise _Refused(400, f"request body is not valid UTF-8 (byte {e.start})") from None
        return body


def _replay(body: bytes, receive: Any) -> Any:
    """A `receive` that yields the buffered body once, then waits on the real one."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return dict(await receive())

    return replay
