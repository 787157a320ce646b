"""The router's HTTP app.

Routes: `POST /v1/route` (one request or `{"requests": [...]}`), `POST /v1/feedback`,
`GET /healthz`, `GET /metrics` (Prometheus text), `POST /admin/reload`, and FastAPI's
`/openapi.json`. Bad input is always a 4xx with a reason: body size and content type are
checked by a raw ASGI middleware before parsing, malformed JSON is a 400, schema errors a
422 naming the field. The router object is swapped atomically on reload; a batch already
running keeps the router it started with, so in-flight requests never fail.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

from fastapi import FastAPI, Header, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import Field

from studio_align.catalog import Catalog
from studio_align.config import Strict
from studio_align.serving.batcher import DynamicBatcher
from studio_align.serving.feedback import FeedbackLog, check_route_event, route_event
from studio_align.serving.metrics import Metrics
from studio_align.serving.schemas import (
    BatchRouteRequest,
    BatchRouteResponse,
    FeedbackRequest,
    FeedbackResponse,
    ReloadRequest,
    ReloadResponse,
    RouteRequest,
    RouteResponse,
)

log = logging.getLogger("studio_align.serving")


class RouterLike(Protocol):
    """What the server needs of a router (`studio_align.intents.router.Router` is one)."""

    version: str
    catalog: Catalog

    def route(self, requests: list[dict[str, Any]]) -> tuple[list[list[str]], list[float]]: ...


class ServeConfig(Strict):
    checkpoint: str
    host: str = "127.0.0.1"
    port: int = 8000
    feedback_log: str = "feedback/route_events.jsonl"
    abstain_below: float = 0.5
    max_batch: int = 64
    # Batches are padded up to one of these sizes (repeating the last request), so only a
    # few shapes are ever compiled; batch compute on CPU barely grows within a bucket.
    batch_buckets: list[int] = Field(default_factory=lambda: [1, 2, 4, 8, 16, 32, 64])
    max_wait_ms: float = 2.0
    max_body_bytes: int = 64 * 1024
    warmup: bool = True
    watch_seconds: float = 0.0  # > 0: poll the checkpoint directory and reload on change
    admin_token: str | None = None
    # XLA's persistent compilation cache: a restarted server warms up from disk in seconds.
    compile_cache_dir: str | None = "~/.cache/studio-align/xla"


def load_router(path: str) -> RouterLike:
    from studio_align.intents.router import Router

    return Router.load(path)


def batch_buckets(max_batch: int, buckets: list[int]) -> list[int]:
    """The batch sizes the server runs: the configured buckets below `max_batch`, then it."""
    return sorted({b for b in buckets if 0 < b < max_batch} | {max_batch})


def _warmup(router: RouterLike, sizes: list[int]) -> None:
    """Compile every batch bucket up front so no live request triggers a compile."""
    fn = getattr(router, "warmup", None)
    if callable(fn):
        fn(sizes)
        return
    for b in sizes:
        router.route([{"text": "warm up", "attachments": ["image"]}] * b)


def _checkpoint_stamp(path: str) -> float:
    p = Path(path)
    if not p.exists():
        return 0.0
    return max((f.stat().st_mtime for f in p.rglob("*") if f.is_file()), default=p.stat().st_mtime)


def _decode_compiles() -> int:
    """Traces of the sampler's decode function so far (constant after warm-up)."""
    from studio_align.generation import sampler

    return int(sampler._trace_count)


class _State:
    def __init__(self, cfg: ServeConfig, loader: Callable[[str], RouterLike]) -> None:
        self.cfg = cfg
        self.loader = loader
        self.router: RouterLike | None = None
        self.checkpoint = cfg.checkpoint
        self.metrics = Metrics()
        self.metrics.compile_count = _decode_compiles
        self.feedback = FeedbackLog(cfg.feedback_log)
        self.sizes = batch_buckets(cfg.max_batch, cfg.batch_buckets)
        self.reload_lock = asyncio.Lock()
        self.batcher = DynamicBatcher(
            self._route_batch,
            max_batch=cfg.max_batch,
            max_wait_ms=cfg.max_wait_ms,
            on_batch=self.metrics.record_batch,
        )

    def _route_batch(self, items: list[dict[str, Any]]) -> list[tuple[list[str], float, str]]:
        router = self.router  # one reference for the whole batch: reload-safe
        assert router is not None
        size = next(b for b in self.sizes if b >= len(items))
        padded = items + [items[-1]] * (size - len(items))
        plans, confs = router.route(padded)
        return [
            (p, float(c), router.version)
            for p, c in zip(plans[: len(items)], confs[: len(items)], strict=True)
        ]

    def load(self, checkpoint: str) -> RouterLike:
        router = self.loader(checkpoint)
        if self.cfg.warmup:
            _warmup(router, self.sizes)
        return router


