"""The reference server (``mcpkit serve``) driven over stdio by the official ``mcp`` Python client.

Every feature is exercised under each handshake revision: the client always offers its
``LATEST_HANDSHAKE_VERSION``, so the ``revision`` fixture patches that module global to make it
offer (and the server answer) an older one. The server runs under the traffic tap
(``wire.command``), so every message it sends is validated against the negotiated revision's
official schema when the test ends; the exact wire form of answers (which keys a revision may
carry) is read back from that same traffic log.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import mcp.client.session as client_session
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from mcpkit import __version__
from tests.conftest import mcpkit_command
from tests.wire import WireLog, check_wire_log
from tests.contract import ELICITATION_SCHEMA, JSON_SCHEMA_2020_12_INPUT, PNG_1X1, SEP1034_SCHEMA, SEP1330_SCHEMA, WAV_MIN

pytestmark = [
    pytest.mark.interop,
    pytest.mark.anyio,
    # logging/setLevel, resources/subscribe and roots are deprecated in 2026-07-28; the legacy
    # revisions exercised here still define them.
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
_ORDER = {rev: i for i, rev in enumerate(REVISIONS)}


def since(revision: str, first: str) -> bool:
    """Whether ``revision`` is ``first`` or newer."""
    return _ORDER[revision] >= _ORDER[first]


# ------------------------------------------------------------------------------ the contract
# CONTRACT.md §2 (the official conformance suite's server contract) plus the demo tools.


CONTRACT_TOOLS = (
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_tool_with_logging",
    "test_tool_with_progress",
    "test_error_handling",
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
    "json_schema_2020_12_tool",
    "test_reconnection",
)
DEMO_TOOLS = (
    "add",
    "echo",
    "countdown",
    "sleep",
    "list_roots",
    "test_trigger_tool_change",
    "test_trigger_prompt_change",
    "test_trigger_resource_update",
)


#: The keys a Tool may carry per revision (TL-05).
TOOL_KEYS = {
    "2024-11-05": {"name", "description", "inputSchema"},
    "2025-03-26": {"name", "description", "inputSchema", "annotations"},
    "2025-06-18": {"name", "description", "inputSchema", "annotations", "title", "outputSchema", "_meta"},
    "2025-11-25": {
        "name", "description", "inputSchema", "annotations", "title", "outputSchema", "_meta", "icons", "execution",
    },
}

SERVER_NAME = "mcpkit-reference"
SERVER_TITLE = "mcpkit reference server"
SERVER_DESCRIPTION = "Every MCP server feature, as the official conformance suite expects it."
SERVER_WEBSITE = "https://pypi.org/project/mcpkit/"
INSTRUCTIONS = "A test server: the test_* tools, resources and prompts follow the MCP conformance contract."

SIMPLE_TOOL_RESULTS: dict[str, Any] = {
    "test_simple_text": {"content": [{"type": "text", "text": "This is a simple text response for testing."}]},
    "test_image_content": {"content": [{"type": "image", "data": PNG_1X1, "mimeType": "image/png"}]},
    "test_audio_content": {"content": [{"type": "audio", "data": WAV_MIN, "mimeType": "audio/wav"}]},
    "test_embedded_resource": {
        "content": [
            {
                "type": "resource",
                "resource": {
                    "uri": "test://embedded-resource",
                    "mimeType": "text/plain",
                    "text": "This is an embedded resource content.",
                },
            }
        ]
    },
    "test_reconnection": {"content": [{"type": "text", "text": "Reconnection test completed successfully"}]},
}

MULTIPLE_CONTENT = [
    {"type": "text", "text": "Multiple content types test:"},
    {"type": "image", "data": PNG_1X1, "mimeType": "image/png"},
    {
        "type": "resource",
        "resource": {
            "uri": "test://mixed-content-resource",
            "mimeType": "application/json",
            "text": '{"test":"data","value":123}',
        },
    },
]


RESOURCES = [
    {
        "uri": "test://static-text",
        "name": "static-text",
        "description": "A static text resource",
        "mimeType": "text/plain",
    },
    {
        "uri": "test://static-binary",
        "name": "static-binary",
        "description": "A static binary resource (1x1 PNG)",
        "mimeType": "image/png",
    },
    {
        "uri": "test://watched-resource",
        "name": "watched-resource",
        "description": "A resource to subscribe to",
        "mimeType": "text/plain",
    },
]
#: the files of the reference server's example skills (reference/skills.py), listed after the contract's
SKILL_FILES = ["skill://pdf-processing/SKILL.md", "skill://pdf-processing/references/FORMS.md",
               "skill://pdf-processing/templates/invoice.md", "skill://pdf-processing/templates/regional/eu-invoice.md",
               "skill://acme/billing/refunds/SKILL.md", "skill://acme/billing/refunds/examples/email.md"]
TEMPLATES = [
    {
        "uriTemplate": "test://template/{id}/data",
        "name": "template-data",
        "description": "JSON data for any id",
        "mimeType": "application/json",
    }
]
PROMPTS = [
    {"name": "test_simple_prompt", "description": "A simple prompt without arguments."},
    {
        "name": "test_prompt_with_arguments",
        "description": "A prompt with two required arguments.",
        "arguments": [
            {"name": "arg1", "description": "First test argument", "required": True},
            {"name": "arg2", "description": "Second test argument", "required": True},
        ],
    },
    {
        "name": "test_prompt_with_embedded_resource",
        "description": "A prompt that embeds a resource.",
        "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": True}],
    },
    {"name": "test_prompt_with_image", "description": "A prompt with an image."},
]
# listed after those: the 2026-07-28 contract's prompt that asks for input first
LISTED_PROMPTS = PROMPTS + [
    {"name": "test_input_required_result_prompt", "description": "A prompt that asks the user for context first."}
]

# ------------------------------------------------------------------------------ fixtures


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=REVISIONS)
def revision(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The revision the client offers, and so the one negotiated."""
    monkeypatch.setattr(client_session, "LATEST_HANDSHAKE_VERSION", request.param)
    return request.param


