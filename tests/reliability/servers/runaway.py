"""Runaway handlers for the process-isolation tests: each holds its worker until killed.

* ``redos(text)`` runs a catastrophic ``re`` match, one C call that holds the GIL throughout;
* ``spin()`` is a plain Python busy loop; ``spin_long()`` the same with a 60 s timeout;
* ``pid()`` answers the process id its handler ran in, ``server_pid()`` the server's;
* ``fail(kind)`` raises, in its worker, an OSError, a ValueError or a ToolError;
* ``add(a, b)`` answers at once, in the server process.

All isolated tools have a 1 s timeout. Serve it with
``mcpkit serve tests/reliability/servers/runaway.py`` (stdio) or ``--http HOST:PORT``.
"""

from __future__ import annotations

import os
import re

from mcpkit import Server

server = Server("runaway", "1.0")
CATASTROPHIC = re.compile(r"(\w+\s?)*$")


@server.tool(isolation="process", timeout=1.0)
def redos(text: str) -> bool:
    """Match a pattern with exponential backtracking: ``text`` a long identifier and a '!'."""
    return CATASTROPHIC.match(text) is not None


@server.tool(isolation="process", timeout=1.0)
def spin() -> int:
    """Never return."""
    n = 0
    while True:
        n += 1


@server.tool(isolation="process", timeout=60.0)
def spin_long() -> int:
    """Never return, with a deadline far away: only a cancellation stops it early."""
    return spin()


@server.tool(isolation="process", timeout=1.0)
def pid() -> int:
    return os.getpid()


@server.tool(isolation="process", timeout=1.0)
def fail(kind: str) -> str:
    """Raise ``kind``: FileNotFoundError, ValueError or a ToolError."""
    from mcpkit import ToolError

    if kind == "missing":
        raise FileNotFoundError("nope")
    if kind == "tool":
        raise ToolError("refused on purpose", code="E_PERMISSION_DENIED", suggested_fix="do not")
    raise ValueError("bad value")


@server.tool
def add(a: int, b: int) -> int:
    return a + b


@server.tool
def server_pid() -> int:
    return os.getpid()
