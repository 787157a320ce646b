"""The router's HTTP app.

Routes: `GET /` (a short JSON index), `POST /v1/route` (one request or
`{"requests": [...]}`), `POST /v1/feedback`, `GET /healthz`, `GET /metrics` (Prometheus
text), `POST /admin/reload`, and FastAPI's `/openapi.json` and `/docs`.

Design choices:

* **Ready means compiled.** The app binds at once; the model is warmed up (every batch
  bucket compiled) and probed in the background. Until then `/healthz` is 503
  `{"status": "warming", "progress": ...}` and `/v1/route` is 503 with `Retry-After`, the
  readiness contract load balancers expect. A model whose outputs are not finite makes
  `/healthz` 503 `degraded` and its answers abstain.
* **Every error has one shape**, `{"error": "..."}`, whatever raised it: the guard
  middleware (limits, encoding), validation (naming only the form attempted: a single
  request or a batch), routing (404/405) or the handlers.
* **Reloads are guarded** (see `settings.py`, `health.py`): token when configured or when
  bound beyond loopback, target under the checkpoint roots, a health probe before the
  atomic swap. A batch already running keeps the router it started with, so in-flight
  requests never fail. A failed load answers without naming paths; the detail is logged.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

from fastapi import FastAPI, Header, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from studio_align import __version__
from studio_align.catalog import Catalog
from studio_align.generation import compiles, sampler
from studio_align.router import analysis
from studio_align.router.router import Router
from studio_align.serving.batcher import DynamicBatcher
from studio_align.serving.feedback import (
    DuplicateEventError,
    FeedbackLog,
    check_route_event,
    route_event,
)
from studio_align.serving.guard import Guard
from studio_align.serving.health import ProbeFailed, probe
from studio_align.serving.metrics import CONTENT_TYPE, Metrics
from studio_align.serving.routing import ModelGate, Routed
from studio_align.serving.schemas import (
    BatchRouteRequest,
    BatchRouteResponse,
    ErrorResponse,
    FeedbackRequest,
    FeedbackResponse,
    HealthResponse,
    IndexResponse,
    ReloadRequest,
    ReloadResponse,
    RouteRequest,
    RouteResponse,
)
from studio_align.serving.settings import (
    ServeConfig,
    check_bind,
    feedback_path,
    reload_roots,
    token_matches,
    within_roots,
)
from studio_align.serving.validation import describe_validation_error
from studio_align.serving.warmup import Readiness, batch_buckets, settle_heap, warm

log = logging.getLogger("studio_align.serving")
Announce = Callable[[str], None]

__all__ = ["RouterLike", "ServeConfig", "batch_buckets", "create_app", "load_router"]


class RouterLike(Protocol):
    """What the server needs of a router (`studio_align.router.router.Router` is one)."""

    version: str
    catalog: Catalog

    def route(self, requests: list[dict[str, Any]]) -> tuple[list[list[str]], list[float]]: ...


def load_router(path: str) -> RouterLike:
    return Router.load(path)


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {c: {"model": ErrorResponse} for c in codes}


def _checkpoint_stamp(path: str) -> float:
    p = Path(path)
    if not p.exists():
        return 0.0
    return max((f.stat().st_mtime for f in p.rglob("*") if f.is_file()), default=p.stat().st_mtime)


def _decode_compiles() -> int:
    """Traces of the sampler's decode function so far (constant after warm-up)."""
    return int(sampler._trace_count)


def _scoring_compiles() -> int:
    """Traces of the router's separate scoring pass (0 while the sampler decodes)."""
    return int(analysis._trace_count)


class _State:
    def __init__(
        self, cfg: ServeConfig, loader: Callable[[str], RouterLike], announce: Announce
    ) -> None:
        self.cfg = cfg
        self.loader = loader
        self.announce = announce
        self.router: RouterLike | None = None
        self.checkpoint = cfg.checkpoint
        self.roots = reload_roots(cfg)
        self.metrics = Metrics()
        compiles.install()
        self.metrics.set_compile_counter(_decode_compiles, _scoring_compiles, compiles.total)
        self.feedback = FeedbackLog(feedback_path(cfg))
        self.sizes = batch_buckets(cfg.max_batch, cfg.batch_buckets)
        self.ready = Readiness(total=len(self.sizes) if cfg.warmup else 0)
        self.degraded: str | None = None
        self.reload_lock = asyncio.Lock()
        self.gate = ModelGate()
        self.batcher: DynamicBatcher[dict[str, Any], Routed] = DynamicBatcher(
            self._route_batch,
            max_batch=cfg.max_batch,
            max_wait_ms=cfg.max_wait_ms,
            on_batch=self.metrics.record_batch,
        )

    def _route_batch(self, items: list[dict[str, Any]]) -> list[Routed]:
        router = self.router  # one reference for the whole batch: reload-safe
        assert router is not None
        size = next(b for b in self.sizes if b >= len(items))
        padded = items + [items[-1]] * (size - len(items))
        out = self.gate.route(router, padded)[: len(items)]
        if any(r.confidence is None for r in out):
            self.metrics.nonfinite.inc(sum(r.confidence is None for r in out))
            if self.router is router:
                self.degraded = "the model produced a non-finite confidence"
        return out

    def load(self, checkpoint: str, progress: Callable[[int, int], None] | None = None) -> Any:
        router = self.loader(checkpoint)
        if self.cfg.warmup:
            warm(router, self.sizes, progress)
        probe(router, self.sizes)
        settle_heap(collect=self.router is None)
        return router