class Inbox:
    """Everything the client's ``message_handler`` surfaced, in arrival order."""

    def __init__(self) -> None:
        self.notifications: list[Any] = []
        self.errors: list[Exception] = []
        self._changed = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.errors.append(message)
        else:
            self.notifications.append(message)
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def of(self, kind: type) -> list[Any]:
        return [n for n in self.notifications if isinstance(n, kind)]

    async def wait_for(self, kind: type, count: int, timeout: float = 5.0) -> list[Any]:
        """Wait (bounded) until ``count`` notifications of ``kind`` arrived."""
        with anyio.fail_after(timeout):
            while len(self.of(kind)) < count:
                await self._changed.wait()
        return self.of(kind)


@dataclass
class Client:
    session: ClientSession
    init: types.InitializeResult
    inbox: Inbox
    log: str
    revision: str

    # -------------------------------------------------------------- the traffic, as sent

    def traffic(self) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for record in WireLog.read(self.log):
            try:
                out.append((record.direction, record.decode()))
            except ValueError:
                continue
        return out

    def exchange(self, method: str, **match: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """The last client request of ``method`` whose params hold ``match``, and its answer."""
        traffic = self.traffic()
        request = None
        for direction, message in traffic:
            if (
                direction == "c2s"
                and isinstance(message, dict)
                and message.get("method") == method
                and "id" in message
                and all((message.get("params") or {}).get(k) == v for k, v in match.items())
            ):
                request = message
        assert request is not None, f"no {method} request {match} on the wire"
        for direction, message in traffic:
            if direction == "s2c" and isinstance(message, dict) and "method" not in message:
                if message.get("id") == request["id"]:
                    return request, message
        raise AssertionError(f"no answer to {request} on the wire")

    async def wait_sent(self, method: str, timeout: float = 5.0, **match: Any) -> None:
        """Wait (bounded) until the client has sent a ``method`` request whose params hold ``match``."""

        def sent() -> bool:
            return any(
                direction == "c2s"
                and isinstance(message, dict)
                and message.get("method") == method
                and all((message.get("params") or {}).get(k) == v for k, v in match.items())
                for direction, message in self.traffic()
            )

        with anyio.fail_after(timeout):
            while not sent():
                await anyio.sleep(0.01)

    def result(self, method: str, **match: Any) -> Any:
        _, response = self.exchange(method, **match)
        assert "error" not in response, response
        return response["result"]

    def server_messages(self, method: str | None = None) -> list[dict[str, Any]]:
        """What the server sent with ``method`` (requests and notifications), or all it sent."""
        return [
            m
            for d, m in self.traffic()
            if d == "s2c" and isinstance(m, dict) and (method is None or m.get("method") == method)
        ]

    def server_messages_after(self, method: str, request: dict[str, Any]) -> list[dict[str, Any]]:
        """Server messages with ``method`` sent after the client sent ``request``."""
        seen = False
        out = []
        for direction, message in self.traffic():
            if direction == "c2s" and message == request:
                seen = True
            elif seen and direction == "s2c" and isinstance(message, dict) and message.get("method") == method:
                out.append(message)
        assert seen, f"{request} is not on the wire"
        return out


def _leaf(error: BaseException) -> BaseException:
    """The one real error inside (nested) exception groups, or the group itself."""
    while isinstance(error, BaseExceptionGroup):
        real = [e for e in error.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())]
        if len(real) != 1:
            return error
        error = real[0]
    return error


@asynccontextmanager
async def _unwrapped() -> AsyncIterator[None]:
    """Re-raise a test's failure as itself, not wrapped in the client's task-group exception groups."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaf = _leaf(group)
        if leaf is group:
            raise
        raise leaf from None


@asynccontextmanager
async def _connect(wire: Any, revision: str, **callbacks: Any) -> AsyncIterator[Client]:
    argv = wire.command(mcpkit_command("serve"))
    log = wire.logs[-1]
    inbox = Inbox()
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        try:
            async with _unwrapped(), stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(
                    read, write, read_timeout_seconds=15, message_handler=inbox, **callbacks
                ) as session:
                    with anyio.fail_after(15):
                        init = await session.initialize()
                    assert init.protocol_version == revision, "the server did not answer the offered revision"
                    yield Client(session, init, inbox, log, revision)
        finally:
            errlog.seek(0)
            stderr = errlog.read()
            if stderr:  # shown by pytest only when the test fails
                sys.stderr.write(f"--- server stderr ---\n{stderr}")
    assert not inbox.errors, f"the client saw transport errors: {inbox.errors}"


@pytest.fixture
def connect(wire: Any, revision: str) -> Callable[..., Any]:
    """``async with connect(**client_callbacks) as client``: a fresh server and an initialized client."""

    def factory(**callbacks: Any) -> Any:
        return _connect(wire, revision, **callbacks)

    return factory


def texts(result: types.CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, types.TextContent)]


def check_wire_now(wire: Any, log: str) -> None:
    """Validate a traffic log in the test's own call phase (so an xfail mark covers it)."""
    wire.logs.remove(log)
    check_wire_log(log)


# ------------------------------------------------------------------------------ lifecycle


