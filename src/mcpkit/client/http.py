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
from .listening import Backoff, StreamState, retry_after, retryable
from .oversize import Edges, bounded_body, bounded_lines, message_id
from .transports import Deliver, Lost, Report, Transport, is_jsonrpc

__all__ = ["StreamableHttpTransport", "SseTransport", "header_value"]

log = logging.getLogger("mcpkit.client")

#: HM-15: which params field Mcp-Name carries, per method (2026-07-28)
NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
              "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}
#: a POST's SSE stream that ends before its answer is resumed until this many attempts in a row
#: bring no new event (HL-14)
MAX_RESUMES = 5
#: what one GET of the standalone stream says besides why it ended: stop (reported), try again at once
_STOP, _AGAIN = "stop", "again"
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

    __slots__ = ("event", "data", "id", "retry", "size", "oversize")

    def __init__(self) -> None:
        self.event = "message"
        self.data: list[str] = []
        self.id: str | None = None
        self.retry: int | None = None
        self.size = 0
        #: the ends of data past the transport's max_message_bytes, which was read past (oversize.py)
        self.oversize: Edges | None = None


async def sse_events(response: Any, limit: int | None = None) -> AsyncIterator[_Sse]:
    """The events of an SSE body (WHATWG parsing: comments, multi-line data, id, retry); with
    ``limit``, an event whose data is longer comes with only its ``oversize`` edges."""
    ev = _Sse()
    lines = response.aiter_lines() if limit is None else bounded_lines(response, limit)
    async for line in lines:
        if isinstance(line, Edges):  # one line past the limit, read past: the event's data is lost
            if ev.oversize is None:
                ev.oversize = line
            else:
                ev.oversize.size += line.size
                ev.oversize.tail = line.tail
            ev.data = []
            continue
        if line == "":
            if ev.data or ev.oversize is not None or ev.id is not None or ev.retry is not None:
                yield ev
            ev = _Sse()
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            if ev.oversize is not None:
                ev.oversize.add(value.encode())
                continue
            ev.data.append(value)
            ev.size += len(value) + 1
            if limit is not None and ev.size > limit:
                ev.oversize = Edges()
                ev.oversize.add("\n".join(ev.data).encode())
                ev.data = []
        elif field == "event":
            ev.event = value or "message"
        elif field == "id" and "\0" not in value:
            ev.id = value
        elif field == "retry" and value.isdigit():
            ev.retry = int(value)
    if ev.data:
        yield ev


class _Seen:
    """What a response stream has brought so far; kept when its connection breaks mid-way."""

    __slots__ = ("answered", "last_id", "events", "stream")

    def __init__(self) -> None:
        self.answered = False  # the answer to the request it was opened for came
        self.last_id: str | None = None  # where to resume from (HL-14)
        self.events = 0
        self.stream = False  # an SSE stream, not a JSON body


