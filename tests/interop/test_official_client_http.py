"""The reference server over HTTP (``mcpkit serve --http``), driven by the official ``mcp`` client.

Five ways to connect, each against its own real server process: Streamable HTTP stateful with
SSE answers (the default), stateful with JSON answers (``--json``), stateless (``--stateless``),
stateless JSON, and the legacy HTTP+SSE transport at ``/sse`` (``mcp.client.sse.sse_client``).

The client's HTTP traffic passes through a tap (an ``httpx2`` transport wrapper) that reads every
JSON-RPC message the server sends, from JSON bodies and SSE streams alike; at the end of the test
each one goes to ``wire.record`` and is validated against the negotiated revision's schema.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from tests.test_http import PRE_NEGOTIATION, SseParser, start_server, stop_server

pytestmark = [
    pytest.mark.interop,
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
LATEST = "2025-11-25"

#: mode -> (serve options, URL path, the answers come as SSE, the server keeps sessions)
MODES: dict[str, tuple[tuple[str, ...], str, bool, bool]] = {
    "stateful-sse": ((), "/mcp", True, True),
    "stateful-json": (("--json",), "/mcp", False, True),
    "stateless-sse": (("--stateless",), "/mcp", True, False),
    "stateless-json": (("--stateless", "--json"), "/mcp", False, False),
    "legacy-sse": ((), "/sse", True, True),
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ------------------------------------------------------------------------------ the tap


class Tap:
    """What the client sent (request id -> method) and every JSON-RPC message the server sent."""

    def __init__(self) -> None:
        self.methods: dict[Any, str] = {}
        self.received: list[Any] = []
        self.revision: str | None = None
        self.listening = anyio.Event()  # set once a standalone GET stream is open

    def client_sent(self, body: bytes) -> None:
        try:
            message = json.loads(body)
        except ValueError:
            return
        for m in message if isinstance(message, list) else [message]:
            if isinstance(m, dict) and "method" in m and "id" in m:
                self.methods[m["id"]] = m["method"]

    def server_sent(self, message: Any) -> None:
        self.received.append(message)
        if (
            isinstance(message, dict)
            and "result" in message
            and self.methods.get(message.get("id")) == "initialize"
            and self.revision is None
        ):
            self.revision = message["result"].get("protocolVersion")

    def record_into(self, wire: Any) -> int:
        for message in self.received:
            method = None
            if isinstance(message, dict) and "method" not in message:
                method = self.methods.get(message.get("id"))
            wire.record(message, self.revision or PRE_NEGOTIATION, method)
        return len(self.received)

    def server_messages(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.received if isinstance(m, dict) and m.get("method") == method]


class _TapStream(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, tap: Tap, sse: bool) -> None:
        self._inner = inner
        self._tap = tap
        self._sse = SseParser() if sse else None
        self._body = b""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                if self._sse is not None:
                    for event in self._sse.feed(chunk):
                        if event.data and event.event in (None, "message"):
                            self._tap.server_sent(json.loads(event.data))
                else:
                    self._body += chunk
                yield chunk
        finally:
            if self._sse is None and self._body:
                try:
                    self._tap.server_sent(json.loads(self._body))
                except ValueError:
                    pass
                self._body = b""

    async def aclose(self) -> None:
        await self._inner.aclose()


class TapTransport(httpx2.AsyncBaseTransport):
    def __init__(self, tap: Tap) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._tap = tap

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "POST":
            self._tap.client_sent(await request.aread())
        response = await self._inner.handle_async_request(request)
        sse = response.headers.get("content-type", "").startswith("text/event-stream")
        if request.method == "GET" and response.status_code == 200 and sse:
            self._tap.listening.set()
        is_json = response.headers.get("content-type", "").startswith("application/json")
        if not (sse or is_json):
            return response
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_TapStream(response.stream, self._tap, sse),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


# ------------------------------------------------------------------------------ fixtures


@dataclass
class Served:
    mode: str
    port: int
    path: str
    sse: bool
    stateful: bool

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"


@pytest.fixture(scope="module", params=list(MODES))
def served(request: pytest.FixtureRequest, serving_loop: str) -> Iterator[Served]:
    options, path, sse, stateful = MODES[request.param]
    proc, port = start_server(*options)
    yield Served(request.param, port, path, sse, stateful)
    stderr = stop_server(proc)
    assert "Traceback" not in stderr, stderr


@dataclass
class Inbox:
    errors: list[Exception] = field(default_factory=list)
    notifications: list[Any] = field(default_factory=list)

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.errors.append(message)
        else:
            self.notifications.append(message)


@dataclass
class Connected:
    session: ClientSession
    init: types.InitializeResult
    tap: Tap
    served: Served


@asynccontextmanager
async def _connect(served: Served, wire: Any, **callbacks: Any) -> AsyncIterator[Connected]:
    tap = Tap()
    inbox = Inbox()
    timeout = httpx2.Timeout(15.0, read=60.0)
    try:
        if served.mode == "legacy-sse":

            def factory(headers: Any = None, timeout: Any = timeout, auth: Any = None) -> httpx2.AsyncClient:
                return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth, transport=TapTransport(tap))

            transport: Any = sse_client(served.url, httpx_client_factory=factory)
            async with transport as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=15, message_handler=inbox, **callbacks) as session:
                    with anyio.fail_after(15):
                        init = await session.initialize()
                    yield Connected(session, init, tap, served)
        else:
            async with httpx2.AsyncClient(timeout=timeout, transport=TapTransport(tap)) as http:
                async with streamable_http_client(served.url, http_client=http) as streams:
                    read, write = streams[0], streams[1]
                    async with ClientSession(read, write, read_timeout_seconds=15, message_handler=inbox, **callbacks) as session:
                        with anyio.fail_after(15):
                            init = await session.initialize()
                        yield Connected(session, init, tap, served)
    finally:
        tap.record_into(wire)
    assert not inbox.errors, f"the client saw transport errors: {inbox.errors}"


@pytest.fixture
def connect(served: Served, wire: Any) -> Any:
    def factory(**callbacks: Any) -> Any:
        return _connect(served, wire, **callbacks)

    return factory


def texts(result: types.CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, types.TextContent)]


# ------------------------------------------------------------------------------ tests


@pytest.mark.req("HL-06", "HX-01", "HX-02", "HX-03")
async def test_the_official_client_initializes_and_lists_tools(connect, served):
    async with connect() as client:
        assert client.init.protocol_version == LATEST
        assert client.init.server_info.name == "mcpkit-reference"
        tools = {t.name: t for t in (await client.session.list_tools()).tools}
        for name in ("add", "echo", "countdown", "test_simple_text", "test_sampling", "json_schema_2020_12_tool"):
            assert name in tools
        assert tools["add"].input_schema == {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        }
        [init_answer] = [m for m in client.tap.received if isinstance(m, dict) and client.tap.methods.get(m.get("id")) == "initialize"]
        assert init_answer["result"]["protocolVersion"] == LATEST


@pytest.mark.req("HL-06", "HL-07", "TL-08")
async def test_add_returns_structured_content(connect, served):
    async with connect() as client:
        result = await client.session.call_tool("add", {"a": 2, "b": 3})
        assert result.is_error is False
        assert result.structured_content == {"result": 5}
        assert texts(result) == ['{"result":5}']
        echoed = await client.session.call_tool("echo", {"text": "héllo\nwörld"})
        assert texts(echoed) == ["héllo\nwörld"]


@pytest.mark.req("HL-07", "HL-13", "PR-01", "PR-03")
async def test_progress_reaches_the_callback(connect, served):
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with connect() as client:
        if served.mode == "stateful-json":
            # A JSON body carries the response alone: progress rides the GET stream, so wait
            # until the client has opened it.
            with anyio.fail_after(5):
                await client.tap.listening.wait()
        result = await client.session.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
        token = next(iter(result.content)).text  # the reference tool answers with its token
        assert token
        wired = client.tap.server_messages("notifications/progress")
        if served.mode == "stateless-json":
            # no stream but the JSON body, which is the response alone
            assert seen == [] and wired == []
            return
        with anyio.fail_after(5):
            while len(seen) < 3:
                await anyio.sleep(0.01)
        assert seen == [(v, 100, f"Completed step {v} of 100") for v in (0, 50, 100)]
        wired = client.tap.server_messages("notifications/progress")
        assert [m["params"]["progress"] for m in wired] == [0, 50, 100]
        assert {str(m["params"]["progressToken"]) for m in wired} == {token}


@pytest.mark.req("HL-04", "HL-07", "SA-01", "SA-04")
async def test_sampling_goes_through_the_callback(connect, served):
    asked: list[types.CreateMessageRequestParams] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="This is a test response from the client"),
            model="test-model",
            stop_reason="endTurn",
        )

    async with connect(sampling_callback=sampling) as client:
        if served.mode == "stateful-json":
            with anyio.fail_after(5):  # the request can only ride the GET stream: wait until it is open
                await client.tap.listening.wait()
        with anyio.fail_after(15):
            result = await client.session.call_tool("test_sampling", {"prompt": "Test prompt for sampling"})
        if served.stateful:
            assert result.is_error is False
            assert texts(result) == ["LLM response: This is a test response from the client"]
            [request] = client.tap.server_messages("sampling/createMessage")
            assert request["params"] == {
                "messages": [{"role": "user", "content": {"type": "text", "text": "Test prompt for sampling"}}],
                "maxTokens": 100,
            }
            assert len(asked) == 1 and asked[0].max_tokens == 100
        else:
            # Stateless: no back-channel and no client capabilities, so the tool says so.
            assert result.is_error is True
            assert texts(result) == [
                "the client did not declare the 'sampling' capability, so this server cannot ask it for that"
            ]
            assert asked == [] and client.tap.server_messages("sampling/createMessage") == []


@pytest.mark.req("RS-03", "RS-04", "PM-03")
async def test_resources_and_prompts(connect, served):
    async with connect() as client:
        text = await client.session.read_resource("test://static-text")
        [content] = text.contents
        assert isinstance(content, types.TextResourceContents)
        assert (str(content.uri), content.mime_type, content.text) == (
            "test://static-text",
            "text/plain",
            "This is the content of the static text resource.",
        )
        binary = await client.session.read_resource("test://static-binary")
        [blob] = binary.contents
        assert isinstance(blob, types.BlobResourceContents) and blob.blob == PNG_1X1 and blob.mime_type == "image/png"
        templated = await client.session.read_resource("test://template/123/data")
        assert json.loads(templated.contents[0].text) == {"id": "123", "templateTest": True, "data": "Data for ID: 123"}

        prompt = await client.session.get_prompt("test_prompt_with_arguments", {"arg1": "testValue1", "arg2": "testValue2"})
        [message] = prompt.messages
        assert message.role == "user"
        assert isinstance(message.content, types.TextContent)
        assert message.content.text == "Prompt with arguments: arg1='testValue1', arg2='testValue2'"
        simple = await client.session.get_prompt("test_simple_prompt")
        assert [m.content.text for m in simple.messages] == ["This is a simple prompt for testing."]
