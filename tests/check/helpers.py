"""Shared by the checker's tests: the fixture servers' command lines and an HTTP fixture starter."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mcpkit.protocol.revisions import HANDSHAKE_VERSIONS
from tests.test_http import free_port, stop_server, wait_listening

FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: what a handshake-only server (every fixture) answers to each offered revision
HANDSHAKE_ONLY = {**{v: v for v in HANDSHAKE_VERSIONS}, "2026-07-28": None}


def fixture(name: str) -> list[str]:
    """The command line of the stdio fixture ``name``."""
    return [sys.executable, str(FIXTURES / f"{name}.py")]


@contextmanager
def http_fixture(name: str) -> Iterator[str]:
    """Serve the HTTP fixture ``name`` on a free port; yields its MCP URL."""
    port = free_port()
    errlog = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [*fixture(name), str(port)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog,
    )
    proc.errlog = errlog  # type: ignore[attr-defined]  # what stop_server reads
    try:
        wait_listening(proc, port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_server(proc)


def by_rule(report, rule_id: str) -> dict[str | None, str]:  # type: ignore[no-untyped-def]
    """revision -> the rule's status there (fail wins over pass)."""
    out: dict[str | None, str] = {}
    for f in report.findings:
        if f.rule == rule_id and out.get(f.revision) != "fail":
            out[f.revision] = f.status
    return out
