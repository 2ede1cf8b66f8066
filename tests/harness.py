"""An in-process MCP client for a :class:`mcpkit.server.server.Server`, without subprocesses.

It drives a :class:`~mcpkit.server.session.ServerSession` on the running asyncio loop (the
test's loop). Sync handlers run in the server's worker threads (``inline_sync=False``), async
handlers as tasks on that loop. Every message the session sends is decoded and recorded into
the ``wire`` fixture, so it is validated at teardown against the official schema of the
negotiated revision::

    async with connect(server, wire, "2025-11-25") as h:
        result = await h.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})

Server -> client requests (sampling, elicitation, roots) are answered by the callback given to
:meth:`Client.answer` for their method; a request whose method has no callback is left
unanswered (what a client that never replies looks like).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from mcpkit.protocol.engine import Outgoing
from mcpkit.server.session import ServerSession

__all__ = ["Client", "RpcError", "connect", "LATEST"]

LATEST = "2025-11-25"
#: what the wire checker uses for messages sent before a revision was negotiated
PRE_NEGOTIATION = "2025-11-25"

Answer = Callable[[dict[str, Any] | None], Any]


class RpcError(Exception):
    """A JSON-RPC error response: ``code``, ``message`` and ``data`` as the server sent them."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class Client:
    """One connection to ``server``; create it on the loop that will run the async handlers."""

    def __init__(self, server: Any, wire: Any, *, timeout: float = 10.0) -> None:
        self.server = server
        self.wire = wire
        self.timeout = timeout
        self.loop = asyncio.get_running_loop()
        self.session = ServerSession(server, self._send, self.loop, inline_sync=False)
        #: every decoded message the server sent, in order
        self.received: list[Any] = []
        #: the notifications the server sent, in order
        self.notifications: list[dict[str, Any]] = []
        #: the requests the server sent to this client, in order
        self.server_requests: list[dict[str, Any]] = []
        self._answers: dict[str, Answer] = {}
        self._pending: dict[Any, asyncio.Future[Any]] = {}
        self._methods: dict[Any, str] = {}
        self._methods_lock = threading.Lock()
        self._next_id = 0
        self._changed = asyncio.Condition()
        self.initialize_result: dict[str, Any] | None = None

    # ------------------------------------------------------------------ what the server sends

    def _send(self, batch: list[Outgoing]) -> None:
        # Called under the session lock, from the loop thread or from a worker thread; the
        # order of the calls is the order of the wire, so decode and record here, in order.
        decoded = []
        for out in batch:
            message = json.loads(out.payload)
            elements = message if isinstance(message, list) else [message]
            rev = self.session.revision
            revision = rev.version if rev is not None else PRE_NEGOTIATION
            for element in elements:
                method = None
                if isinstance(element, dict) and "method" not in element and "id" in element:
                    with self._methods_lock:
                        method = self._methods.get(element["id"])
                self.wire.record(element, revision, method)
            decoded.append(message)
        # call_soon_threadsafe keeps FIFO order whichever thread the call comes from
        self.loop.call_soon_threadsafe(self._deliver, decoded)

    def _deliver(self, messages: list[Any]) -> None:
        for message in messages:
            for element in message if isinstance(message, list) else [message]:
                self._dispatch(element)
        self.loop.create_task(self._notify_changed())

    async def _notify_changed(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _dispatch(self, msg: dict[str, Any]) -> None:
        self.received.append(msg)
        if "method" in msg:
            if "id" in msg:
                self.server_requests.append(msg)
                answer = self._answers.get(msg["method"])
                if answer is not None:
                    self.loop.create_task(self._answer(msg, answer))
            else:
                self.notifications.append(msg)
            return
        fut = self._pending.pop(msg.get("id"), None)
        if fut is None or fut.done():
            return
        if "error" in msg:
            err = msg["error"]
            fut.set_exception(RpcError(err.get("code"), err.get("message"), err.get("data")))
        else:
            fut.set_result(msg.get("result"))

    async def _answer(self, msg: dict[str, Any], answer: Answer) -> None:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": msg["id"]}
        try:
            result = answer(msg.get("params"))
            if inspect.isawaitable(result):
                result = await result
        except RpcError as exc:
            reply["error"] = exc.to_error()
        else:
            reply["result"] = result
        self.feed(reply)

    # ------------------------------------------------------------------ what the client sends

    def feed(self, message: Any) -> None:
        """Send one raw message (a dict, list or bytes) and flush what it caused."""
        frame = message if isinstance(message, (bytes, str)) else json.dumps(message)
        self.session.feed(frame)
        self.session.flush()

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def send_request(
        self, method: str, params: dict[str, Any] | None = None, *, id: Any = None, progress_token: Any = None
    ) -> tuple[Any, asyncio.Future[Any]]:
        """Send a request without waiting: (request id, future of its result)."""
        rid = self.new_id() if id is None else id
        if progress_token is not None:
            params = dict(params or {})
            params["_meta"] = {**params.get("_meta", {}), "progressToken": progress_token}
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        fut: asyncio.Future[Any] = self.loop.create_future()
        self._pending[rid] = fut
        with self._methods_lock:
            self._methods[rid] = method
        self.feed(msg)
        return rid, fut

    async def request(
        self, method: str, params: dict[str, Any] | None = None, *, progress_token: Any = None,
        timeout: float | None = None,
    ) -> Any:
        """The result of ``method``; raises :class:`RpcError` for an error response."""
        _, fut = self.send_request(method, params, progress_token=progress_token)
        return await asyncio.wait_for(fut, self.timeout if timeout is None else timeout)

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.feed(msg)

    def cancel(self, request_id: Any, reason: str | None = None) -> None:
        params: dict[str, Any] = {"requestId": request_id}
        if reason is not None:
            params["reason"] = reason
        self.notify("notifications/cancelled", params)

    async def initialize(
        self,
        version: str = LATEST,
        capabilities: dict[str, Any] | None = None,
        client_info: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The handshake: initialize, then notifications/initialized."""
        result = await self.request(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": capabilities or {},
                "clientInfo": client_info or {"name": "mcpkit-tests", "version": "1.0"},
            },
        )
        self.initialize_result = result
        self.notify("notifications/initialized")
        return result

    # ------------------------------------------------------------------ server -> client requests

    def answer(self, method: str, callback: Answer | None) -> None:
        """Answer the server's ``method`` requests with ``callback(params)`` (sync or async; raise
        :class:`RpcError` for an error answer). ``None`` stops answering them."""
        if callback is None:
            self._answers.pop(method, None)
        else:
            self._answers[method] = callback

    # ------------------------------------------------------------------ waiting

    async def wait_for(self, predicate: Callable[[], Any], timeout: float | None = None) -> Any:
        """Wait until ``predicate()`` is truthy (checked after each delivery); returns its value."""

        async def waiter() -> Any:
            async with self._changed:
                while True:
                    value = predicate()
                    if value:
                        return value
                    await self._changed.wait()

        return await asyncio.wait_for(waiter(), self.timeout if timeout is None else timeout)

    async def wait_notification(self, method: str, count: int = 1, timeout: float | None = None) -> list[dict[str, Any]]:
        """The first ``count`` notifications with ``method``, once that many arrived."""

        def found() -> list[dict[str, Any]] | None:
            hits = [n for n in self.notifications if n["method"] == method]
            return hits[:count] if len(hits) >= count else None

        return await self.wait_for(found, timeout)

    async def eventually(self, predicate: Callable[[], Any], timeout: float | None = None) -> Any:
        """Poll ``predicate()`` (for state that changes without a message) until it is truthy."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.timeout if timeout is None else timeout)
        while not (value := predicate()):
            if loop.time() > deadline:
                raise TimeoutError("condition not reached in time")
            await asyncio.sleep(0.005)
        return value

    async def settle(self, turns: int = 5) -> None:
        """Let already-queued deliveries run (for asserting that nothing more arrives)."""
        for _ in range(turns):
            await asyncio.sleep(0)

    def notifications_of(self, method: str) -> list[dict[str, Any]]:
        return [n for n in self.notifications if n["method"] == method]

    # ------------------------------------------------------------------ shutdown

    async def aclose(self) -> None:
        self.session.close()
        for fut in self._pending.values():
            if not fut.done():
                fut.cancel()
        self._pending.clear()
        await self.settle()


@contextlib.asynccontextmanager
async def connect(
    server: Any,
    wire: Any,
    version: str | None = LATEST,
    capabilities: dict[str, Any] | None = None,
    *,
    answers: dict[str, Answer] | None = None,
    timeout: float = 10.0,
) -> AsyncIterator[Client]:
    """A :class:`Client` already initialized with ``version`` (``None``: not initialized)."""
    client = Client(server, wire, timeout=timeout)
    for method, callback in (answers or {}).items():
        client.answer(method, callback)
    try:
        if version is not None:
            await client.initialize(version, capabilities)
        yield client
    finally:
        await client.aclose()
