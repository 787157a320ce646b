"""Run the router app under uvicorn (uvloop + httptools when installed)."""

from __future__ import annotations

from pathlib import Path

import uvicorn

from studio_align.serving.app import ServeConfig, create_app


def enable_compile_cache(path: str | None) -> None:
    """Persist compiled decode programs across server restarts (no-op when `path` is None)."""
    if not path:
        return
    import jax

    jax.config.update("jax_compilation_cache_dir", str(Path(path).expanduser()))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def serve(cfg: ServeConfig, *, log_level: str = "warning") -> None:
    enable_compile_cache(cfg.compile_cache_dir)
    app = create_app(cfg)
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
