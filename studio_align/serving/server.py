"""Run the router app under uvicorn, with slow clients bounded.

Design choices:

* The checkpoint is loaded (not warmed) before uvicorn starts, so a bad checkpoint or
  settings that would expose the admin routes are a one-line error, not a traceback;
  then the server binds at once and compiles in the background (`/healthz` says
  `warming` until it is done, see `app.py`).
* uvicorn bounds idle keep-alive connections but not a client that trickles a request
  (one header byte every few seconds keeps it alive). `BoundedH11Protocol` adds a
  deadline: a connection must deliver each complete request within `request_timeout_s`
  of the connection opening or of the previous response, or it is closed. h11 also caps
  the header size (`h11_max_incomplete_event_size`), and `max_connections` caps how many
  connections may be open (uvicorn answers 503 beyond it).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import h11
import uvicorn
from threadpoolctl import threadpool_limits
from uvicorn.protocols.http.h11_impl import H11Protocol

from studio_align.errors import CheckpointError
from studio_align.serving.app import RouterLike, ServeConfig, create_app, load_router
from studio_align.serving.health import nonfinite_weights
from studio_align.serving.settings import check_bind

MAX_HEADER_BYTES = 16 * 1024


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol plus a per-request read deadline (`request_timeout`)."""

    request_timeout: float = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._arm()

    def _arm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(self.request_timeout, self._expire)

    def _expire(self) -> None:
        reading = self.conn.their_state in (h11.IDLE, h11.SEND_BODY)
        if reading and not self.transport.is_closing():
            self.transport.close()  # slow or silent client: drop it

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if getattr(self, "_deadline", None) is not None:
            self._deadline.cancel()  # type: ignore[union-attr]
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


def protocol_for(cfg: ServeConfig) -> type[H11Protocol]:
    return type(
        "ServeH11Protocol", (BoundedH11Protocol,), {"request_timeout": cfg.request_timeout_s}
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
        limit_concurrency=cfg.max_connections,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        timeout_graceful_shutdown=5,
        server_header=False,
    )
    uvicorn.Server(config).run()
