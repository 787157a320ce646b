"""Run the router app under uvicorn, with slow clients bounded.

Design choices:

* The checkpoint is loaded (not warmed) before uvicorn starts, so a bad checkpoint or
  settings that would expose the admin routes are a one-line error, not a traceback;
  then the server binds at once and compiles in the background (`/healthz` says
  `warming` until it is done, see `app.py`).
* uvicorn bounds idle keep-alive connections but not a client that trickles a request
  (one header byte every few seconds keeps it alive). The bounded protocols add a
  deadline: a connection must deliver each complete request within `request_timeout_s`
  of the connection opening or of the previous response, or it is closed. A request
  head (request line + headers) over `MAX_HEADER_BYTES` is refused with a 400.
* Connections are capped twice: `max_connections` in all and `max_connections_per_client`
  per client address, so one client's idle sockets cannot lock everyone out. Beyond a cap
  the connection gets a 503 and is closed at once.
* Refusals the protocol answers itself (a malformed request, a cap) use the app's JSON
  error shape, `{"error": "..."}`, like every other error.
* HTTP parsing is httptools (llhttp, C; part of `uvicorn[standard]`); h11 stays available
  (`protocol_for(cfg, parser="h11")`). At concurrency 8 the pure-Python h11 parser was ~40 %
  of the event loop's ~1.5 ms per request, time during which the next batch's requests
  were not yet queued, so batches split (3 + 5 instead of 8) and each request waited for
  the other half's batch; with httptools 20-25 % more requests per second.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import h11
import uvicorn
from threadpoolctl import threadpool_limits
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from studio_align.errors import CheckpointError
from studio_align.serving.app import RouterLike, ServeConfig, create_app, load_router
from studio_align.serving.health import nonfinite_weights
from studio_align.serving.settings import check_bind

MAX_HEADER_BYTES = 16 * 1024


def json_refusal(status: int, phrase: str, reason: str) -> bytes:
    """A whole HTTP/1.1 response in the app's error shape, closing the connection."""
    body = json.dumps({"error": reason}).encode()
    head = (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class _ReadDeadline:
    """A per-request read deadline (`request_timeout`) for a uvicorn HTTP protocol: armed
    when the connection opens and after each response; on expiry, a connection still
    reading its request is closed. Subclasses say whether they are reading (`_reading`).
    Also the connection caps (`_admit`) and JSON refusals (`send_400_response`)."""

    request_timeout: float = 10.0
    max_open: int = 256
    max_per_client: int = 32
    open_by_client: Counter[str]  # shared by every connection of one server (`protocol_for`)
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    _deadline: asyncio.TimerHandle | None = None
    _peer: str | None = None

    def _admit(self, transport: asyncio.Transport) -> bool:
        """Count this connection, or refuse it with a JSON 503 when a cap is reached."""
        peer = transport.get_extra_info("peername")
        addr = str(peer[0]) if isinstance(peer, tuple) and peer else "-"
        counts = self.open_by_client
        if counts[addr] >= self.max_per_client or counts.total() >= self.max_open:
            transport.write(json_refusal(503, "Service Unavailable",
                                         "too many open connections: retry later"))  # fmt: skip
            transport.close()
            return False
        counts[addr] += 1
        self._peer = addr
        return True

    def _release(self) -> None:
        if self._peer is not None:
            self.open_by_client[self._peer] -= 1
            if self.open_by_client[self._peer] <= 0:
                del self.open_by_client[self._peer]
            self._peer = None

    def send_400_response(self, msg: str) -> None:
        self.transport.write(json_refusal(400, "Bad Request", msg))
        self.transport.close()

    def _reading(self) -> bool:
        raise NotImplementedError

    def _arm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(self.request_timeout, self._expire)

    def _expire(self) -> None:
        if self._reading() and not self.transport.is_closing():
            self.transport.close()  # slow or silent client: drop it

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()


class BoundedH11Protocol(_ReadDeadline, H11Protocol):
    """uvicorn's h11 protocol plus the read deadline (h11 caps the head itself)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self._admit(transport):
            self._arm()

    def _reading(self) -> bool:
        return self.conn.their_state in (h11.IDLE, h11.SEND_BODY)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._release()
        super().connection_lost(exc)


class BoundedHttpToolsProtocol(_ReadDeadline, HttpToolsProtocol):
    """uvicorn's httptools protocol plus the read deadline and a cap on the head.

    httptools buffers a header line until it ends, so the head is bounded here as h11
    bounds it: when a read leaves a request's head incomplete, the bytes read since the
    head began (counting that read whole) may not exceed `MAX_HEADER_BYTES`."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._in_request = False  # a request begun and not yet read to its end
        self._in_head = True
        self._head_bytes = 0
        if self._admit(transport):
            self._arm()

    def _reading(self) -> bool:
        """Waiting for request bytes: a request is part-read, or none awaits its response."""
        idle = self.cycle is None or self.cycle.response_complete
        return self._in_request or idle

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._in_head:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEADER_BYTES and not self.transport.is_closing():
                self.send_400_response("Invalid HTTP request received.")

    def on_message_begin(self) -> None:
        self._in_request, self._in_head, self._head_bytes = True, True, 0
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_request = False
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._release()
        super().connection_lost(exc)


def enable_compile_cache(path: str | None, min_compile_s: float = 0.5) -> None:
    """Persist compiled decode programs across server restarts (no-op when `path` is None)."""
    if not path:
        return
    import jax

    jax.config.update("jax_compilation_cache_dir", str(Path(path).expanduser()))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", min_compile_s)


def limit_blas_threads(n: int) -> None:
    """Cap numpy's BLAS (OpenBLAS) threads for the process; 0 leaves them as they are.

    The server's numpy products are small ([batch, 128] x [128, exemplars] for the memory,
    [batch * classes, 128] x [128, 128] for unfamiliarity); with the decoder's XLA threads
    on the same cores, OpenBLAS's own threads spin on each other: measured 67 ms for the
    memory product of a batch of 8 with 1,600 exemplars on 2 loaded cores, 1.9 ms with one
    thread."""
    if n > 0:
        threadpool_limits(limits=n, user_api="blas")


def _announce(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def protocol_for(cfg: ServeConfig, *, parser: str = "httptools") -> type[asyncio.Protocol]:
    """The bounded protocol class for `cfg`, parsing with httptools or h11."""
    if parser not in ("httptools", "h11"):
        raise ValueError(f"parser must be 'httptools' or 'h11', got {parser!r}")
    base: type[asyncio.Protocol] = (
        BoundedH11Protocol if parser == "h11" else BoundedHttpToolsProtocol
    )
    return type(
        "ServeProtocol",
        (base,),
        {
            "request_timeout": cfg.request_timeout_s,
            "max_open": cfg.max_connections,
            "max_per_client": cfg.max_connections_per_client,
            "open_by_client": Counter(),
        },
    )


def serve(cfg: ServeConfig, *, log_level: str = "warning") -> None:
    check_bind(cfg)
    enable_compile_cache(cfg.compile_cache_dir, cfg.compile_cache_min_s)
    limit_blas_threads(cfg.blas_threads)
    first = load_router(cfg.checkpoint)
    model = getattr(first, "model", None)
    if model is not None and nonfinite_weights(model):
        raise CheckpointError(f"{cfg.checkpoint}: refused: the model has non-finite weights")
    preloaded: dict[str, RouterLike] = {cfg.checkpoint: first}

    def loader(path: str) -> RouterLike:
        return preloaded.pop(path, None) or load_router(path)

    app = create_app(cfg, loader=loader, announce=_announce)
    config: Any = uvicorn.Config(
        app,
        host=cfg.host,
        port=cfg.port,
        log_level=log_level,
        access_log=False,
        loop="auto",
        http=protocol_for(cfg),
        timeout_keep_alive=cfg.keep_alive_s,
        # the caps are the protocol's (`_admit`): uvicorn's own answers in plain text
        limit_concurrency=None,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        timeout_graceful_shutdown=5,
        server_header=False,
    )
    _announce(  # only once the checkpoint, keys and feedback log have all been accepted
        f"serving {cfg.checkpoint} on http://{cfg.host}:{cfg.port} "
        "(GET /healthz answers 503 until warm-up is done)"
    )
    uvicorn.Server(config).run()