def create_app(
    cfg: ServeConfig,
    *,
    loader: Callable[[str], RouterLike] = load_router,
    announce: Announce | None = None,
) -> FastAPI:
    """The app for `cfg`; raises `ConfigError` for settings that would expose it."""
    check_bind(cfg)
    state = _State(cfg, loader, announce or log.info)

    async def _start() -> None:
        t0 = time.perf_counter()

        def progress(done: int, total: int) -> None:
            state.ready.update(done, total)
            state.metrics.warmup_progress.set(done / total if total else 1.0)
            state.announce(f"warming up ({done}/{total} shapes)")

        try:
            router = await asyncio.to_thread(state.load, cfg.checkpoint, progress)
        except ProbeFailed as e:
            state.degraded = str(e)
            state.ready.fail(str(e))
            state.announce(f"not ready: {e}")
            return
        except Exception as e:
            log.error("loading %s failed: %s", cfg.checkpoint, e)
            state.ready.fail("the model could not be loaded (see the server log)")
            state.announce(f"not ready: loading the model failed: {e}")
            return
        state.router = router
        state.metrics.set_model_version(router.version)
        state.metrics.warmup_progress.set(1.0)
        state.ready.finish()
        state.announce(f"ready in {time.perf_counter() - t0:.1f} s")

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # type: ignore[no-untyped-def]
        await state.batcher.start()
        starter = asyncio.create_task(_start())
        watcher = asyncio.create_task(_watch(state)) if cfg.watch_seconds > 0 else None
        yield
        for task in (starter, watcher):
            if task is not None:
                task.cancel()
        await state.batcher.stop()
        gc.unfreeze()  # what `settle_heap` froze is collectable again once the app stops
        if state.router is not None and cfg.remember_feedback:
            state.gate.save_memory(state.router, state.checkpoint)

    app = FastAPI(title="studio-align router", version=__version__, lifespan=lifespan)
    app.state.serve = state

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        status, reason = describe_validation_error(exc)
        return _error(status, reason)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail), exc.headers)

    def _response(result: Routed, start: float) -> RouteResponse:
        conf, reason = result.confidence, result.reason
        below = cfg.abstain_below if cfg.abstain_below is not None else (
            None if result.decided else 0.5
        )  # fmt: skip
        if conf is None or (reason is None and below is not None and conf < below):
            reason = "low_confidence"
        if reason is not None:
            state.metrics.abstains.inc()
        state.metrics.sources.labels(source=result.source).inc()
        return RouteResponse(
            plan=result.plan,
            confidence=0.0 if conf is None else conf,
            abstain=reason is not None,
            reason=reason,
            source=result.source,
            model_version=result.version,
            latency_ms=(time.perf_counter() - start) * 1000.0,
        )

    @app.get("/", response_model=IndexResponse)
    async def index() -> IndexResponse:
        return IndexResponse(
            name="studio-align router",
            version=__version__,
            model=state.router.version if state.router is not None else None,
            links={"docs": "/docs", "openapi": "/openapi.json", "metrics": "/metrics",
                   "health": "/healthz", "route": "/v1/route", "feedback": "/v1/feedback"},
        )  # fmt: skip

    @app.post(
        "/v1/route",
        response_model=RouteResponse | BatchRouteResponse,
        responses=_errors(400, 413, 415, 422, 503),
    )
    async def route(body: RouteRequest | BatchRouteRequest) -> RouteResponse | BatchRouteResponse:
        if state.router is None:
            raise HTTPException(503, "the model is warming up", headers={"Retry-After": "5"})
        start = time.perf_counter()
        if isinstance(body, BatchRouteRequest):
            results = await state.batcher.submit_many([r.model_dump() for r in body.requests])
            out: RouteResponse | BatchRouteResponse = BatchRouteResponse(
                results=[_response(r, start) for r in results]
            )
        else:
            out = _response(await state.batcher.submit(body.model_dump()), start)
        state.metrics.route_latency.observe(time.perf_counter() - start)
        return out

    @app.post(
        "/v1/feedback", response_model=FeedbackResponse, responses=_errors(400, 409, 413, 415, 422)
    )
    async def feedback(body: FeedbackRequest) -> FeedbackResponse:
        catalog = state.router.catalog if state.router is not None else Catalog()
        event = route_event(
            request=body.request.model_dump(exclude={"creator"}),
            proposed=body.proposed,
            final=body.final,
            outcome=body.outcome,
            creator=body.creator,
            session=body.session,
            event_id=body.id,
        )
        problem = check_route_event(event, catalog)
        if problem is not None:
            raise HTTPException(422, problem)
        try:
            written = await asyncio.to_thread(state.feedback.append, event)
        except DuplicateEventError as e:
            raise HTTPException(409, str(e)) from None
        (state.metrics.feedback if written else state.metrics.feedback_duplicates).inc()
        if written and state.router is not None and cfg.remember_feedback:
            await asyncio.to_thread(state.gate.remember, state.router, event, pad_to=state.sizes[0])
        return FeedbackResponse(id=event["id"], written=written)

    @app.get("/healthz", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
    async def healthz() -> JSONResponse:
        version = state.router.version if state.router is not None else None
        if state.degraded is not None:
            body = HealthResponse(status="degraded", model_version=version, reason=state.degraded)
        elif state.router is None:
            body = HealthResponse(
                status="warming", progress=state.ready.progress(), reason=state.ready.error
            )
        else:
            body = HealthResponse(status="ok", model_version=version)
        code = 200 if body.status == "ok" else 503
        return JSONResponse(body.model_dump(exclude_none=True), status_code=code)

    @app.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE: {}}}})
    async def metrics() -> Response:
        return Response(state.metrics.render(), media_type=CONTENT_TYPE)

    @app.post(
        "/admin/reload",
        response_model=ReloadResponse,
        responses=_errors(400, 401, 403, 409, 413, 415, 422),
    )
    async def reload(
        body: ReloadRequest,
        x_admin_token: str | None = Header(default=None, max_length=1024),
    ) -> ReloadResponse:
        if cfg.admin_token is not None and not token_matches(cfg.admin_token, x_admin_token):
            state.metrics.reload_failures.labels(reason="unauthorized").inc()
            if x_admin_token is None:
                raise HTTPException(401, "admin token required (X-Admin-Token header)")
            raise HTTPException(403, "wrong admin token")
        return await _reload(state, body.checkpoint)

    return _wrap(app, state)


