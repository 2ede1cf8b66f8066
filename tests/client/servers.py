"""Servers the client's tests talk to over HTTP: subprocesses on a free port."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import mcpkit_command

SDK_SERVER = str(Path(__file__).resolve().parents[2] / "bench" / "servers" / "sdk_server.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def http_server(argv: list[str], port: int, timeout: float = 20.0) -> Iterator[str]:
    """Run ``argv`` (which listens on ``port``) until the block ends; yields the base URL.
    On exit, asserts the server wrote no traceback."""
    errlog = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the server exited with {proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        errlog.seek(0)
        stderr = errlog.read().decode(errors="replace")
        errlog.close()
    assert "Traceback" not in stderr, stderr


@contextmanager
def reference_http(*extra: str) -> Iterator[str]:
    port = free_port()
    with http_server(mcpkit_command("serve", "--http", f"127.0.0.1:{port}", *extra), port) as base:
        yield base


@contextmanager
def sdk_http(mode: str) -> Iterator[str]:
    port = free_port()
    argv = [sys.executable, SDK_SERVER, "--transport", "http", "--port", str(port), "--http-mode", mode]
    with http_server(argv, port) as base:
        yield base
