"""Streamable HTTP: DNS-rebinding guards (Host, Origin) and sessions, probed with raw requests."""

from __future__ import annotations

import uuid
from typing import Any

from ...protocol import revisions
from ..context import CheckContext
from ..model import Finding
from ..registry import rule

EVIL_HOST = "evil.example"
EVIL_ORIGIN = "https://evil.example"


def _version(ctx: CheckContext) -> str:
    handshake = [v for v in ctx.supported if v in revisions.HANDSHAKE_VERSIONS]
    return handshake[-1] if handshake else revisions.LATEST_HANDSHAKE


def _version_header(version: str) -> bool:
    """HL-19: MCP-Protocol-Version rides requests after initialize from 2025-06-18 on."""
    order = revisions.SUPPORTED_VERSIONS
    return order.index(version) >= order.index("2025-06-18")


def _initialize(version: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "mcpkit-check", "version": "1"}},
    }


class Http:
    """Raw POST/DELETE to the MCP endpoint; only the status and the headers are read (an SSE answer
    is not waited for)."""

    def __init__(self, ctx: CheckContext) -> None:
        import httpx

        self.url = str(ctx.options.target)
        self.base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                     **ctx.options.headers}
        self.client = httpx.AsyncClient(timeout=ctx.timeout)
        self.version = _version(ctx)
        supported = ctx.supported
        self.modern_only = bool(supported) and not any(v in revisions.HANDSHAKE_VERSIONS for v in supported)
        self.sessions: list[str] = []

    async def __aenter__(self) -> Http:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        for session in self.sessions:  # tidy up the sessions the probes opened
            try:
                await self.client.delete(self.url, headers={**self.base, "Mcp-Session-Id": session})
            except Exception:  # noqa: BLE001 - best effort
                pass
        await self.client.aclose()

    def _headers(self, session: str | None, extra: dict[str, str]) -> dict[str, str]:
        headers = dict(self.base)
        if session is not None:
            headers["Mcp-Session-Id"] = session
            if _version_header(self.version):
                headers["MCP-Protocol-Version"] = self.version
        headers.update(extra)
        return headers

    async def post(self, body: dict[str, Any], *, session: str | None = None, **extra: str) -> tuple[int, Any]:
        from ... import _json

        request = self.client.build_request("POST", self.url, content=_json.dumps(body),
                                            headers=self._headers(session, extra))
        response = await self.client.send(request, stream=True)
        try:
            sid = response.headers.get("mcp-session-id")
            if sid and 200 <= response.status_code < 300:
                self.sessions.append(sid)
            return response.status_code, response.headers
        finally:
            await response.aclose()

    async def initialize(self, **extra: str) -> tuple[int, str | None]:
        """An initialize POST; for a server that only speaks 2026-07-28, a server/discover POST."""
        if self.modern_only:
            version = revisions.MODERN_VERSIONS[-1]
            body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
                revisions.PROTOCOL_VERSION_KEY: version, revisions.CLIENT_CAPABILITIES_KEY: {}}}}
            extra = {"MCP-Protocol-Version": version, "Mcp-Method": "server/discover", **extra}
        else:
            body = _initialize(self.version)
        status, headers = await self.post(body, **extra)
        return status, headers.get("mcp-session-id")

    async def delete(self, session: str) -> int:
        response = await self.client.delete(self.url, headers=self._headers(session, {}))
        return response.status_code


async def _control(ctx: CheckContext, http: Http) -> str | None:
    """A plain initialize must succeed, or the guards cannot be told apart from other refusals."""
    status, session = await http.initialize()
    if not 200 <= status < 300:
        what = "server/discover" if http.modern_only else "initialize"
        raise ctx.skip(f"a plain {what} POST got HTTP {status}; pass credentials with --header")
    return session


@rule(
    "http.host-guard", severity="warning", requirements=("HS-01", "HS-03"), scope="server", transports=("http",),
    title="a request with a foreign Host header is refused (DNS-rebinding protection)",
    fix="accept only the Host names you serve (localhost, 127.0.0.1, your domain) and answer others "
    "with 403 (or 421)",
)
async def check_host_guard(ctx: CheckContext) -> list[Finding]:
    async with Http(ctx) as http:
        await _control(ctx, http)
        status, _ = await http.initialize(Host=EVIL_HOST)
    if 400 <= status < 500:
        return [ctx.ok(f"Host: {EVIL_HOST} got HTTP {status}")]
    return [ctx.fail(f"a request with Host: {EVIL_HOST} got HTTP {status}; a DNS-rebinding page could "
                     "drive this server", status=status)]


@rule(
    "http.origin-guard", severity="error", requirements=("HS-01", "HS-02"), scope="server", transports=("http",),
    title="a request with a foreign Origin header gets 403 Forbidden",
    fix="validate the Origin header of every request and answer an Origin you do not trust with 403",
)
async def check_origin_guard(ctx: CheckContext) -> list[Finding]:
    async with Http(ctx) as http:
        await _control(ctx, http)
        status, _ = await http.initialize(Origin=EVIL_ORIGIN)
    if status == 403:
        return [ctx.ok(f"Origin: {EVIL_ORIGIN} got HTTP 403")]
    if 400 <= status < 500:
        return [ctx.fail(f"Origin: {EVIL_ORIGIN} got HTTP {status}; an invalid Origin gets 403", status=status)]
    return [ctx.fail(f"a request with Origin: {EVIL_ORIGIN} got HTTP {status}; a web page from any site "
                     "could drive this server", status=status)]


async def _session(ctx: CheckContext, http: Http) -> str:
    if http.modern_only:
        raise ctx.skip("2026-07-28 has no sessions")
    session = await _control(ctx, http)
    if not session:
        raise ctx.skip("the server issues no Mcp-Session-Id (no sessions)")
    status, _ = await http.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=session)
    if not 200 <= status < 300:
        raise ctx.skip(f"notifications/initialized in the new session got HTTP {status}")
    return session


PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


@rule(
    "http.session", severity="error", requirements=("HL-17", "HL-18"), scope="server", transports=("http",),
    title="a request with an unknown or ended Mcp-Session-Id gets 404 Not Found",
    fix="answer a request whose Mcp-Session-Id you do not know (never issued, expired, or DELETEd) with 404, "
    "so that the client initializes again",
)
async def check_session(ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    async with Http(ctx) as http:
        session = await _session(ctx, http)
        status, _ = await http.post(PING, session="mcpkit-check-" + uuid.uuid4().hex)
        if status != 404:
            out.append(ctx.fail(f"a request with an unknown Mcp-Session-Id got HTTP {status}; expected 404"))
        ended = await http.delete(session)
        if 200 <= ended < 300:
            http.sessions.remove(session)
            status, _ = await http.post(PING, session=session)
            if status != 404:
                out.append(ctx.fail(f"a request in a session ended with DELETE got HTTP {status}; expected 404"))
    return out or [ctx.ok("unknown and ended sessions get 404")]


@rule(
    "http.session-required", severity="warning", requirements=("HL-16",), scope="server", transports=("http",),
    title="a server with sessions answers a request without Mcp-Session-Id with 400 Bad Request",
    fix="answer a request (other than initialize) that lacks the Mcp-Session-Id header with 400",
)
async def check_session_required(ctx: CheckContext) -> list[Finding]:
    async with Http(ctx) as http:
        await _session(ctx, http)
        extra = {"MCP-Protocol-Version": http.version} if _version_header(http.version) else {}
        status, _ = await http.post(PING, **extra)
    if status == 400:
        return []
    return [ctx.fail(f"a request without Mcp-Session-Id got HTTP {status}; expected 400")]
