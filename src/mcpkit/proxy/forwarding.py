"""Forwarding, the half of :class:`~mcpkit.proxy.upstream.Upstream` that talks to the upstream
once it is mirrored: each tool call, read, prompt get and completion sent on a downstream
request's behalf (progress, logs and cancellation relayed, what the upstream asks meanwhile asked
of the real client: relay.py), tasks, subscriptions and roots. A mixin of Upstream, whose state
(its client, bridge, loop, calls in flight) it uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from ..client import Client, ClientError, ClientTimeout, MessageTooLarge, RpcError
from ..protocol.errors import INTERNAL_ERROR, McpError, ToolError
from ..protocol.revisions import CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, LOG_LEVEL_KEY, LOG_LEVELS
from ..server.context import Context
from .relay import CURRENT_CALL, Call, ask_downstream, inputs_of, owner
from .sizecap import too_large

__all__ = ["Forwarding"]

log = logging.getLogger("mcpkit.proxy")

_PY_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO, "warning": logging.WARNING,
              "error": logging.ERROR, "critical": logging.CRITICAL, "alert": logging.CRITICAL,
              "emergency": logging.CRITICAL}
#: rounds of input a 2026-07-28 upstream may ask for in one call before it is refused
_MAX_INPUT_ROUNDS = 16


class Forwarding:
    """What an Upstream sends the upstream on its clients' behalf (see the module)."""

    _client: Any
    _calls: list[Any]
    bridge: Any
    name: str

    async def _forward(self, ctx: Context, method: str, params: dict[str, Any], *, tool: bool = False) -> Any:
        """Send one request upstream on behalf of ``ctx``'s request and return its result."""
        client = self._client
        if client is None or not self.bridge.up:
            if tool:
                raise self.bridge.not_connected_error()
            raise McpError(INTERNAL_ERROR, f"upstream {self.name} is not connected ({self.bridge.last_error})")
        # in flight as its client's call: what the upstream sends meanwhile goes to that client
        call = Call(ctx, self)
        progress = None
        if ctx.progress_token is not None:
            progress = ctx.report_progress
        self._calls.append(call)
        try:
            if client.modern:
                return await self._exchange_modern(client, call, method, params, progress, tool)
            return await self._exchange(client, call, method, params, progress)
        except RpcError as exc:
            code = exc.code if isinstance(exc.code, int) else INTERNAL_ERROR
            raise McpError(code, str(exc.message), exc.data) from None
        except MessageTooLarge as exc:  # read past, not held: the link is fine (sizecap.py)
            raise too_large(self.name, exc.size, exc.limit, tool) from None
        except ClientTimeout as exc:
            if tool:
                raise ToolError(f"upstream {self.name} did not answer in time: {exc}") from None
            raise McpError(INTERNAL_ERROR, f"upstream {self.name} did not answer in time") from None
        except ClientError as exc:
            self.bridge.mark_down(str(exc))
            if tool:
                down = self.bridge.not_connected_error()
                down.message += f" It was lost during this call: {exc}"  # why: a crash, a sandbox's limit
                raise down from None
            raise McpError(INTERNAL_ERROR, f"upstream {self.name} is not reachable: {exc}") from None
        finally:
            self._calls.remove(call)

    async def _exchange(self, client: Client, call: Call, method: str, params: dict[str, Any],
                        progress: Any) -> Any:
        """One request to a handshake-era upstream; what it asks meanwhile is relayed (relay.py)."""
        async def send() -> Any:
            CURRENT_CALL.set(call)  # what the upstream asks while answering this is asked of its client
            return await client.request(method, params, progress=progress)

        task = asyncio.ensure_future(self._loop.run_here(send()))
        try:
            await asyncio.wait({task, call.abort}, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                return task.result()
            # the downstream client must answer first (2026-07-28 multi-round trip): this request
            # stops here and is run again, answers included, when the client retries
            task.cancel()
            raise call.abort.exception() or McpError(INTERNAL_ERROR, "the relay stopped")
        except asyncio.CancelledError:
            task.cancel()  # the downstream request was cancelled: so is the upstream one
            raise

    async def _exchange_modern(self, client: Client, call: Call, method: str, params: dict[str, Any],
                               progress: Any, tool: bool) -> Any:
        """One request to a 2026-07-28 upstream, on behalf of the real client: its capabilities
        and log level ride the request (MT-08), the inputs the upstream asks for are asked of the
        client under the upstream's own keys (MR-01), and a task the upstream creates is the
        client's to follow (tasks/* are forwarded to it)."""
        ctx = call.ctx
        assert ctx is not None
        request = ctx._request

        async def send(params: dict[str, Any]) -> Any:
            # as in _exchange: a mounted Server's session finds the parent's call it serves
            # (calling_context), so its ctx.principal, audit lines and rate limits are that
            # caller's, not one "anonymous" for every caller of the parent
            token = CURRENT_CALL.set(call)
            try:
                return await client.request(method, params, progress=progress, fulfil_inputs=False)
            finally:
                CURRENT_CALL.reset(token)

        meta = dict(params.get("_meta") or {})
        meta[CLIENT_CAPABILITIES_KEY] = ctx.client_capabilities
        if ctx.client_info:
            meta[CLIENT_INFO_KEY] = ctx.client_info
        level = request.log_level if request.revision.era == "modern" else "debug"
        if level:
            meta[LOG_LEVEL_KEY] = level
        params = {**params, "_meta": meta}
        for _ in range(_MAX_INPUT_ROUNDS):
            result = await self._loop.run_here(send(params))
            if not isinstance(result, dict) or result.get("resultType") != "input_required":
                if tool and isinstance(result, dict) and result.get("resultType") == "task":
                    task_id = result.get("taskId")
                    if isinstance(task_id, str):
                        self._tasks.add(task_id, ctx._session)
                return result
            answers = await inputs_of(ctx, result.get("inputRequests") or {})
            params = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
            params["inputResponses"] = answers
            if "requestState" in result:
                params["requestState"] = result["requestState"]
        raise McpError(INTERNAL_ERROR, f"upstream {self.name}: {method} still wants input after "
                                       f"{_MAX_INPUT_ROUNDS} rounds")

    async def forward_task(self, session: Any, req: Any) -> Any:
        """tasks/get, tasks/update, tasks/cancel of a task this upstream created, passed on as is."""
        client = self._client
        if client is None or not self.bridge.up:
            raise McpError(INTERNAL_ERROR, f"upstream {self.name} is not connected ({self.bridge.last_error})")
        params = dict(req.params or {})
        params["_meta"] = {**(params.get("_meta") or {}), CLIENT_CAPABILITIES_KEY: req.capabilities}
        try:
            return await self._loop.run_here(client.request(req.method, params, fulfil_inputs=False))
        except RpcError as exc:
            code = exc.code if isinstance(exc.code, int) else INTERNAL_ERROR
            raise McpError(code, str(exc.message), exc.data) from None
        except ClientError as exc:
            raise McpError(INTERNAL_ERROR, f"upstream {self.name} is not reachable: {exc}") from None

    def _relay(self, method: str) -> Callable[[dict[str, Any]], Any]:
        async def relay(params: dict[str, Any]) -> Any:
            return await ask_downstream(self._calls, method, params)

        return relay

    async def _roots(self) -> Any:
        return await ask_downstream(self._calls, "roots/list", None)

    def _on_log(self, params: dict[str, Any]) -> None:
        level = params.get("level")
        logger = params.get("logger") if isinstance(params.get("logger"), str) else None
        call = owner(self._calls)  # the call it belongs to, where that is known (relay.py)
        if not (call is not None and level in LOG_LEVELS and call.log(level, params.get("data"), logger)):
            log.log(_PY_LEVELS.get(str(level), logging.INFO), "upstream %s%s: %s", self.name,
                    f" ({logger})" if logger else "", params.get("data"))

    def subscribe(self, uri: str) -> None:
        """A downstream session subscribed to ``uri``: subscribe upstream (once) if it is ours."""
        found = self.server.find_resource(uri)
        client = self._client
        if found is None or id(found[0]) not in self._owned or uri in self._subscribed or client is None:
            return
        if client.modern or not (client.server_capabilities.get("resources") or {}).get("subscribe"):
            return  # 2026-07-28 has no resources/subscribe
        upstream_uri = self.names.uri_back(uri)
        if upstream_uri is None:
            return
        self._subscribed.add(uri)

        async def send() -> None:
            call = Call(None, self)  # no client's call (relay.py): what the upstream sends meanwhile is nobody's
            CURRENT_CALL.set(call)
            self._calls.append(call)
            try:
                await client.subscribe(upstream_uri)
            except (ClientError, RpcError) as exc:
                self._subscribed.discard(uri)
                log.warning("upstream %s: could not subscribe to %s: %s", self.name, upstream_uri, exc)
            finally:
                self._calls.remove(call)

        self._loop.submit(send())

    def roots_changed(self) -> None:
        client = self._client
        if client is not None:

            async def send() -> None:
                with contextlib.suppress(ClientError):
                    await client.roots_changed()

            self._loop.submit(send())

