"""The sans-IO protocol engine: one per client connection (a stdio process or an HTTP session).

Bytes or decoded frames go in through :meth:`Engine.receive`; what comes out is a
list of events for the server to act on, and outgoing messages queued in
:attr:`Engine.outbox` for the transport to move. The engine never touches a
socket, a clock or asyncio. It owns everything JSON-RPC and lifecycle:
framing errors, id rules, the handshake, batching per revision, in-flight
requests, cancellation, progress tokens and requests the server sends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import _json
from . import revisions
from .errors import INVALID_PARAMS, INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION, McpError
from .jsonrpc import NO_ID, ErrorResponse, Invalid, Notification, Request, Response, classify, parse
from .revisions import Revision

__all__ = [
    "Engine",
    "Outgoing",
    "RequestReceived",
    "NotificationReceived",
    "CancelRequested",
    "ResponseReceived",
    "SessionStarted",
]


class Outgoing:
    """One encoded message for the transport.

    ``related`` is the client request it belongs to (a response, or progress, logs and
    server->client requests made while handling it), so HTTP can route it to that
    request's stream; ``answers`` lists the request ids this message completes.
    """

    __slots__ = ("payload", "related", "answers")

    def __init__(self, payload: bytes, related: Any = None, answers: tuple[Any, ...] = ()) -> None:
        self.payload = payload
        self.related = related
        self.answers = answers

    def __repr__(self) -> str:
        return f"Outgoing({self.payload[:80]!r}, related={self.related!r})"


class RequestReceived:
    """A request to handle, with what it is to be handled under: in the handshake era the
    session's revision and capabilities, in 2026-07-28 those of this request's own ``_meta``
    (BP-14: nothing is taken from earlier requests)."""

    __slots__ = ("id", "method", "params", "revision", "capabilities", "log_level", "client_info", "access_token")

    def __init__(
        self,
        id: str | int,
        method: str,
        params: dict[str, Any] | None,
        revision: Revision,
        capabilities: dict[str, Any],
        log_level: str | None = None,
        client_info: dict[str, Any] | None = None,
    ) -> None:
        self.id = id
        self.method = method
        self.params = params
        self.revision = revision
        self.capabilities = capabilities
        self.log_level = log_level
        self.client_info = client_info
        # ``access_token``: the verified credential this request arrived with, set by the
        # server session when its transport passed one (never read here; unset otherwise, so
        # a request without one costs nothing): a session may see several, as a client steps
        # up its scopes, and each request is judged by its own

    def __repr__(self) -> str:
        return f"RequestReceived(id={self.id!r}, method={self.method!r})"


class NotificationReceived:
    __slots__ = ("method", "params")

    def __init__(self, method: str, params: dict[str, Any] | None) -> None:
        self.method = method
        self.params = params


class CancelRequested:
    __slots__ = ("request_id", "reason")

    def __init__(self, request_id: str | int, reason: str | None) -> None:
        self.request_id = request_id
        self.reason = reason


class ResponseReceived:
    """The client answered a request the server sent: ``error`` is None on success."""

    __slots__ = ("id", "result", "error")

    def __init__(self, id: Any, result: dict[str, Any] | None, error: dict[str, Any] | None) -> None:
        self.id = id
        self.result = result
        self.error = error


class SessionStarted:
    """The initialize request was answered: the revision is now fixed for this connection."""

    __slots__ = ("revision", "client_info", "client_capabilities")

    def __init__(self, revision: Revision, client_info: dict[str, Any], client_capabilities: dict[str, Any]) -> None:
        self.revision = revision
        self.client_info = client_info
        self.client_capabilities = client_capabilities


class _InFlight:
    __slots__ = ("progress_token", "last_progress", "batch", "revision")

    def __init__(self, progress_token: Any, batch: _Batch | None, revision: Revision) -> None:
        self.progress_token = progress_token
        self.last_progress: float | None = None
        self.batch = batch
        self.revision = revision


class _Batch:
    """BP-13 (2025-03-26): the answers to one batch go out together as one array."""

    __slots__ = ("pending", "answers", "ids")

    def __init__(self) -> None:
        self.pending: set[Any] = set()
        self.answers: list[dict[str, Any]] = []
        self.ids: list[Any] = []


Event = RequestReceived | NotificationReceived | CancelRequested | ResponseReceived | SessionStarted

#: LC-01/PG-01/LC-04: the only requests a client may send before initialize.
_PRE_INIT = frozenset({"initialize", "ping"})


class Engine:
    """Protocol state of one connection in the handshake era."""

    def __init__(
        self,
        *,
        describe: Callable[[Revision, dict[str, Any]], dict[str, Any]],
        versions: tuple[str, ...] = revisions.HANDSHAKE_VERSIONS,
        result_meta: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        #: builds the InitializeResult for a revision (capabilities, serverInfo, instructions)
        self._describe = describe
        self._versions = versions
        self.revision: Revision | None = None
        self.initialized = False  # notifications/initialized seen
        self.client_info: dict[str, Any] = {}
        self.client_capabilities: dict[str, Any] = {}
        #: LC-05/LC-06: the capabilities this connection's InitializeResult declared (None: no
        #: handshake, e.g. stateless HTTP or 2026-07-28)
        self.declared: frozenset[str] | None = None
        self.outbox: list[Outgoing] = []
        self._in_flight: dict[Any, _InFlight] = {}
        self._pending_out: set[Any] = set()  # ids of requests we sent and await
        self._next_out_id = 0
        #: MT-06: the _meta every 2026-07-28 result carries (serverInfo); a function that makes
        #: it is called on the first such result (a session of the handshake era never needs it)
        self._result_meta = result_meta

    def assume(self, rev: Revision) -> None:
        """Serve at ``rev`` without a handshake (stateless HTTP: every POST stands alone)."""
        self.revision = rev
        self.initialized = True

    # ------------------------------------------------------------------ input

    def receive(self, data: bytes | str) -> list[Event]:
        """Take one frame (one stdio line or one HTTP body) and return the events it causes."""
        try:
            messages, is_batch = parse(data)
        except McpError as exc:  # BP-02, ST-04: garbage gets -32700 and the server goes on
            self._emit_error(NO_ID, exc, None)
            return []
        if is_batch:
            return self._receive_batch(messages)
        return self._receive_one(messages[0], None)

    def receive_message(self, obj: Any, classified: Any = None) -> list[Event]:
        """Take one already-decoded JSON value (transports that decode themselves);
        ``classified``: ``classify(obj)`` when the transport made it already."""
        if type(obj) is list:
            return self.receive(_json.dumps(obj))
        return self._receive_one(classify(obj) if classified is None else classified, None)

    def _receive_batch(self, messages: list[Any]) -> list[Event]:
        rev = self.revision
        if rev is None or not rev.batching:
            # BP-13: batches exist only in 2025-03-26, and only once it was negotiated
            # (initialize itself must never be batched, LC-07).
            where = "before initialization" if rev is None else f"under protocol {rev.version}"
            self._emit_error(
                NO_ID,
                McpError(
                    INVALID_REQUEST,
                    f"JSON-RPC batches are not accepted {where}; batching exists only in protocol 2025-03-26.",
                ),
                None,
            )
            return []
        batch = _Batch()
        events: list[Event] = []
        for msg in messages:
            if type(msg) is Request and msg.method == "initialize":
                self._emit_error(msg.id, McpError(INVALID_REQUEST, "initialize must not be part of a batch."), batch)
                continue
            events.extend(self._receive_one(msg, batch))
        self._flush_batch(batch)
        return events

    def _receive_one(self, msg: Any, batch: _Batch | None) -> list[Event]:
        t = type(msg)
        if t is Request:
            return self._on_request(msg, batch)
        if t is Notification:
            return self._on_notification(msg)
        if t is Response or t is ErrorResponse:
            if msg.id in self._pending_out:
                self._pending_out.discard(msg.id)
                if t is Response:
                    return [ResponseReceived(msg.id, msg.result, None)]
                return [ResponseReceived(msg.id, None, msg.error)]
            return []  # CN-02: late or unknown responses are ignored
        assert t is Invalid
        self._emit_error(msg.id, msg.error, batch)
        return []

    def _on_request(self, req: Request, batch: _Batch | None) -> list[Event]:
        method = req.method
        params = req.params
        meta = params.get("_meta") if params is not None else None
        if method == "server/discover" or (
            type(meta) is dict and revisions.PROTOCOL_VERSION_KEY in meta
        ):
            return self._on_modern_request(req, meta if type(meta) is dict else None, batch)
        if self.revision is None and method not in _PRE_INIT:
            self._emit_error(
                req.id,
                McpError(
                    INVALID_REQUEST,
                    f"Received {method!r} before initialization: send 'initialize' first (only 'ping' is allowed before it).",
                ),
                batch,
            )
            return []
        if req.id in self._in_flight:
            self._emit_error(
                req.id,
                McpError(INVALID_REQUEST, "This request id is already used by a request still in flight (BP-04)."),
                batch,
            )
            return []
        if method == "ping":  # PG-01: answered at once, before and after initialization
            self._emit_result(req.id, {}, batch)
            return []
        if method == "initialize":
            return self._on_initialize(req)
        rev = self.revision
        assert rev is not None
        if batch is None:  # _track, inline for the common case
            token = meta.get("progressToken") if type(meta) is dict else None
            if token is not None and type(token) is not str and type(token) is not int:
                token = None
            self._in_flight[req.id] = _InFlight(token, None, rev)
        else:
            self._track(req.id, meta, batch, rev)
        return [RequestReceived(req.id, method, params, rev, self.client_capabilities, None, self.client_info)]

    def _track(self, rid: Any, meta: Any, batch: _Batch | None, rev: Revision) -> None:
        token = meta.get("progressToken") if type(meta) is dict else None
        if token is not None and type(token) not in (str, int):
            token = None
        self._in_flight[rid] = _InFlight(token, batch, rev)
        if batch is not None:
            batch.pending.add(rid)
            batch.ids.append(rid)

    def _on_modern_request(self, req: Request, meta: dict[str, Any] | None, batch: _Batch | None) -> list[Event]:
        """2026-07-28: no session; everything a request is served under comes in its _meta."""
        if batch is not None:  # BP-13: no batches after 2025-03-26, never in this era
            self._emit_error(req.id, McpError(INVALID_REQUEST, "Batches do not exist in protocol 2026-07-28."), batch)
            return []
        if req.id in self._in_flight:
            # BP-04, in either era: a second request under an id still in flight would leave the
            # first unanswerable (its answer could go to neither); refuse the newcomer alone
            self._emit_error(req.id, McpError(
                INVALID_REQUEST, "This request id is already used by a request still in flight (BP-04)."), None)
            return []
        requested = meta.get(revisions.PROTOCOL_VERSION_KEY) if meta is not None else None
        if not isinstance(requested, str):
            self._emit_error(req.id, McpError(
                INVALID_PARAMS,
                f"Missing required _meta field {revisions.PROTOCOL_VERSION_KEY}.",  # MT-05
                {"missing": [revisions.PROTOCOL_VERSION_KEY]},
            ), None)
            return []
        rev = revisions.REVISIONS.get(requested)
        if rev is None or rev.era != "modern":
            self._emit_error(req.id, McpError(
                UNSUPPORTED_PROTOCOL_VERSION,
                f"Unsupported protocol version {requested!r}.",  # VN-02
                {"supported": list(revisions.SUPPORTED_VERSIONS), "requested": requested},
            ), None)
            return []
        caps = meta.get(revisions.CLIENT_CAPABILITIES_KEY) if meta is not None else None
        if type(caps) is not dict:
            self._emit_error(req.id, McpError(
                INVALID_PARAMS,
                f"Missing required _meta field {revisions.CLIENT_CAPABILITIES_KEY}.",  # MT-05
                {"missing": [revisions.CLIENT_CAPABILITIES_KEY]},
            ), None)
            return []
        level = meta.get(revisions.LOG_LEVEL_KEY) if meta is not None else None
        if level is not None and level not in revisions.LOG_LEVELS:
            self._emit_error(req.id, McpError(
                INVALID_PARAMS, f"Unknown log level {level!r} in _meta.", {"levels": list(revisions.LOG_LEVELS)}
            ), None)  # LG-03
            return []
        info = meta.get(revisions.CLIENT_INFO_KEY) if meta is not None else None
        self._track(req.id, meta, None, rev)
        return [RequestReceived(req.id, req.method, req.params, rev, caps, level, info if type(info) is dict else None)]

    def _on_initialize(self, req: Request) -> list[Event]:
        if self.revision is not None:
            self._emit_error(req.id, McpError(INVALID_REQUEST, "The session is already initialized."), None)
            return []
        params = req.params or {}
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            # LC-02: the lifecycle page's example error for an unusable version.
            self._emit_error(
                req.id,
                McpError(
                    INVALID_PARAMS,
                    "initialize needs a string protocolVersion.",
                    {"supported": list(self._versions), "requested": requested},
                ),
                None,
            )
            return []
        caps = params.get("capabilities")
        info = params.get("clientInfo")
        rev = revisions.negotiate(requested, self._versions)
        self.revision = rev
        self.client_capabilities = caps if isinstance(caps, dict) else {}
        self.client_info = info if isinstance(info, dict) else {}
        result = self._describe(rev, params)
        caps = result.get("capabilities")
        self.declared = frozenset(caps) if isinstance(caps, dict) else frozenset()
        self._emit_result(req.id, result, None)
        return [SessionStarted(rev, self.client_info, self.client_capabilities)]

    def _on_notification(self, note: Notification) -> list[Event]:
        method = note.method
        params = note.params or {}
        if method == "notifications/cancelled":
            # CN-01: cancel what is in flight; unknown or malformed cancellations are ignored.
            rid = params.get("requestId")
            if (type(rid) is str or type(rid) is int) and rid in self._in_flight:
                reason = params.get("reason")
                self._drop(rid)
                return [CancelRequested(rid, reason if isinstance(reason, str) else None)]
            return []
        if method == "notifications/initialized":
            if self.revision is not None:
                self.initialized = True
            return []
        if self.revision is None:
            return []  # LC-01: nothing else counts before the handshake
        return [NotificationReceived(method, note.params)]

    # ------------------------------------------------------------------ output

    def is_in_flight(self, request_id: Any) -> bool:
        return request_id in self._in_flight

    @property
    def in_flight_count(self) -> int:
        return len(self._in_flight)

    def respond(self, request_id: Any, result: dict[str, Any]) -> bool:
        """Queue the result of a request. False (and nothing sent) when it was cancelled (CN-01).

        Raises TypeError, with the request still in flight, when the result is not JSON:
        the caller can then answer with an error instead of leaving the client waiting.
        """
        flight = self._in_flight.get(request_id)
        if flight is None:
            return False
        if flight.revision.result_type:
            result = self._complete(result)
        msg = {"jsonrpc": "2.0", "id": request_id, "result": result}
        if flight.batch is None:
            payload = _json.dumps(msg)  # may raise: encode before forgetting the request
            del self._in_flight[request_id]
            self.outbox.append(Outgoing(payload, request_id, (request_id,)))
            return True
        _json.dumps(result)  # the batch is encoded later, all at once: check this member now
        del self._in_flight[request_id]
        flight.batch.answers.append(msg)
        self._batch_done(flight.batch, request_id)
        return True

    def _complete(self, result: dict[str, Any]) -> dict[str, Any]:
        """BP-10: every 2026-07-28 result has a resultType; MT-06: and serverInfo in _meta."""
        server_meta = self._result_meta
        if callable(server_meta):
            server_meta = self._result_meta = server_meta()
        if "resultType" in result and (server_meta is None or "_meta" in result):
            return result
        out = dict(result)
        out.setdefault("resultType", "complete")
        if server_meta is not None:
            meta = out.get("_meta")
            out["_meta"] = {**server_meta, **meta} if isinstance(meta, dict) else dict(server_meta)
        return out

    def respond_error(self, request_id: Any, error: McpError) -> bool:
        flight = self._in_flight.pop(request_id, None)
        if flight is None:
            return False
        self._emit_error(request_id, error, flight.batch)
        if flight.batch is not None:
            self._batch_done(flight.batch, request_id)
        return True

    def notify(self, method: str, params: dict[str, Any] | None = None, related: Any = None) -> bool:
        """Queue a notification; one tied to a request is dropped once that request ended (PR-04)."""
        if related is not None:
            if related not in self._in_flight:
                return False
        elif self.revision is None and method != "notifications/message":
            return False  # LC-03: nothing unrelated before the handshake
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.outbox.append(Outgoing(_json.dumps(msg), related))
        return True

    def progress_token(self, request_id: Any) -> Any:
        flight = self._in_flight.get(request_id)
        return None if flight is None else flight.progress_token

    def progress(
        self, request_id: Any, progress: float, total: float | None = None, message: str | None = None
    ) -> bool:
        """PR-01..PR-04: only with a token, only while in flight, strictly increasing."""
        flight = self._in_flight.get(request_id)
        if flight is None or flight.progress_token is None:
            return False
        if flight.last_progress is not None and not progress > flight.last_progress:
            raise ValueError(
                f"progress must increase with every notification (PR-03): {progress} after {flight.last_progress}"
            )
        flight.last_progress = progress
        params: dict[str, Any] = {"progressToken": flight.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None and flight.revision.progress_message:
            params["message"] = message
        self.outbox.append(Outgoing(_json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}), request_id))
        return True

    def send_request(self, method: str, params: dict[str, Any] | None = None, related: Any = None) -> int:
        """Queue a server->client request; the answer comes back as ResponseReceived with this id."""
        self._next_out_id += 1
        rid = self._next_out_id  # BP-04: never reused within the session
        self._pending_out.add(rid)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.outbox.append(Outgoing(_json.dumps(msg), related))
        return rid

    def abandon_request(self, request_id: int, reason: str | None = None) -> None:
        """LC-10: stop waiting for a request we sent, and tell the client (notifications/cancelled)."""
        if request_id in self._pending_out:
            self._pending_out.discard(request_id)
            params: dict[str, Any] = {"requestId": request_id}
            if reason:
                params["reason"] = reason
            self.outbox.append(
                Outgoing(_json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}))
            )

    def reject(self, error: McpError) -> None:
        """Queue an error for a message that could not even be read (no id, BP-06)."""
        self._emit_error(NO_ID, error, None)

    def take_outbox(self) -> list[Outgoing]:
        out = self.outbox
        self.outbox = []
        return out

    # ------------------------------------------------------------------ internals

    def _drop(self, request_id: Any) -> None:
        flight = self._in_flight.pop(request_id, None)
        if flight is not None and flight.batch is not None:
            self._batch_done(flight.batch, request_id)

    def _emit_result(self, request_id: Any, result: dict[str, Any], batch: _Batch | None) -> None:
        msg = {"jsonrpc": "2.0", "id": request_id, "result": result}
        if batch is not None:
            if request_id not in batch.ids:
                batch.ids.append(request_id)  # answered at once (ping): still one the batch answers
            batch.answers.append(msg)
        else:
            self.outbox.append(Outgoing(_json.dumps(msg), request_id, (request_id,)))

    def _emit_error(self, request_id: Any, error: McpError, batch: _Batch | None) -> None:
        if request_id is NO_ID or request_id is None:
            msg: dict[str, Any] = {"jsonrpc": "2.0", "error": error.to_error()}
        else:
            msg = {"jsonrpc": "2.0", "id": request_id, "error": error.to_error()}
        if batch is not None:
            if request_id is not NO_ID and request_id is not None and request_id not in batch.ids:
                batch.ids.append(request_id)
            batch.answers.append(msg)
        else:
            answered = () if request_id is NO_ID or request_id is None else (request_id,)
            self.outbox.append(Outgoing(_json.dumps(msg), answered[0] if answered else None, answered))

    def _batch_done(self, batch: _Batch, request_id: Any) -> None:
        batch.pending.discard(request_id)
        self._flush_batch(batch)

    def _flush_batch(self, batch: _Batch) -> None:
        if not batch.pending and batch.answers:
            answers, batch.answers = batch.answers, []
            ids = tuple(batch.ids)
            self.outbox.append(Outgoing(_json.dumps(answers), ids[0] if ids else None, ids))
