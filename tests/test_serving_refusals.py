"""Refusals the HTTP protocol answers itself (malformed requests, connection caps) use the
app's JSON error shape, and one client's idle sockets cannot lock another out. Real uvicorn
and the real protocols on loopback, with the fake router."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from serving_helpers import live_server, serve_config


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    sock.settimeout(5)
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
    while len(body) < int(headers.get("content-length", "0")):
        chunk = sock.recv(4096)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize("parser", ["httptools", "h11"])
def test_a_malformed_request_is_a_json_400(tmp_path: Path, parser: str) -> None:
    with live_server(serve_config(tmp_path), parser=parser) as port:
        s = socket.create_connection(("127.0.0.1", port))
        with s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
            status, headers, body = _answer(s)
    assert status == 400 and headers["content-type"] == "application/json"
    assert set(json.loads(body)) == {"error"}


def test_one_clients_idle_sockets_do_not_lock_others_out(tmp_path: Path) -> None:
    cfg = serve_config(tmp_path, max_connections_per_client=4, max_connections=64)
    with live_server(cfg) as port:
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        try:
            with socket.create_connection(("127.0.0.1", port)) as extra:
                status, headers, body = _answer(extra)
            assert status == 503 and headers["content-type"] == "application/json"
            assert "too many open connections" in json.loads(body)["error"]
            # another address (127.0.0.2 is loopback too) is served at once
            other = socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0))
            with other:
                other.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                assert _answer(other)[0] in (200, 503)
        finally:
            for s in idle:
                s.close()