@pytest.mark.req("LC-01", "LC-02", "LC-06", "CP-01", "IC-03", "PG-01", "TL-01", "RS-01", "PM-01", "LG-01")
async def test_initialize_negotiates_the_offered_revision_and_ping_answers(connect, revision):
    async with connect() as client:
        assert client.init.protocol_version == revision
        assert client.session.protocol_version == revision

        _, response = client.exchange("initialize")
        result = response["result"]
        assert result["protocolVersion"] == revision

        info = {"name": SERVER_NAME, "version": __version__}
        if since(revision, "2025-06-18"):
            info["title"] = SERVER_TITLE
        if since(revision, "2025-11-25"):
            info["description"] = SERVER_DESCRIPTION
            info["websiteUrl"] = SERVER_WEBSITE
        assert result["serverInfo"] == info
        assert client.init.server_info.name == SERVER_NAME

        capabilities = {
            "tools": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "prompts": {"listChanged": True},
            "logging": {},
        }
        if since(revision, "2025-03-26"):
            capabilities["completions"] = {}
        capabilities["extensions"] = {"io.modelcontextprotocol/skills": {"directoryRead": True}}  # SEP-2640
        assert result["capabilities"] == capabilities
        assert result["instructions"] == INSTRUCTIONS
        assert client.session.instructions == INSTRUCTIONS

        pong = await client.session.send_ping()
        assert isinstance(pong, types.EmptyResult)
        assert client.result("ping") == {}


# ------------------------------------------------------------------------------ tools/list


@pytest.mark.req("TL-04", "TL-05", "TL-07", "TL-14")
async def test_tools_list_has_every_tool_with_the_fields_of_the_revision(connect, revision):
    async with connect() as client:
        listed = await client.session.list_tools()
        assert listed.next_cursor is None
        tools = {tool["name"]: tool for tool in client.result("tools/list")["tools"]}
        assert set(CONTRACT_TOOLS + DEMO_TOOLS) <= set(tools)
        assert {t.name for t in listed.tools} == set(tools)

        for name, tool in tools.items():
            assert set(tool) <= TOOL_KEYS[revision], (name, sorted(set(tool) - TOOL_KEYS[revision]))
            assert tool["description"], name
            assert tool["inputSchema"]["type"] == "object", name

        # Kept exactly as registered: $schema, $defs and the $ref are not inlined.
        schema_tool = tools["json_schema_2020_12_tool"]
        assert schema_tool["inputSchema"] == JSON_SCHEMA_2020_12_INPUT
        assert schema_tool["description"] == "Tool with JSON Schema 2020-12 features"
        typed = next(t for t in listed.tools if t.name == "json_schema_2020_12_tool")
        assert typed.input_schema == JSON_SCHEMA_2020_12_INPUT

        assert tools["test_sampling"]["inputSchema"]["required"] == ["prompt"]
        assert tools["test_elicitation"]["inputSchema"]["required"] == ["message"]
        assert tools["test_simple_text"]["inputSchema"].get("required", []) == []

        add = tools["add"]
        assert add["inputSchema"]["properties"] == {"a": {"type": "integer"}, "b": {"type": "integer"}}
        assert sorted(add["inputSchema"]["required"]) == ["a", "b"]
        if since(revision, "2025-03-26"):
            assert add["annotations"] == {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}
            typed_add = next(t for t in listed.tools if t.name == "add")
            assert typed_add.annotations is not None and typed_add.annotations.read_only_hint is True
        else:
            assert all("annotations" not in tool for tool in tools.values())
        if since(revision, "2025-06-18"):
            assert add["outputSchema"] == {
                "type": "object",
                "properties": {"result": {"type": "integer"}},
                "required": ["result"],
            }
        else:
            assert all("outputSchema" not in tool and "title" not in tool for tool in tools.values())


# ------------------------------------------------------------------------------ tools/call


@pytest.mark.req("TL-09", "TL-12", "ST-01")
async def test_contract_tools_return_the_contract_content(connect, revision):
    async with connect() as client:
        typed: dict[str, types.CallToolResult] = {}
        for name, expected in SIMPLE_TOOL_RESULTS.items():
            # test_simple_text goes without an ``arguments`` key, as the conformance suite sends it.
            typed[name] = await client.session.call_tool(name, None if name == "test_simple_text" else {})
            assert typed[name].is_error is False, name
            raw = client.result("tools/call", name=name)
            if name == "test_audio_content" and not since(revision, "2025-03-26"):
                # No audio content in 2024-11-05: a text notice stands in for it.
                expected = {
                    "content": [
                        {
                            "type": "text",
                            "text": "[audio content (audio/wav) omitted: not supported by protocol 2024-11-05]",
                        }
                    ]
                }
            assert raw == expected, name

        request, _ = client.exchange("tools/call", name="test_simple_text")
        assert "arguments" not in request["params"]

        [image] = typed["test_image_content"].content
        assert isinstance(image, types.ImageContent) and image.data == PNG_1X1 and image.mime_type == "image/png"
        [audio] = typed["test_audio_content"].content
        if since(revision, "2025-03-26"):
            assert isinstance(audio, types.AudioContent) and audio.data == WAV_MIN and audio.mime_type == "audio/wav"
        else:
            assert isinstance(audio, types.TextContent)
        [embedded] = typed["test_embedded_resource"].content
        assert isinstance(embedded, types.EmbeddedResource)
        assert isinstance(embedded.resource, types.TextResourceContents)
        assert embedded.resource.text == "This is an embedded resource content."

        echoed = await client.session.call_tool("echo", {"text": "héllo\nwörld"})
        assert texts(echoed) == ["héllo\nwörld"]

        called = await client.session.call_tool(
            "json_schema_2020_12_tool", {"name": "n", "address": {"street": "s", "city": "c"}}
        )
        assert called.is_error is False
        assert texts(called) == ['Received: {"address": {"city": "c", "street": "s"}, "name": "n"}']


@pytest.mark.req("TL-09")
async def test_multiple_content_types_returns_text_image_and_resource(connect, revision):
    async with connect() as client:
        result = await client.session.call_tool("test_multiple_content_types", {})
        assert result.is_error is False
        assert [type(c) for c in result.content] == [types.TextContent, types.ImageContent, types.EmbeddedResource]
        assert client.result("tools/call", name="test_multiple_content_types") == {"content": MULTIPLE_CONTENT}


