"""Streamable HTTP (2025-03-26 .. 2025-11-25) and legacy HTTP+SSE (2024-11-05), as one plain ASGI app.

Mount it anywhere (Starlette, FastAPI) or serve it with uvicorn (``mcpkit serve --http``).
Defaults protect: Host and Origin are checked against an allow-list (loopback unless told
otherwise, HS-01/HS-02, DNS rebinding), bodies are capped (413), sessions are capped in number
and evicted when idle, and error bodies never carry stack traces.

Routing (transports/http_streams.py). Every message the engine emits names the client request
it belongs to (``Outgoing.related``). A POST that carries requests gets a *stream* for them: an SSE
response (or one JSON body in JSON mode) that receives exactly the messages related to its
requests and ends with the last response (HL-06, HL-07). Everything else (list_changed,
resource updates) goes to the session's standalone GET stream (HL-12), each message on one
stream only (HL-13). SSE events carry ids from an EventStore, so a client that lost a stream
resumes it with ``Last-Event-ID`` (HL-14); a dropped connection is not a cancellation (HL-10).
On shutdown the streams end without waiting for their clients (transports/http_drain.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import weakref
from collections import OrderedDict, deque
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from .. import _json
from ..protocol import revisions
from ..protocol.errors import INVALID_REQUEST, PARSE_ERROR
from ..protocol.jsonrpc import NO_ID, Invalid, classify
from ..protocol.errors import McpError
from .http_auth import AuthRoutes
from .http_body import DEFAULT_BODY_TIMEOUT, DEFAULT_OFF_LOOP_BYTES, BodyReading
from .http_drain import Draining
from .http_guard import LOOPBACK_HOSTS, HostGuard, repeated_header
from .http_media import acceptable, is_json_content_type
from .http_quotas import QuotaExceeded, SessionQuotas
from .http_sessions import ASK_STORE, STORE_DOWN, STORE_WAIT, SessionTable
from .http_streams import _END, _HttpSession, _Stream
from .http_modern import check_headers, modern_version, status_for
from .http_resume import META, Resuming, sse_frame, event_seq
from .mount import public_path, route_path
from . import SHUTDOWN_TIMEOUT
from ..stores.memory import MemoryEventStore

if TYPE_CHECKING:
    from ..protocol.engine import Outgoing
    from ..server.server import Server

__all__ = ["McpHttpApp", "LOOPBACK_HOSTS"]

log = logging.getLogger("mcpkit.http")

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),  # HM-07: proxies must not buffer the stream
]
_JSON = (b"content-type", b"application/json")
#: seconds a stream's events stay resumable after it was delivered to its end (HL-14): behind a
#: reverse proxy the server cannot tell that the proxy, not the client, read the end
RESUME_GRACE = 30.0
_DISCONNECTED = object()
#: the event store could not be read
STORE_GONE = object()


def _error_body(code: int, message: str, data: Any = None, id: Any = NO_ID) -> bytes:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    msg: dict[str, Any] = {"jsonrpc": "2.0", "error": err}
    if id is not NO_ID and id is not None:
        msg["id"] = id
    return _json.dumps(msg)


async def _watch_disconnect(receive: Any, gone: asyncio.Event, wake: asyncio.Event) -> None:
    """Wait for the client to go away; then say so, and wake whoever writes to it."""
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()
    wake.set()


class McpHttpApp(AuthRoutes, BodyReading, SessionTable, Draining, Resuming):
    """The ASGI application. Build it with ``server.http_app(...)``."""

    def __init__(
        self,
        server: Server,
        *,
        path: str = "/mcp",
        json_response: bool = False,
        stateless: bool = False,
        allowed_hosts: list[str] | None = None,
        allowed_origins: list[str] | None = None,
        max_body_bytes: int = 4 * 1024 * 1024,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        off_loop_bytes: int = DEFAULT_OFF_LOOP_BYTES,
        max_sessions: int = 1000,
        max_sessions_per_client: int | None = None,
        session_idle_timeout: float = 1800.0,
        retry_ms: int = 1000,
        event_store: Any = None,
        legacy_sse: bool = True,
        sse_path: str = "/sse",
        messages_path: str = "/messages/",
        cors_origins: list[str] | None = None,
        auth: Any = None,
        server_card: bool = True,
        card_name: str | None = None,
        metrics: Any = None,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT,
    ) -> None:
        server.check_environment()  # a bad MCPKIT_* value, or one nothing reads, stops it here
        self.server = server
        #: on shutdown, seconds requests in flight get before they are answered with an error
        #: (transports/http_drain.py); the standalone streams end at once
        self.shutdown_timeout = shutdown_timeout
        self._passing: weakref.WeakSet[_HttpSession] = weakref.WeakSet()
        #: --metrics: a mcpkit.observe.PrometheusMetrics whose page GET /metrics serves
        self.metrics = None
        if metrics:
            from ..observe.metrics import PrometheusMetrics

            self.metrics = (metrics if isinstance(metrics, PrometheusMetrics) else PrometheusMetrics()).attach(server)
        #: SEP-2127: the Server Card at <path>/server-card and the MCP Catalog (transports/discovery.py)
        self.card_name = card_name
        self._discovery = {path.rstrip("/") + "/server-card": "card",
                           "/.well-known/mcp/catalog.json": "catalog"} if server_card else {}
        #: a mcpkit.auth.ResourceServer: every MCP request must carry a valid bearer token
        self.auth = auth
        #: the header an API-key scheme reads its key from (Authorization is single already)
        self._credential_header: bytes | None = getattr(auth, "header", None)
        if auth is not None:
            from ..server.scopes import ScopeStep

            # scopes are enforced in the call path too, for the routes a request body does not name
            server._install_step("scopes", ScopeStep(auth))
        self._metadata_paths = auth.metadata_paths(path) if auth is not None else frozenset()
        self.path = path.rstrip("/") or "/"
        self.json_response = json_response
        self.stateless = stateless
        #: HS-01/HS-02: the Host and Origin allow-lists (transports/http_guard.py)
        self.guard = HostGuard(allowed_hosts, allowed_origins)
        self.max_body_bytes = max_body_bytes
        #: http_body.py: a body's read deadline, and the size from which it is parsed off the loop
        self.body_timeout = body_timeout
        self.off_loop_bytes = off_loop_bytes
        self.max_sessions = max_sessions
        #: per principal (with auth) or client address: a tenth of max_sessions unless told
        self.quotas = SessionQuotas(max_sessions_per_client or max(1, max_sessions // 10))
        self.session_idle_timeout = session_idle_timeout
        self.retry_ms = retry_ms
        shared = server.shared  # MCPKIT_STORE: several processes serve the same sessions
        self.event_store = event_store if event_store is not None else (
            server.stores.events if shared else MemoryEventStore())
        #: where sessions live so that any process can serve them (None: this process only)
        self.session_store = server.stores.sessions if shared else None
        if shared:
            server._listen_bus()
            # another process changed or ended a session this one also serves; Redis lost
            self._share_sessions()
        self.legacy_sse = legacy_sse
        self._held: Any = None  # the server's lifespan (server/lifespan.py), while this app holds it
        self.sse_path = sse_path
        self.messages_path = messages_path
        self.cors_origins = {o.rstrip("/").lower() for o in (cors_origins or ())}
        self.sessions: OrderedDict[str, _HttpSession] = OrderedDict()
        self.legacy: dict[str, _HttpSession] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._last_sweep = time.monotonic()
        self._from_workers: deque[tuple[_HttpSession, list[Outgoing]]] = deque()
        self._drain_scheduled = False
        self._sweeper_loop: asyncio.AbstractEventLoop | None = None
        self._sweep_every = min(60.0, max(0.5, session_idle_timeout / 4))
        #: shared stores: how often a session served here renews its stored copy's TTL
        self._touch_every = min(60.0, max(1.0, session_idle_timeout / 4))
        self._touching: dict[str, asyncio.Future[None]] = {}
        self._checking: dict[str, asyncio.Future[bool]] = {}
        self._saving: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Future[None]] = set()
        self._closed = False

    def from_worker(self, hs: _HttpSession, messages: list[Outgoing]) -> None:
        """Messages made in a worker thread: queue them, and wake the loop once for however
        many answers pile up meanwhile (one wake-up per batch, not per call)."""
        self._from_workers.append((hs, messages))
        if not self._drain_scheduled:
            self._drain_scheduled = True
            hs.loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        self._drain_scheduled = False  # first: an append after this point schedules another drain
        pending = self._from_workers
        while pending:
            hs, messages = pending.popleft()
            hs._route(messages)

    # ------------------------------------------------------------------ ASGI entry

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "http":
            loop = self.loop = asyncio.get_running_loop()  # the app may outlive a loop (tests)
            if self._sweeper_loop is not loop:
                self._start(loop)
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        """First use on ``loop``: sweep idle sessions on it, and learn of its server's shutdown."""
        self._sweeper_loop = loop
        self._closed = False
        if not self.stateless:
            loop.call_later(self._sweep_every, self._periodic_sweep, loop)
        self._started(loop)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.loop = asyncio.get_running_loop()
                if self._sweeper_loop is not self.loop:
                    self._start(self.loop)
                lifespan = self.server.lifespan
                if lifespan is not None:  # the server's own setup (server/lifespan.py)
                    try:
                        await lifespan.enter(self.server)
                    except Exception as exc:  # noqa: BLE001 - ASGI: the host reports it and stops
                        log.exception("the lifespan's setup failed")
                        await send({"type": "lifespan.startup.failed", "message": f"lifespan setup failed: {exc}"})
                        return
                    self._held = lifespan
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.server.close_tasks()  # requests in flight are done; the tasks still running fail
                self.close_all()
                lifespan, self._held = self._held, None
                if lifespan is not None:
                    try:
                        await lifespan.exit()
                    except Exception as exc:  # noqa: BLE001
                        log.exception("the lifespan's teardown failed")
                        await send({"type": "lifespan.shutdown.failed", "message": f"lifespan teardown failed: {exc}"})
                        return
                await send({"type": "lifespan.shutdown.complete"})
                return

    def close_all(self) -> None:
        self._closed = True
        for hs in list(self.sessions.values()) + list(self.legacy.values()) + list(self._passing):
            hs.close()
        self.sessions.clear()
        self.legacy.clear()
        self._flush_audit()

    async def _http(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        raw = scope["headers"]
        headers = dict(raw)
        twice = repeated_header(raw, headers, self._credential_header)
        if twice is not None:
            await self._plain(send, 400, _error_body(
                INVALID_REQUEST, f"The {twice} header was sent more than once; send it once."), {})
            return
        path = route_path(scope)  # below the mount point when mounted under a prefix
        if self.metrics is not None and path == "/metrics" and scope["method"] == "GET":
            await self._metrics_page(scope, send, headers)
            return
        which = self._discovery.get(path) if self._discovery else None
        if which is not None and scope["method"] == "GET":
            # public metadata for any origin and without a token; the Host guard still applies
            host = headers.get(b"host", b"").decode("latin-1")
            if not self.guard.host_allowed(host):
                await self._plain(send, 403, _error_body(INVALID_REQUEST, f"Host {host!r} is not allowed."), headers)
                return
            from .discovery import serve

            await serve(self, scope, send, headers, which)
            return
        refused = self.guard.refusal(headers)
        if refused is not None:
            await self._plain(send, 403, _error_body(INVALID_REQUEST, refused), headers)
            return
        method = scope["method"]
        if method == "OPTIONS" and self.cors_origins:
            await self._preflight(send, headers)
            return
        if self.auth is not None:
            await self._authenticated(scope, receive, send, headers, path, method)
            return
        await self._route(scope, receive, send, headers, path, method)

    async def _metrics_page(self, scope: dict[str, Any], send: Any, headers: dict[bytes, bytes]) -> None:
        """Prometheus text for a scraper: behind the Host guard like everything else, and with
        auth on, behind the same credential as the MCP endpoint (tool names, sessions and
        traffic are not for whoever reaches the port)."""
        host = headers.get(b"host", b"").decode("latin-1")
        if not self.guard.host_allowed(host):
            await self._plain(send, 403, _error_body(INVALID_REQUEST, f"Host {host!r} is not allowed."), headers)
            return
        if self.auth is not None and await self._access(scope, send, headers, "/metrics", "GET") is None:
            return
        from .._extras import needs

        with needs("metrics", "--metrics"):
            from prometheus_client import CONTENT_TYPE_LATEST

        body = self.metrics.render()  # type: ignore[union-attr]
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", CONTENT_TYPE_LATEST.encode())]})
        await send({"type": "http.response.body", "body": body})

    async def _route(
        self, scope: dict[str, Any], receive: Any, send: Any, headers: dict[bytes, bytes], path: str, method: str
    ) -> None:
        if self._drain_started is not None and (method == "GET" or self._expired):
            # shutting down: no new stream (nor, past the deadline, any request) is taken here
            await self._plain(send, 503, _error_body(INVALID_REQUEST, "The server is shutting down; connect again."),
                              headers, [(b"retry-after", b"1")])
            return
        if path.rstrip("/") == self.path or path == self.path:
            if method == "POST":
                await self._post(scope, receive, send, headers)
            elif method == "GET":
                await self._get(receive, send, headers)
            elif method == "DELETE":
                await self._delete(send, headers)
            else:
                await self._plain(send, 405, _error_body(INVALID_REQUEST, "Method not allowed."), headers, [(b"allow", b"GET, POST, DELETE")])
            return
        if self.legacy_sse and path == self.sse_path and method == "GET":
            await self._legacy_get(scope, receive, send, headers)
            return
        if self.legacy_sse and path == self.messages_path and method == "POST":
            await self._legacy_post(scope, receive, send, headers)
            return
        await self._plain(send, 404, _error_body(INVALID_REQUEST, "Not found."), headers)

    # ------------------------------------------------------------------ protection

    def _cors(self, headers: dict[bytes, bytes]) -> list[tuple[bytes, bytes]]:
        if not self.cors_origins:
            return []
        origin = headers.get(b"origin", b"").decode("latin-1").rstrip("/").lower()
        if origin and (origin in self.cors_origins or "*" in self.cors_origins):
            return [
                (b"access-control-allow-origin", origin.encode("latin-1")),
                (b"access-control-expose-headers", b"mcp-session-id, mcp-protocol-version"),
                (b"vary", b"origin"),
            ]
        return []

    async def _preflight(self, send: Any, headers: dict[bytes, bytes]) -> None:
        extra = self._cors(headers)
        if extra:
            extra += [
                (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
                (b"access-control-allow-headers", b"content-type, accept, authorization, mcp-session-id, mcp-protocol-version, last-event-id"),
                (b"access-control-max-age", b"600"),
            ]
        await send({"type": "http.response.start", "status": 204 if extra else 403, "headers": extra})
        await send({"type": "http.response.body", "body": b""})

    async def _plain(
        self, send: Any, status: int, body: bytes, headers: dict[bytes, bytes],
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        out = [_JSON] if body else []
        out += self._cors(headers)
        if extra:
            out += extra
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": body})

    def _version_error(self, headers: dict[bytes, bytes]) -> str | None:
        """HL-19: an invalid or unsupported MCP-Protocol-Version is refused with 400."""
        value = headers.get(b"mcp-protocol-version")
        if value is None:
            return None
        version = value.decode("latin-1")
        if version not in revisions.HANDSHAKE_VERSIONS:
            return f"Unsupported MCP-Protocol-Version {version!r}; supported: {', '.join(revisions.HANDSHAKE_VERSIONS)}."
        return None

    # ------------------------------------------------------------------ POST

    async def _post(self, scope: dict[str, Any], receive: Any, send: Any, headers: dict[bytes, bytes]) -> None:
        if not is_json_content_type(headers.get(b"content-type", b"")):  # RFC 9110 §8.3.1
            await self._plain(send, 415, _error_body(INVALID_REQUEST, "Content-Type must be application/json."), headers)
            return
        takes_json, takes_sse = acceptable(headers.get(b"accept"))  # RFC 9110 §12.5.1
        if not (takes_sse or takes_json):
            await self._plain(send, 406, _error_body(INVALID_REQUEST, "Accept must include application/json or text/event-stream."), headers)
            return
        body = await self._read_body(receive, send, headers)
        if body is None:
            return
        try:
            payload = await self._parse(body)
        except _json.JSONDecodeError:
            await self._plain(send, 400, _error_body(PARSE_ERROR, "Parse error: the body is not valid UTF-8 JSON."), headers)
            return
        large = self._is_large(body)
        del body
        items = payload if type(payload) is list else [payload]
        msg: Any = None  # a single message, classified once: the engine takes it as it is
        if type(payload) is not list:
            msg = classify(payload)
            if type(msg) is Invalid:  # HL-05: not acceptable, with a JSON-RPC error body
                await self._plain(send, 400, _error_body(msg.error.code, msg.error.message, msg.error.data, msg.id), headers)
                return
        else:
            # HL-05: a batch with an element that is no valid message (an id that is not a string
            # or an integer, no method...) or no element at all is refused whole, with the errors
            bad = [m for m in map(classify, payload) if type(m) is Invalid]
            if bad or not payload:
                errors = [_json.loads(_error_body(m.error.code, m.error.message, m.error.data, m.id)) for m in bad]
                body = _json.dumps(errors) if errors else _error_body(INVALID_REQUEST, "An empty batch is not a valid request.")
                await self._plain(send, 400, body, headers)
                return
        if await self._scopes_refused(send, headers, payload):
            return
        modern = modern_version(headers, payload)
        if modern is not None:
            await self._post_modern(scope, receive, send, headers, payload, modern, takes_sse, large)
            return
        is_init = any(type(m) is dict and m.get("method") == "initialize" for m in items)
        request_ids = [m["id"] for m in items if type(m) is dict and "method" in m and "id" in m]
        if is_init and type(payload) is list:  # LC-07: initialize is never batched
            await self._plain(send, 400, _error_body(INVALID_REQUEST, "initialize must not be part of a batch."), headers)
            return

        extra: list[tuple[bytes, bytes]] = []
        if self.stateless:
            hs = _HttpSession(self, None)
            hs.session.worker_key = self._client_of(scope)
            if not is_init:
                version = headers.get(b"mcp-protocol-version", b"2025-03-26").decode("latin-1")
                if version not in revisions.HANDSHAKE_VERSIONS:
                    await self._plain(send, 400, _error_body(INVALID_REQUEST, f"Unsupported MCP-Protocol-Version {version!r}."), headers)
                    return
                hs.session.engine.assume(revisions.get(version))
        elif is_init:
            try:
                hs = await self._new_session(self._client_of(scope))
            except QuotaExceeded as full:
                await self._plain(send, full.status, _error_body(INVALID_REQUEST, full.message, None, payload.get("id", NO_ID)),
                                  headers, [(b"retry-after", str(full.retry_after).encode())])
                return
            extra.append((b"mcp-session-id", hs.id.encode()))  # type: ignore[union-attr]
        else:
            found, status, why = self._lookup(headers)
            if found is None:  # the store asked only here: the hot path costs what it did without it
                if status == ASK_STORE:
                    found, status, why = await self._lookup_shared(why)
                if found is None:
                    await self._plain(send, status, _error_body(INVALID_REQUEST, why), headers,
                                      STORE_WAIT if status == 503 else None)
                    return
            hs = found
            bad_version = self._version_error(headers)
            if bad_version is not None:
                await self._plain(send, 400, _error_body(INVALID_REQUEST, bad_version), headers)
                return

        access = self._bind(hs, scope)
        if type(payload) is list:
            rev = hs.session.revision
            if rev is None or not rev.batching:  # HL-03, HL-05: only 2025-03-26 has batches
                where = f"under protocol {rev.version}" if rev is not None else "before initialization"
                await self._plain(send, 400, _error_body(
                    INVALID_REQUEST, f"JSON-RPC batches are not accepted {where}; batching exists only in protocol 2025-03-26."
                ), headers, extra)
                return

        busy = [rid for rid in request_ids if rid in hs.by_request]
        if busy:  # BP-04: still in flight on another stream, whose answer must stay its own
            await self._plain(send, 400, _error_body(
                INVALID_REQUEST, "This request id is already used by a request still in flight.", None, busy[0]
            ), headers, extra)
            return

        if not request_ids:  # HL-04: notifications and responses only
            if large:
                await self._off_loop(hs.session.feed_message, payload, None, access)  # validation included
            else:
                hs.session.feed_message(payload, None, access)
            hs.session.flush()
            if self.session_store is not None and not self.stateless and self._changed(hs):
                await self._save(hs)
            await self._plain(send, 202, b"", headers, extra)
            return

        use_sse = takes_sse and not (self.json_response and takes_json)
        stream = hs.open_stream(request_ids, json_mode=not use_sse)
        hs.active += 1
        try:
            if large:
                await self._off_loop(hs.session.feed_message, payload, msg, access)  # validation included
            else:
                hs.session.feed_message(payload, msg, access)
            hs.session.flush()
            if self.session_store is not None and not self.stateless and self._changed(hs) and not await self._save(hs):
                # before the answer leaves: the client's next request may reach another process,
                # so a session the store could not record is refused (http_sessions.py)
                await self._plain(send, 503, _error_body(INVALID_REQUEST, STORE_DOWN), headers, STORE_WAIT)
                return
            if use_sse:
                await self._write_sse(send, receive, hs, stream, headers, extra, replay=None)
            else:
                await stream.done  # type: ignore[misc]
                frames = stream.frames
                if not frames:  # every request of it was cancelled: nothing to answer (CN-01)
                    await self._plain(send, 202, b"", headers, extra)
                    return
                body_out = frames[0] if len(frames) == 1 else b"[" + b",".join(frames) + b"]"
                await self._plain(send, 200, body_out, headers, extra)
        finally:
            hs.active -= 1
            if self.stateless:
                hs.close()

    # ------------------------------------------------------------------ 2026-07-28

    async def _post_modern(
        self, scope: dict[str, Any], receive: Any, send: Any, headers: dict[bytes, bytes], payload: Any, version: str,
        takes_sse: bool, large: bool = False,
    ) -> None:
        """One sessionless POST of 2026-07-28: check its headers, answer it, then forget it."""
        if type(payload) is not dict:
            await self._plain(send, 400, _error_body(INVALID_REQUEST, "Batches do not exist in protocol 2026-07-28."), headers)
            return
        rid = payload.get("id", NO_ID)
        if "method" not in payload:  # HM-02: clients send no responses in this revision
            await self._plain(send, 400, _error_body(INVALID_REQUEST, "A client sends no responses in protocol 2026-07-28."), headers)
            return
        try:
            check_headers(headers, payload, version, self.server)
        except McpError as exc:
            await self._plain(send, 400, _error_body(exc.code, exc.message, exc.data, rid), headers)
            return
        if rid is NO_ID:  # HM-03: a notification is accepted and needs no answer
            await self._plain(send, 202, b"", headers)
            return
        hs = _HttpSession(self, None)
        hs.session.worker_key = self._client_of(scope)
        access = self._bind(hs, scope)
        stream = hs.open_stream([rid], json_mode=False)
        wake = asyncio.Event()
        stream.writer = wake
        gone = asyncio.Event()
        watcher = asyncio.ensure_future(_watch_disconnect(receive, gone, wake))
        sse = takes_sse and not self.json_response
        try:
            if large:
                await self._off_loop(hs.session.feed_message, payload, None, access)  # validation included
            else:
                hs.session.feed_message(payload, None, access)
            hs.session.flush()
            # Wait for the first message: if it is the answer itself, it goes out as JSON with the
            # status its error calls for (HM-12, HM-13); if notifications come first, they and the
            # answer ride an SSE stream (HM-04, HM-05). A JSON-only client gets the answer alone.
            while not gone.is_set() and not (stream.queue and (sse or stream.queue[-1] is _END)):
                wake.clear()
                await wake.wait()
            if gone.is_set():
                return  # HM-10: the client closed the request: cancelled below
            if stream.queue[-1] is _END and (not sse or len(stream.queue) == 2):
                answer = stream.queue[-2] if len(stream.queue) >= 2 else b""
                status = 200
                if answer:
                    error = _json.loads(answer).get("error")
                    if isinstance(error, dict):
                        status = status_for(error.get("code", 0))
                await self._plain(send, status, answer, headers)
                return
            watcher.cancel()
            stream.writer = None
            hs.streams[stream.id] = stream
            await self._write_sse(send, receive, hs, stream, headers, [], replay=None, resumable=False)
        finally:
            watcher.cancel()
            hs.close()  # HM-10: a closed stream is a cancellation; nothing outlives the POST

    # ------------------------------------------------------------------ SSE writing

    def _priming(self, hs: _HttpSession) -> bool:
        rev = hs.session.revision
        return rev is not None and rev.version >= "2025-11-25"

    async def _write_sse(
        self, send: Any, receive: Any, hs: _HttpSession, stream: _Stream, headers: dict[bytes, bytes],
        extra: list[tuple[bytes, bytes]], replay: list[tuple[str, bytes]] | None, resumable: bool = True,
        preamble: bytes | None = None,
    ) -> None:
        store = self.event_store if resumable and not self.stateless else None
        # shared stores: a new POST stream's first entry says who owes which answers, so that
        # any process can carry it on, or fail it once its owner is gone (http_resume.py). It is
        # stored before the status goes out and sent right after it: a process killed in between
        # leaves a client with no answer at all (a balancer's 502, retryable) or with an event
        # id to resume from, never a 200 it cannot resume
        record = self._record(stream) if store is not None and replay is None else None
        primed = None
        if store is not None and self._priming(hs):
            primed = await self._stored(store, stream.id, record or b"")  # HL-09: an event id, empty data
        elif record is not None:
            await self._stored(store, stream.id, record)
        wake = asyncio.Event()
        stream.writer = wake
        gone = asyncio.Event()
        watcher = asyncio.ensure_future(_watch_disconnect(receive, gone, wake))
        ended = False
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": _SSE_HEADERS + self._cors(headers) + extra})
            if preamble is not None:
                await send({"type": "http.response.body", "body": preamble, "more_body": True})
            if primed is not None:  # ... and how soon to come back after a drop
                await send({"type": "http.response.body", "more_body": True,
                            "body": f"id: {primed}\nretry: {self.retry_ms}\ndata: \n\n".encode()})
            for eid, payload in replay or ():
                if payload and not payload.startswith(META):
                    await send({"type": "http.response.body", "body": sse_frame(eid, payload), "more_body": True})
            while not ended and not gone.is_set():
                if not stream.queue:
                    wake.clear()
                    await wake.wait()
                    continue
                chunks = []
                while stream.queue:
                    item = stream.pop()
                    if item is _END:
                        ended = True
                        break
                    eid = await self._stored(store, stream.id, item) if store is not None else None
                    if not item.startswith(META):  # a record is for the store alone
                        chunks.append(sse_frame(eid, item))
                if chunks:
                    await send({"type": "http.response.body", "body": b"".join(chunks), "more_body": True})
            if not gone.is_set():
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                if ended and store is not None and not (stream.standalone and self.session_store is not None):
                    # delivered to the end on a live connection: nothing left to resume, unless
                    # a reverse proxy read it for a client that had gone (HAProxy and nginx
                    # drain an answer whatever the client does): kept RESUME_GRACE more seconds.
                    # A shared GET stream is left alone: it ends here because another process
                    # writes it now (http_resume.py), or on shutdown, and goes on elsewhere
                    await self._drop_events(store, [stream.id], RESUME_GRACE)
        except OSError:
            pass  # the client went away mid-write; the stream stays resumable
        finally:
            watcher.cancel()
            if stream.writer is wake:
                stream.writer = None
            if ended:
                hs.streams.pop(stream.id, None)
                self._let_go(stream)
            elif store is not None and self.session_store is not None and not stream.standalone:
                # shared stores: the client may resume on another process, so what this stream
                # still says goes to the event store without a reader
                asyncio.ensure_future(self._drain_to_store(hs, stream, store))

    async def _carry_on(self, send: Any, receive: Any, headers: dict[bytes, bytes], stream_id: str, last: int,
                        owner: str, owes: set[Any], stored: list[tuple[str, bytes]]) -> None:
        """A stream that still owes answers, resumed where its reader is not (http_resume.py):
        what was stored after ``last``, then what is stored next, live."""
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS + self._cors(headers)})
        gone = asyncio.Event()
        watcher = asyncio.ensure_future(_watch_disconnect(receive, gone, asyncio.Event()))
        try:
            replay = [(eid, p) for eid, p in stored if event_seq(eid) > last and p and not p.startswith(META)]
            if replay:
                await send({"type": "http.response.body", "body": b"".join(sse_frame(e, p) for e, p in replay),
                            "more_body": True})
            await self._follow(send, gone, stream_id, event_seq(stored[-1][0]), owner, owes)
            if not gone.is_set():
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went away mid-write; the stream stays resumable
        finally:
            watcher.cancel()

    @staticmethod
    async def _drop_events(store: Any, stream_ids: list[str], grace: float = 0.0) -> None:
        try:
            await store.drop(stream_ids, grace) if grace else await store.drop(stream_ids)
        except Exception as exc:  # noqa: BLE001 - a shared store that is down: the TTL drops them
            log.warning("event store unavailable; old events expire by themselves: %s", exc)

    async def _stored(self, store: Any, stream_id: str, item: bytes) -> str | None:
        """The event id under which ``item`` can be resumed, or None when the store is down:
        the message still goes out, only without an id to resume from."""
        try:
            eid: str = await store.store(stream_id, item)
        except Exception as exc:  # noqa: BLE001 - StoreUnavailable from a shared store
            log.warning("event store unavailable; sending without an event id: %s", exc)
            return None
        return eid

    async def _drain_to_store(self, hs: _HttpSession, stream: _Stream, store: Any) -> None:
        wake = asyncio.Event()
        stream.writer = wake
        stream.draining = True
        try:
            while not hs.closed:
                if not stream.queue:
                    wake.clear()
                    await wake.wait()
                    continue
                item = stream.pop()
                if item is _END:
                    break
                await self._stored(store, stream.id, item)
        finally:
            if stream.writer is wake:
                stream.writer = None
            hs.streams.pop(stream.id, None)
            self._let_go(stream)

    # ------------------------------------------------------------------ GET and DELETE

    async def _get(self, receive: Any, send: Any, headers: dict[bytes, bytes]) -> None:
        if not acceptable(headers.get(b"accept", b""))[1]:
            await self._plain(send, 406, _error_body(INVALID_REQUEST, "Accept must include text/event-stream."), headers)
            return
        if self.stateless:
            await self._plain(send, 405, _error_body(INVALID_REQUEST, "No standalone stream in stateless mode."), headers, [(b"allow", b"POST")])
            return
        hs = await self._session_of(send, headers)
        if hs is None:
            return
        last = headers.get(b"last-event-id")
        hs.active += 1
        try:
            if last is not None:
                last_id = last.decode("latin-1")
                attached = None
                if hs.get_stream is None and last_id.rpartition("_")[0] == f"{hs.id}.get":
                    # the GET stream, opened on another process (or before a restart): attached
                    # before the replay is read, so what is published meanwhile waits in its
                    # queue and follows the replay, neither lost nor sent twice (it is stored,
                    # with the next ids, only as it is written)
                    attached = hs.get_stream = _Stream(f"{hs.id}.get", set(), json_mode=False, standalone=True)
                try:
                    found = await self.event_store.replay_after(last_id)
                except Exception as exc:  # noqa: BLE001 - StoreUnavailable from a shared store
                    log.warning("event store unavailable: %s", exc)
                    found = STORE_GONE
                if found is not None and found is not STORE_GONE and not found[0].startswith(f"{hs.id}."):
                    found = None  # HL-14: another session's stream is not this client's to replay
                if found is None or found is STORE_GONE:
                    if attached is not None and hs.get_stream is attached:
                        hs.get_stream = None
                    if found is STORE_GONE:
                        await self._plain(send, 503, _error_body(
                            INVALID_REQUEST, "The event store is unavailable; retry in a few seconds."), headers)
                    else:
                        await self._plain(send, 404, _error_body(INVALID_REQUEST, "Unknown or expired Last-Event-ID."), headers)
                    return
                stream_id, events = found
                stream = hs.streams.get(stream_id) or (hs.get_stream if hs.get_stream and hs.get_stream.id == stream_id else None)
                if stream is None or stream.draining:
                    owed = await self._owed(stream_id)
                    if owed is not None:  # still owes answers: carried on from the store
                        await self._carry_on(send, receive, headers, stream_id, event_seq(last_id), *owed)
                        return
                    # ended, or running on for the store only: replay what was stored, then close
                    # (with shared stores, that is how any process resumes any stream)
                    stream = _Stream(stream_id, set(), json_mode=False)
                    stream.push(_END)
                elif stream.writer is not None:
                    await self._plain(send, 409, _error_body(INVALID_REQUEST, "That stream is already being read."), headers)
                    return
                elif stream is hs.get_stream:
                    self._reading_here(hs)
                await self._write_sse(send, receive, hs, stream, headers, [], replay=events)
                return
            if hs.get_stream is not None and hs.get_stream.writer is not None:
                await self._plain(send, 409, _error_body(INVALID_REQUEST, "A standalone stream is already open for this session."), headers)
                return
            if hs.get_stream is None:
                hs.get_stream = _Stream(f"{hs.id}.get", set(), json_mode=False, standalone=True)
            self._reading_here(hs)
            await self._write_sse(send, receive, hs, hs.get_stream, headers, [], replay=None)
        finally:
            hs.active -= 1

    async def _session_of(self, send: Any, headers: dict[bytes, bytes]) -> _HttpSession | None:
        """The session a GET or DELETE names (asking the shared store if need be), or None once
        the refusal is sent: 400, 404, or 503 + Retry-After while the store is down."""
        hs, status, why = self._lookup(headers)
        if status == ASK_STORE:
            hs, status, why = await self._lookup_shared(why)
        if hs is None:
            await self._plain(send, status, _error_body(INVALID_REQUEST, why), headers,
                              STORE_WAIT if status == 503 else None)
            return None
        bad_version = self._version_error(headers)
        if bad_version is not None:
            await self._plain(send, 400, _error_body(INVALID_REQUEST, bad_version), headers)
            return None
        return hs  # type: ignore[no-any-return]

    async def _delete(self, send: Any, headers: dict[bytes, bytes]) -> None:
        hs = await self._session_of(send, headers)
        if hs is None:
            return
        if not await self._end(hs.id):  # type: ignore[arg-type]  # HL-18: later requests with this id get 404
            # a shared store could not record the end: refused, never acknowledged and undone
            await self._plain(send, 503, _error_body(INVALID_REQUEST, STORE_DOWN), headers, STORE_WAIT)
            return
        await self._plain(send, 200, b"", headers)

    # ------------------------------------------------------------------ legacy HTTP+SSE (2024-11-05)

    async def _legacy_get(self, scope: dict[str, Any], receive: Any, send: Any, headers: dict[bytes, bytes]) -> None:
        client = self._client_of(scope)
        if self.quotas.count(client) >= self.quotas.per_client:
            # every legacy session is an open stream: none is idle to make room with
            await self._plain(send, 429, _error_body(
                INVALID_REQUEST, f"Too many sessions for this client (the limit is {self.quotas.per_client}); "
                "close one or retry later."), headers, [(b"retry-after", str(self.quotas.retry_after).encode())])
            return
        session_id = os.urandom(16).hex()
        hs = _HttpSession(self, session_id)
        self.quotas.add(client, session_id)
        self._bind(hs, scope)
        stream = _Stream(f"{session_id}.legacy", set(), json_mode=False, standalone=True)
        hs.get_stream = stream
        self.legacy[session_id] = hs
        # HX-02: the first event names the URI for the client's POSTs; HX-03: then message events
        endpoint = f"{public_path(scope, self.messages_path)}?session_id={session_id}".encode()
        try:
            await self._write_sse(
                send, receive, hs, stream, headers, [], replay=None, resumable=False,
                preamble=b"event: endpoint\ndata: " + endpoint + b"\n\n",
            )
        finally:
            self.legacy.pop(session_id, None)
            self.quotas.remove(session_id)
            hs.close()

    async def _legacy_post(self, scope: dict[str, Any], receive: Any, send: Any, headers: dict[bytes, bytes]) -> None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        session_id = (query.get("session_id") or [""])[0]
        hs = self.legacy.get(session_id)
        if hs is not None and hs.owner is not None and not self._owned(hs):
            hs = None  # SEC-03: another user's session
        if hs is None:
            await self._plain(send, 404, _error_body(INVALID_REQUEST, "Unknown session_id: open /sse first."), headers)
            return
        body = await self._read_body(receive, send, headers)
        if body is None:
            return
        if self.auth is not None:
            try:
                payload = _json.loads(body)
            except _json.JSONDecodeError:
                payload = None  # the session answers the parse error on the stream
            if await self._scopes_refused(send, headers, payload):
                return
        hs.session.feed(body, self._bind(hs, scope))  # answers, including parse errors, go out on the SSE stream
        hs.session.flush()
        await send({"type": "http.response.start", "status": 202, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"Accepted"})


McpHttpApp._session_type = _HttpSession
