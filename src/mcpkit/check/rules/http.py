"""Streamable HTTP: DNS-rebinding guards (Host, Origin) and sessions, probed with raw requests."""

from __future__ import annotations

import uuid
from typing import Any

from ..._extras import needs
from ...protocol import revisions
from ..context import CheckContext
from ..model import Finding
from ..registry import rule, since

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
        with needs("client", "mcpkit check of a URL"):
            import httpx

        self.url = str(ctx.options.target)
        self.base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                     **ctx.options.headers}
        self.client = httpx.AsyncClient(timeout=ctx.timeout)
        self.version = _version(ctx)
        supported = ctx.supported
        self.modern_only = bool(supported) and not any(v in revisions.HANDSHAKE_VERSIONS for v in supported)
        self.sessions: list[str] = []
        #: the headers of the last initialize (server/discover) answer
        self.answered: Any = {}

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
        status, headers, _ = await self.exchange(body, session=session, **extra)
        return status, headers

    async def exchange(self, body: dict[str, Any], *, session: str | None = None, read: bool = False,
                       **extra: str) -> tuple[int, Any, bytes]:
        """POST ``body``: (status, headers, the body when ``read``, else b""). A header given
        as "" in ``extra`` is left out."""
        from ... import _json

        headers = {k: v for k, v in self._headers(session, extra).items() if v != ""}
        request = self.client.build_request("POST", self.url, content=_json.dumps(body), headers=headers)
        response = await self.client.send(request, stream=True)
        try:
            sid = response.headers.get("mcp-session-id")
            if sid and 200 <= response.status_code < 300:
                self.sessions.append(sid)
            content = b""
            if read:
                content = await response.aread()
            return response.status_code, response.headers, content
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
        self.answered = headers
        return status, headers.get("mcp-session-id")

    async def get(self, session: str | None) -> tuple[int, Any]:
        """A GET asking for the standalone SSE stream: (status, headers); the body is not read."""
        headers = {**self._headers(session, {}), "Accept": "text/event-stream"}
        headers.pop("Content-Type", None)
        request = self.client.build_request("GET", self.url, headers=headers)
        response = await self.client.send(request, stream=True)
        try:
            return response.status_code, response.headers
        finally:
            await response.aclose()

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


_HTTP_SDK = "the official SDK's streamable_http_app() guards Host and Origin on 127.0.0.1; pass " \
    "transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=[...], " \
    "allowed_origins=[...]) when you bind elsewhere"


@rule(
    "http.host-guard", example="no_host_guard",
    keyword="advice", requirements=("HS-01", "HS-03"), scope="server", transports=("http",),
    title="a request with a foreign Host header is refused (DNS-rebinding protection)",
    fix="accept only the Host names you serve (localhost, 127.0.0.1, your domain) and answer others "
    "with 403 (or 421)",
    quote="(Host validation is not in the spec, which asks for Origin validation; the SDKs add it as "
    "DNS-rebinding defence, and the conformance scenario dns-rebinding-protection expects a 4xx.) When running "
    "locally, servers SHOULD bind only to localhost (127.0.0.1).",
    source="basic/transports#security-warning",
    fixes={
        "mcpkit": "built in: `mcpkit serve --transport http` refuses foreign Host names (--allow-host adds names)",
        "sdk": _HTTP_SDK,
        "fastmcp": "run behind the official SDK's TransportSecuritySettings or a proxy that checks Host",
        "ts": "use createMcpExpressApp() (host validation on localhost) or hostHeaderValidation() middleware",
    },
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
    "http.origin-guard", example="no_host_guard",
    keyword="MUST", requirements=("HS-01", "HS-02"), scope="server", transports=("http",),
    title="a request with a foreign Origin header is refused (403 Forbidden from 2025-11-25 on)",
    fix="validate the Origin header of every request and answer an Origin you do not trust with 403",
    quote="Servers MUST validate the Origin header on all incoming connections to prevent DNS rebinding "
    "attacks. If the Origin header is present and invalid, servers MUST respond with HTTP 403 Forbidden.",
    source="basic/transports#security-warning (the 403 since 2025-11-25)",
    fixes={
        "mcpkit": "built in: foreign Origins get 403 (--allow-origin adds trusted ones)",
        "sdk": _HTTP_SDK,
        "fastmcp": "add a middleware that answers 403 to an Origin you do not trust",
        "ts": "check req.headers.origin before transport.handleRequest and answer 403 "
        "(StreamableHTTPServerTransport does not)",
    },
)
async def check_origin_guard(ctx: CheckContext) -> list[Finding]:
    async with Http(ctx) as http:
        await _control(ctx, http)
        status, _ = await http.initialize(Origin=EVIL_ORIGIN)
    if status == 403:
        return [ctx.ok(f"Origin: {EVIL_ORIGIN} got HTTP 403")]
    if 400 <= status < 500:
        if not any(v >= "2025-11-25" for v in ctx.supported):
            return [ctx.ok(f"Origin: {EVIL_ORIGIN} got HTTP {status} (the 403 is required from 2025-11-25 on)")]
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
_SESSION_FIXES = {
    "mcpkit": "built in",
    "sdk": "built in (StreamableHTTPSessionManager)",
    "fastmcp": "built in",
    "ts": "answer 404 when req.headers['mcp-session-id'] is not in your transports map, and delete it on close",
}


