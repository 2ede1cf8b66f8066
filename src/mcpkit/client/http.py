"""The client's HTTP transports: Streamable HTTP (both eras) and legacy HTTP+SSE (2024-11-05).

httpx is imported here only, when such a transport starts (the ``client`` extra).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urljoin

from .. import _json
from .._extras import needs
from ..protocol import revisions
from .errors import ClientError, HttpRpcError
from .transports import Deliver, Lost, Transport, is_jsonrpc

__all__ = ["StreamableHttpTransport", "SseTransport", "header_value"]

log = logging.getLogger("mcpkit.client")

#: HM-15: which params field Mcp-Name carries, per method (2026-07-28)
NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
              "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}
#: a POST's SSE stream that ends before its answer is resumed this many times (HL-14)
MAX_RESUMES = 5
_PLAIN = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")


def header_value(value: Any) -> str:
    """HM-16/HM-17: a parameter as an HTTP header value; text that is not plain visible ASCII
    (or has edge whitespace) travels as ``=?base64?...?=``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _json.dumps_str(value)
    text = value if isinstance(value, str) else _json.dumps_str(value)
    if _PLAIN.fullmatch(text) and not text.startswith("=?base64?"):
        return text
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


class _Sse:
    """One server-sent event."""

    __slots__ = ("event", "data", "id", "retry")

    def __init__(self) -> None:
        self.event = "message"
        self.data: list[str] = []
        self.id: str | None = None
        self.retry: int | None = None


async def sse_events(response: Any) -> AsyncIterator[_Sse]:
    """The events of an SSE body (WHATWG parsing: comments, multi-line data, id, retry)."""
    ev = _Sse()
    async for line in response.aiter_lines():
        if line == "":
            if ev.data or ev.id is not None or ev.retry is not None:
                yield ev
            ev = _Sse()
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            ev.data.append(value)
        elif field == "event":
            ev.event = value or "message"
        elif field == "id" and "\0" not in value:
            ev.id = value
        elif field == "retry" and value.isdigit():
            ev.retry = int(value)
    if ev.data:
        yield ev


class _HttpBase(Transport):
    closes_to_cancel = True

    def __init__(self, url: str, *, headers: dict[str, str] | None = None, timeout: float | None = 30.0) -> None:
        super().__init__()
        self.url = url
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.http: Any = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self, deliver: Deliver, lost: Lost) -> None:
        await super().start(deliver, lost)
        with needs("client", "mcpkit.Client over HTTP"):
            import httpx

        limit = self.timeout
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=limit, write=limit, pool=limit))

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _deliver_data(self, data: str | bytes) -> Any:
        """Deliver one SSE data payload or JSON body; returns the messages (or None for noise)."""
        raw = data.encode() if isinstance(data, str) else data
        if not raw.strip():
            return None
        try:
            obj = _json.loads(raw)
        except _json.JSONDecodeError:
            obj = None
        items = obj if isinstance(obj, list) and obj else [obj]
        if not all(is_jsonrpc(item) for item in items):
            self.stdout_noise.append(bytes(raw))
            return None
        for item in items:
            self._deliver(item)
        return items

    async def _fail_status(self, response: Any, message: dict[str, Any] | None, raw: bool = False) -> None:
        """Raise for a status that is not 2xx: :class:`HttpRpcError` when the body is the JSON-RPC
        error answering ``message``, else :class:`ClientError`. ``raw`` (send_raw): what the body
        carries is also delivered, so an error nobody awaits lands in ``Client.unmatched``."""
        body = await response.aread()
        if raw:
            self._deliver_data(body)
        headers = dict(response.headers)
        status = response.status_code
        try:
            obj = _json.loads(body) if body else None
        except _json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
            if message is None or "id" not in message or obj.get("id") in (None, message.get("id")):
                raise HttpRpcError(obj["error"], status, headers, body)
        text = body[:500].decode("utf-8", errors="replace")
        raise ClientError(f"HTTP {status} from {response.request.method} {self.url}: {text}", status=status,
                          headers=headers, body=body)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.http is not None:
            await self.http.aclose()


