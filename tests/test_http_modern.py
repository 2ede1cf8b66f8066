"""2026-07-28 over Streamable HTTP: sessionless POSTs with their headers, statuses and streams."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.test_http import aio, clients  # noqa: F401  (fixture)

V = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}}


def _msg(rid: Any, method: str, params: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> dict:
    p = dict(params or {})
    p["_meta"] = {**META, **(meta or {})}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": p}


def _headers(method: str, name: str | None = None, **extra: str | None) -> dict[str, str | None]:
    h: dict[str, str | None] = {"mcp_protocol_version": V, "mcp_method": method}
    if name is not None:
        h["mcp_name"] = name
    h.update(extra)
    return h


async def _answer(client: Any, reply: Any) -> dict[str, Any]:
    body = await reply.json()
    client.wire.record(body, V, client._methods.get(body.get("id")))
    return body


@pytest.fixture
def modern(clients):  # noqa: F811
    app = clients.app()
    client = clients.asgi(app)
    client.revision = V  # no handshake: every POST names its revision (and answers are checked against it)
    return app, client


@aio
@pytest.mark.req("HM-01", "HM-04", "HM-23", "VN-03", "BP-14")
async def test_discover_and_a_call_need_no_session(modern) -> None:
    app, client = modern
    reply = await client.post(_msg(1, "server/discover"), **_headers("server/discover"))
    assert reply.status == 200 and "mcp-session-id" not in reply.headers
    body = await _answer(client, reply)
    assert V in body["result"]["supportedVersions"] and body["result"]["resultType"] == "complete"
    reply = await client.post(_msg(2, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}),
                              **_headers("tools/call", "add"))
    body = await _answer(client, reply)
    assert body["result"]["structuredContent"] == {"result": 5}
    assert app.sessions == {}  # nothing outlives the POST


@aio
@pytest.mark.req("HM-11", "HM-15", "HM-18", "HM-22")
@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({"mcp_method": None}, "Mcp-Method header is required"),
        ({"mcp_method": "tools/list"}, "Mcp-Method header does not match"),
        ({"mcp_method": "TOOLS/CALL"}, "Mcp-Method header does not match"),
        ({"mcp_name": None}, "Mcp-Name header is required"),
        ({"mcp_name": "echo"}, "Mcp-Name header does not match"),
    ],
)
async def test_standard_headers_must_match_the_body(modern, headers: dict[str, Any], why: str) -> None:
    _, client = modern
    message = _msg(7, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})
    reply = await client.post(message, **{**_headers("tools/call", "add"), **headers})
    assert reply.status == 400
    body = await _answer(client, reply)
    assert body["id"] == 7 and body["error"]["code"] == -32020 and why in body["error"]["message"]


@aio
@pytest.mark.req("HM-15", "HM-16")
async def test_padded_and_base64_names_are_accepted(modern) -> None:
    _, client = modern
    for name in ("  add ", "=?base64?" + base64.b64encode(b"add").decode() + "?="):
        reply = await client.post(_msg(1, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}),
                                  **_headers("tools/call", name))
        assert reply.status == 200, name
        assert (await _answer(client, reply))["result"]["structuredContent"] == {"result": 2}


@aio
@pytest.mark.req("HM-19", "HM-20", "HM-16")
@pytest.mark.parametrize(
    ("region", "header", "status"),
    [
        ("Hello", "=?base64?SGVsbG8=?=", 200),
        ("Hello", "=?base64?SGVsbG8?=", 400),
        ("Hello", "=?base64?SGVs!!!bG8=?=", 400),
        ("SGVsbG8=", "SGVsbG8=", 200),
        ("=?base64?SGVsbG8=", "=?base64?SGVsbG8=", 200),
        ("test-value", None, 400),
        ("Hello", "Bye", 400),
    ],
)
async def test_parameters_mirrored_into_headers(modern, region: str, header: str | None, status: int) -> None:
    _, client = modern
    message = _msg(3, "tools/call", {"name": "test_x_mcp_header", "arguments": {"region": region}})
    reply = await client.post(message, **_headers("tools/call", "test_x_mcp_header", mcp_param_region=header))
    assert reply.status == status
    body = await _answer(client, reply)
    if status == 200:
        assert body["result"]["content"] == [{"type": "text", "text": f"region={region}"}]
    else:
        assert body["error"]["code"] == -32020


@aio
@pytest.mark.req("HM-12", "HM-13", "HM-22", "VN-02", "MT-05", "MT-08", "PG-03", "RS-08")
async def test_errors_carry_their_http_status(modern) -> None:
    _, client = modern
    cases = [
        (_msg(1, "ping"), _headers("ping"), 404, -32601),
        (_msg(2, "resources/read", {"uri": "test://nope"}), _headers("resources/read", "test://nope"), 400, -32602),
        (_msg(3, "tools/call", {"name": "test_missing_capability", "arguments": {}}),
         _headers("tools/call", "test_missing_capability"), 400, -32021),
    ]
    for message, headers, status, code in cases:
        reply = await client.post(message, **headers)
        assert reply.status == status, message["method"]
        body = await _answer(client, reply)
        assert body["error"]["code"] == code and body["id"] == message["id"]
    odd = {"jsonrpc": "2.0", "id": 4, "method": "tools/list",
           "params": {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}}
    reply = await client.post(odd, mcp_protocol_version="2099-01-01", mcp_method="tools/list")
    assert reply.status == 400
    body = await _answer(client, reply)
    assert body["error"]["code"] == -32022 and body["error"]["data"]["requested"] == "2099-01-01"


@aio
@pytest.mark.req("HM-05", "PR-07", "LG-03")
async def test_progress_rides_the_request_stream(modern) -> None:
    _, client = modern
    message = _msg(9, "tools/call", {"name": "test_tool_with_progress", "arguments": {}}, {"progressToken": "t"})
    reply = await client.post(message, **_headers("tools/call", "test_tool_with_progress"))
    assert reply.status == 200 and reply.content_type == "text/event-stream"
    messages = [m for m in await client.messages(reply)]
    assert [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"] == [0, 50, 100]
    assert messages[-1]["id"] == 9 and messages[-1]["result"]["resultType"] == "complete"


@aio
@pytest.mark.req("SB-04", "SB-06", "SB-07", "HM-06", "HM-23")
async def test_a_listen_stream_over_http(modern) -> None:
    app, client = modern
    listen = _msg("sub-1", "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    stream = await client.post(listen, **_headers("subscriptions/listen"))
    assert stream.status == 200 and stream.content_type == "text/event-stream"
    ack = client.event_message(await stream.next_event())
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "sub-1"
    # another POST changes the tool list: the change arrives on the listen stream, tagged
    reply = await client.post(_msg(2, "tools/call", {"name": "test_trigger_tool_change", "arguments": {}},
                                   {"progressToken": "p"}), **_headers("tools/call", "test_trigger_tool_change"))
    assert (await _answer(client, reply))["result"]["content"][0]["text"] == "tool list changed"
    changed = client.event_message(await stream.next_event())
    assert changed["method"] == "notifications/tools/list_changed"
    assert changed["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "sub-1"}
    assert len(app.server._listeners) == 1
    await stream.disconnect()  # closing the stream ends the subscription (SB-06)
    for _ in range(50):
        if not app.server._listeners:
            break
        import asyncio

        await asyncio.sleep(0.01)
    assert not app.server._listeners