@rule(
    "http.session", keyword="MUST", requirements=("HL-17", "HL-18"), scope="server", transports=("http",),
    revisions=since("2025-03-26")[:-1],
    title="a request in a session ended with DELETE gets 404 Not Found",
    fix="forget a session once it is DELETEd (or expires) and answer requests carrying its Mcp-Session-Id with 404",
    quote="The server MAY terminate the session at any time, after which it MUST respond to requests "
    "containing that session ID with HTTP 404 Not Found.",
    source="basic/transports#session-management",
    fixes=_SESSION_FIXES,
)
async def check_session(ctx: CheckContext) -> list[Finding]:
    async with Http(ctx) as http:
        session = await _session(ctx, http)
        ended = await http.delete(session)
        if not 200 <= ended < 300:
            raise ctx.skip(f"DELETE of the session got HTTP {ended} (the server does not let clients end sessions)")
        http.sessions.remove(session)
        status, _ = await http.post(PING, session=session)
    if status != 404:
        return [ctx.fail(f"a request in a session ended with DELETE got HTTP {status}; expected 404", status=status)]
    return [ctx.ok("an ended session gets 404")]


@rule(
    "http.session-unknown", keyword="advice", requirements=("HL-17",), scope="server", transports=("http",),
    revisions=since("2025-03-26")[:-1],
    title="a request with an Mcp-Session-Id the server never issued gets 404 Not Found",
    fix="answer an Mcp-Session-Id you do not know with 404, so that the client starts a new session",
    quote="(The spec states the 404 for a session the server terminated; a session id it never issued is "
    "treated the same by the SDKs.) When a client receives HTTP 404 in response to a request containing an "
    "MCP-Session-Id, it MUST start a new session.",
    source="basic/transports#session-management",
    fixes=_SESSION_FIXES,
)
async def check_session_unknown(ctx: CheckContext) -> list[Finding]:
    async with Http(ctx) as http:
        await _session(ctx, http)
        status, _ = await http.post(PING, session="mcpkit-check-" + uuid.uuid4().hex)
    if status != 404:
        return [ctx.fail(f"a request with an unknown Mcp-Session-Id got HTTP {status}; expected 404", status=status)]
    return []


@rule(
    "http.session-required", keyword="SHOULD", requirements=("HL-16",), scope="server", transports=("http",),
    revisions=since("2025-03-26")[:-1],
    title="a server with sessions answers a request without Mcp-Session-Id with 400 Bad Request",
    fix="answer a request (other than initialize) that lacks the Mcp-Session-Id header with 400",
    quote="Servers that require a session ID SHOULD respond to requests without an MCP-Session-Id header "
    "(other than initialization) with HTTP 400 Bad Request.",
    source="basic/transports#session-management",
    fixes=_SESSION_FIXES,
)
async def check_session_required(ctx: CheckContext) -> list[Finding]:
    async with Http(ctx) as http:
        await _session(ctx, http)
        extra = {"MCP-Protocol-Version": http.version} if _version_header(http.version) else {}
        status, _ = await http.post(PING, **extra)
    if status == 400:
        return []
    return [ctx.fail(f"a request without Mcp-Session-Id got HTTP {status}; expected 400", status=status)]