class _Guard:
    """Raw ASGI middleware: body-size and content-type limits, per-path status metrics."""

    def __init__(self, app: Any, state: _State) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        status_box = {"status": 500}

        async def send_wrapper(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status_box["status"] = message["status"]
            await send(message)

        reject = self._check_headers(scope)
        if reject is not None:
            await reject(scope, receive, send_wrapper)
            self.state.metrics.record_request(path, status_box["status"])
            return

        limit = self.state.cfg.max_body_bytes
        seen = 0

        async def receive_limited() -> MutableMapping[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _BodyTooLarge()
            return message

        try:
            await self.app(scope, receive_limited, send_wrapper)
        except _BodyTooLarge:
            await _error(413, f"request body over {limit} bytes")(scope, receive, send_wrapper)
        if path not in ("/v1/route",):  # route records its own latency
            self.state.metrics.record_request(path, status_box["status"])

    def _check_headers(
        self, scope: MutableMapping[str, Any]
    ) -> Callable[..., Awaitable[None]] | None:
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.state.cfg.max_body_bytes:
            return _error(413, f"request body over {self.state.cfg.max_body_bytes} bytes")
        if scope["method"] == "POST":
            ctype = headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype != "application/json":
                return _error(
                    415, f"content type must be application/json, got {ctype or 'none'!r}"
                )
        return None


class _BodyTooLarge(Exception):
    pass


def _error(status: int, reason: str) -> JSONResponse:
    return JSONResponse({"error": reason}, status_code=status)


def create_app(cfg: ServeConfig, *, loader: Callable[[str], RouterLike] = load_router) -> FastAPI:
    state = _State(cfg, loader)

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # type: ignore[no-untyped-def]
        state.router = await asyncio.to_thread(state.load, cfg.checkpoint)
        state.metrics.model_version = state.router.version
        await state.batcher.start()
        watcher = asyncio.create_task(_watch(state)) if cfg.watch_seconds > 0 else None
        yield
        if watcher is not None:
            watcher.cancel()
        await state.batcher.stop()

    app = FastAPI(title="studio-align router", version="1", lifespan=lifespan)
    app.state.serve = state

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return _error(400, "malformed JSON body")
        reasons = []
        for e in errors:
            loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body")
            reasons.append(f"{loc or 'body'}: {e.get('msg')}")
        return _error(422, "; ".join(reasons))

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    def _response(result: tuple[list[str], float, str], start: float) -> RouteResponse:
        plan, conf, version = result
        abstain = conf < cfg.abstain_below
        if abstain:
            state.metrics.abstains += 1
        return RouteResponse(
            plan=plan,
            confidence=conf,
            abstain=abstain,
            model_version=version,
            latency_ms=(time.perf_counter() - start) * 1000.0,
        )

    @app.post("/v1/route", response_model=RouteResponse | BatchRouteResponse)
    async def route(body: RouteRequest | BatchRouteRequest) -> RouteResponse | BatchRouteResponse:
        start = time.perf_counter()
        if isinstance(body, BatchRouteRequest):
            results = await state.batcher.submit_many([r.model_dump() for r in body.requests])
            out: RouteResponse | BatchRouteResponse = BatchRouteResponse(
                results=[_response(r, start) for r in results]
            )
        else:
            out = _response(await state.batcher.submit(body.model_dump()), start)
        state.metrics.record_request("/v1/route", 200, (time.perf_counter() - start) * 1000.0)
        return out

    @app.post("/v1/feedback", response_model=FeedbackResponse)
    async def feedback(body: FeedbackRequest) -> FeedbackResponse:
        catalog = state.router.catalog if state.router is not None else Catalog()
        event = route_event(
            request=body.request.model_dump(),
            proposed=body.proposed,
            final=body.final,
            outcome=body.outcome,
            creator=body.creator,
            session=body.session,
        )
        problem = check_route_event(event, catalog)
        if problem is not None:
            raise HTTPException(422, problem)
        await asyncio.to_thread(state.feedback.append, event)
        state.metrics.feedback += 1
        return FeedbackResponse(id=event["id"])

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        version = state.router.version if state.router is not None else None
        return {"status": "ok" if version else "loading", "model_version": version}

    @app.get("/metrics", response_class=PlainTextResponse)
    async def metrics() -> str:
        return state.metrics.render()

    @app.post("/admin/reload", response_model=ReloadResponse)
    async def reload(
        body: ReloadRequest, x_admin_token: str | None = Header(default=None)
    ) -> ReloadResponse:
        if cfg.admin_token is not None and x_admin_token != cfg.admin_token:
            raise HTTPException(403, "admin token required (X-Admin-Token header)")
        return await _reload(state, body.checkpoint)

    app.add_middleware(_Guard, state=state)
    return app


async def _reload(state: _State, checkpoint: str | None) -> ReloadResponse:
    async with state.reload_lock:
        start = time.perf_counter()
        target = checkpoint or state.checkpoint
        try:
            new = await asyncio.to_thread(state.load, target)
        except Exception as e:
            state.metrics.reload_failures += 1
            raise HTTPException(422, f"reload of {target!r} failed: {e}") from e
        previous = state.router.version if state.router is not None else ""
        state.router = new  # atomic swap; running batches keep their reference
        state.checkpoint = target
        state.metrics.model_version = new.version
        state.metrics.reloads += 1
        return ReloadResponse(
            model_version=new.version,
            previous_version=previous,
            seconds=time.perf_counter() - start,
        )


async def _watch(state: _State) -> None:
    stamp = _checkpoint_stamp(state.checkpoint)
    while True:
        await asyncio.sleep(state.cfg.watch_seconds)
        now = _checkpoint_stamp(state.checkpoint)
        if now != stamp:
            stamp = now
            # a half-written checkpoint fails to load: keep serving, retry on the next change
            try:
                await _reload(state, None)
            except HTTPException as e:
                state.metrics.reload_failures += 1
                log.warning(
                    "watched reload failed, still serving %s: %s",
                    state.metrics.model_version,
                    e.detail,
                )
