"""Run the router app under uvicorn (uvloop + httptools when installed)."""

from __future__ import annotations

import uvicorn

from studio_align.serving.app import ServeConfig, create_app


def serve(cfg: ServeConfig, *, log_level: str = "warning") -> None:
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
