"""Servers the client's tests talk to over HTTP: subprocesses on a free port."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import mcpkit_command
from tests.test_http import free_port, stop_server, wait_listening

SDK_SERVER = str(Path(__file__).resolve().parents[2] / "bench" / "servers" / "sdk_server.py")


@contextmanager
def http_server(argv: list[str], port: int, timeout: float = 20.0) -> Iterator[str]:
    """Run ``argv`` (which listens on ``port``) until the block ends; yields the base URL.
    On exit, asserts the server wrote no traceback."""
    errlog = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog)
    proc.errlog = errlog  # type: ignore[attr-defined]  # what stop_server reads back
    try:
        wait_listening(proc, port, timeout)
        yield f"http://127.0.0.1:{port}"
    finally:
        stderr = stop_server(proc)
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