@rule(
    "http.notification-accepted", example="notification_body",
    keyword="MUST", requirements=("HL-04",), scope="server", transports=("http",),
    revisions=since("2025-03-26")[:-1],
    title="a POSTed notification is answered 202 Accepted with no body",
    fix="answer a POST whose body is a notification (or a response) with 202 and an empty body",
    quote="If the input is a JSON-RPC response or notification: If the server accepts the input, the server "
    "MUST return HTTP status code 202 Accepted with no body. If the server cannot accept the input, it MUST "
    "return an HTTP error status code (e.g., 400 Bad Request).",
    source="basic/transports#sending-messages-to-the-server",
    fixes={
        "mcpkit": "built in",
        "sdk": "built in",
        "fastmcp": "built in",
        "ts": "built in (StreamableHTTPServerTransport answers 202)",
    },
)
async def check_notification_accepted(ctx: CheckContext) -> list[Finding]:
    async with Http(ctx) as http:
        if http.modern_only:
            raise ctx.skip("a 2026-07-28-only server")
        session = await _control(ctx, http)
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        status, headers, body = await http.exchange(note, session=session, read=True)
    if status == 202 and not body.strip():
        return [ctx.ok("notifications/initialized got 202 with no body")]
    if status == 202:
        return [ctx.fail(f"a notification got 202 with a body ({len(body)} bytes: {body[:80]!r}); the body must be "
                         "empty", status=status)]
    if 200 <= status < 300:
        return [ctx.fail(f"a notification got HTTP {status} ({headers.get('content-type') or 'no content type'}); "
                         "an accepted notification gets 202 with no body", status=status)]
    return [ctx.fail(f"notifications/initialized, which every client sends, got HTTP {status}", status=status)]


@rule(
    "http.protocol-version-header", example="version_header_ignored",
    keyword="MUST", requirements=("HL-19",), scope="server", transports=("http",),
    revisions=("2025-06-18", "2025-11-25"),
    title="a request with an invalid MCP-Protocol-Version header gets 400 Bad Request",
    fix="check the MCP-Protocol-Version header of every request after initialize: answer a value that is not a "
    "revision you support with 400",
    quote="If the server receives a request with an invalid or unsupported MCP-Protocol-Version, it MUST respond "
    "with 400 Bad Request.",
    source="basic/transports#protocol-version-header (2025-06-18 on)",
    fixes={
        "mcpkit": "built in",
        "sdk": "built in",
        "fastmcp": "built in",
        "ts": "built in (StreamableHTTPServerTransport validates it)",
    },
)
async def check_protocol_version_header(ctx: CheckContext) -> list[Finding]:
    async with Http(ctx) as http:
        if not _version_header(http.version) or http.modern_only:
            raise ctx.skip("the server speaks no revision with the MCP-Protocol-Version header (2025-06-18 on)")
        session = await _control(ctx, http)
        if session:
            await http.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=session)
        bogus = "1999-01-01"
        status, _ = await http.post(PING, session=session, **{"MCP-Protocol-Version": bogus})
    if status == 400:
        return [ctx.ok(f"MCP-Protocol-Version: {bogus} got 400")]
    return [ctx.fail(f"a request with MCP-Protocol-Version: {bogus} got HTTP {status}; expected 400",
                     status=status)]


#: HL-06: the media types a request's answer may carry
ANSWER_TYPES = ("application/json", "text/event-stream")


def _media_type(headers: Any) -> str:
    return (headers.get("content-type") or "").split(";", 1)[0].strip().lower()


def _labelled(headers: Any) -> str:
    """How an answer was labelled, for a message."""
    label = headers.get("content-type")
    return f"Content-Type: {label}" if label else "no Content-Type"


@rule(
    "http.content-type", example="text_plain",
    keyword="MUST", requirements=("HL-06",), scope="server", transports=("http",),
    title="a POSTed request is answered with Content-Type application/json or text/event-stream",
    fix="label the answer to a request Content-Type: application/json (one JSON object) or text/event-stream "
    "(an SSE stream), nothing else",
    quote="If the input is a JSON-RPC request, the server MUST either return Content-Type: text/event-stream, "
    "to initiate an SSE stream, or Content-Type: application/json, to return one JSON object.",
    source="basic/transports#sending-messages-to-the-server",
    fixes={
        "mcpkit": "built in",
        "sdk": "built in (StreamableHTTPSessionManager)",
        "fastmcp": "built in",
        "ts": "built in (StreamableHTTPServerTransport); a hand-written handler sets res.type('application/json')",
    },
    reproduce="POSTs initialize (server/discover for a 2026-07-28-only server) and reads the Content-Type of "
    "the 2xx answer; text/plain, or none, fails",
)
async def check_content_type(ctx: CheckContext) -> list[Finding]:
    async with Http(ctx) as http:
        what = "server/discover" if http.modern_only else "initialize"
        status, _ = await http.initialize()
        headers = http.answered
    if not 200 <= status < 300:
        raise ctx.skip(f"a plain {what} POST got HTTP {status}; pass credentials with --header")
    media = _media_type(headers)
    if media in ANSWER_TYPES:
        return [ctx.ok(f"{what} answered with {media}")]
    return [ctx.fail(f"{what} was answered HTTP {status} with {_labelled(headers)}; a request's answer is "
                     "application/json or text/event-stream", content_type=headers.get("content-type"))]


