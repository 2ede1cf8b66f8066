"""Raw JSON-RPC to a peer, without mcpkit's client: what the expectation files' findings are
verified with. A session is: initialize at a revision, notifications/initialized, then requests."""

from __future__ import annotations

import asyncio
import json
from typing import Any

INIT_ID = 1


def initialize(version: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": INIT_ID, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "raw-probe", "version": "1"}}}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class RawStdio:
    """A stdio peer driven line by line."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.env = env
        self.proc: asyncio.subprocess.Process | None = None
        self.seen: list[dict[str, Any]] = []
        #: lines on stdout that are not JSON (a server that prints a banner; stdio.stdout-clean)
        self.noise: list[bytes] = []

    async def __aenter__(self) -> RawStdio:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, env=self.env, limit=2**24,  # a tools/list line can be large
        )
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.kill()
        await self.proc.wait()

    async def send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        await self.proc.stdin.drain()

    async def answer(self, rid: Any, timeout: float = 60.0) -> dict[str, Any]:
        """The response with id ``rid`` (messages before it are kept in ``seen``)."""
        assert self.proc is not None and self.proc.stdout is not None
        async with asyncio.timeout(timeout):
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    raise EOFError("the peer closed its stdout")
                try:
                    message = json.loads(line)
                except ValueError:
                    self.noise.append(line)
                    continue
                self.seen.append(message)
                if message.get("id") == rid and ("result" in message or "error" in message):
                    return message

    async def request(self, rid: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            body["params"] = params
        await self.send(body)
        return await self.answer(rid)

    async def open(self, version: str) -> dict[str, Any]:
        await self.send(initialize(version))
        answer = await self.answer(INIT_ID)
        await self.send(INITIALIZED)
        return answer


class RawHttp:
    """A Streamable HTTP peer: POSTs, with the session id and protocol version it was given."""

    def __init__(self, url: str) -> None:
        import httpx

        self.url = url
        self.http = httpx.AsyncClient(timeout=60.0)
        self.session: str | None = None
        self.version: str | None = None

    async def __aenter__(self) -> RawHttp:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.session:
            await self.http.delete(self.url, headers=self.headers())
        await self.http.aclose()

    def headers(self, **extra: str) -> dict[str, str]:
        out = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if self.session:
            out["Mcp-Session-Id"] = self.session
        if self.version and self.version >= "2025-06-18":
            out["MCP-Protocol-Version"] = self.version
        out.update(extra)
        return out

    async def post(self, body: dict[str, Any], **extra: str) -> tuple[int, dict[str, str], Any]:
        """(status, headers, the JSON-RPC message in the body: JSON or the SSE event holding it)."""
        response = await self.http.post(self.url, content=json.dumps(body), headers=self.headers(**extra))
        text = response.text
        message: Any = None
        if "text/event-stream" in response.headers.get("content-type", ""):
            for line in text.splitlines():
                if line.startswith("data:") and line[5:].strip():
                    candidate = json.loads(line[5:])
                    if isinstance(candidate, dict) and candidate.get("id") == body.get("id"):
                        message = candidate
        elif text.strip():
            message = json.loads(text)
        return response.status_code, dict(response.headers), message

    async def open(self, version: str) -> dict[str, Any]:
        status, headers, message = await self.post(initialize(version))
        assert status == 200, status
        self.session = headers.get("mcp-session-id")
        self.version = version
        await self.post(INITIALIZED)
        return message

    async def request(self, rid: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            body["params"] = params
        status, _, message = await self.post(body)
        assert status == 200, status
        return message
