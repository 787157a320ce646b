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
import hashlib
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
from studio_align.serving.auth import AuthError, RateLimiter, Verifier, creator_key, load_keys
from studio_align.serving.batcher import DynamicBatcher
from studio_align.serving.feedback import (
    DuplicateEventError,
    FeedbackLog,
    LogWriteError,
    check_route_event,
    route_event,
)
from studio_align.serving.guard import Guard
from studio_align.serving.health import ProbeFailed, probe
from studio_align.serving.learning import Learner
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
        self,
        cfg: ServeConfig,
        loader: Callable[[str], RouterLike],
        announce: Announce,
        feedback: FeedbackLog | None = None,
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
        self.feedback = (
            feedback
            if feedback is not None
            else FeedbackLog(
                feedback_path(cfg), rotate_bytes=int(cfg.feedback_rotate_mb * (1 << 20))
            )
        )
        self.verifier = Verifier(
            load_keys(cfg.feedback_keys_file) if cfg.feedback_keys_file else {}
        )
        self.sizes = batch_buckets(cfg.max_batch, cfg.batch_buckets)
        self.learner = (
            Learner(self.feedback.path, self.verifier, settings=cfg.memory, buckets=self.sizes)
            if cfg.remember_feedback
            else None
        )
        self.source_limit = RateLimiter(cfg.feedback_rate, cfg.feedback_burst)
        self.creator_limit = RateLimiter(cfg.creator_feedback_rate, cfg.creator_feedback_burst)
        self.loaded_stamp = _checkpoint_stamp(cfg.checkpoint)
        self.ready = Readiness(total=len(self.sizes) if cfg.warmup else 0)
        self.degraded: str | None = None
        self.reload_lock = asyncio.Lock()
        self.gate = ModelGate()
        self.batcher: DynamicBatcher[tuple[Any, dict[str, Any]], Routed] = DynamicBatcher(
            self._route_batch,
            max_batch=cfg.max_batch,
            max_wait_ms=cfg.max_wait_ms,
            on_batch=self.metrics.record_batch,
        )

    def _route_batch(self, items: list[tuple[Any, dict[str, Any]]]) -> list[Routed]:
        """Route a batch; each item carries the router its request was pinned to, so a
        request (or a whole batch request) is answered by one model version even when a
        reload swaps the router while it waits."""
        out: list[Routed | None] = [None] * len(items)
        groups: dict[int, list[int]] = {}
        for i, (router, _) in enumerate(items):
            groups.setdefault(id(router), []).append(i)
        for idx in groups.values():
            router = items[idx[0]][0]
            reqs = [items[i][1] for i in idx]
            size = next(b for b in self.sizes if b >= len(reqs))
            padded = reqs + [reqs[-1]] * (size - len(reqs))
            for i, r in zip(idx, self.gate.route(router, padded)[: len(reqs)], strict=True):
                out[i] = r
            bad = sum(out[i].confidence is None for i in idx)  # type: ignore[union-attr]
            if bad:
                self.metrics.nonfinite.inc(bad)
                if self.router is router:
                    self.degraded = "the model produced a non-finite confidence"
        return [r for r in out if r is not None]

    def load(self, checkpoint: str, progress: Callable[[int, int], None] | None = None) -> Any:
        router = self.loader(checkpoint)
        if self.cfg.warmup:
            warm(router, self.sizes, progress)
        probe(router, self.sizes)
        if self.learner is not None:
            n = self.learner.build(router)  # the memory of the whole feedback log
            if n:
                self.announce(f"memory: {n} exemplars from {self.feedback.path}")
        settle_heap(collect=self.router is None)
        return router

    def swap(self, new: Any) -> None:
        """Make `new` the served router: it first learns what the log gained while it
        loaded, under the model lock, so no acknowledged event falls between two models."""
        with self.gate.lock:
            if self.learner is not None:
                self.learner.follow(new)
                if self.router is not None:
                    self.learner.forget(self.router)
            self.router = new

    def learn(self) -> bool:
        """Bring the served router's memory up to the log; True when it follows the log."""
        router = self.router
        if router is None or self.learner is None or not self.learner.supports(router):
            return False
        with self.gate.lock:
            self.learner.follow(router)
        return True