@pytest.mark.req("TL-07", "TL-08", "TL-09")
async def test_add_returns_structured_content_with_a_text_fallback(connect, revision):
    async with connect() as client:
        result = await client.session.call_tool("add", {"a": 1, "b": 2})
        assert result.is_error is False
        assert texts(result) == ['{"result":3}']
        raw = client.result("tools/call", name="add")
        if since(revision, "2025-06-18"):
            assert result.structured_content == {"result": 3}
            assert raw == {"content": [{"type": "text", "text": '{"result":3}'}], "structuredContent": {"result": 3}}
        else:
            assert raw == {"content": [{"type": "text", "text": '{"result":3}'}]}


@pytest.mark.req("TL-10", "TL-11", "JS-01", "JS-02")
async def test_invalid_arguments_are_a_tool_error_from_2025_11_25_and_invalid_params_before(connect, revision):
    cases = [
        ("add", {"a": "x", "b": 2}, "/a"),
        ("add", {"a": 1}, '"b"'),
        # validated through the $ref into $defs, and additionalProperties: false
        ("json_schema_2020_12_tool", {"address": {"street": 5}}, "/address/street"),
        ("json_schema_2020_12_tool", {"name": "n", "extra": 1}, "'extra'"),
    ]
    async with connect() as client:
        for tool, arguments, field in cases:
            if since(revision, "2025-11-25"):
                result = await client.session.call_tool(tool, arguments)
                assert result.is_error is True
                [message] = texts(result)
            else:
                with pytest.raises(MCPError) as caught:
                    await client.session.call_tool(tool, arguments)
                assert caught.value.error.code == -32602
                message = caught.value.error.message
            assert message.startswith(f"Invalid arguments for tool '{tool}'"), message
            assert field in message, message
        errors = [m for m in client.server_messages() if "error" in m]
        assert len(errors) == (0 if since(revision, "2025-11-25") else len(cases))


@pytest.mark.req("TL-10")
async def test_unknown_tool_is_invalid_params(connect, revision):
    async with connect() as client:
        with pytest.raises(MCPError) as caught:
            await client.session.call_tool("no_such_tool", {})
        assert caught.value.error.code == -32602
        assert caught.value.error.message == "Unknown tool: no_such_tool"


@pytest.mark.req("TL-10")
async def test_tool_failure_is_an_is_error_result(connect, revision):
    async with connect() as client:
        result = await client.session.call_tool("test_error_handling", {})
        assert result.is_error is True
        assert texts(result) == ["This tool intentionally returns an error for testing"]
        assert client.result("tools/call", name="test_error_handling") == {
            "content": [{"type": "text", "text": "This tool intentionally returns an error for testing"}],
            "isError": True,
            # the error envelope every tool error carries (docs/policy.md), whatever runs around the call
            "_meta": {"dev.mcpkit/error": {"code": "E_INTERNAL", "details": None, "retryable": False,
                                           "message": "This tool intentionally returns an error for testing",
                                           "suggestedFix": None}},
        }


# ------------------------------------------------------------------------------ logging, progress


@pytest.mark.req("LG-01", "LG-02", "LG-04")
async def test_logging_follows_the_level_the_client_set(connect, revision):
    logged: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    async with connect(logging_callback=on_log) as client:
        assert isinstance(await client.session.set_logging_level("debug"), types.EmptyResult)
        assert client.result("logging/setLevel", level="debug") == {}

        result = await client.session.call_tool("test_tool_with_logging", {})
        assert texts(result) == ["Tool with logging executed successfully"]
        await client.inbox.wait_for(types.LoggingMessageNotification, 3)
        assert [p.data for p in logged] == [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ]
        assert [p.level for p in logged] == ["info", "info", "info"]
        wired = client.server_messages("notifications/message")
        assert [m["params"] for m in wired] == [
            {"level": "info", "data": "Tool execution started"},
            {"level": "info", "data": "Tool processing data"},
            {"level": "info", "data": "Tool execution completed"},
        ]

        await client.session.set_logging_level("error")
        second, _ = client.exchange("logging/setLevel", level="error")
        result = await client.session.call_tool("test_tool_with_logging", {})
        assert texts(result) == ["Tool with logging executed successfully"]
        # Notifications of a call go out before its answer: the log is complete now.
        assert client.server_messages_after("notifications/message", second) == []
        assert len(logged) == 3


@pytest.mark.req("PR-01", "PR-02", "PR-03", "PR-04")
async def test_progress_notifications_follow_the_token(connect, revision):
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with connect() as client:
        result = await client.session.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
        request, response = client.exchange("tools/call", name="test_tool_with_progress")
        token = request["params"]["_meta"]["progressToken"]
        # The reference tool answers with the token it reported on.
        assert texts(result) == [str(token)]

        wired = client.server_messages("notifications/progress")
        expected = []
        for value in (0, 50, 100):
            params: dict[str, Any] = {"progressToken": token, "progress": value, "total": 100}
            if since(revision, "2025-03-26"):
                params["message"] = f"Completed step {value} of 100"
            expected.append(params)
        assert [m["params"] for m in wired] == expected
        # Nothing after the answer: every notification precedes the response on the wire.
        traffic = client.traffic()
        answered = traffic.index(("s2c", response))
        assert not [m for d, m in traffic[answered:] if d == "s2c" and m.get("method") == "notifications/progress"]

        with anyio.fail_after(5):
            while len(seen) < 3:
                await anyio.sleep(0.01)
        assert [(p, t) for p, t, _ in seen] == [(0, 100), (50, 100), (100, 100)]
        if since(revision, "2025-03-26"):
            assert [m for _, _, m in seen] == [f"Completed step {v} of 100" for v in (0, 50, 100)]
        else:
            assert [m for _, _, m in seen] == [None, None, None]

        # Without a token the tool just runs, and reports nothing.
        plain = await client.session.call_tool("test_tool_with_progress", {})
        assert texts(plain) == ["Progress complete"]
        assert len(client.server_messages("notifications/progress")) == 3


