"""Where a backend is reached: a TCP port, a Unix socket, or a child process' stdio.

Each endpoint opens one :class:`Link` (a reader, a writer and a way to close both) on the
bridge's event loop. Opening has its own timeout in the RPC client; endpoints only connect.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Endpoint", "Link", "Subprocess", "Tcp", "Unix"]


class Link:
    """An open byte stream to the backend."""

    def __init__(self, reader: asyncio.StreamReader, writer: Any, closer: Any = None) -> None:
        self.reader = reader
        self.writer = writer
        self._closer = closer

    async def write(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    def close(self) -> None:
        """Close at once (idempotent, never raises): the reader sees the end of the stream."""
        with contextlib.suppress(Exception):
            self.writer.close()
        if self._closer is not None:
            closer, self._closer = self._closer, None
            with contextlib.suppress(Exception):
                closer()


class Endpoint(Protocol):
    async def open(self, limit: int) -> Link: ...

    def describe(self) -> str: ...


@dataclass(frozen=True)
class Tcp:
    """A TCP port; editor plugins listen on 127.0.0.1 (never expose them to the network)."""

    host: str
    port: int

    async def open(self, limit: int) -> Link:
        reader, writer = await asyncio.open_connection(self.host, self.port, limit=limit)
        return Link(reader, writer)

    def describe(self) -> str:
        return f"tcp://{self.host}:{self.port}"


@dataclass(frozen=True)
class Unix:
    """A Unix domain socket (its directory's permissions decide who may connect)."""

    path: str

    async def open(self, limit: int) -> Link:
        reader, writer = await asyncio.open_unix_connection(self.path, limit=limit)
        return Link(reader, writer)

    def describe(self) -> str:
        return f"unix:{self.path}"


@dataclass(frozen=True)
class Subprocess:
    """A child process speaking on its stdin/stdout; its stderr goes to ours (never stdout,
    which may be the MCP wire). Each connect starts a fresh child in its own process group, and
    closing kills the whole group, so helpers it spawned do not outlive it."""

    argv: Sequence[str]
    cwd: str | None = None
    env: Mapping[str, str] | None = field(default=None, hash=False)

    async def open(self, limit: int) -> Link:
        proc = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=None,  # inherits fd 2
            cwd=self.cwd, env=dict(self.env) if self.env is not None else None, limit=limit,
            start_new_session=True,
        )
        assert proc.stdout is not None and proc.stdin is not None

        def kill() -> None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            transport = getattr(proc, "_transport", None)  # release the pipes now, not at GC
            if transport is not None:
                transport.close()

        return Link(proc.stdout, proc.stdin, kill)

    def describe(self) -> str:
        return f"subprocess {self.argv[0]!r}"
