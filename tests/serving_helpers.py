"""Servers for the serving tests: tiny real router checkpoints, the real server in a
subprocess (`ServerProcess`), and the real app under real uvicorn in a thread with a fake
router (`live_server`: no compile, so a fuzz or slow-client test starts in a second).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import uvicorn
from flax import nnx

from studio_align.catalog import default_catalog
from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.router.checkpoint import save_router
from studio_align.router.format import build_tokenizer
from studio_align.router.router import Router
from studio_align.serving.app import ServeConfig, create_app
from studio_align.serving.auth import signed_headers
from studio_align.serving.server import protocol_for
from studio_align.simulate.router.requests import generate_examples

TOKEN = "s3cret-admin-token-0123"


def make_router_checkpoint(path: Path, *, seed: int, version: str) -> Path:
    """An untrained tiny router (random weights): a real checkpoint, cheap to build."""
    cat = default_catalog()
    texts = [e["request"]["text"] for e in generate_examples(300, seed=0)]
    tok = build_tokenizer(texts, cat, vocab_size=600)
    model = Transformer(ModelConfig.tiny(vocab_size=tok.vocab_size), rngs=nnx.Rngs(seed))
    save_router(path, model, tok, cat, max_steps=3, version=version)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    def __init__(self, checkpoint: Path, feedback_log: Path, *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [
            sys.executable, "-m", "studio_align", "serve", "router",
            "--checkpoint", str(checkpoint), "--port", str(self.port),
            "--feedback-log", str(feedback_log), *extra,
        ]  # fmt: skip
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "JAX_PLATFORMS": "cpu"}
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def wait_healthy(self, timeout: float = 240.0) -> None:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if self.proc.poll() is not None:
                out = self.proc.stdout.read().decode() if self.proc.stdout else ""
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{out}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as r:
                    if json.load(r)["status"] == "ok":
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("server did not become healthy")

    def stop(self) -> str:
        self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return out.decode() if out else ""


# -- in-process: the real app and uvicorn, a fake router ------------------------------------------


class FakeRouter:
    """Routes everything to one plan; `nan` makes every confidence NaN."""

    def __init__(self, version: str, *, nan: bool = False, gate: threading.Event | None = None):
        self.version = version
        self.catalog = default_catalog()
        self.nan = nan
        self.gate = gate

    def warmup(self, sizes: list[int]) -> None:
        if self.gate is not None:
            self.gate.wait(30)

    def route(self, reqs: list[dict[str, Any]]) -> tuple[list[list[str]], list[float]]:
        conf = math.nan if self.nan else 0.9
        return [["wan.image_to_video"]] * len(reqs), [conf] * len(reqs)


def fake_loader(path: str) -> FakeRouter:
    """A checkpoint directory named `nan...` loads a router whose confidences are NaN."""
    return FakeRouter(Path(path).name, nan=Path(path).name.startswith("nan"))


def serve_config(root: Path, **kw: Any) -> ServeConfig:
    """A server config whose starting checkpoint is `root/a` (the fake loader needs no files)."""
    (root / "a").mkdir(exist_ok=True)
    return ServeConfig(checkpoint=str(root / "a"), compile_cache_dir=None, **kw)


@contextlib.contextmanager
def live_server(
    cfg: ServeConfig, loader: Any = fake_loader, parser: str = "httptools", **uvicorn_kw: Any
) -> Iterator[int]:
    """Serve `create_app(cfg)` with real uvicorn and `cfg`'s bounded protocol (parsing with
    `parser`) on a loopback port, in a daemon thread; yields the port and stops the server
    on exit."""
    port = free_port()
    config = uvicorn.Config(
        create_app(cfg, loader=loader), host="127.0.0.1", port=port,
        http=protocol_for(cfg, parser=parser), log_level="error", **uvicorn_kw,
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the in-process server on port {port} did not start")
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


# -- a router with the real memory logic (Router.decide) over a fake model -------------------------


class MemoryRouter(Router):
    """`Router.decide` / `remember` / `plan_allowed` as served, over a fake model: the plan
    is `ideogram.text_to_image` (or `wan.image_to_video` with an image) at confidence
    `confidence`, the embedding a hashed bag of words (the same words: the same vector).
    Only the model's own decisions and embeddings are faked; `Router.__init__` (which
    builds the decoder) is not run."""

    def __init__(self, version: str, *, confidence: float = 0.6, calibration: Any = None):
        self.version = version
        self.catalog = default_catalog()
        self.max_steps = 3
        self.memory: Any = None
        self.calibration = calibration
        self.confidence = confidence
        self.embedded = 0

    def warmup(self, sizes: list[int]) -> None:
        pass

    def route(self, reqs: list[dict[str, Any]]) -> tuple[list[list[str]], list[float]]:
        ds = self.model_decisions(reqs)[0]
        return [d["plan"] for d in ds], [d["confidence"] for d in ds]

    def embed(self, requests: Any, *, batch_size: int = 64, pad_to: int = 1) -> np.ndarray:
        self.embedded += len(requests)
        out = np.zeros((len(requests), 64), np.float32)
        for i, r in enumerate(requests):
            for w in r["text"].lower().split():
                out[i, int(hashlib.sha256(w.encode()).hexdigest(), 16) % 64] += 1.0
        return out + 1e-3

    def model_decisions(self, chunk: Any) -> tuple[list[dict[str, Any]], np.ndarray]:
        ds = []
        for r in chunk:
            plan = (
                ["wan.image_to_video"]
                if "image" in r["attachments"]
                else ["ideogram.text_to_image"]
            )
            ds.append({"plan": plan, "confidence": self.confidence, "model_plan": plan,
                       "model_confidence": self.confidence, "unfamiliarity": 0.0,
                       "source": "model", "memory_similarity": None})  # fmt: skip
        return ds, self.embed(chunk)


def memory_loader(path: str) -> MemoryRouter:
    return MemoryRouter(Path(path).name)


PLATFORM, PLATFORM_KEY = "acme", "acme-platform-key-0123456789abcdef"
OTHER, OTHER_KEY = "rival", "rival-platform-key-0123456789abcdef"


def write_keys(path: Path, **keys: str) -> Path:
    path.write_text("[platforms]\n" + "".join(f'{k} = "{v}"\n' for k, v in keys.items()))
    return path


def signed_post(client: Any, path: str, body: Any, platform: str = PLATFORM,
                key: str = PLATFORM_KEY) -> Any:  # fmt: skip
    """POST `body` as JSON signed by `platform`'s backend (the real scheme, auth.py)."""
    raw = json.dumps(body).encode()
    headers = signed_headers(platform, key.encode(), "POST", path, raw)
    return client.post(path, content=raw, headers={**headers, "Content-Type": "application/json"})