# ------------------------------------------------------------------------------ cancellation, concurrency


@pytest.mark.req("CN-01", "PR-04", "PG-01")
async def test_cancelled_call_gets_no_answer_and_the_server_stays_responsive(connect, revision):
    started = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        started.set()

    async with connect() as client:
        began = time.monotonic()
        outcome: list[types.CallToolResult] = []
        blocking, counting = anyio.CancelScope(), anyio.CancelScope()

        async def sleep() -> None:
            with blocking:
                outcome.append(await client.session.call_tool("sleep", {"seconds": 1}))

        async def countdown() -> None:
            with counting:
                outcome.append(
                    await client.session.call_tool("countdown", {"seconds": 30}, progress_callback=on_progress)
                )

        async with anyio.create_task_group() as tg:
            # A blocking (sync) tool cannot be interrupted, but its answer must not be sent either.
            tg.start_soon(sleep)
            await client.wait_sent("tools/call", name="sleep")
            blocking.cancel()
            # An async tool is stopped.
            tg.start_soon(countdown)
            with anyio.fail_after(5):
                await started.wait()  # the countdown is running on the server
            counting.cancel()
        assert blocking.cancelled_caught and counting.cancelled_caught and outcome == []

        assert isinstance(await client.session.send_ping(), types.EmptyResult)
        assert texts(await client.session.call_tool("add", {"a": 2, "b": 3})) == ['{"result":5}']
        assert time.monotonic() - began < 10

    # The server has exited (after finishing the blocked call): the log is complete.
    traffic = client.traffic()
    calls = {
        m["params"]["name"]: m for d, m in traffic if d == "c2s" and m.get("method") == "tools/call"
    }
    cancels = [m for d, m in traffic if d == "c2s" and m.get("method") == "notifications/cancelled"]
    assert [c["params"]["requestId"] for c in cancels] == [calls["sleep"]["id"], calls["countdown"]["id"]]
    answered = {m.get("id") for d, m in traffic if d == "s2c" and "method" not in m}
    assert calls["sleep"]["id"] not in answered
    assert calls["countdown"]["id"] not in answered
    assert calls["add"]["id"] in answered
    # No progress for the countdown once it was cancelled.
    token = calls["countdown"]["params"]["_meta"]["progressToken"]
    after_cancel = traffic[traffic.index(("c2s", cancels[1])) :]
    assert [
        m
        for d, m in after_cancel
        if d == "s2c" and m.get("method") == "notifications/progress" and m["params"]["progressToken"] == token
    ] == []


@pytest.mark.req("PG-01", "ST-01")
async def test_ping_and_calls_are_not_delayed_by_a_blocking_tool(connect, revision):
    async with connect() as client:
        done = anyio.Event()
        slept: list[types.CallToolResult] = []

        async def sleeper() -> None:
            slept.append(await client.session.call_tool("sleep", {"seconds": 2}))
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(sleeper)
            # The sleep request is on the wire (so the server reads it before the ping).
            await client.wait_sent("tools/call", name="sleep")
            t0 = time.monotonic()
            await client.session.send_ping()
            ping_time = time.monotonic() - t0
            t0 = time.monotonic()
            added = await client.session.call_tool("add", {"a": 20, "b": 22})
            add_time = time.monotonic() - t0
            assert not done.is_set(), "sleep(2) finished before ping and add: they were delayed by it"
            assert ping_time < 1.5 and add_time < 1.5, (ping_time, add_time)
            assert texts(added) == ['{"result":42}']
        assert texts(slept[0]) == ["Slept 2 s"]


# ------------------------------------------------------------------------------ sampling, elicitation, roots


@pytest.mark.req("SA-01", "SA-04")
async def test_sampling_asks_the_client_and_returns_its_answer(connect, revision):
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
        result = await client.session.call_tool("test_sampling", {"prompt": "Test prompt for sampling"})
        assert result.is_error is False
        assert texts(result) == ["LLM response: This is a test response from the client"]
        [request] = client.server_messages("sampling/createMessage")
        assert request["params"] == {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Test prompt for sampling"}}],
            "maxTokens": 100,
        }
        assert len(asked) == 1 and asked[0].max_tokens == 100


def _accepting(answer: dict[str, Any], asked: list[Any]) -> Any:
    async def elicitation(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content=answer)

    return elicitation


@pytest.mark.req("EL-01", "EL-02", "EL-10")
async def test_elicitation_sends_the_form_and_returns_the_answer(connect, revision):
    asked: list[Any] = []
    answer = {"username": "testuser", "email": "test@example.com"}
    async with connect(elicitation_callback=_accepting(answer, asked)) as client:
        result = await client.session.call_tool("test_elicitation", {"message": "Please provide your information"})
        if not since(revision, "2025-06-18"):
            # Elicitation does not exist before 2025-06-18: a tool error, and nothing is sent.
            assert result.is_error is True
            assert texts(result) == [f"elicitation does not exist in protocol {revision}"]
            assert client.server_messages("elicitation/create") == []
            assert asked == []
            return
        assert result.is_error is False
        assert texts(result) == [
            'User response: <action: accept, content: {"username": "testuser", "email": "test@example.com"}>'
        ]
        [request] = client.server_messages("elicitation/create")
        params = {"message": "Please provide your information", "requestedSchema": ELICITATION_SCHEMA}
        if since(revision, "2025-11-25"):
            params["mode"] = "form"
        assert request["params"] == params
        assert asked[0].message == "Please provide your information"


