"""Run the router app under uvicorn (uvloop + httptools when installed)."""

from __future__ import annotations

from pathlib import Path

import uvicorn

from studio_align.serving.app import RouterLike, ServeConfig, create_app, load_router


def enable_compile_cache(path: str | None) -> None:
    """Persist compiled decode programs across server restarts (no-op when `path` is None)."""
    if not path:
        return
    import jax

    jax.config.update("jax_compilation_cache_dir", str(Path(path).expanduser()))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def serve(cfg: ServeConfig, *, log_level: str = "warning") -> None:
    enable_compile_cache(cfg.compile_cache_dir)
    # Load before uvicorn starts, so a bad checkpoint is a one-line error, not a traceback.
    preloaded: dict[str, RouterLike] = {cfg.checkpoint: load_router(cfg.checkpoint)}

    def loader(path: str) -> RouterLike:
        return preloaded.pop(path, None) or load_router(path)

    app = create_app(cfg, loader=loader)
    uvicorn.run(
        app,
        host=cfg.host,
        port=cfg.port,
        log_level=log_level,
        access_log=False,
        loop="auto",
        http="auto",
        timeout_graceful_shutdown=5,
    )
