"""An RPC bridge: requests to a backend (editor plugin, engine script, helper process), in
JSON-RPC 2.0 unless a codec (:mod:`.codecs`) gives the plugin's own message shape.

    godot = RpcBridge("Godot", Tcp("127.0.0.1", 6505), token=os.environ["GODOT_BRIDGE_TOKEN"],
                      errors={-32004: E_NOT_FOUND, "locked": E_PERMISSION_DENIED})
    godot.start()
    await godot.wait_up(30)
    tree = await godot.request("scene.tree", {"scene": "res://main.tscn"})

Supervision (probing, reconnecting with backoff and jitter, the breaker, E_NOT_CONNECTED while
down, up/down callbacks) is :class:`mcpkit.policy.Bridge`'s; this class is the connection it
supervises:

* **Handshake**: the first request on a new link is ``hello`` with ``protocolVersion`` and the
  shared ``token``; a refused token or another protocol version fails the connect (reported in
  ``last_error``, retried with backoff), so an impostor on the port never gets a call.
* **Requests** carry their own ids, matched to responses by a reader task; each has a timeout.
  A call that times out is forgotten (its late answer dropped) and ``notifications/cancelled``
  goes to the backend; the link stays up, so one stuck call never blocks the others.
* **Cancellation**: when the MCP client cancels a call (CN-01), the awaiting task is cancelled
  and the backend gets ``notifications/cancelled`` for its request.
* **Errors** the backend returns are mapped to the tool contract's codes by a declared table
  (``errors``): keyed by the JSON-RPC error code, or by ``error.data.kind`` when it is a string.
* **Liveness**: the probe is a ``ping`` request; end of stream or a broken frame marks the
  bridge down at once (pending calls fail with E_NOT_CONNECTED), and the supervisor reconnects.
* **Shapes**: the codec turns each request into the plugin's message and reads answers by the
  id it carries; an answer to an id never sent is dropped with a warning, a late one quietly.

The link lives on a private event loop in a daemon thread, so it works the same under stdio,
HTTP or a test's loop, and sync tools can call :meth:`request_sync` from worker threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..policy.bridge import Bridge
from ..protocol.errors import (
    E_INTERNAL,
    E_SCHEMA_VALIDATION,
    E_TIMEOUT,
    E_UNSUPPORTED,
    TOOL_ERROR_CODES,
    ToolError,
)
from .. import _json
from .codecs import Answer, Codec, Event, JsonRpc, Reply
from .codecs import Call as Outgoing
from .framing import Channel, Framed, Framing, NdJson
from .transports import Endpoint

__all__ = ["DEFAULT_ERRORS", "PROTOCOL_VERSION", "RpcBridge"]

log = logging.getLogger("mcpkit.bridge")

#: the bridge protocol this side speaks, unless told otherwise
PROTOCOL_VERSION = "1"

#: JSON-RPC's own codes; a server's table is merged over this one
DEFAULT_ERRORS: dict[int | str, str] = {
    -32700: E_INTERNAL,
    -32600: E_INTERNAL,
    -32601: E_UNSUPPORTED,
    -32602: E_SCHEMA_VALIDATION,
    -32603: E_INTERNAL,
}

Call = Callable[..., Awaitable[Any]]


class BackendTimeout(TimeoutError):
    """The backend did not answer a request in time (the link may still be fine)."""


class _Rpc:
    """One open link: ids, pending calls, the reader task. Lives on the bridge's loop."""

    def __init__(self, channel: Channel, codec: Codec, on_message: Callable[[str, Any], None],
                 on_lost: Callable[[_Rpc, str], None], name: str = "") -> None:
        self.channel = channel
        self.codec = codec
        self.name = name
        self.pending: dict[Any, asyncio.Future[Any]] = {}
        self.closed = False
        self.lost_reason = "the connection is closed"
        self._ids = itertools.count(1)
        self._last_id = 0
        self._on_message = on_message
        self._on_lost = on_lost
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        reason = "the backend closed the connection"
        try:
            while True:
                message = await self.channel.receive()
                if message is None:
                    break
                for one in message if isinstance(message, list) and getattr(self.codec, "batches", False) else [message]:
                    self._dispatch(one)
        except asyncio.CancelledError:
            reason = "the connection was closed"
        except Exception as exc:  # noqa: BLE001 - a broken frame or socket: the link is unusable
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        was_closed = self.closed
        self._shut(reason)
        if not was_closed:
            self._on_lost(self, reason)

    def _dispatch(self, message: Any) -> None:
        decoded = self.codec.decode(message)
        if decoded is None:
            log.warning("bridge %s: dropped a message its codec does not read: %.200s", self.name, _json.dumps_str(message))
        elif isinstance(decoded, Event):
            self._on_message(decoded.method, decoded.params)
        elif isinstance(decoded, Reply):
            self._send_nowait(decoded.message)
        else:
            rid = decoded.id
            if isinstance(rid, str) and rid.isdigit():  # a plugin that echoes ids as strings
                rid = int(rid)
            future = self.pending.pop(rid, None)
            if future is None:
                if isinstance(rid, int) and not isinstance(rid, bool) and 0 < rid <= self._last_id:
                    log.debug("bridge %s: dropped an answer to request %r, which is no longer waited for",
                              self.name, rid)
                else:  # never asked: a plugin's bug, or a message meant for someone else
                    log.warning("bridge %s: dropped an answer to unknown request id %r", self.name, decoded.id)
            elif not future.done():
                future.set_result(decoded)

    async def call(self, method: str, params: Any, timeout: float) -> Answer:
        if self.closed:
            raise ConnectionError(self.lost_reason)
        rid = self._last_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[rid] = future
        try:
            await self.channel.send(self.codec.request(Outgoing(rid, method, params)))
            return await asyncio.wait_for(future, timeout)  # type: ignore[no-any-return]
        except TimeoutError:
            self._forget(rid, "timed out")
            raise BackendTimeout(f"no answer to {method} within {timeout:g} s") from None
        except asyncio.CancelledError:
            self._forget(rid, "cancelled by the client")
            raise
        finally:
            self.pending.pop(rid, None)

    def _forget(self, rid: int, reason: str) -> None:
        """The caller stopped waiting: tell the backend (if its protocol can), so it stops too."""
        self.pending.pop(rid, None)
        message = self.codec.cancel(rid, reason)
        if message is not None:
            self._send_nowait(message)

    def notify(self, method: str, params: Any = None) -> None:
        message = self.codec.notification(method, params)
        if message is not None:
            self._send_nowait(message)

    def _send_nowait(self, message: Any) -> None:
        if self.closed:
            return
        try:
            self.channel.send_nowait(message)
        except Exception as exc:  # noqa: BLE001 - the reader notices a dead link and reports it
            log.debug("bridge %s: could not send a message: %s", self.name, exc)

    def _shut(self, reason: str) -> None:
        if not self.closed:
            self.closed = True
            self.lost_reason = reason
        for future in self.pending.values():
            if not future.done():
                future.set_exception(ConnectionError(reason))
        self.pending.clear()
        self.channel.close()

    def close(self) -> None:
        """Close from the loop thread (idempotent)."""
        was_closed = self.closed
        self._shut("the connection was closed")
        if not was_closed:
            self._reader.cancel()


