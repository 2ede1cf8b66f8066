"""A backend speaking the bridge protocol over TCP, on its own thread: what an editor plugin is
to a bridge server. Tests publish tools on it, make calls slow, stop it and start it again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from mcpkit.bridge.framing import LengthPrefixed, NdJson

from .plugins import Listener


class Backend(Listener):
    def __init__(self, *, token: str | None = "s3cret-token", version: str = "1", framing: Any = None,
                 port: int = 0) -> None:
        super().__init__(port)
        self.token = token
        self.version = version
        self.framing = framing or NdJson()
        self.schema_version = 1
        self.tools: list[dict[str, Any]] = []
        self.resources: list[dict[str, Any]] = []
        #: None: resources/templates/list is no method of this backend (-32601), as in older plugins
        self.templates: list[dict[str, Any]] | None = None
        self.handlers: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self.received: list[dict[str, Any]] = []  # every message, in order
        self.cancelled: list[Any] = []
        self.hellos = 0
        self.silent: set[str] = set()  # methods never answered (a hung editor)

    async def _listen(self) -> Any:
        return await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    def notify(self, method: str, params: Any = None) -> None:
        assert self._loop is not None
        message = {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})}

        def send() -> None:
            for writer in self._peers:
                writer.write(self.framing.encode(message))

        self._loop.call_soon_threadsafe(send)

    # ------------------------------------------------------------------ serving

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._peers.add(writer)
        authed = self.token is None
        try:
            while True:
                message = await self.framing.read(reader)
                if message is None:
                    return
                self.received.append(message)
                method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
                if rid is None:
                    if method == "notifications/cancelled":
                        self.cancelled.append(params.get("requestId"))
                    continue
                if method == "hello":
                    self.hellos += 1
                    if self.token is not None and params.get("token") != self.token:
                        writer.write(self.framing.encode({"jsonrpc": "2.0", "id": rid, "error": {
                            "code": -32001, "message": "bad token", "data": {"kind": "unauthorized"}}}))
                        await writer.drain()
                        return
                    authed = True
                    self._answer(writer, rid, {"protocolVersion": self.version, "name": "fake",
                                               "schemaVersion": self.schema_version})
                    continue
                if not authed:
                    return
                asyncio.get_running_loop().create_task(self._call(writer, rid, method, params))
        except (ConnectionError, OSError):
            return
        finally:
            self._peers.discard(writer)
            writer.close()

    async def _call(self, writer: asyncio.StreamWriter, rid: Any, method: str, params: dict[str, Any]) -> None:
        if method in self.silent:
            return
        try:
            if method == "ping":
                result: Any = {"schemaVersion": self.schema_version}
            elif method == "tools/list":
                result = {"tools": self.tools, "schemaVersion": self.schema_version}
            elif method == "resources/list":
                result = {"resources": self.resources}
            elif method == "resources/templates/list" and self.templates is not None:
                result = {"resourceTemplates": self.templates}
            elif method in self.handlers:
                result = self.handlers[method](params)
                if asyncio.iscoroutine(result):
                    result = await result
            elif method == "tools/call" and params.get("name") in self.handlers:
                result = self.handlers[params["name"]](params.get("arguments") or {})
                if asyncio.iscoroutine(result):
                    result = await result
            else:
                raise LookupError(method)
        except LookupError as exc:
            writer.write(self.framing.encode({"jsonrpc": "2.0", "id": rid,
                                              "error": {"code": -32601, "message": f"no such method {exc}"}}))
            return
        except BackendError as exc:
            writer.write(self.framing.encode({"jsonrpc": "2.0", "id": rid, "error": exc.error}))
            return
        self._answer(writer, rid, result)

    def _answer(self, writer: asyncio.StreamWriter, rid: Any, result: Any) -> None:
        if not writer.is_closing():
            writer.write(self.framing.encode({"jsonrpc": "2.0", "id": rid, "result": result}))


class BackendError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.error = {"code": code, "message": message, **({"data": data} if data is not None else {})}


__all__ = ["Backend", "BackendError", "LengthPrefixed", "json"]