class _HttpBase(Transport):
    closes_to_cancel = True

    def __init__(self, url: str, *, headers: dict[str, str] | None = None, timeout: float | None = 30.0) -> None:
        super().__init__()
        self.url = url
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.http: Any = None
        self._httpx: Any = None  # the httpx module, once start() imported it
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self, deliver: Deliver, lost: Lost, state: Report | None = None) -> None:
        await super().start(deliver, lost, state)
        with needs("client", "mcpkit.Client over HTTP"):
            import httpx

        self._httpx = httpx  # imported once here: every request reads it from the transport

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

    def _too_large(self, edges: Edges) -> Any:
        """Report a message read past (the Client fails its request); the id it answers, if known."""
        self.on_oversize(edges)
        return message_id(edges.head, edges.tail)

    async def _error_body(self, response: Any) -> bytes:
        """The body of a refusal, read to say what went wrong: past max_message_bytes, only its
        first bytes are kept (an error page of a gigabyte is read past, not held)."""
        if self.max_message_bytes is None:
            return bytes(await response.aread())
        body = await bounded_body(response, self.max_message_bytes)
        return body.head if isinstance(body, Edges) else body

    async def _fail_status(self, response: Any, message: dict[str, Any] | None, raw: bool = False) -> None:
        """Raise for a status that is not 2xx: :class:`HttpRpcError` when the body is the JSON-RPC
        error answering ``message``, else :class:`ClientError`. ``raw`` (send_raw): what the body
        carries is also delivered, so an error nobody awaits lands in ``Client.unmatched``."""
        body = await self._error_body(response)
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

    def __init__(self, url: str, *, headers: dict[str, str] | None = None, timeout: float | None = 30.0,
                 reconnect: Backoff | None = None) -> None:
        super().__init__(url, headers=headers, timeout=timeout)
        #: how a broken GET stream, or a POST's stream broken before its answer, is reopened
        self.reconnect = reconnect or Backoff()
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        #: the HTTP status of the standalone GET stream (405: the server offers none)
        self.standalone_status: int | None = None
        #: the HTTP status of the DELETE that ended the session on close()
        self.delete_status: int | None = None
        #: tools by name, for the Mcp-Param-* headers of 2026-07-28 (the client fills it)
        self.tool_definitions: dict[str, dict[str, Any]] = {}
        self._retry_ms: int | None = None  # the server's SSE retry field (HL-09), once it sent one
        self._listening = False

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
            # no session, no standalone stream: every request carries its version
            self._report(StreamState("unsupported", f"{version} has no GET stream: list changes and "
                                     "resource updates come on subscriptions/listen"))
            return
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
        httpx = self._httpx

        want = message.get("id") if message is not None and "method" in message else None
        seen = _Seen()
        broke: Exception | None = None
        try:
            async with self.http.stream("POST", self.url, content=body, headers=self._headers(message)) as response:
                sid = response.headers.get("mcp-session-id")
                if sid is not None and self.session_id is None:
                    self.session_id = sid
                if not 200 <= response.status_code < 300:
                    await self._fail_status(response, message, raw)
                try:
                    await self._read_answer(response, want, seen)
                except httpx.HTTPError as exc:
                    if want is None or seen.last_id is None:
                        raise
                    broke = exc  # a failover, say: the events after last_id are resumable
        except httpx.HTTPError as exc:
            raise ClientError(f"HTTP request to {self.url} failed: {exc!r}") from exc
        if want is None or seen.answered or not seen.stream:
            return
        if seen.last_id is None:
            # nothing to resume from, and HL-12 keeps the answer off the GET stream: it will not come
            raise ClientError(f"the response stream of request {want!r} from {self.url} ended before its "
                              "answer, with no event id to resume it from (HL-14)")
        await self._resume(seen, want, broke)

    async def _read_answer(self, response: Any, want: Any, seen: _Seen) -> None:
        """Deliver what the response carries, noting in ``seen`` whether the answer to ``want`` came."""
        ctype = response.headers.get("content-type", "")
        if ctype.startswith("text/event-stream"):
            seen.stream = True
            await self._read_sse(response, want, seen)
            return
        body = await response.aread() if self.max_message_bytes is None else await bounded_body(
            response, self.max_message_bytes)
        if isinstance(body, Edges):
            seen.answered = self._too_large(body) == want
            return
        items = self._deliver_data(body) if body.strip() else None
        seen.answered = any(_answers(m, want) for m in items or ())

    async def _read_sse(self, response: Any, want: Any, seen: _Seen) -> None:
        async for ev in sse_events(response, self.max_message_bytes):
            seen.events += 1
            if ev.retry is not None:
                self._retry_ms = ev.retry
            if ev.id is not None:
                seen.last_id = ev.id
            if ev.oversize is not None:
                if ev.event == "message" and self._too_large(ev.oversize) == want and want is not None:
                    seen.answered = True
                continue
            if ev.event == "message" and ev.data:
                items = self._deliver_data("\n".join(ev.data))
                if not seen.answered and any(_answers(m, want) for m in items or ()):
                    seen.answered = True

    def _get_headers(self, last_id: str | None) -> dict[str, str]:
        headers = {**self._headers(None), "Accept": "text/event-stream"}
        headers.pop("Content-Type", None)
        if last_id is not None:
            headers["Last-Event-ID"] = last_id
        return headers

    def _delay(self, attempt: int, at_least: float | None = None) -> float:
        """Seconds before reconnection attempt ``attempt``: the backoff, lengthened to the
        server's retry field (HL-09) and to its Retry-After."""
        delay = self.reconnect.delay(attempt)
        if self._retry_ms is not None:
            delay = max(delay, self._retry_ms / 1000)
        return delay if at_least is None else max(delay, at_least)

    async def _resume(self, seen: _Seen, want: Any, broke: Exception | None) -> None:
        """HL-14: the stream of request ``want`` ended (or ``broke``) before its answer: GET it again
        from its last event id until the answer comes. A broken connection is resumed at once
        (behind a load balancer, another server may have the events), one the server ended after
        its retry field (HL-09). Statuses that mean "not now" (503, 429...) and broken
        connections are retried with the backoff; an attempt that brings no new event counts
        towards MAX_RESUMES and one that does starts the count again, so a server that closes
        its connections on purpose is followed for as long as the request's timeout allows.
        Nobody listening (connection refused), or a refusal for good (404: the events or the
        session are gone), fails the request at once instead of leaving it to time out."""
        httpx = self._httpx

        how = f"broke ({broke!r})" if broke is not None else "ended"
        misses = 0
        at_once, fresh = broke is not None, False
        at_least: float | None = None
        while not seen.answered:
            if misses == MAX_RESUMES:
                raise ClientError(f"no answer to request {want!r}: its response stream from {self.url} {how}, and "
                                  f"{MAX_RESUMES} attempts in a row to resume it after event {seen.last_id!r} "
                                  "brought nothing new (HL-14)")
            misses += 1
            if not at_once:
                await asyncio.sleep(self._delay(misses, at_least))
            at_once, at_least = False, None
            before = seen.last_id
            status: int | None = None
            try:
                async with self.http.stream("GET", self.url, headers=self._get_headers(seen.last_id)) as response:
                    status = response.status_code
                    fresh = False
                    if not 200 <= status < 300:
                        if not retryable(status):
                            await self._fail_status(response, None)
                        await self._error_body(response)
                        at_least = retry_after(response.headers)
                        how = f"could not be resumed (HTTP {status})"
                        continue
                    await self._read_sse(response, want, seen)
                how = "ended again"
            except httpx.ConnectError as exc:
                raise ClientError(f"no answer to request {want!r}: its response stream from {self.url} {how}, and "
                                  f"nothing listens there any more to resume it ({exc!r})") from exc
            except httpx.HTTPError as exc:
                how = f"broke ({exc!r})"
                log.debug("%s: resuming the stream of request %r: %r", self.url, want, exc)
                if status is None and not fresh:
                    at_once = fresh = True  # no response at all: see _standalone
            if seen.last_id != before:
                misses = 0

    async def _standalone(self) -> None:
        """HL-12: the GET stream for what the server sends outside any request. It is reopened
        from the last event id it brought (HL-14) for as long as the transport is open, with the
        backoff of ``reconnect`` while attempts bring nothing; each change of state goes to the
        client (listening.py). It stops only when the server says it never will serve it: 405
        (none offered), 404 (the session is gone), 401/403, 400."""
        seen = _Seen()
        failures = 0  # attempts in a row that brought no event
        fresh = False
        try:
            while True:
                events = seen.events
                outcome = await self._listen_once(seen)
                if outcome is _STOP:
                    return
                if outcome is _AGAIN:
                    continue
                why, status, at_least = outcome
                if status is None and not fresh:
                    # no response at all: most likely a pooled keep-alive connection that the
                    # server had closed (or a server that died); a fresh connection is tried at
                    # once, before this counts as a failure
                    fresh = True
                    continue
                fresh = status is None
                if seen.events > events:
                    # it brought events, then ended or broke (the server's choice, a proxy's timeout,
                    # a failover): come back as the server asked (HL-09) and carry on quietly
                    failures = 0
                    delay = self._delay(1)
                    log.debug("%s: the GET stream %s; reopening it in %.2f s", self.url, why, delay)
                else:
                    failures += 1
                    delay = self._delay(failures, at_least)
                    self._listening = False
                    refused = status if status is not None and not 200 <= status < 300 else None
                    self._report(StreamState("retrying", f"the GET stream from {self.url} {why}", status=refused,
                                             attempt=failures, retry_in=delay))
                await asyncio.sleep(delay)
        except Exception as exc:  # noqa: BLE001 - a bug here must not end listening unsaid
            log.debug("the GET stream failed", exc_info=True)
            self._report(StreamState("stopped", f"the GET stream from {self.url} failed: {exc!r}"))

    async def _listen_once(self, seen: _Seen) -> Any:
        """One GET: _STOP (reported), _AGAIN (at once), or why it ended, the status of its
        response (None: there was none) and the Retry-After asked for."""
        httpx = self._httpx

        status: int | None = None
        try:
            async with self.http.stream("GET", self.url, headers=self._get_headers(seen.last_id)) as response:
                status = self.standalone_status = response.status_code
                ctype = response.headers.get("content-type", "")
                if 200 <= status < 300 and ctype.startswith("text/event-stream"):
                    if not self._listening:
                        self._listening = True
                        self._report(StreamState("listening", f"GET {self.url}", status=status))
                    await self._read_sse(response, None, seen)
                    return "was ended by the server", status, None
                body = await self._error_body(response)
                if status == 404 and seen.last_id is not None:
                    # the events after it expired, or this server never had them: listen afresh
                    # (a session that is gone gets 404 again, without the header)
                    log.warning("%s: the GET stream could not be resumed after event %r (HTTP 404); what the "
                                "server sent meanwhile may be lost", self.url, seen.last_id)
                    seen.last_id = None
                    return _AGAIN
                if 200 <= status < 300 or not retryable(status):
                    self._refused(status, ctype, body)
                    return _STOP
                return f"got HTTP {status}", status, retry_after(response.headers)
        except httpx.HTTPError as exc:
            return (f"broke ({exc!r})" if status is not None else f"failed ({exc!r})"), status, None

    def _refused(self, status: int, ctype: str, body: bytes) -> None:
        """GET was answered ``status`` for good: stop listening and say so; when the session is
        gone (HL-17), nothing in it can work any more and the client is ended too."""
        where = f"GET {self.url}: HTTP {status}"
        error: ClientError | None = None
        if status == 405:  # HL-11: no standalone stream offered, which is normal
            state = StreamState("unsupported", f"{self.url} offers no GET stream (HTTP 405)", status=status)
        elif status == 404 and self.session_id is not None:
            error = ClientError(f"the session {self.session_id} has ended on the server ({where}): open a new "
                                "Client to start another", status=status, body=body)
            state = StreamState("stopped", str(error), status=status)
        elif 200 <= status < 300:
            state = StreamState("stopped", f"{where} with Content-Type {ctype!r}, not an event stream (HL-11)",
                                status=status)
        else:
            why = "the server refuses these credentials" if status in (401, 403) else (
                body[:200].decode("utf-8", errors="replace").strip() or "refused")
            state = StreamState("stopped", f"{where}: {why}", status=status)
        self._report(state)
        if error is not None:
            self._lost(error)

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
    """``message`` is the answer to request ``want``: its id, or the same id in another JSON type
    ("1" for 1), which Client fails at once as MismatchedId rather than waiting on the stream."""
    if want is None or not isinstance(message, dict) or "method" in message:
        return False
    rid = message.get("id")
    return rid == want or (isinstance(rid, (str, int)) and not isinstance(rid, bool) and str(rid) == str(want))


