"""The conformance contract (CONTRACT.md §2), value by value, over Streamable HTTP.

The official suite checks little of what its contract specifies (§4: "exact texts, default
values and field names in results are mostly unchecked"). This table checks every exact value
§2 gives (texts, base64 payloads, MIME types, embedded resource fields, log data, progress
values, elicitation schemas, the 2020-12 input schema, resource and prompt results,
completion), one test case per value, against the reference server's ASGI app driven the way
the suite drives it: a 2025-11-25 session whose answers come as SSE on each POST, with
notifications and server->client requests on the same stream. Every message is validated
against the 2025-11-25 schema through ``wire``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.contract import ELICITATION_SCHEMA, JSON_SCHEMA_2020_12_INPUT, PNG_1X1, SEP1034_SCHEMA, SEP1330_SCHEMA, WAV_MIN
from tests.test_http import Clients, McpHttp, clients, jsonrpc  # noqa: F401 - clients is a fixture

SAMPLING_ANSWER = {
    "role": "assistant",
    "content": {"type": "text", "text": "This is a test response from the client"},
    "model": "test-model",
    "stopReason": "endTurn",
}
ELICITATION_ANSWER = {"action": "accept", "content": {"username": "testuser", "email": "test@example.com"}}
SEP1034_ANSWER = {"action": "accept", "content": {"name": "Jane", "age": 31, "score": 88.5, "status": "pending", "verified": False}}
SEP1330_ANSWER = {"action": "accept", "content": {"untitledSingle": "option1"}}



# ------------------------------------------------------------------------------ driving a call


@dataclass
class Exchange:
    """A request's whole stream: the server's requests (answered), notifications, the final answer."""

    asked: list[dict[str, Any]]
    notes: list[dict[str, Any]]
    answer: dict[str, Any]

    @property
    def result(self) -> Any:
        assert "error" not in self.answer, self.answer
        return self.answer["result"]


async def exchange(client: McpHttp, method: str, params: dict[str, Any] | None, answers: dict[str, Any] | None = None) -> Exchange:
    """POST one request; answer server->client requests (POSTed back with the session) as they come."""
    rid = client.next_id()
    reply = await client.post(jsonrpc(method, params, rid))
    assert reply.status == 200 and reply.content_type == "text/event-stream", reply.headers
    asked, notes = [], []
    while (event := await reply.next_event()) is not None:
        message = client.event_message(event)
        if message is None:
            continue  # the priming event
        if "method" in message and "id" in message:
            asked.append(message)
            answer = (answers or {})[message["method"]]
            posted = await client.post({"jsonrpc": "2.0", "id": message["id"], "result": answer})
            assert posted.status == 202, posted.status
        elif "method" in message:
            notes.append(message)
        else:
            assert message["id"] == rid, message
            return Exchange(asked, notes, message)
    raise AssertionError("the stream ended without the response")


Fetch = Callable[[McpHttp], Awaitable[Any]]


def tool(name: str, arguments: dict[str, Any] | None = None, *, answers: dict[str, Any] | None = None, token: Any = None, omit_arguments: bool = False) -> Callable[[McpHttp], Awaitable[Exchange]]:
    async def run(client: McpHttp) -> Exchange:
        params: dict[str, Any] = {"name": name}
        if not omit_arguments:
            params["arguments"] = arguments or {}
        if token is not None:
            params["_meta"] = {"progressToken": token}
        return await exchange(client, "tools/call", params, answers)

    return run


def request(method: str, params: dict[str, Any] | None = None) -> Callable[[McpHttp], Awaitable[Exchange]]:
    async def run(client: McpHttp) -> Exchange:
        return await exchange(client, method, params)

    return run


def then(fetch: Callable[[McpHttp], Awaitable[Exchange]], pick: Callable[[Exchange], Any]) -> Fetch:
    async def run(client: McpHttp) -> Any:
        return pick(await fetch(client))

    return run


def result_of(fetch: Callable[[McpHttp], Awaitable[Exchange]], *path: Any) -> Fetch:
    def pick(ex: Exchange) -> Any:
        value = ex.result
        for key in path:
            value = value[key]
        return value

    return then(fetch, pick)


async def _logging(client: McpHttp) -> Exchange:
    await exchange(client, "logging/setLevel", {"level": "debug"})  # as the suite does
    return await tool("test_tool_with_logging")(client)


async def _subscribe_capability(client: McpHttp) -> Any:
    return client.capabilities["resources"].get("subscribe")


async def _subscribe_then_unsubscribe(client: McpHttp) -> Any:
    assert (await exchange(client, "resources/subscribe", {"uri": "test://watched-resource"})).result == {}
    return (await exchange(client, "resources/unsubscribe", {"uri": "test://watched-resource"})).result


def _capability(name: str) -> Fetch:
    async def run(client: McpHttp) -> Any:
        return client.capabilities.get(name, "<absent>")

    return run


def _listed(method: str, key: str, field: str, value: str) -> Fetch:
    async def run(client: McpHttp) -> Any:
        items = (await exchange(client, method, None)).result[key]
        found = [item for item in items if item.get(field) == value]
        assert len(found) <= 1
        return found[0] if found else None

    return run


def _every_listed(method: str, key: str, check: Callable[[dict[str, Any]], bool]) -> Fetch:
    async def run(client: McpHttp) -> Any:
        items = (await exchange(client, method, None)).result[key]
        return [item.get("name") or item.get("uri") for item in items if not check(item)]

    return run


SAMPLING = tool("test_sampling", {"prompt": "Test prompt for sampling"}, answers={"sampling/createMessage": SAMPLING_ANSWER})
ELICITATION = tool(
    "test_elicitation", {"message": "Please provide your information"}, answers={"elicitation/create": ELICITATION_ANSWER}
)
SEP1034 = tool("test_elicitation_sep1034_defaults", answers={"elicitation/create": SEP1034_ANSWER})
SEP1330 = tool("test_elicitation_sep1330_enums", answers={"elicitation/create": SEP1330_ANSWER})
PROGRESS = tool("test_tool_with_progress", token="progress-test-1")
TEMPLATE_READ = request("resources/read", {"uri": "test://template/123/data"})


def _only(items: list[Any]) -> Any:
    assert len(items) == 1, items
    return items[0]


# (case id, what to fetch, the exact value CONTRACT.md §2 gives)
CONTRACT: list[tuple[str, Fetch, Any]] = [
    # §2.1 capabilities and protocol methods
    ("capabilities.tools", _capability("tools"), {"listChanged": True}),
    ("capabilities.resources.subscribe", _subscribe_capability, True),
    ("capabilities.prompts", _capability("prompts"), {"listChanged": True}),
    ("capabilities.logging", _capability("logging"), {}),
    ("capabilities.completions", _capability("completions"), {}),
    ("ping", result_of(request("ping")), {}),
    ("logging/setLevel info", result_of(request("logging/setLevel", {"level": "info"})), {}),
    (
        "completion/complete test_prompt_with_arguments arg1",
        result_of(
            request(
                "completion/complete",
                {"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "test"}},
            )
        ),
        {"completion": {"values": [], "total": 0, "hasMore": False}},
    ),
    ("resources/subscribe watched-resource", result_of(request("resources/subscribe", {"uri": "test://watched-resource"})), {}),
    ("resources/unsubscribe watched-resource", _subscribe_then_unsubscribe, {}),
    # §2.2 tools
    (
        "test_simple_text (no arguments key)",
        result_of(tool("test_simple_text", omit_arguments=True)),
        {"content": [{"type": "text", "text": "This is a simple text response for testing."}]},
    ),
    ("test_image_content result", result_of(tool("test_image_content")), {"content": [{"type": "image", "data": PNG_1X1, "mimeType": "image/png"}]}),
    ("test_image_content data", result_of(tool("test_image_content"), "content", 0, "data"), PNG_1X1),
    ("test_image_content mimeType", result_of(tool("test_image_content"), "content", 0, "mimeType"), "image/png"),
    ("test_audio_content result", result_of(tool("test_audio_content")), {"content": [{"type": "audio", "data": WAV_MIN, "mimeType": "audio/wav"}]}),
    ("test_audio_content data", result_of(tool("test_audio_content"), "content", 0, "data"), WAV_MIN),
    ("test_audio_content mimeType", result_of(tool("test_audio_content"), "content", 0, "mimeType"), "audio/wav"),
    (
        "test_embedded_resource result",
        result_of(tool("test_embedded_resource")),
        {
            "content": [
                {
                    "type": "resource",
                    "resource": {"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."},
                }
            ]
        },
    ),
    ("test_embedded_resource uri", result_of(tool("test_embedded_resource"), "content", 0, "resource", "uri"), "test://embedded-resource"),
    ("test_embedded_resource mimeType", result_of(tool("test_embedded_resource"), "content", 0, "resource", "mimeType"), "text/plain"),
    (
        "test_embedded_resource text",
        result_of(tool("test_embedded_resource"), "content", 0, "resource", "text"),
        "This is an embedded resource content.",
    ),
    (
        "test_multiple_content_types result",
        result_of(tool("test_multiple_content_types")),
        {
            "content": [
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image", "data": PNG_1X1, "mimeType": "image/png"},
                {
                    "type": "resource",
                    "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json", "text": '{"test":"data","value":123}'},
                },
            ]
        },
    ),
    (
        "test_tool_with_logging data",
        then(_logging, lambda ex: [n["params"]["data"] for n in ex.notes if n["method"] == "notifications/message"]),
        ["Tool execution started", "Tool processing data", "Tool execution completed"],
    ),
    ("test_tool_with_logging count", then(_logging, lambda ex: len(ex.notes)), 3),
    ("test_tool_with_logging levels", then(_logging, lambda ex: [n["params"]["level"] for n in ex.notes]), ["info"] * 3),
    (
        "test_tool_with_logging result",
        then(_logging, lambda ex: ex.result),
        {"content": [{"type": "text", "text": "Tool with logging executed successfully"}]},
    ),
    ("test_tool_with_progress values", then(PROGRESS, lambda ex: [n["params"]["progress"] for n in ex.notes]), [0, 50, 100]),
    ("test_tool_with_progress totals", then(PROGRESS, lambda ex: [n["params"]["total"] for n in ex.notes]), [100, 100, 100]),
    ("test_tool_with_progress token", then(PROGRESS, lambda ex: {n["params"]["progressToken"] for n in ex.notes}), {"progress-test-1"}),
    (
        "test_tool_with_progress messages",
        then(PROGRESS, lambda ex: [n["params"]["message"] for n in ex.notes]),
        ["Completed step 0 of 100", "Completed step 50 of 100", "Completed step 100 of 100"],
    ),
    ("test_tool_with_progress result", then(PROGRESS, lambda ex: ex.result), {"content": [{"type": "text", "text": "progress-test-1"}]}),
    (
        "test_error_handling result",
        result_of(tool("test_error_handling")),
        # CONTRACT.md's value, with the error envelope every mcpkit tool error carries in _meta
        {"content": [{"type": "text", "text": "This tool intentionally returns an error for testing"}], "isError": True,
         "_meta": {"dev.mcpkit/error": {"code": "E_INTERNAL", "details": None, "retryable": False,
                                        "message": "This tool intentionally returns an error for testing",
                                        "suggestedFix": None}}},
    ),
    ("test_sampling request method", then(SAMPLING, lambda ex: [a["method"] for a in ex.asked]), ["sampling/createMessage"]),
    (
        "test_sampling request params",
        then(SAMPLING, lambda ex: _only(ex.asked)["params"]),
        {"messages": [{"role": "user", "content": {"type": "text", "text": "Test prompt for sampling"}}], "maxTokens": 100},
    ),
    (
        "test_sampling result",
        then(SAMPLING, lambda ex: ex.result),
        {"content": [{"type": "text", "text": "LLM response: This is a test response from the client"}]},
    ),
    ("test_elicitation request method", then(ELICITATION, lambda ex: [a["method"] for a in ex.asked]), ["elicitation/create"]),
    ("test_elicitation message", then(ELICITATION, lambda ex: _only(ex.asked)["params"]["message"]), "Please provide your information"),
    ("test_elicitation requestedSchema", then(ELICITATION, lambda ex: _only(ex.asked)["params"]["requestedSchema"]), ELICITATION_SCHEMA),
    (
        "test_elicitation result",
        then(ELICITATION, lambda ex: ex.result["content"][0]["text"]),
        'User response: <action: accept, content: {"username": "testuser", "email": "test@example.com"}>',
    ),
    ("test_elicitation_sep1034_defaults requestedSchema", then(SEP1034, lambda ex: _only(ex.asked)["params"]["requestedSchema"]), SEP1034_SCHEMA),
    (
        "test_elicitation_sep1034_defaults result",
        then(SEP1034, lambda ex: ex.result["content"][0]["text"]),
        "Elicitation completed: action=accept, content=" + json.dumps(SEP1034_ANSWER["content"]),
    ),
    ("test_elicitation_sep1330_enums requestedSchema", then(SEP1330, lambda ex: _only(ex.asked)["params"]["requestedSchema"]), SEP1330_SCHEMA),
    (
        "test_elicitation_sep1330_enums result",
        then(SEP1330, lambda ex: ex.result["content"][0]["text"]),
        "Elicitation completed: action=accept, content=" + json.dumps(SEP1330_ANSWER["content"]),
    ),
    (
        "json_schema_2020_12_tool inputSchema",
        then(_listed("tools/list", "tools", "name", "json_schema_2020_12_tool"), lambda t: t["inputSchema"]),
        JSON_SCHEMA_2020_12_INPUT,
    ),
    (
        "json_schema_2020_12_tool description",
        then(_listed("tools/list", "tools", "name", "json_schema_2020_12_tool"), lambda t: t["description"]),
        "Tool with JSON Schema 2020-12 features",
    ),
    (
        "test_reconnection result",
        result_of(tool("test_reconnection")),
        {"content": [{"type": "text", "text": "Reconnection test completed successfully"}]},
    ),
    (
        "tools/list: every tool has a name, a description and an inputSchema",
        _every_listed("tools/list", "tools", lambda t: bool(t.get("name")) and bool(t.get("description")) and isinstance(t.get("inputSchema"), dict)),
        [],
    ),
    # §2.3 resources
    (
        "read test://static-text",
        result_of(request("resources/read", {"uri": "test://static-text"})),
        {"contents": [{"uri": "test://static-text", "mimeType": "text/plain", "text": "This is the content of the static text resource."}]},
    ),
    (
        "read test://static-binary",
        result_of(request("resources/read", {"uri": "test://static-binary"})),
        {"contents": [{"uri": "test://static-binary", "mimeType": "image/png", "blob": PNG_1X1}]},
    ),
    (
        "read test://template/123/data",
        result_of(TEMPLATE_READ),
        {
            "contents": [
                {"uri": "test://template/123/data", "mimeType": "application/json", "text": '{"id":"123","templateTest":true,"data":"Data for ID: 123"}'}
            ]
        },
    ),
    (
        "read test://template/123/data as JSON",
        then(TEMPLATE_READ, lambda ex: json.loads(ex.result["contents"][0]["text"])),
        {"id": "123", "templateTest": True, "data": "Data for ID: 123"},
    ),
    (
        "read test://watched-resource",
        result_of(request("resources/read", {"uri": "test://watched-resource"})),
        {"contents": [{"uri": "test://watched-resource", "mimeType": "text/plain", "text": "Watched resource content"}]},
    ),
    ("resources/list static-text mimeType", then(_listed("resources/list", "resources", "uri", "test://static-text"), lambda r: r["mimeType"]), "text/plain"),
    ("resources/list static-binary mimeType", then(_listed("resources/list", "resources", "uri", "test://static-binary"), lambda r: r["mimeType"]), "image/png"),
    (
        "resources/list watched-resource mimeType",
        then(_listed("resources/list", "resources", "uri", "test://watched-resource"), lambda r: r["mimeType"]),
        "text/plain",
    ),
    ("resources/list leaves the template out", _listed("resources/list", "resources", "uri", "test://template/{id}/data"), None),
    (
        "resources/templates/list has the template",
        then(_listed("resources/templates/list", "resourceTemplates", "uriTemplate", "test://template/{id}/data"), lambda t: t["uriTemplate"]),
        "test://template/{id}/data",
    ),
    ("resources/list: every resource has a uri and a name", _every_listed("resources/list", "resources", lambda r: bool(r.get("uri")) and bool(r.get("name"))), []),
    # §2.4 prompts
    (
        "get test_simple_prompt",
        result_of(request("prompts/get", {"name": "test_simple_prompt"}), "messages"),
        [{"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}],
    ),
    (
        "get test_prompt_with_arguments",
        result_of(request("prompts/get", {"name": "test_prompt_with_arguments", "arguments": {"arg1": "testValue1", "arg2": "testValue2"}}), "messages"),
        [{"role": "user", "content": {"type": "text", "text": "Prompt with arguments: arg1='testValue1', arg2='testValue2'"}}],
    ),
    (
        "get test_prompt_with_embedded_resource",
        result_of(request("prompts/get", {"name": "test_prompt_with_embedded_resource", "arguments": {"resourceUri": "test://example-resource"}}), "messages"),
        [
            {
                "role": "user",
                "content": {
                    "type": "resource",
                    "resource": {"uri": "test://example-resource", "mimeType": "text/plain", "text": "Embedded resource content for testing."},
                },
            },
            {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}},
        ],
    ),
    (
        "get test_prompt_with_image",
        result_of(request("prompts/get", {"name": "test_prompt_with_image"}), "messages"),
        [
            {"role": "user", "content": {"type": "image", "data": PNG_1X1, "mimeType": "image/png"}},
            {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}},
        ],
    ),
    (
        "prompts/list test_prompt_with_arguments arguments",
        then(_listed("prompts/list", "prompts", "name", "test_prompt_with_arguments"), lambda p: p["arguments"]),
        [
            {"name": "arg1", "description": "First test argument", "required": True},
            {"name": "arg2", "description": "Second test argument", "required": True},
        ],
    ),
    (
        "prompts/list test_prompt_with_embedded_resource arguments",
        then(_listed("prompts/list", "prompts", "name", "test_prompt_with_embedded_resource"), lambda p: [(a["name"], a["required"]) for a in p["arguments"]]),
        [("resourceUri", True)],
    ),
    ("prompts/list: every prompt has a name and a description", _every_listed("prompts/list", "prompts", lambda p: bool(p.get("name")) and bool(p.get("description"))), []),
]
#: which checklist requirements a case covers, by the start of its id (first match wins)
REQUIREMENTS: list[tuple[str, tuple[str, ...]]] = [
    ("capabilities.tools", ("LC-06", "TL-01")),
    ("capabilities.resources", ("LC-06", "RS-01", "RS-10")),
    ("capabilities.prompts", ("LC-06", "PM-01")),
    ("capabilities.logging", ("LC-06", "LG-01")),
    ("capabilities.completions", ("LC-06", "CP-01")),
    ("ping", ("PG-01",)),
    ("logging/setLevel", ("LG-02",)),
    ("completion/complete", ("CP-02",)),
    ("resources/subscribe", ("RS-10",)),
    ("resources/unsubscribe", ("RS-10",)),
    ("test_embedded_resource", ("TL-09", "TL-12")),
    ("test_multiple_content_types", ("TL-09", "TL-12")),
    ("test_tool_with_logging", ("LG-02", "LG-04", "HL-07")),
    ("test_tool_with_progress", ("PR-01", "PR-03", "PR-04", "HL-07")),
    ("test_error_handling", ("TL-10",)),
    ("test_sampling", ("SA-01", "SA-04", "HL-07")),
    ("test_elicitation", ("EL-01", "EL-02", "HL-07")),
    ("json_schema_2020_12_tool", ("TL-05", "JS-04")),
    ("tools/list", ("TL-05",)),
    ("test_", ("TL-09",)),
    ("read test://static-binary", ("RS-03", "RS-04")),
    ("read ", ("RS-03",)),
    ("resources/", ("RS-03",)),
    ("get test_prompt_with_image", ("PM-03", "PM-04")),
    ("get test_prompt_with_embedded_resource", ("PM-03", "PM-04")),
    ("get ", ("PM-03",)),
    ("prompts/list", ("PM-03",)),
]


def _case(case_id: str, fetch: Fetch, expected: Any) -> Any:
    ids = next(req for prefix, req in REQUIREMENTS if case_id.startswith(prefix))
    return pytest.param(fetch, expected, id=case_id, marks=pytest.mark.req(*ids))


@pytest.mark.asyncio
@pytest.mark.parametrize("fetch, expected", [_case(*case) for case in CONTRACT])
async def test_contract_value(clients: Clients, fetch: Fetch, expected: Any) -> None:
    client = clients.asgi(clients.app())
    await client.initialize()
    assert await fetch(client) == expected