def _wrap(app: FastAPI, state: _State) -> FastAPI:
    app.add_middleware(Guard, metrics=state.metrics, max_body_bytes=state.cfg.max_body_bytes)
    return app


def _error(status: int, reason: str, headers: Any = None) -> JSONResponse:
    return JSONResponse({"error": reason}, status_code=status, headers=headers)


async def _reload(state: _State, checkpoint: str | None) -> ReloadResponse:
    refused = state.metrics.reload_failures
    if checkpoint is None:
        target = state.checkpoint  # the trusted starting (or last reloaded) checkpoint
    else:
        resolved = within_roots(checkpoint, state.roots)
        if resolved is None:
            refused.labels(reason="outside_roots").inc()
            raise HTTPException(403, "checkpoint is not under the configured checkpoint_roots")
        target = str(resolved)
    if state.reload_lock.locked():
        refused.labels(reason="busy").inc()
        raise HTTPException(409, "a reload is already in progress")
    async with state.reload_lock:
        start = time.perf_counter()
        try:
            new = await asyncio.to_thread(state.load, target)
        except ProbeFailed as e:
            refused.labels(reason="probe").inc()
            raise HTTPException(422, f"reload refused: {e}") from None
        except Exception as e:
            refused.labels(reason="load").inc()
            log.warning("reload of %s failed: %s: %s", target, type(e).__name__, e)
            raise HTTPException(
                422, "reload failed: the checkpoint could not be loaded (details in the server log)"
            ) from None
        previous = state.router.version if state.router is not None else ""
        state.router = new  # atomic swap; running batches keep their reference
        state.degraded = None
        state.checkpoint = target
        state.metrics.set_model_version(new.version)
        state.metrics.reloads.inc()
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
        if now != stamp and state.router is not None:
            stamp = now
            # a half-written checkpoint fails to load: keep serving, retry on the next change
            try:
                await _reload(state, None)
            except HTTPException as e:
                log.warning("watched reload failed, still serving: %s", e.detail)