class RpcBridge(Bridge):
    """A supervised JSON-RPC link to a backend; see the module docstring.

    ``endpoint``: :class:`~mcpkit.bridge.Tcp`, :class:`~mcpkit.bridge.Unix`,
    :class:`~mcpkit.bridge.Subprocess` or :class:`~mcpkit.bridge.WebSocket`. ``framing``:
    :class:`NdJson` (default) or :class:`LengthPrefixed` (not with a WebSocket, which frames
    its own). ``codec``: the message shape, :class:`~mcpkit.bridge.JsonRpc` (default),
    :class:`~mcpkit.bridge.Fields` or :class:`~mcpkit.bridge.Custom`. ``token``: sent in
    ``hello`` (None: no handshake token); ``hello=None`` skips the handshake for backends
    that have none, or names the plugin's own; ``protocol_version=None`` neither sends nor
    checks one. ``probe_method`` is the ping (None: none, the link's end alone tells it is
    down); ``probe_timeout`` bounds it, which tells a hung backend from a busy one. ``errors``: backend error
    code (int) or ``data.kind`` (str) -> contract code, merged over :data:`DEFAULT_ERRORS`.
    The remaining keyword arguments are :class:`mcpkit.policy.Bridge`'s (probe interval,
    backoff, breaker).
    """

    def __init__(
        self,
        name: str,
        endpoint: Endpoint,
        *,
        framing: Framing | None = None,
        codec: Codec | None = None,
        token: str | None = None,
        protocol_version: str | None = PROTOCOL_VERSION,
        hello: str | None = "hello",
        probe_method: str | None = "ping",
        call_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        probe_timeout: float = 10.0,
        errors: Mapping[int | str, str] | None = None,
        **supervision: Any,
    ) -> None:
        if call_timeout <= 0 or connect_timeout <= 0 or probe_timeout <= 0:
            raise ValueError("call_timeout, connect_timeout and probe_timeout must be > 0 seconds")
        table = {**DEFAULT_ERRORS, **(errors or {})}
        unknown = {k: v for k, v in table.items() if v not in TOOL_ERROR_CODES}
        if unknown:
            raise ValueError(f"errors: {unknown} map to unknown codes; use one of {sorted(TOOL_ERROR_CODES)}")
        super().__init__(name, self._connect_sync, probe=self._probe_sync, close=self._close_sync,
                         call_errors=(ConnectionError, OSError), **supervision)
        if framing is not None and hasattr(endpoint, "connect"):
            raise ValueError(f"{endpoint.describe()} frames its own messages; drop framing=")
        self.endpoint = endpoint
        self.framing: Framing = framing if framing is not None else NdJson()
        #: the message shape: JSON-RPC unless told otherwise
        self.codec: Codec = codec if codec is not None else JsonRpc()
        self.protocol_version = protocol_version
        self.call_timeout = float(call_timeout)
        self.connect_timeout = float(connect_timeout)
        #: a backend that does not answer a ping within this is hung: the link is replaced
        self.probe_timeout = float(probe_timeout)
        self.errors: dict[int | str, str] = table
        #: what the backend said in its hello answer (name, version, schemaVersion, ...)
        self.peer: dict[str, Any] = {}
        #: the backend's schema version, from hello and every probe; a change triggers resyncs
        self.schema_version: Any = None
        self._token = token
        self._hello = hello
        self._probe_method = probe_method
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._loop_lock = threading.Lock()
        self._on_connect: list[Callable[[Call], Awaitable[None]]] = []
        self._on_message: list[Callable[[str, Any], None]] = []
        self._on_schema: list[Callable[[Any], None]] = []

    def __repr__(self) -> str:
        return f"<RpcBridge {self.name!r} {self.endpoint.describe()} {'up' if self.up else 'down'} breaker={self.breaker}>"

    # ------------------------------------------------------------------ listeners

    def on_connect(self, hook: Callable[[Call], Awaitable[None]]) -> None:
        """``await hook(call)`` on every new link, after the handshake and before the bridge
        reports up; ``await call(method, params=None)`` returns a result or raises ToolError.
        What a mirror uses to have the tool list in place when tools reappear."""
        self._on_connect.append(hook)

    def on_notification(self, callback: Callable[[str, Any], None]) -> None:
        """``callback(method, params)`` for each notification the backend sends (bridge loop thread)."""
        self._on_message.append(callback)

    def on_schema_change(self, callback: Callable[[Any], None]) -> None:
        """``callback(version)`` when a probe sees another ``schemaVersion`` than the last one."""
        self._on_schema.append(callback)

    # ------------------------------------------------------------------ calls

    async def request(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """The backend's result for ``method``; ToolError on a backend error (mapped by the table),
        E_TIMEOUT after ``timeout`` (default ``call_timeout``), E_NOT_CONNECTED while down."""
        gen = self._gen
        conn: _Rpc = self.connection  # E_NOT_CONNECTED while down
        loop = self._loop
        assert loop is not None
        future = asyncio.run_coroutine_threadsafe(conn.call(method, params, timeout or self.call_timeout), loop)
        try:
            message = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()  # cancels the call on the bridge loop, which tells the backend
            raise
        except BackendTimeout:
            raise self._timeout_error(method, timeout or self.call_timeout) from None
        except self.call_errors as exc:
            raise self._call_failed(exc, gen) from exc
        return self._outcome(message, method)

    def request_sync(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """:meth:`request` for sync tools running in worker threads (never on the bridge loop)."""
        if threading.current_thread() is self._loop_thread:
            raise RuntimeError("request_sync cannot run on the bridge's own loop; await request() there")
        gen = self._gen
        conn: _Rpc = self.connection
        loop = self._loop
        assert loop is not None
        wait = timeout or self.call_timeout
        future = asyncio.run_coroutine_threadsafe(conn.call(method, params, wait), loop)
        try:
            message = future.result(wait + 5.0)  # the call times itself out; this is a backstop
        except (BackendTimeout, concurrent.futures.TimeoutError):
            future.cancel()
            raise self._timeout_error(method, wait) from None
        except self.call_errors as exc:
            raise self._call_failed(exc, gen) from exc
        return self._outcome(message, method)

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification to the backend (dropped while down)."""
        conn, loop = self._conn, self._loop
        if self.up and conn is not None and loop is not None:
            loop.call_soon_threadsafe(conn.notify, method, params)

    def _outcome(self, answer: Answer, method: str) -> Any:
        if self._consecutive:
            self._reset_count()
        if answer.error is not None:
            raise self.backend_error(answer.error, method)
        return answer.result

    def backend_error(self, error: Any, method: str) -> ToolError:
        """The ToolError for a backend's error object, by the declared table (else E_INTERNAL)."""
        if not isinstance(error, dict):
            error = {"code": None, "message": str(error)}
        data = error.get("data")
        kind = data.get("kind") if isinstance(data, dict) else None
        code = self.errors.get(kind) if isinstance(kind, str) else None
        if code is None:
            raw = error.get("code")
            code = self.errors.get(raw, E_INTERNAL) if isinstance(raw, (int, str)) else E_INTERNAL
        message = str(error.get("message") or f"{self.name} could not do {method}")
        fix = data.get("suggestedFix") if isinstance(data, dict) else None
        return ToolError(f"{self.name}: {message}", code=code,
                         details={"bridge": self.name, "method": method, "backend": error},
                         suggested_fix=fix if isinstance(fix, str) else None)

    def _timeout_error(self, method: str, timeout: float) -> ToolError:
        return ToolError(f"{self.name} did not answer {method} within {timeout:g} s.", code=E_TIMEOUT,
                         details={"bridge": self.name, "method": method, "timeoutSeconds": timeout},
                         suggested_fix=f"Retry, or check whether the {self.name} is busy or stuck.")

    # ------------------------------------------------------------------ the loop

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=f"mcpkit-bridge-{self.name}-io", daemon=True)
                thread.start()
                self._loop, self._loop_thread = loop, thread
            return self._loop

    def start(self) -> None:
        self._ensure_loop()
        super().start()

    def stop(self, timeout: float = 2.0) -> None:
        super().stop(timeout)
        with self._loop_lock:
            loop, thread = self._loop, self._loop_thread
            self._loop = self._loop_thread = None
        if loop is not None and thread is not None:
            # let the reader tasks finish their cancellation before the loop goes away
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result(timeout)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout)
            if not thread.is_alive():
                loop.close()

    def _await(self, coro: Any, timeout: float) -> Any:
        """Run ``coro`` on the bridge loop from the supervisor thread, bounded by ``timeout``."""
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        try:
            return future.result(timeout)
        except BackendTimeout:
            raise  # the call's own timeout (a TimeoutError too, since 3.11)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout:g} s") from None

    # ------------------------------------------------------------------ supervision callables

    def _connect_sync(self) -> _Rpc:
        return self._await(self._open(), self.connect_timeout)  # type: ignore[no-any-return]

    async def _open(self) -> _Rpc:
        connect = getattr(self.endpoint, "connect", None)
        if connect is not None:  # a message endpoint (a WebSocket): its framing is its own
            channel: Channel = await connect()
        else:
            channel = Framed(await self.endpoint.open(self.framing.max_bytes + 1), self.framing)
        rpc = _Rpc(channel, self.codec, self._deliver, self._lost, self.name)
        try:
            if self._hello is not None:
                params: dict[str, Any] = {"client": {"name": "mcpkit"}}
                if self.protocol_version is not None:
                    params["protocolVersion"] = self.protocol_version
                if self._token is not None:
                    params["token"] = self._token
                answer = await self._call_on(rpc, self._hello, params)
                self._check_hello(answer)
            for hook in list(self._on_connect):
                await hook(lambda method, params=None: self._call_on(rpc, method, params))
        except BaseException:
            rpc.close()
            raise
        return rpc

    async def _call_on(self, rpc: _Rpc, method: str, params: Any = None) -> Any:
        try:
            answer = await rpc.call(method, params, self.call_timeout)
        except BackendTimeout:
            raise self._timeout_error(method, self.call_timeout) from None
        if answer.error is not None:
            raise self.backend_error(answer.error, method)
        return answer.result

    def _check_hello(self, answer: Any) -> None:
        if not isinstance(answer, dict):
            if self.protocol_version is None:
                return  # nothing to check: any answer is a welcome
            raise ConnectionError(f"the backend answered hello with {type(answer).__name__}, not an object")
        theirs = answer.get("protocolVersion")
        if self.protocol_version is not None and theirs != self.protocol_version:
            raise ConnectionError(f"protocol version mismatch: the backend speaks {theirs!r}, "
                                  f"this server {self.protocol_version!r}; update one of them")
        self.peer = answer
        self.schema_version = answer.get("schemaVersion")

    def _probe_sync(self, conn: _Rpc) -> bool:
        # the inner timeout decides; the outer one is a backstop for a starved loop thread
        if self._probe_method is None:  # no ping in the plugin's protocol: the link's own end tells
            return not conn.closed
        answer = self._await(conn.call(self._probe_method, None, self.probe_timeout), self.probe_timeout * 2 + 5.0)
        result = answer.result  # an error answer is an answer too: the backend is alive
        version = result.get("schemaVersion") if isinstance(result, dict) else None
        if version is not None and version != self.schema_version:
            self.schema_version = version
            for callback in list(self._on_schema):
                try:
                    callback(version)
                except Exception:
                    log.exception("bridge %s: schema change callback failed", self.name)
        return True

    def _close_sync(self, conn: _Rpc) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if threading.current_thread() is self._loop_thread:
            conn.close()
        else:
            loop.call_soon_threadsafe(conn.close)

    # ------------------------------------------------------------------ from the reader

    def _deliver(self, method: str, params: Any) -> None:
        for callback in list(self._on_message):
            try:
                callback(method, params)
            except Exception:
                log.exception("bridge %s: notification callback for %s failed", self.name, method)

    def _lost(self, rpc: _Rpc, reason: str) -> None:
        if self._conn is rpc:  # only the live link's end matters
            self.mark_down(f"{reason} ({self.endpoint.describe()})")


async def _cancel_all() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