@pytest.mark.req("EL-10")
async def test_elicitation_decline_and_cancel_are_reported(connect, revision):
    if not since(revision, "2025-06-18"):
        pytest.skip(f"elicitation does not exist in {revision} (the downgrade is asserted elsewhere)")
    actions = ["decline", "cancel"]

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action=actions.pop(0))

    async with connect(elicitation_callback=answer) as client:
        for action in ("decline", "cancel"):
            result = await client.session.call_tool("test_elicitation", {"message": "Who are you?"})
            assert result.is_error is False
            assert texts(result) == [f"User response: <action: {action}, content: null>"]


@pytest.mark.req("EL-10", "TL-10", "SA-01", "RT-01")
async def test_a_client_error_answer_becomes_a_tool_error(connect, revision):
    """The client's error is not relayed as the server's own error answer to tools/call."""

    async def sampling(context: Any, params: Any) -> types.ErrorData:
        return types.ErrorData(code=-32603, message="model unavailable")

    async def elicitation(context: Any, params: Any) -> types.ErrorData:
        return types.ErrorData(code=-32601, message="no form support here")

    async def roots(context: Any) -> types.ErrorData:
        return types.ErrorData(code=-32603, message="roots unavailable")

    callbacks = {"sampling_callback": sampling, "elicitation_callback": elicitation, "list_roots_callback": roots}
    async with connect(**callbacks) as client:
        calls = [("test_sampling", {"prompt": "hi"}, "model unavailable"), ("list_roots", {}, "roots unavailable")]
        if since(revision, "2025-06-18"):
            calls.append(("test_elicitation", {"message": "hi"}, "no form support here"))
        for name, arguments, reason in calls:
            # A -32601 relayed as the answer to tools/call would tell the client tools/call does not exist.
            result = await client.session.call_tool(name, arguments)
            assert result.is_error is True, name
            [message] = texts(result)
            assert reason in message, message
        assert [m for m in client.server_messages() if "error" in m] == []


@pytest.mark.req("EL-01", "EL-02")
async def test_elicitation_sep1034_defaults(connect, revision):
    asked: list[Any] = []
    answer = {"name": "Jane", "age": 31, "score": 88.5, "status": "inactive", "verified": False}
    async with connect(elicitation_callback=_accepting(answer, asked)) as client:
        result = await client.session.call_tool("test_elicitation_sep1034_defaults", {})
        if not since(revision, "2025-06-18"):
            assert result.is_error is True
            assert texts(result) == [f"elicitation does not exist in protocol {revision}"]
            assert client.server_messages("elicitation/create") == []
            return
        assert result.is_error is False
        assert texts(result) == [f"Elicitation completed: action=accept, content={json.dumps(answer)}"]
        [request] = client.server_messages("elicitation/create")
        assert request["params"]["requestedSchema"] == SEP1034_SCHEMA
        assert request["params"]["message"] == "Please review and update the form fields with defaults"


@pytest.mark.req("EL-01", "EL-02")
async def test_elicitation_sep1330_enums(connect, revision, wire):
    asked: list[Any] = []
    answer = {
        "untitledSingle": "option2",
        "titledSingle": "value3",
        "legacyEnum": "opt1",
        "untitledMulti": ["option1", "option3"],
        "titledMulti": ["value2"],
    }
    async with connect(elicitation_callback=_accepting(answer, asked)) as client:
        result = await client.session.call_tool("test_elicitation_sep1330_enums", {})
        if not since(revision, "2025-06-18"):
            assert result.is_error is True
            assert texts(result) == [f"elicitation does not exist in protocol {revision}"]
            assert client.server_messages("elicitation/create") == []
        elif not since(revision, "2025-11-25"):
            # multi-select and titled enums arrive in 2025-11-25: refused before anything is sent
            assert result.is_error is True
            [message] = texts(result)
            assert "needs protocol 2025-11-25" in message and revision in message, message
            assert client.server_messages("elicitation/create") == []
        else:
            assert result.is_error is False
            assert texts(result) == [f"Elicitation completed: action=accept, content={json.dumps(answer)}"]
            [sent] = client.server_messages("elicitation/create")
            assert sent["params"]["requestedSchema"] == SEP1330_SCHEMA
            assert sent["params"]["message"] == "Please choose from the enum options"
    # Whatever went out must be valid in the negotiated revision.
    check_wire_now(wire, client.log)


@pytest.mark.req("RT-01", "RT-04")
async def test_list_roots_asks_the_client(connect, revision):
    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(
            roots=[types.Root(uri="file:///tmp/project", name="project"), types.Root(uri="file:///tmp/other")]
        )

    async with connect(list_roots_callback=roots) as client:
        result = await client.session.call_tool("list_roots", {})
        assert result.is_error is False
        assert texts(result) == ["project file:///tmp/project\nfile:///tmp/other"]
        [request] = client.server_messages("roots/list")
        assert "id" in request


@pytest.mark.req("SA-01", "EL-01", "RT-01")
async def test_requests_to_a_client_without_the_capability_are_tool_errors(connect, revision):
    async with connect() as client:
        undeclared = "the client did not declare the {!r} capability, so this server cannot ask it for that"
        cases = {
            ("test_sampling", "prompt"): undeclared.format("sampling"),
            ("list_roots", None): undeclared.format("roots"),
        }
        elicit = (
            undeclared.format("elicitation")
            if since(revision, "2025-06-18")
            else f"elicitation does not exist in protocol {revision}"
        )
        cases[("test_elicitation", "message")] = elicit
        cases[("test_elicitation_sep1034_defaults", None)] = elicit
        cases[("test_elicitation_sep1330_enums", None)] = elicit
        for (name, argument), message in cases.items():
            with anyio.fail_after(5):  # no hang waiting for an answer that cannot come
                result = await client.session.call_tool(name, {argument: "x"} if argument else {})
            assert result.is_error is True, name
            assert texts(result) == [message], name
        # Nothing was asked of the client.
        assert [m for m in client.server_messages() if "method" in m and "id" in m] == []


