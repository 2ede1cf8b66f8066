"""Client: one connection to an MCP server, over stdio, Streamable HTTP, legacy SSE or in memory.

    async with Client(["mcpkit", "serve"]) as client:
        print(await client.call_tool("add", {"a": 1, "b": 2}))
        await client.tools.load()
        print(await client.tools.add(a=1, b=2))

The client speaks both eras: the handshake (initialize, then notifications/initialized) by
default, or the 2026-07-28 envelope (``server/discover`` first, ``_meta`` on every request,
multi-round-trip results fulfilled transparently) with ``protocol_version="2026-07-28"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
import sys
from collections.abc import Callable, Iterable
from typing import Any

from ..protocol import revisions
from .errors import ClientError, ClientTimeout, MessageTooLarge, MismatchedId, RpcError, UnsupportedVersion
from .listening import Backoff, StreamState
from .proxies import ToolProxies
from .transports import Transport, make_transport

__all__ = ["Client"]

log = logging.getLogger("mcpkit.client")

#: a multi-round-trip request gives up after this many input_required rounds
MAX_INPUT_ROUNDS = 16
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class _NoHandler(RpcError):
    """The server asked for something this client has no handler for."""


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class Client:
    """A connection to one MCP server; see the module docstring. Use it as an async context
    manager, or call :meth:`connect` and :meth:`close` yourself.

    A command (stdio) starts with an allow-list of this process's environment (PATH, HOME, the
    locale...: mcpkit.client.environment), then ``inherit_env`` (names, or True for all of it),
    then ``env`` (a None value removes a name): never the secrets this process holds.
    ``sandbox`` (a :class:`mcpkit.client.sandbox.Sandbox`) runs the command confined."""

    def __init__(
        self,
        target: Any,
        *,
        transport: str = "auto",
        protocol_version: str | None = None,
        capabilities: dict[str, Any] | None = None,
        client_info: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        env: dict[str, str | None] | None = None,
        inherit_env: bool | Iterable[str] | None = None,
        cwd: str | None = None,
        sandbox: Any = None,
        timeout: float | None = 30.0,
        sampling_handler: Callable[[dict[str, Any]], Any] | None = None,
        elicitation_handler: Callable[[dict[str, Any]], Any] | None = None,
        roots: list[dict[str, Any]] | Callable[[], Any] | None = None,
        on_notification: Callable[[dict[str, Any]], Any] | None = None,
        on_message: Callable[[dict[str, Any]], Any] | None = None,
        on_log: Callable[[dict[str, Any]], Any] | None = None,
        on_stream_state: Callable[[StreamState], Any] | None = None,
        reconnect: Backoff | None = None,
        tracer_provider: Any = None,
        keep_messages: int | None = 10_000,
        max_message_bytes: int | None = None,
    ) -> None:
        from .. import __version__

        #: OpenTelemetry: where client spans go (default: the global provider); spans are made
        #: only when OpenTelemetry is imported in this process (client/tracing.py)
        self.tracer_provider = tracer_provider
        self.timeout = timeout
        self.requested_version = protocol_version or revisions.LATEST_HANDSHAKE
        #: True when this client speaks the 2026-07-28 envelope (no handshake)
        self.modern = self.requested_version in revisions.MODERN_VERSIONS
        self.client_info = client_info or {"name": "mcpkit", "version": __version__}
        self.sampling_handler = sampling_handler
        self.elicitation_handler = elicitation_handler
        self.roots = roots
        self.on_notification = on_notification
        #: called with every message the server sends, as it arrives and before it is routed
        #: (what a checker or a recorder sees of the wire)
        self.on_message = on_message
        self.on_log = on_log
        #: called with each new :attr:`stream_state`
        self.on_stream_state = on_stream_state
        #: whether the client hears what the server sends outside requests (list_changed, resource
        #: updates, log messages): a StreamState (client/listening.py), None before start. Over
        #: Streamable HTTP a broken GET stream is reopened with the ``reconnect`` backoff, retrying
        #: while the client is open; "stopped" says why it gave up (the session ended on the
        #: server: a new Client is needed); "unsupported": the server offers no such stream
        self.stream_state: StreamState | None = None
        caps: dict[str, Any] = {}
        if sampling_handler is not None:
            caps["sampling"] = {}
        if elicitation_handler is not None:
            caps["elicitation"] = {}
        if roots is not None:
            caps["roots"] = {"listChanged": True}
        caps.update(capabilities or {})
        #: the capabilities this client declares (initialize, or every 2026-07-28 request's _meta)
        self.capabilities = caps
        self._transport = make_transport(
            target, transport, headers=headers, env=env, cwd=cwd, timeout=timeout, reconnect=reconnect,
            inherit_env=inherit_env, sandbox=sandbox,
        )
        if max_message_bytes is not None:
            # a bigger answer fails its request (MessageTooLarge), read past unbuffered (client/oversize.py)
            self._transport.max_message_bytes = max_message_bytes
            self._transport.on_oversize = self._on_oversize
        self.protocol_version: str | None = None
        self.server_info: dict[str, Any] = {}
        self.server_capabilities: dict[str, Any] = {}
        self.instructions: str | None = None
        #: the result of initialize (or server/discover)
        self.connect_result: dict[str, Any] | None = None
        #: what the server sent: its notifications, answers nobody waits for, its requests; each
        #: list keeps the newest ``keep_messages`` (up to twice that between trims; None: all).
        #: Bounded by default, so a long-lived client of a chatty or hostile server does not fill
        #: its memory; a proxy's keeps none (it relays them)
        self.keep_messages = keep_messages
        self.notifications: list[dict[str, Any]] = []
        self.unmatched: list[dict[str, Any]] = []
        self.server_requests: list[dict[str, Any]] = []
        #: handlers for other server->client request methods: method -> (params) -> result
        self.request_handlers: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self.tools = ToolProxies(self)
        #: the tools of the last list_tools(), by name (the HTTP transport mirrors x-mcp-header
        #: arguments from their schemas)
        self.tool_definitions: dict[str, dict[str, Any]] = {}
        self.log_level: str | None = None
        self._ids = itertools.count(1)
        self._pending: dict[Any, asyncio.Future[Any]] = {}
        self._progress: dict[Any, Callable[..., Any]] = {}
        self._answering: dict[Any, asyncio.Task[Any]] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._lost: ClientError | None = None
        self._started = False
        self._closed = False

    # ------------------------------------------------------------------ transport state

    @property
    def transport(self) -> Transport:
        return self._transport

    @property
    def stderr(self) -> str:
        return self._transport.stderr

    @property
    def stdout_noise(self) -> list[bytes]:
        return self._transport.stdout_noise

    @property
    def returncode(self) -> int | None:
        return self._transport.returncode

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Client:
        try:
            await self.connect()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def start(self) -> None:
        """Start the transport without any handshake (for checkers that want to send the first
        message themselves); :meth:`connect` calls it."""
        if not self._started:
            self._started = True
            if hasattr(self._transport, "tool_definitions"):
                self._transport.tool_definitions = self.tool_definitions  # type: ignore[attr-defined]
            await self._transport.start(self._on_message, self._on_lost, self._on_stream_state)

    async def connect(self) -> dict[str, Any]:
        """The handshake (initialize + notifications/initialized) or, 2026-07-28, server/discover."""
        await self.start()
        if self.modern:
            result = await self.request("server/discover")
            if not isinstance(result, dict):
                raise ClientError(f"server/discover answered {result!r}")
            versions = result.get("supportedVersions")
            if isinstance(versions, list) and self.requested_version not in versions:
                raise ClientError(f"the server does not serve {self.requested_version}; it serves {versions}")
            self.protocol_version = self.requested_version
            meta = result.get("_meta") or {}
            self.server_info = meta.get(revisions.SERVER_INFO_KEY) or result.get("serverInfo") or {}
        else:
            result = await self._request_once(
                "initialize",
                {"protocolVersion": self.requested_version, "capabilities": self.capabilities,
                 "clientInfo": self.client_info},
                cancellable=False,  # LC-08: initialize is never cancelled
            )
            if not isinstance(result, dict):
                raise ClientError(f"initialize answered {result!r}")
            version = result.get("protocolVersion")
            if version not in revisions.HANDSHAKE_VERSIONS:
                raise UnsupportedVersion(version)
            self.protocol_version = version
            self.server_info = result.get("serverInfo") or {}
        self.server_capabilities = result.get("capabilities") or {}
        self.instructions = result.get("instructions")
        self.connect_result = result
        self._transport.connected(self.protocol_version, result)
        if not self.modern:
            await self.notify("notifications/initialized")
        return result

    async def close(self) -> None:
        """End the connection: stdio closes the child's stdin (terminating it after 5 s), HTTP
        ends the session (DELETE) when there is one."""
        if self._closed:
            return
        self._closed = True
        for task in [*self._answering.values(), *self._background]:
            task.cancel()
        try:
            if self._started:
                await self._transport.close()
        finally:
            self._fail_pending(ClientError("the client is closed"))

    # ------------------------------------------------------------------ sending

    async def request(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None,
        progress: Callable[..., Any] | None = None, fulfil_inputs: bool = True,
    ) -> Any:
        """Send a request; its ``result``, or :class:`RpcError` for an error response.

        ``progress(progress, total, message)`` receives the request's progress notifications.
        In 2026-07-28, an ``input_required`` result is fulfilled with the handlers and retried
        (``fulfil_inputs=False`` returns it as is). Cancelling the awaiting task sends
        ``notifications/cancelled`` (closes the response stream on 2026-07-28 HTTP).
        """
        rounds = 0
        while True:
            result = await self._request_once(method, params, timeout=timeout, progress=progress)
            if not (self.modern and fulfil_inputs and isinstance(result, dict)
                    and result.get("resultType") == "input_required"):
                return result
            rounds += 1
            if rounds > MAX_INPUT_ROUNDS:
                raise ClientError(f"{method}: still input_required after {MAX_INPUT_ROUNDS} rounds")
            responses = await self._fulfil(result.get("inputRequests") or {})
            params = {k: v for k, v in (params or {}).items() if k not in ("inputResponses", "requestState")}
            params["inputResponses"] = responses  # MR-10: a new request, the original params plus these
            if "requestState" in result:
                params["requestState"] = result["requestState"]

    def _envelope(self, method: str, params: dict[str, Any] | None, rid: Any) -> dict[str, Any]:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if self.modern:
            params = dict(params or {})
            meta = dict(params.get("_meta") or {})
            meta[revisions.PROTOCOL_VERSION_KEY] = self.requested_version
            # a caller may speak for another client on this request (a proxy: the real client's)
            meta.setdefault(revisions.CLIENT_CAPABILITIES_KEY, self.capabilities)
            meta.setdefault(revisions.CLIENT_INFO_KEY, self.client_info)
            if self.log_level is not None:
                meta.setdefault(revisions.LOG_LEVEL_KEY, self.log_level)
            params["_meta"] = meta
        if params is not None:
            msg["params"] = params
        return msg

    async def _request_once(
        self, method: str, params: dict[str, Any] | None, *, timeout: float | None = None,
        progress: Callable[..., Any] | None = None, cancellable: bool = True,
    ) -> Any:
        if "opentelemetry.trace" in sys.modules:  # something configured OpenTelemetry: trace the call
            from .tracing import traced

            return await traced(self, method, params, lambda p: self._send_request(
                method, p, timeout=timeout, progress=progress, cancellable=cancellable))
        return await self._send_request(method, params, timeout=timeout, progress=progress, cancellable=cancellable)

    async def _send_request(
        self, method: str, params: dict[str, Any] | None, *, timeout: float | None = None,
        progress: Callable[..., Any] | None = None, cancellable: bool = True,
    ) -> Any:
        if self._lost is not None:
            raise self._lost_error()
        if self._closed:
            raise ClientError("the client is closed")
        await self.start()
        rid = next(self._ids)
        if progress is not None:
            params = dict(params or {})
            params["_meta"] = {**(params.get("_meta") or {}), "progressToken": rid}
            self._progress[rid] = progress
        msg = self._envelope(method, params, rid)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        limit = self.timeout if timeout is None else timeout
        try:
            async with asyncio.timeout(limit):
                await self._transport.send(msg)
                return await fut
        except TimeoutError:
            if cancellable and rid in self._pending:
                await self._cancel_on_server(rid, "timeout")
            raise ClientTimeout(f"no answer to {method} within {limit} s") from None
        except asyncio.CancelledError:
            if cancellable and rid in self._pending:
                await self._cancel_on_server(rid, "cancelled by the client")
            raise
        finally:
            self._pending.pop(rid, None)
            self._progress.pop(rid, None)
            if fut.done() and not fut.cancelled():
                fut.exception()  # a send that failed leaves the answer (the same loss) unawaited

    async def _cancel_on_server(self, rid: Any, reason: str) -> None:
        self._pending.pop(rid, None)
        if self._transport.closes_to_cancel and self.modern:
            return  # CN-05: on HTTP, closing the response stream is the cancellation
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid, "reason": reason}}
        task = asyncio.get_running_loop().create_task(self._transport.send(note))
        with contextlib.suppress(ClientError, asyncio.CancelledError):
            await asyncio.shield(task)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification."""
        if self._lost is not None:
            raise self._lost_error()
        await self.start()
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        await self._transport.send(msg)

    async def send_raw(self, data: bytes) -> None:
        """Send ``data`` as is (stdio: to the child's stdin, add the b"\\n" yourself; HTTP: as a
        POST body). What comes back is routed as usual; responses nobody awaits go to ``unmatched``."""
        await self.start()
        await self._transport.send_raw(data)

    # ------------------------------------------------------------------ receiving

    def _on_lost(self, error: ClientError) -> None:
        self._lost = error
        if self.stream_state is None or self.stream_state.state != "stopped":
            self._on_stream_state(StreamState("stopped", str(error), status=error.status), quiet=True)
        self._fail_pending(error)

    def _on_oversize(self, edges: Any) -> None:
        from .oversize import message_id

        limit = self._transport.max_message_bytes or 0
        fut = self._pending.pop(message_id(edges.head, edges.tail), None)
        if fut is not None and not fut.done():
            fut.set_exception(MessageTooLarge(edges.size, limit))
        else:  # a notification, a request of the server's, or an answer nobody waits for: dropped
            log.warning("dropped a message of %d bytes from the server, over the limit of %d bytes", edges.size, limit)

    def _lost_error(self) -> ClientError:
        """A fresh copy of why the connection is gone (with its HTTP status, for a caller that checks it)."""
        lost = self._lost
        assert lost is not None
        return ClientError(str(lost), status=lost.status, headers=lost.headers, body=lost.body)

    def _fail_pending(self, error: ClientError) -> None:
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ClientError(str(error), status=error.status, headers=error.headers))
        self._pending.clear()

    def _on_stream_state(self, state: StreamState, quiet: bool = False) -> None:
        """The transport's news about listening: kept, logged, passed to ``on_stream_state``.
        Trouble is a warning (once when retrying starts, again when it ends or gives up), so an
        application that set no callback still hears of it; ``quiet``: the loss of the whole
        connection, which every request reports already."""
        previous = self.stream_state.state if self.stream_state is not None else None
        self.stream_state = state
        if quiet or (state.state in ("listening", "unsupported") and previous != "retrying"):
            log.debug("%s: %s", state.state, state.reason)
        elif state.state == "retrying" and previous == "retrying":
            log.debug("still not listening to the server: %s; attempt %d in %.2f s", state.reason,
                      state.attempt + 1, state.retry_in)
        elif state.state == "retrying":
            log.warning("not listening to the server: %s; retrying in %.1f s, and for as long as the client "
                        "is open", state.reason, state.retry_in)
        elif state.state == "listening":
            log.warning("listening to the server again: %s", state.reason)
        else:
            log.warning("%s listening to the server: %s", "stopped" if state.state == "stopped" else "not",
                        state.reason)
        self._call_back(self.on_stream_state, state)

    def _on_message(self, msg: dict[str, Any]) -> None:
        if self.on_message is not None:
            self._call_back(self.on_message, msg)
        if "method" in msg:
            if "id" in msg:
                self._keep(self.server_requests, msg)
                task = asyncio.get_running_loop().create_task(self._answer(msg))
                self._answering[msg["id"]] = task
                task.add_done_callback(lambda t, rid=msg["id"]: self._answering.pop(rid, None))
            else:
                self._on_notification(msg)
            return
        rid = msg.get("id")
        fut = self._pending.pop(rid, None) if isinstance(rid, (int, str)) else None
        if fut is None and (mismatched := self._retyped(rid)) is not None:
            # BP-05/BP-06: an answer must echo its request's id with its JSON type; "1" for 1 answers
            # nothing, and waiting for the timeout would blame the wrong thing: fail it now, named
            fut = self._pending.pop(mismatched)
            if not fut.done():
                fut.set_exception(MismatchedId(mismatched, rid))
            self._keep(self.unmatched, msg)
            return
        if fut is None or fut.done():
            self._keep(self.unmatched, msg)
        elif "error" in msg:
            fut.set_exception(RpcError.from_error(msg["error"]))
        else:
            fut.set_result(msg.get("result"))

    def _retyped(self, rid: Any) -> Any:
        """The id of a pending request that ``rid`` (an id matching none) spells with another JSON
        type ("1" or 1.0 for 1, 7 for "7"), or None."""
        if not isinstance(rid, (str, int, float)) or isinstance(rid, bool):
            return None
        for pending in self._pending:
            if type(pending) is type(rid):
                continue
            if str(pending) == str(rid) or (isinstance(rid, float) and rid == pending):
                return pending
        return None

    def _call_back(self, callback: Callable[..., Any] | None, *args: Any) -> None:
        if callback is None:
            return
        try:
            value = callback(*args)
        except Exception:  # noqa: BLE001 - a callback's bug must not stop the reader
            log.exception("client callback %r failed", callback)
            return
        if inspect.isawaitable(value):
            task = asyncio.ensure_future(value)
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def _keep(self, record: list[dict[str, Any]], msg: dict[str, Any]) -> None:
        limit = self.keep_messages
        if limit is None:
            record.append(msg)
        elif limit > 0:
            record.append(msg)
            if len(record) > 2 * limit:  # trimmed by halves: appends stay O(1)
                del record[:-limit]

    def _on_notification(self, msg: dict[str, Any]) -> None:
        self._keep(self.notifications, msg)
        method = msg.get("method")
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        if method == "notifications/progress":
            callback = self._progress.get(params.get("progressToken"))
            self._call_back(callback, params.get("progress"), params.get("total"), params.get("message"))
        elif method == "notifications/message":
            self._call_back(self.on_log, params)
        elif method == "notifications/cancelled":
            task = self._answering.get(params.get("requestId"))
            if task is not None:
                task.cancel()
        self._call_back(self.on_notification, msg)

    async def _answer(self, msg: dict[str, Any]) -> None:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": msg["id"]}
        try:
            reply["result"] = await self.handle_input(msg["method"], msg.get("params") or {})
        except asyncio.CancelledError:
            return  # the server cancelled it: no answer
        except RpcError as exc:
            reply["error"] = exc.to_error()
        except Exception as exc:  # noqa: BLE001 - the server gets an error, the client keeps going
            log.exception("answering %s failed", msg["method"])
            reply["error"] = {"code": INTERNAL_ERROR, "message": str(exc) or type(exc).__name__}
        with contextlib.suppress(ClientError):
            await self._transport.send(reply)

    async def handle_input(self, method: str, params: dict[str, Any]) -> Any:
        """The answer to a server->client request (or a 2026-07-28 input request)."""
        if method == "ping":
            return {}
        handler: Callable[..., Any] | None = self.request_handlers.get(method)
        if method == "sampling/createMessage":
            from ..protocol.sampling import pairing_problem

            problem = pairing_problem(params.get("messages"))
            if problem is not None:  # SA-05: not passed on to a model that would choke on it
                raise RpcError(INVALID_PARAMS, f"Invalid sampling messages (SA-05): {problem}")
            if handler is None:
                handler = self.sampling_handler
        elif handler is None and method == "elicitation/create":
            handler = self.elicitation_handler
        elif handler is None and method == "roots/list" and self.roots is not None:
            roots = await _maybe_await(self.roots()) if callable(self.roots) else self.roots
            return {"roots": list(roots)} if isinstance(roots, (list, tuple)) else roots
        if handler is None:
            raise _NoHandler(METHOD_NOT_FOUND, f"Method not found: {method}")
        return await _maybe_await(handler(params))

    async def _fulfil(self, requests: dict[str, Any]) -> dict[str, Any]:
        async def one(key: str, request: Any) -> Any:
            if not isinstance(request, dict) or not isinstance(request.get("method"), str):
                raise ClientError(f"malformed input request {key!r}: {request!r}")
            try:
                return await self.handle_input(request["method"], request.get("params") or {})
            except _NoHandler:
                raise ClientError(
                    f"the server asks for {request['method']} (input {key!r}), which this client has no handler for"
                ) from None

        keys = list(requests)
        values = await asyncio.gather(*(one(k, requests[k]) for k in keys))
        return dict(zip(keys, values, strict=True))

    # ------------------------------------------------------------------ convenience

    async def _paginate(self, method: str, key: str, meta: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor: Any = None
        seen: set[Any] = set()
        while True:
            params: dict[str, Any] | None = {"cursor": cursor} if cursor is not None else None
            if meta is not None:
                params = {**(params or {}), "_meta": dict(meta)}
            result = await self.request(method, params)
            items.extend(result.get(key) or [])
            cursor = result.get("nextCursor")
            if cursor is None:
                return items
            if cursor in seen:
                raise ClientError(f"{method}: the server repeats the cursor {cursor!r}")
            seen.add(cursor)

    async def list_tools(self, *, full: bool = False) -> list[dict[str, Any]]:
        """Every page of tools/list. ``full=True`` asks a server with tool search for its whole
        catalog rather than the search/call pair (docs/tool-search.md); others ignore it."""
        from ..protocol.meta import FULL_TOOL_LIST

        tools = await self._paginate("tools/list", "tools", {FULL_TOOL_LIST: True} if full else None)
        self.tool_definitions.clear()
        self.tool_definitions.update((t["name"], t) for t in tools if isinstance(t, dict) and "name" in t)
        self.tools._set(tools)
        return tools

    async def list_resources(self) -> list[dict[str, Any]]:
        return await self._paginate("resources/list", "resources")

    async def list_resource_templates(self) -> list[dict[str, Any]]:
        return await self._paginate("resources/templates/list", "resourceTemplates")

    async def list_prompts(self) -> list[dict[str, Any]]:
        return await self._paginate("prompts/list", "prompts")

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, *, progress: Callable[..., Any] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """The CallToolResult; a result with ``isError: true`` is returned, not raised."""
        return await self.request(
            "tools/call", {"name": name, "arguments": arguments or {}}, progress=progress, timeout=timeout
        )

    async def read_resource(self, uri: str) -> dict[str, Any]:
        return await self.request("resources/read", {"uri": uri})

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return await self.request("prompts/get", params)

    async def complete(self, ref: dict[str, Any] | str, argument_name: str, value: str) -> dict[str, Any]:
        """completion/complete; ``ref`` is a reference object, or a prompt name, or a resource
        template URI (a string with "://" or "{")."""
        if isinstance(ref, str):
            is_uri = "://" in ref or "{" in ref
            ref = {"type": "ref/resource", "uri": ref} if is_uri else {"type": "ref/prompt", "name": ref}
        argument = {"name": argument_name, "value": value}
        return await self.request("completion/complete", {"ref": ref, "argument": argument})

    async def ping(self) -> dict[str, Any]:
        return await self.request("ping")

    async def set_log_level(self, level: str) -> dict[str, Any]:
        """logging/setLevel; 2026-07-28 has none: the level then rides every request's _meta."""
        if self.modern:
            self.log_level = level
            return {}
        return await self.request("logging/setLevel", {"level": level})

    async def subscribe(self, uri: str) -> dict[str, Any]:
        return await self.request("resources/subscribe", {"uri": uri})

    async def unsubscribe(self, uri: str) -> dict[str, Any]:
        return await self.request("resources/unsubscribe", {"uri": uri})

    async def roots_changed(self) -> None:
        """Tell the server the roots changed (notifications/roots/list_changed)."""
        await self.notify("notifications/roots/list_changed")

    # ------------------------------------------------------------------ skills (SEP-2640)

    def _skills_declared(self, method: str) -> dict[str, Any]:
        """Clients issue the skill methods only after seeing the server declare the extension."""
        from ..protocol.skills import SKILLS_EXTENSION

        settings = (self.server_capabilities.get("extensions") or {}).get(SKILLS_EXTENSION)
        if not isinstance(settings, dict):
            raise ClientError(f"{method}: the server does not declare the {SKILLS_EXTENSION} extension")
        return settings

    async def list_skills(self) -> list[dict[str, Any]]:
        """Every skill entry of skills/list, all pages: uri, frontmatter and resources. An
        empty list does not prove the server has no skills (SEP-2640 "Enumeration")."""
        self._skills_declared("skills/list")
        return await self._paginate("skills/list", "skills")

    async def get_skill(self, uri: str) -> dict[str, Any]:
        """The entry of the skill whose SKILL.md is at ``uri`` (skills/get), listed or not."""
        self._skills_declared("skills/get")
        from .skills import check_entry

        return check_entry((await self.request("skills/get", {"uri": uri})).get("skill"))

    async def read_directory(self, uri: str) -> list[dict[str, Any]]:
        """The direct children of a directory resource (resources/directory/read, all pages);
        subdirectories have ``mimeType`` ``inode/directory``."""
        if self._skills_declared("resources/directory/read").get("directoryRead") is not True:
            raise ClientError("resources/directory/read: the server does not declare directoryRead")
        items: list[dict[str, Any]] = []
        cursor: Any = None
        while True:
            params: dict[str, Any] = {"uri": uri} if cursor is None else {"uri": uri, "cursor": cursor}
            result = await self.request("resources/directory/read", params)
            items.extend(result.get("resources") or [])
            cursor = result.get("nextCursor")
            if cursor is None:
                return items

    async def read_skill_file(self, entry: dict[str, Any], uri: str | None = None, *,
                              allow_dynamic: bool = False) -> bytes:
        """The bytes of one file of a skill (its SKILL.md when ``uri`` is not given), verified
        against ``entry`` (from :meth:`list_skills` or :meth:`get_skill`): listed, of the listed
        size and digest, and for SKILL.md with the entry's frontmatter. Anything else raises
        :class:`mcpkit.client.skills.SkillVerificationError` and the content is not returned."""
        from .skills import check_entry, listed, verified_bytes

        entry = check_entry(entry)
        uri = entry["uri"] if uri is None else uri
        if entry["resources"] != "dynamic":
            listed(entry, uri)  # an unlisted file is not even asked for
        return verified_bytes(entry, uri, await self.read_resource(uri), allow_dynamic=allow_dynamic)

    async def fetch_skill(self, entry: dict[str, Any], directory: str | Any) -> list[Any]:
        """Every file of the skill, verified, written under ``directory`` at its path in the
        skill; nothing is written unless every file verifies. Returns the paths written."""
        from pathlib import Path

        from .skills import check_entry, file_path_of, write_file

        entry = check_entry(entry)
        if entry["resources"] == "dynamic":
            from .skills import SkillVerificationError

            raise SkillVerificationError(f"{entry['uri']}: the skill's resources are \"dynamic\": no manifest "
                                         "to fetch and verify", entry["uri"])
        files = [(file_path_of(entry, item["uri"]), await self.read_skill_file(entry, item["uri"]))
                 for item in entry["resources"]]
        return [write_file(Path(directory), rel, data) for rel, data in files]