def create_app(
    cfg: ServeConfig,
    *,
    loader: Callable[[str], RouterLike] = load_router,
    announce: Announce | None = None,
    feedback: FeedbackLog | None = None,
) -> FastAPI:
    """The app for `cfg`; raises `ConfigError` for settings that would expose it.
    `feedback`: the log to write (a test injects one with a failing writer)."""
    check_bind(cfg)
    state = _State(cfg, loader, announce or log.info, feedback)

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
        await asyncio.to_thread(state.swap, router)
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
        if conf is not None:
            conf = min(max(conf, 0.0), 1.0)
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
    async def route(
        request: Request, body: RouteRequest | BatchRouteRequest
    ) -> RouteResponse | BatchRouteResponse:
        router = state.router  # pinned: every answer to this request is from one model
        if router is None:
            raise HTTPException(503, "the model is warming up", headers={"Retry-After": "5"})
        start = time.perf_counter()
        platform = await _platform(request, once=False)
        reqs = body.requests if isinstance(body, BatchRouteRequest) else [body]
        items: list[tuple[Any, dict[str, Any]]] = []
        for r in reqs:
            d = r.model_dump()
            # a creator's exemplars answer only that creator's platform, signed
            d["creator"] = creator_key(platform, r.creator) if platform and r.creator else None
            d["source"] = platform  # population votes: that platform's creators only
            items.append((router, d))
        results = await state.batcher.submit_many(items)
        if isinstance(body, BatchRouteRequest):
            out: RouteResponse | BatchRouteResponse = BatchRouteResponse(
                results=[_response(r, start) for r in results]
            )
        else:
            out = _response(results[0], start)
        state.metrics.route_latency.observe(time.perf_counter() - start)
        return out

    async def _platform(request: Request, *, once: bool) -> str | None:
        """The platform that signed `request` (None when unsigned and keys allow that)."""
        signed = any(k.startswith("x-studio-") for k in request.headers)
        if not state.verifier.enabled:
            if signed:
                raise HTTPException(403, "this server has no platform keys: unsigned only")
            return None
        if not signed and not once:
            return None  # an anonymous route: no creator memory
        try:
            return state.verifier.platform(
                request.headers, request.method, request.url.path, await request.body(),
                once=once,
            )  # fmt: skip
        except AuthError as e:
            state.metrics.auth_failures.inc()
            raise HTTPException(e.status, str(e)) from None

    def _signed_id(request: Request, platform: str | None) -> str | None:
        """A signed post's event id when it gave none: its signature's digest."""
        sig = request.headers.get("x-studio-signature") if platform else None
        return f"sig-{hashlib.sha256(sig.encode('latin-1')).hexdigest()[:32]}" if sig else None

    def _limit(limiter: RateLimiter, key: str) -> None:
        wait = limiter.allow(key)
        if wait > 0:
            state.metrics.rate_limited.inc()
            raise HTTPException(
                429, "too many feedback posts: slow down", {"Retry-After": str(int(wait) + 1)}
            )

    @app.post(
        "/v1/feedback",
        response_model=FeedbackResponse,
        responses=_errors(400, 401, 403, 409, 413, 415, 422, 429, 503, 507),
    )
    async def post_feedback(request: Request, body: FeedbackRequest) -> FeedbackResponse:
        platform = await _platform(request, once=True)
        client = request.client.host if request.client is not None else "-"
        _limit(state.source_limit, platform or f"addr:{client}")
        _limit(state.creator_limit, creator_key(platform or "-", body.creator))
        catalog = state.router.catalog if state.router is not None else Catalog()
        event = route_event(
            request=body.request.model_dump(exclude={"creator"}),
            proposed=body.proposed,
            final=body.final,
            outcome=body.outcome,
            creator=body.creator,
            session=body.session,
            event_id=body.id or _signed_id(request, platform),
        )
        problem = check_route_event(event, catalog)
        if problem is not None:
            raise HTTPException(422, problem)
        if platform is not None:
            event = state.verifier.seal(event, platform)
        try:
            written = await asyncio.to_thread(state.feedback.append, event)
        except DuplicateEventError as e:
            raise HTTPException(409, str(e)) from None
        except LogWriteError as e:
            state.metrics.feedback_failures.inc()
            log.error("feedback log write failed (rolled back): %s", e)
            if e.full:
                raise HTTPException(507, "the feedback log's disk is full: nothing was written; "
                                    "retry later") from None  # fmt: skip
            raise HTTPException(503, "the feedback log could not be written: nothing was "
                                "written; retry later", {"Retry-After": "5"}) from None  # fmt: skip
        (state.metrics.feedback if written else state.metrics.feedback_duplicates).inc()
        teaches = (
            platform is not None
            and state.learner is not None
            and body.outcome in ("accepted", "rerouted")
        )
        memory = "ignored"
        if teaches:
            memory = "remembered" if await asyncio.to_thread(state.learn) else "pending"
            if memory == "pending" and state.router is not None:
                memory = "ignored"  # the served router has no memory API
        return FeedbackResponse(id=event["id"], written=written, memory=memory)

    @app.head("/healthz", include_in_schema=False)  # load balancers probe with HEAD
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
        stamp = await asyncio.to_thread(_checkpoint_stamp, target)  # what this load reads
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
        await asyncio.to_thread(state.swap, new)  # running requests keep their reference
        state.degraded = None
        state.checkpoint = target
        state.loaded_stamp = stamp
        state.metrics.set_model_version(new.version)
        state.metrics.reloads.inc()
        return ReloadResponse(
            model_version=new.version,
            previous_version=previous,
            seconds=time.perf_counter() - start,
        )


async def _watch(state: _State) -> None:
    """Reload once per change of the served checkpoint's files: the stamp compared is the
    one the last load (watched or admin) read, so an admin reload is not repeated, and a
    reload in progress is waited for, never answered 409."""
    failed: float | None = None
    while True:
        await asyncio.sleep(state.cfg.watch_seconds)
        if state.router is None or state.reload_lock.locked():
            continue
        now = await asyncio.to_thread(_checkpoint_stamp, state.checkpoint)
        if now == state.loaded_stamp or now == failed:
            continue
        # a half-written checkpoint fails to load: keep serving, retry on the next change
        try:
            await _reload(state, None)
            failed = None
        except HTTPException as e:
            failed = now
            log.warning("watched reload failed, still serving: %s", e.detail)