# ------------------------------------------------------------------------------ resources


@pytest.mark.req("RS-01", "RS-03", "RS-04")
async def test_resources_list_templates_and_read(connect, revision):
    async with connect() as client:
        listed = await client.session.list_resources()
        assert [r.uri for r in listed.resources] == [r["uri"] for r in RESOURCES] + SKILL_FILES
        wire = client.result("resources/list")["resources"]
        assert wire[:len(RESOURCES)] == RESOURCES  # the contract's, then the example skills' files
        assert [r["uri"] for r in wire[len(RESOURCES):]] == SKILL_FILES

        templates = await client.session.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == ["test://template/{id}/data"]
        assert client.result("resources/templates/list") == {"resourceTemplates": TEMPLATES}

        text = await client.session.read_resource("test://static-text")
        assert isinstance(text.contents[0], types.TextResourceContents)
        assert client.result("resources/read", uri="test://static-text") == {
            "contents": [
                {
                    "uri": "test://static-text",
                    "mimeType": "text/plain",
                    "text": "This is the content of the static text resource.",
                }
            ]
        }

        blob = await client.session.read_resource("test://static-binary")
        assert isinstance(blob.contents[0], types.BlobResourceContents)
        assert blob.contents[0].blob == PNG_1X1
        assert client.result("resources/read", uri="test://static-binary") == {
            "contents": [{"uri": "test://static-binary", "mimeType": "image/png", "blob": PNG_1X1}]
        }

        await client.session.read_resource("test://template/123/data")
        assert client.result("resources/read", uri="test://template/123/data") == {
            "contents": [
                {
                    "uri": "test://template/123/data",
                    "mimeType": "application/json",
                    "text": '{"id":"123","templateTest":true,"data":"Data for ID: 123"}',
                }
            ]
        }

        watched = await client.session.read_resource("test://watched-resource")
        assert watched.contents[0].text == "Watched resource content"


@pytest.mark.req("RS-08", "RS-05")
async def test_unknown_resource_is_not_found_with_its_uri(connect, revision):
    async with connect() as client:
        for uri in ("test://no-such-resource", "test://template/123/other"):
            with pytest.raises(MCPError) as caught:
                await client.session.read_resource(uri)
            assert caught.value.error.code == -32002
            assert caught.value.error.data == {"uri": uri}


@pytest.mark.req("RS-10")
async def test_subscribed_resource_updates_reach_the_client_until_unsubscribed(connect, revision):
    async with connect() as client:
        # Not subscribed yet: an update is not sent.
        await client.session.call_tool("test_trigger_resource_update", {})
        assert client.server_messages("notifications/resources/updated") == []

        assert isinstance(await client.session.subscribe_resource("test://watched-resource"), types.EmptyResult)
        assert client.result("resources/subscribe", uri="test://watched-resource") == {}
        result = await client.session.call_tool("test_trigger_resource_update", {"uri": "test://watched-resource"})
        assert texts(result) == ["updated test://watched-resource"]
        [updated] = await client.inbox.wait_for(types.ResourceUpdatedNotification, 1)
        assert str(updated.params.uri) == "test://watched-resource"

        # Another resource's update does not reach this subscriber.
        await client.session.call_tool("test_trigger_resource_update", {"uri": "test://static-text"})
        assert len(client.server_messages("notifications/resources/updated")) == 1

        assert isinstance(await client.session.unsubscribe_resource("test://watched-resource"), types.EmptyResult)
        unsubscribe, _ = client.exchange("resources/unsubscribe", uri="test://watched-resource")
        await client.session.call_tool("test_trigger_resource_update", {"uri": "test://watched-resource"})
        assert client.server_messages_after("notifications/resources/updated", unsubscribe) == []
        assert [m["params"] for m in client.server_messages("notifications/resources/updated")] == [
            {"uri": "test://watched-resource"}
        ]


# ------------------------------------------------------------------------------ list_changed


@pytest.mark.req("TL-13", "PM-07")
async def test_list_changed_notifications_reach_the_client(connect, revision):
    async with connect() as client:
        result = await client.session.call_tool("test_trigger_tool_change", {})
        assert texts(result) == ["tool list changed"]
        await client.inbox.wait_for(types.ToolListChangedNotification, 1)
        assert len(client.server_messages("notifications/tools/list_changed")) >= 1
        names = {t.name for t in (await client.session.list_tools()).tools}
        assert "test_dynamic_tool" not in names and "add" in names

        result = await client.session.call_tool("test_trigger_prompt_change", {})
        assert texts(result) == ["prompt list changed"]
        await client.inbox.wait_for(types.PromptListChangedNotification, 1)
        assert len(client.server_messages("notifications/prompts/list_changed")) >= 1
        prompts = {p.name for p in (await client.session.list_prompts()).prompts}
        assert prompts == {p["name"] for p in LISTED_PROMPTS}
        for message in client.server_messages("notifications/tools/list_changed") + client.server_messages(
            "notifications/prompts/list_changed"
        ):
            assert message.get("params") in (None, {}), message


# ------------------------------------------------------------------------------ prompts