class SseTransport(_HttpBase):
    """Legacy HTTP+SSE (2024-11-05): GET the SSE URL, wait for its ``endpoint`` event, POST
    every message there; everything the server sends arrives as ``message`` events."""

    kind = "sse"
    closes_to_cancel = False

    def __init__(self, url: str, *, headers: dict[str, str] | None = None, timeout: float | None = 30.0) -> None:
        super().__init__(url, headers=headers, timeout=timeout)
        self.endpoint: str | None = None
        self._closing = False

    async def start(self, deliver: Deliver, lost: Lost, state: Report | None = None) -> None:
        await super().start(deliver, lost, state)
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._spawn(self._listen(ready))
        try:
            self.endpoint = await asyncio.wait_for(ready, self.timeout)
        except asyncio.TimeoutError:
            raise ClientError(f"no endpoint event from {self.url} within {self.timeout} s") from None

    async def _listen(self, ready: asyncio.Future[str]) -> None:
        httpx = self._httpx

        error: ClientError | None = None
        try:
            headers = {"Accept": "text/event-stream", **self.headers}
            async with self.http.stream("GET", self.url, headers=headers) as response:
                if not 200 <= response.status_code < 300:
                    await self._fail_status(response, None)
                async for ev in sse_events(response, self.max_message_bytes):
                    data = "\n".join(ev.data)
                    if ev.oversize is not None:
                        if ev.event == "message":
                            self._too_large(ev.oversize)
                    elif ev.event == "endpoint" and not ready.done():
                        ready.set_result(urljoin(self.url, data.strip()))
                        self._report(StreamState("listening", f"GET {self.url}", status=response.status_code))
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
                    # 2024-11-05 has no resumption, and the session ends with its stream: a new
                    # stream would be a new session, which only a new initialize can set up
                    self._report(StreamState("stopped", f"{error}: legacy HTTP+SSE cannot resume a session; "
                                             "open a new Client", status=error.status))
                    self._lost(error)

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_raw(_json.dumps(message))

    async def send_raw(self, data: bytes) -> None:
        httpx = self._httpx

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