#: HL-15: the characters a session id may hold
VISIBLE_ASCII = frozenset(chr(c) for c in range(0x21, 0x7F))


@rule(
    "http.session-id", example="session_id_space",
    keyword="MUST", requirements=("HL-15",), scope="server", transports=("http",),
    revisions=since("2025-03-26")[:-1],
    title="a session id holds only visible ASCII characters (0x21 to 0x7E)",
    fix="mint session ids from visible ASCII only (a UUID, a hex or base64url token): no space, no control "
    "character, nothing beyond ASCII",
    quote="The session ID SHOULD be globally unique and cryptographically secure (e.g., a securely generated "
    "UUID, a JWT, or a cryptographic hash). The session ID MUST only contain visible ASCII characters (ranging "
    "from 0x21 to 0x7E).",
    source="basic/transports#session-management",
    fixes=_SESSION_FIXES | {"ts": "use sessionIdGenerator: () => randomUUID()"},
    reproduce="POSTs initialize and reads the Mcp-Session-Id of the answer; a space, a control character or a "
    "non-ASCII one fails (a server without sessions is skipped)",
)
async def check_session_id(ctx: CheckContext) -> list[Finding]:
    async with Http(ctx) as http:
        if http.modern_only:
            raise ctx.skip("2026-07-28 has no sessions")
        session = await _control(ctx, http)
    if not session:
        raise ctx.skip("the server issues no Mcp-Session-Id (no sessions)")
    bad = sorted({c for c in session if c not in VISIBLE_ASCII})
    if bad:
        shown = ", ".join(f"U+{ord(c):04X}" for c in bad)
        return [ctx.fail(f"the session id {session!r} holds {shown}; only visible ASCII (0x21 to 0x7E) is allowed",
                         session=session)]
    return [ctx.ok(f"a session id of {len(session)} visible ASCII characters")]


@rule(
    "http.get-stream", example="get_json",
    keyword="MUST", requirements=("HL-11",), scope="server", transports=("http",),
    title="a GET on the endpoint is answered with an SSE stream (text/event-stream) or 405",
    fix="answer GET on the MCP endpoint with Content-Type: text/event-stream (the stream of server messages) or "
    "405 Method Not Allowed when you offer none; never a JSON or HTML page",
    quote="The server MUST either return Content-Type: text/event-stream in response to this HTTP GET, or else "
    "return HTTP 405 Method Not Allowed, indicating that the server does not offer an SSE stream at this "
    "endpoint.",
    source="basic/transports#listening-for-messages-from-the-server",
    fixes={
        "mcpkit": "built in",
        "sdk": "built in (StreamableHTTPSessionManager)",
        "fastmcp": "built in; a custom route on the same path must not answer GET",
        "ts": "pass GET to transport.handleRequest, or answer it with 405",
    },
    reproduce="initializes a session (if the server has sessions) and GETs the endpoint with Accept: "
    "text/event-stream, reading only the status and headers; a 2xx answer that is not text/event-stream fails "
    "(another status is reported as not judged)",
)
async def check_get_stream(ctx: CheckContext) -> list[Finding]:
    async with Http(ctx) as http:
        session = await _control(ctx, http)
        if session:
            await http.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=session)
        status, headers = await http.get(session)
    media = _media_type(headers)
    if status == 405 or (200 <= status < 300 and media == "text/event-stream"):
        return [ctx.ok(f"GET got HTTP {status}" + (" (an SSE stream)" if status != 405 else ""))]
    if 200 <= status < 300:
        return [ctx.fail(f"GET on the endpoint got HTTP {status} with {_labelled(headers)}; it is an SSE stream "
                         "(text/event-stream) or 405", status=status)]
    raise ctx.skip(f"GET on the endpoint got HTTP {status} (neither a stream nor 405; not judged)")
