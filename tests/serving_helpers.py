"""Build tiny real router checkpoints and run the real server in a subprocess."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from flax import nnx

from studio_align.catalog import default_catalog
from studio_align.intents.demo import generate_examples
from studio_align.intents.format import build_tokenizer
from studio_align.intents.router import save_router
from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer


def make_router_checkpoint(path: Path, *, seed: int, version: str) -> Path:
    """An untrained tiny router (random weights): a real checkpoint, cheap to build."""
    cat = default_catalog()
    texts = [e["request"]["text"] for e in generate_examples(300, seed=0)]
    tok = build_tokenizer(texts, cat, vocab_size=600)
    model = Transformer(ModelConfig.tiny(vocab_size=640), rngs=nnx.Rngs(seed))
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