@pytest.mark.req("PM-01", "PM-03", "PM-04")
async def test_prompts_list_and_get(connect, revision):
    async with connect() as client:
        listed = await client.session.list_prompts()
        assert [p.name for p in listed.prompts] == [p["name"] for p in LISTED_PROMPTS]
        assert client.result("prompts/list") == {"prompts": LISTED_PROMPTS}

        simple = await client.session.get_prompt("test_simple_prompt")
        assert simple.messages[0].role == "user"
        assert client.result("prompts/get", name="test_simple_prompt") == {
            "description": "A simple prompt without arguments.",
            "messages": [{"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}],
        }
        request, _ = client.exchange("prompts/get", name="test_simple_prompt")
        assert "arguments" not in request["params"]

        await client.session.get_prompt("test_prompt_with_arguments", {"arg1": "testValue1", "arg2": "testValue2"})
        assert client.result("prompts/get", name="test_prompt_with_arguments")["messages"] == [
            {
                "role": "user",
                "content": {"type": "text", "text": "Prompt with arguments: arg1='testValue1', arg2='testValue2'"},
            }
        ]

        embedded = await client.session.get_prompt(
            "test_prompt_with_embedded_resource", {"resourceUri": "test://example-resource"}
        )
        assert isinstance(embedded.messages[0].content, types.EmbeddedResource)
        assert client.result("prompts/get", name="test_prompt_with_embedded_resource")["messages"] == [
            {
                "role": "user",
                "content": {
                    "type": "resource",
                    "resource": {
                        "uri": "test://example-resource",
                        "mimeType": "text/plain",
                        "text": "Embedded resource content for testing.",
                    },
                },
            },
            {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}},
        ]

        image = await client.session.get_prompt("test_prompt_with_image")
        assert isinstance(image.messages[0].content, types.ImageContent)
        assert client.result("prompts/get", name="test_prompt_with_image")["messages"] == [
            {"role": "user", "content": {"type": "image", "data": PNG_1X1, "mimeType": "image/png"}},
            {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}},
        ]

        # Nothing but the description and the messages, in every revision.
        for prompt in PROMPTS:
            result = client.result("prompts/get", name=prompt["name"])
            assert set(result) == {"description", "messages"}, result
            assert result["description"] == prompt["description"]


@pytest.mark.req("PM-05", "PM-06")
async def test_prompt_errors_are_invalid_params(connect, revision):
    async with connect() as client:
        with pytest.raises(MCPError) as caught:
            await client.session.get_prompt("test_prompt_with_arguments", {"arg1": "only one"})
        assert caught.value.error.code == -32602
        assert "arg2" in caught.value.error.message

        with pytest.raises(MCPError) as caught:
            await client.session.get_prompt("no_such_prompt")
        assert caught.value.error.code == -32602
        assert caught.value.error.message == "Unknown prompt: no_such_prompt"


# ------------------------------------------------------------------------------ completion


@pytest.mark.req("CP-01", "CP-02", "CP-03")
async def test_completion_for_a_prompt_argument_and_a_template_variable(connect, revision):
    async with connect() as client:
        prompt = types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments")
        completed = await client.session.complete(prompt, {"name": "arg1", "value": "pa"})
        assert completed.completion.values == ["paris", "park", "party"]
        assert client.result("completion/complete")["completion"] == {
            "values": ["paris", "park", "party"],
            "total": 3,
            "hasMore": False,
        }
        assert (await client.session.complete(prompt, {"name": "arg1", "value": "pari"})).completion.values == [
            "paris"
        ]
        assert (await client.session.complete(prompt, {"name": "arg1", "value": "x"})).completion.values == []

        template = types.ResourceTemplateReference(type="ref/resource", uri="test://template/{id}/data")
        assert (await client.session.complete(template, {"name": "id", "value": ""})).completion.values == [
            "1",
            "2",
            "3",
            "4",
            "5",
        ]
        assert (await client.session.complete(template, {"name": "id", "value": "3"})).completion.values == ["3"]

        with pytest.raises(MCPError) as caught:
            await client.session.complete(
                types.PromptReference(type="ref/prompt", name="no_such_prompt"), {"name": "arg1", "value": ""}
            )
        assert caught.value.error.code == -32602


# ------------------------------------------------------------------------------ batches (raw stdio)
# The mcp client cannot send a JSON-RPC batch, so these speak to the server directly.


def _initialize(revision: str) -> list[dict[str, Any]]:
    return [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": revision, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]


def _serve_lines(wire: Any, messages: list[Any]) -> list[Any]:
    """Send ``messages`` (one per line), close stdin, and return what the server wrote."""
    argv = wire.command(mcpkit_command("serve"))
    data = "".join(json.dumps(m) + "\n" for m in messages).encode()
    proc = subprocess.run(argv, input=data, capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return [json.loads(line) for line in proc.stdout.decode().splitlines() if line.strip()]


@pytest.mark.req("BP-13", "LC-07")
def test_batch_is_answered_with_one_array_under_2025_03_26(wire):
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}},
    ]
    initialize_in_batch = [_initialize("2025-03-26")[0] | {"id": 3}]
    answers = _serve_lines(wire, _initialize("2025-03-26") + [batch, initialize_in_batch])
    assert len(answers) == 3
    assert answers[0]["result"]["protocolVersion"] == "2025-03-26"
    assert isinstance(answers[1], list)
    assert sorted(answers[1], key=lambda m: m["id"]) == [
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": '{"result":3}'}]}},
    ]
    # initialize must not be part of a batch.
    assert isinstance(answers[2], list) and len(answers[2]) == 1
    assert answers[2][0]["id"] == 3 and answers[2][0]["error"]["code"] == -32600


@pytest.mark.req("BP-13")
@pytest.mark.parametrize("revision", ["2024-11-05", "2025-06-18", "2025-11-25"])
def test_batch_is_invalid_request_outside_2025_03_26(wire, revision):
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]
    answers = _serve_lines(wire, _initialize(revision) + [batch, {"jsonrpc": "2.0", "id": 3, "method": "ping"}])
    assert answers[0]["result"]["protocolVersion"] == revision
    assert len(answers) == 3
    assert isinstance(answers[1], dict) and answers[1]["error"]["code"] == -32600
    assert "id" not in answers[1]
    # The session goes on.
    assert answers[2] == {"jsonrpc": "2.0", "id": 3, "result": {}}
