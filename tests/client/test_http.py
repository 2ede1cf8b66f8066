"""The client over Streamable HTTP (both eras) and legacy HTTP+SSE, against ``mcpkit serve --http``."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mcpkit.client import Client, ClientError, HttpRpcError, RpcError
from tests.client.servers import reference_http

aio = pytest.mark.asyncio
MODERN = "2026-07-28"
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m", "stopReason": "endTurn"}


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with reference_http() as url:
        yield url


def spy_on(client: Client) -> list[dict[str, Any]]:
    """Every message the client sends from now on."""
    sent: list[dict[str, Any]] = []
    original = client.transport.send

    async def spy(message: dict[str, Any]) -> None:
        sent.append(message)
        await original(message)

    client.transport.send = spy  # type: ignore[method-assign]
    return sent


async def cancel_a_countdown(client: Client) -> None:
    started = asyncio.Event()
    call = asyncio.ensure_future(client.call_tool("countdown", {"seconds": 30}, progress=lambda *a: started.set()))
    await asyncio.wait_for(started.wait(), 10)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


@aio
@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
async def test_each_handshake_revision_over_http(base: str, version: str) -> None:
    async with Client(f"{base}/mcp", protocol_version=version) as client:
        assert client.transport.kind == "http"
        assert client.protocol_version == version
        assert re.fullmatch(r"[0-9a-f]{32}", client.transport.session_id)
        assert client.server_info["name"] == "mcpkit-reference"
        assert (await client.call_tool("echo", {"text": "hi"}))["content"] == [{"type": "text", "text": "hi"}]


@aio
async def test_progress_and_server_requests_over_http(base: str) -> None:
    seen: list[tuple[Any, ...]] = []
    elicited = {"action": "accept", "content": {"username": "u", "email": "u@example.com"}}
    async with Client(f"{base}/mcp", sampling_handler=lambda p: SAMPLED, elicitation_handler=lambda p: elicited,
                      roots=[{"uri": "file:///r", "name": "r"}]) as client:
        await client.call_tool("test_tool_with_progress", progress=lambda *a: seen.append(a))
        assert [s[0] for s in seen] == [0, 50, 100]
        assert (await client.call_tool("test_sampling", {"prompt": "?"}))["content"][0]["text"] == "LLM response: Paris"
        result = await client.call_tool("test_elicitation", {"message": "who"})
        assert result["content"][0]["text"].startswith("User response: <action: accept")
        assert (await client.call_tool("list_roots"))["content"][0]["text"] == "r file:///r"


@aio
async def test_the_standalone_stream_brings_list_changed(base: str) -> None:
    changed = asyncio.Event()
    count = 0

    def note(message: dict[str, Any]) -> None:
        nonlocal count
        if message["method"] == "notifications/tools/list_changed":
            count += 1
            if count == 2:
                changed.set()

    async with Client(f"{base}/mcp", on_notification=note) as client:
        # the GET stream opens in the background after initialize: wait until it is there
        for _ in range(500):
            if client.transport.standalone_status is not None:
                break
            await asyncio.sleep(0.01)
        assert client.transport.standalone_status == 200
        await client.call_tool("test_trigger_tool_change")
        await asyncio.wait_for(changed.wait(), 10)


@aio
async def test_cancelling_over_http_sends_notifications_cancelled(base: str) -> None:
    async with Client(f"{base}/mcp") as client:
        sent = spy_on(client)
        await cancel_a_countdown(client)
        assert sent[1] == {"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": sent[0]["id"], "reason": "cancelled by the client"}}
        assert await client.ping() == {}


@aio
async def test_close_ends_the_session(base: str) -> None:
    async with Client(f"{base}/mcp") as client:
        session = client.transport.session_id
        version = client.protocol_version
    assert client.transport.delete_status == 200
    async with httpx.AsyncClient() as http:
        headers = {"Accept": "application/json, text/event-stream", "Mcp-Session-Id": session,
                   "MCP-Protocol-Version": version}
        answer = await http.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers)
    assert answer.status_code == 404


@aio
async def test_http_errors_keep_status_and_headers(base: str) -> None:
    client = Client(f"{base}/mcp", headers={"Origin": "http://evil.example"})
    with pytest.raises(ClientError) as err:
        await client.__aenter__()
    assert err.value.status == 403
    assert "content-type" in err.value.headers
    async with Client(f"{base}/mcp") as client:
        with pytest.raises(ClientError) as err:
            await client.send_raw(b"{oops")
        assert err.value.status == 400
        assert [m["error"]["code"] for m in client.unmatched] == [-32700]
    with pytest.raises(ClientError, match="failed"):
        async with Client("http://127.0.0.1:9/mcp", timeout=5):
            pass


@aio
async def test_modern_mode_over_http(base: str) -> None:
    elicit = {"action": "accept", "content": {"name": "Ida"}}
    async with Client(f"{base}/mcp", protocol_version=MODERN, elicitation_handler=lambda p: elicit) as client:
        assert client.protocol_version == MODERN
        assert client.transport.session_id is None
        assert (await client.call_tool("add", {"a": 1, "b": 2}))["structuredContent"] == {"result": 3}
        result = await client.call_tool("test_input_required_result_elicitation")
        assert result["content"] == [{"type": "text", "text": "Hello, Ida!"}]
        # Mcp-Param-Region must mirror the argument (HM-19): the server checks it against the body
        await client.list_tools()
        result = await client.call_tool("test_x_mcp_header", {"region": "  zürich  "})
        assert result["content"][0]["text"] == "region=  zürich  "
        assert (await client.read_resource("test://static-text"))["contents"][0]["uri"] == "test://static-text"
        with pytest.raises(HttpRpcError) as err:
            await client.request("no/such/method")
        assert isinstance(err.value, RpcError) and isinstance(err.value, ClientError)
        assert (err.value.status, err.value.code) == (404, -32601)


@aio
async def test_modern_cancellation_closes_the_stream_without_a_notification(base: str) -> None:
    async with Client(f"{base}/mcp", protocol_version=MODERN) as client:
        sent = spy_on(client)
        await cancel_a_countdown(client)
        assert [m.get("method") for m in sent] == ["tools/call"]  # CN-05: no notifications/cancelled
        assert (await client.call_tool("add", {"a": 1, "b": 1}))["structuredContent"] == {"result": 2}


@aio
async def test_legacy_sse(base: str) -> None:
    seen: list[Any] = []
    async with Client(f"{base}/sse", transport="sse", protocol_version="2024-11-05",
                      sampling_handler=lambda p: SAMPLED) as client:
        assert client.transport.kind == "sse"
        assert client.transport.endpoint.startswith(f"{base}/messages/?session_id=")
        assert client.protocol_version == "2024-11-05"
        result = await client.call_tool("add", {"a": 1, "b": 2})
        assert result["content"] == [{"type": "text", "text": '{"result":3}'}]
        await client.call_tool("test_tool_with_progress", progress=lambda *a: seen.append(a))
        assert seen == [(0, 100, None), (50, 100, None), (100, 100, None)]
        assert (await client.call_tool("test_sampling", {"prompt": "?"}))["content"][0]["text"] == "LLM response: Paris"
        sent = spy_on(client)
        await cancel_a_countdown(client)
        assert sent[1]["method"] == "notifications/cancelled"
        assert await client.ping() == {}
    with pytest.raises(ClientError) as err:
        async with Client(f"{base}/nothing-here", transport="sse"):
            pass
    assert err.value.status == 404


@aio
@pytest.mark.parametrize("kind", ["http", "sse"])
async def test_httpx_is_imported_once_per_connection_not_per_request(base: str, kind: str, monkeypatch) -> None:
    """A request's path enters no import guard: the module start() imported is kept."""
    import mcpkit.client.http as transport

    entered: list[str] = []
    real = transport.needs

    def counting(*args: Any, **kwargs: Any) -> Any:
        entered.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(transport, "needs", counting)
    url, extra = (f"{base}/mcp", {}) if kind == "http" else (f"{base}/sse", {"transport": "sse", "protocol_version": "2024-11-05"})
    async with Client(url, **extra) as client:
        for n in range(5):
            assert (await client.call_tool("add", {"a": n, "b": 1}))["content"][0]["text"] == f'{{"result":{n + 1}}}'
        assert await client.ping() == {}
    assert entered == ["client"]