class StreamableHttpTransport(_HttpBase):
    """POST every message to one endpoint; answers come as JSON or an SSE stream."""

    kind = "http"

    def __init__(self, url: str, *, headers: dict[str, str] | None = None, timeout: float | None = 30.0) -> None:
        super().__init__(url, headers=headers, timeout=timeout)
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        #: the HTTP status of the standalone GET stream (405: the server offers none)
        self.standalone_status: int | None = None
        #: the HTTP status of the DELETE that ended the session on close()
        self.delete_status: int | None = None
        #: tools by name, for the Mcp-Param-* headers of 2026-07-28 (the client fills it)
        self.tool_definitions: dict[str, dict[str, Any]] = {}
        self._retry_ms = 1000

    def _headers(self, message: Any) -> dict[str, str]:
        h = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if self.session_id is not None:
            h["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None:
            h["MCP-Protocol-Version"] = self.protocol_version  # HL-19
        params = message.get("params") if isinstance(message, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(revisions.PROTOCOL_VERSION_KEY) if isinstance(meta, dict) else None
        if isinstance(version, str) and "method" in message:  # 2026-07-28: HM-11, HM-15, HM-19
            method = message["method"]
            h["MCP-Protocol-Version"] = version
            h["Mcp-Method"] = header_value(method)
            field = NAME_PARAM.get(method)
            if field is not None and isinstance(params.get(field), str):
                h["Mcp-Name"] = header_value(params[field])
            if method == "tools/call":
                h.update(self._mirrored(params))
        h.update(self.headers)
        return h

    def _mirrored(self, params: dict[str, Any]) -> dict[str, str]:
        tool = self.tool_definitions.get(params.get("name"))  # type: ignore[arg-type]
        schema = tool.get("inputSchema") if isinstance(tool, dict) else None
        props = schema.get("properties") if isinstance(schema, dict) else None
        arguments = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
        out: dict[str, str] = {}
        for prop, spec in (props or {}).items():
            name = spec.get("x-mcp-header") if isinstance(spec, dict) else None
            if isinstance(name, str) and arguments.get(prop) is not None:
                out[f"Mcp-Param-{name}"] = header_value(arguments[prop])
        return out

    def connected(self, version: str, session_meta: dict[str, Any] | None = None) -> None:
        if version in revisions.MODERN_VERSIONS:
            return  # no session, no standalone stream: every request carries its version
        self.protocol_version = version
        self._spawn(self._standalone())

    async def send(self, message: dict[str, Any]) -> None:
        await self._post(_json.dumps(message), message)

    async def send_raw(self, data: bytes) -> None:
        try:
            message = _json.loads(data)
        except _json.JSONDecodeError:
            message = None
        await self._post(data, message if isinstance(message, dict) else None, raw=True)

    async def _post(self, body: bytes, message: dict[str, Any] | None, raw: bool = False) -> None:
        with needs("client", "mcpkit.Client over HTTP"):
            import httpx

        want = message.get("id") if message is not None and "method" in message else None
        try:
            async with self.http.stream("POST", self.url, content=body, headers=self._headers(message)) as response:
                sid = response.headers.get("mcp-session-id")
                if sid is not None and self.session_id is None:
                    self.session_id = sid
                if not 200 <= response.status_code < 300:
                    await self._fail_status(response, message, raw)
                answered, last_id = await self._read_answer(response, want)
            if want is not None and not answered and last_id is not None:
                await self._resume(last_id, want)
        except httpx.HTTPError as exc:
            raise ClientError(f"HTTP request to {self.url} failed: {exc!r}") from exc

    async def _read_answer(self, response: Any, want: Any) -> tuple[bool, str | None]:
        """Deliver what the response carries: (whether the answer to ``want`` came, last event id)."""
        ctype = response.headers.get("content-type", "")
        if ctype.startswith("text/event-stream"):
            return await self._read_sse(response, want)
        body = await response.aread()
        items = self._deliver_data(body) if body.strip() else None
        return any(_answers(m, want) for m in items or ()), None

    async def _read_sse(self, response: Any, want: Any) -> tuple[bool, str | None]:
        answered = False
        last_id: str | None = None
        async for ev in sse_events(response):
            if ev.retry is not None:
                self._retry_ms = ev.retry
            if ev.id is not None:
                last_id = ev.id
            if ev.event == "message" and ev.data:
                items = self._deliver_data("\n".join(ev.data))
                answered = answered or any(_answers(m, want) for m in items or ())
        return answered, last_id

    async def _resume(self, last_id: str, want: Any) -> None:
        """HL-14: the stream broke before the answer; GET it again from Last-Event-ID."""
        for _ in range(MAX_RESUMES):
            await asyncio.sleep(self._retry_ms / 1000)
            headers = {**self._headers(None), "Accept": "text/event-stream", "Last-Event-ID": last_id}
            headers.pop("Content-Type", None)
            async with self.http.stream("GET", self.url, headers=headers) as response:
                if not 200 <= response.status_code < 300:
                    await self._fail_status(response, None)
                answered, new_id = await self._read_sse(response, want)
            if answered:
                return
            last_id = new_id or last_id

    async def _standalone(self) -> None:
        """HL-12: the GET stream for what the server sends outside any request."""
        with needs("client", "mcpkit.Client over HTTP"):
            import httpx

        last_id: str | None = None
        failures = 0
        while failures < 3:
            headers = {**self._headers(None), "Accept": "text/event-stream"}
            headers.pop("Content-Type", None)
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            try:
                async with self.http.stream("GET", self.url, headers=headers) as response:
                    self.standalone_status = response.status_code
                    if not 200 <= response.status_code < 300:
                        return  # 405: no standalone stream offered; anything else: none for us
                    _, new_id = await self._read_sse(response, None)
                    last_id = new_id or last_id
                    failures = 0
            except httpx.HTTPError as exc:
                failures += 1
                log.debug("standalone stream: %r", exc)
            await asyncio.sleep(self._retry_ms / 1000)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.session_id is not None and self.http is not None:
            headers = self._headers(None)
            headers.pop("Content-Type", None)
            with contextlib.suppress(Exception):
                # HL-16: end the session (405: the server does not let clients end sessions)
                response = await asyncio.wait_for(self.http.delete(self.url, headers=headers), 5.0)
                self.delete_status = response.status_code
        await super().close()


def _answers(message: Any, want: Any) -> bool:
    return want is not None and isinstance(message, dict) and "method" not in message and message.get("id") == want


class SseTransport(_HttpBase):
    """Legacy HTTP+SSE (2024-11-05): GET the SSE URL, wait for its ``endpoint`` event, POST
    every message there; everything the server sends arrives as ``message`` events."""

    kind = "sse"
    closes_to_cancel = False

    def __init__(self, url: str, *, headers: dict[str, str] | None = None, timeout: float | None = 30.0) -> None:
        super().__init__(url, headers=headers, timeout=timeout)
        self.endpoint: str | None = None
        self._closing = False

    async def start(self, deliver: Deliver, lost: Lost) -> None:
        await super().start(deliver, lost)
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._spawn(self._listen(ready))
        try:
            self.endpoint = await asyncio.wait_for(ready, self.timeout)
        except asyncio.TimeoutError:
            raise ClientError(f"no endpoint event from {self.url} within {self.timeout} s") from None

    async def _listen(self, ready: asyncio.Future[str]) -> None:
        with needs("client", "mcpkit.Client over HTTP"):
            import httpx

        error: ClientError | None = None
        try:
            headers = {"Accept": "text/event-stream", **self.headers}
            async with self.http.stream("GET", self.url, headers=headers) as response:
                if not 200 <= response.status_code < 300:
                    await self._fail_status(response, None)
                async for ev in sse_events(response):
                    data = "\n".join(ev.data)
                    if ev.event == "endpoint" and not ready.done():
                        ready.set_result(urljoin(self.url, data.strip()))
                    elif ev.event == "message":
                        self._deliver_data(data)
            error = ClientError(f"the SSE stream from {self.url} ended")
        except ClientError as exc:
            error = exc
        except httpx.HTTPError as exc:
            error = ClientError(f"the SSE stream from {self.url} failed: {exc!r}")
        finally:
            if error is not None:
                if not ready.done():
                    ready.set_exception(error)
                elif not self._closing:
                    self._lost(error)

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_raw(_json.dumps(message))

    async def send_raw(self, data: bytes) -> None:
        with needs("client", "mcpkit.Client over HTTP"):
            import httpx

        if self.endpoint is None:
            raise ClientError("not connected: no endpoint yet")
        headers = {"Content-Type": "application/json", **self.headers}
        try:
            response = await self.http.post(self.endpoint, content=data, headers=headers)
        except httpx.HTTPError as exc:
            raise ClientError(f"HTTP request to {self.endpoint} failed: {exc!r}") from exc
        if not 200 <= response.status_code < 300:
            await self._fail_status(response, None, raw=True)

    async def close(self) -> None:
        self._closing = True
        await super().close()
