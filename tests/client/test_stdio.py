"""The client over stdio against the reference server (``mcpkit serve``) and misbehaving children."""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpkit.client import Client, ClientError, ClientTimeout, MismatchedId, RpcError, UnsupportedVersion
from tests.conftest import mcpkit_command

aio = pytest.mark.asyncio
SCRIPT = str(Path(__file__).with_name("scripted_server.py"))
MODERN = "2026-07-28"
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "test-model",
           "stopReason": "endTurn"}


def serve(wire: Any) -> list[str]:
    return wire.command(mcpkit_command("serve"))


@aio
@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
async def test_each_handshake_revision_is_negotiated(wire, version: str) -> None:
    async with Client(serve(wire), protocol_version=version) as client:
        assert client.protocol_version == version
        assert client.connect_result["protocolVersion"] == version
        assert client.server_info["name"] == "mcpkit-reference"
        assert client.instructions.startswith("A test server")
        assert "tools" in client.server_capabilities
        assert (await client.call_tool("echo", {"text": "hi"}))["content"] == [{"type": "text", "text": "hi"}]
    assert client.returncode == 0


@aio
async def test_default_offer_is_the_newest_handshake_and_an_unknown_offer_gets_the_servers_latest(wire) -> None:
    async with Client(serve(wire)) as client:
        assert client.protocol_version == "2025-11-25"
    async with Client(serve(wire), protocol_version="1999-01-01") as client:
        assert client.protocol_version == "2025-11-25"


@aio
async def test_an_answer_echoing_the_id_as_a_string_fails_its_request_at_once_named() -> None:
    """A server answering request 1 with the id "1" answers nothing: the request fails as soon as
    that answer arrives, naming both ids, instead of waiting out its timeout; on_message saw it."""
    seen: list[dict[str, Any]] = []
    fixture = Path(__file__).resolve().parents[1] / "check" / "fixtures" / "string_ids.py"
    client = Client([sys.executable, str(fixture)], timeout=60, on_message=seen.append)
    try:
        with pytest.raises(MismatchedId, match=r"answered request 1 with the id '1' \(a string, not an integer\)") as err:
            await asyncio.wait_for(client.connect(), 30)  # bounded: the 60 s timeout would fail it
        assert (err.value.request_id, err.value.answered) == (1, "1")
        assert [m["id"] for m in seen] == ["1"] and "result" in seen[0]
    finally:
        await client.close()


@aio
async def test_an_answered_version_the_client_does_not_support_is_refused() -> None:
    client = Client([sys.executable, SCRIPT, "badversion"])
    with pytest.raises(UnsupportedVersion, match="answered protocol version '1999-01-01', which") as err:
        await client.__aenter__()
    assert isinstance(err.value, ClientError) and err.value.answered == "1999-01-01"
    assert client.returncode is not None  # closed on the failed connect


@aio
async def test_modern_mode_discovers_and_sends_meta_on_every_request(wire) -> None:
    async with Client(serve(wire), protocol_version=MODERN, sampling_handler=lambda p: SAMPLED) as client:
        assert client.protocol_version == MODERN
        assert client.connect_result["supportedVersions"][-1] == MODERN
        assert client.server_info["name"] == "mcpkit-reference"
        assert client.server_capabilities["tools"] == {"listChanged": True}
        result = await client.call_tool("add", {"a": 2, "b": 3})
        assert result["resultType"] == "complete" and result["structuredContent"] == {"result": 5}
        # the server judges capabilities by this request's _meta (MT-08): sampling was declared
        result = await client.call_tool("test_missing_capability")
        assert result["content"][0]["text"] == "Client declared sampling capability; proceeding."
        with pytest.raises(RpcError) as err:
            await client.ping()  # gone in 2026-07-28
        assert err.value.code == -32601


@aio
async def test_modern_mode_fulfils_input_required_results_transparently(wire) -> None:
    answers = iter([{"action": "accept", "content": {"name": "Alice"}},
                    {"action": "accept", "content": {"color": "blue"}}])
    asked: list[dict[str, Any]] = []

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return next(answers)

    async def sample(params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return SAMPLED

    roots = [{"uri": "file:///test/root", "name": "Test Root"}]
    async with Client(serve(wire), protocol_version=MODERN, elicitation_handler=elicit, sampling_handler=sample,
                      roots=roots) as client:
        result = await client.call_tool("test_input_required_result_multi_round")
        assert result["content"] == [{"type": "text", "text": "Alice likes blue."}]
        assert [a["message"] for a in asked] == ["Step 1: What is your name?", "Step 2: What is your favorite color?"]
        asked.clear()
        answers = iter([{"action": "accept", "content": {"name": "Bob"}}])
        result = await client.call_tool("test_input_required_result_multiple_inputs")
        assert result["content"][0]["text"] == "All inputs received."
        result = await client.call_tool("test_input_required_result_list_roots")
        assert result["content"][0]["text"] == "Client exposed 1 root(s)."
        # without fulfilment the caller sees the input_required result itself
        raw = await client.request("tools/call", {"name": "test_input_required_result_elicitation", "arguments": {}},
                                   fulfil_inputs=False)
        assert raw["resultType"] == "input_required" and list(raw["inputRequests"]) == ["user_name"]


@aio
async def test_an_input_request_without_a_handler_is_a_client_error(wire) -> None:
    async with Client(serve(wire), protocol_version=MODERN, capabilities={"elicitation": {}}) as client:
        with pytest.raises(ClientError, match="elicitation/create"):
            await client.call_tool("test_input_required_result_elicitation")


@aio
async def test_progress_reaches_the_callback_of_its_request(wire) -> None:
    seen: list[tuple[Any, ...]] = []
    async with Client(serve(wire)) as client:
        result = await client.call_tool("test_tool_with_progress", progress=lambda *args: seen.append(args))
    assert seen == [(0, 100, "Completed step 0 of 100"), (50, 100, "Completed step 50 of 100"),
                    (100, 100, "Completed step 100 of 100")]
    token = client.notifications[0]["params"]["progressToken"]
    assert result["content"][0]["text"] == str(token)


@aio
async def test_cancelling_a_call_sends_notifications_cancelled_and_the_server_stops(wire) -> None:
    sent: list[dict[str, Any]] = []
    async with Client(serve(wire)) as client:
        original = client.transport.send

        async def spy(message: dict[str, Any]) -> None:
            sent.append(message)
            await original(message)

        client.transport.send = spy  # type: ignore[method-assign]
        started = asyncio.Event()
        call = asyncio.ensure_future(client.call_tool("countdown", {"seconds": 30}, progress=lambda *a: started.set()))
        await asyncio.wait_for(started.wait(), 10)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await client.ping() == {}  # the cancellation went out before this ping
        rid = sent[0]["id"]
        assert sent[1] == {"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": rid, "reason": "cancelled by the client"}}
    # the server never answered the cancelled call (CN-01), and had nothing left to finish when
    # its stdin closed: it exited by itself (a 30 s countdown still running would have kept it
    # past the 5 s grace, and it would have been terminated)
    assert client.unmatched == []
    assert client.returncode == 0


@aio
async def test_a_timeout_raises_and_cancels_on_the_server(wire) -> None:
    async with Client(serve(wire)) as client:
        with pytest.raises(ClientTimeout) as err:
            await client.call_tool("countdown", {"seconds": 30}, timeout=0.3)
        assert isinstance(err.value, TimeoutError)
        assert await client.call_tool("add", {"a": 1, "b": 1}) is not None
    assert client.unmatched == []


@aio
async def test_server_requests_are_answered_by_the_handlers(wire) -> None:
    prompts: list[dict[str, Any]] = []

    def sample(params: dict[str, Any]) -> dict[str, Any]:
        prompts.append(params)
        return SAMPLED

    async def elicit(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"username": "ann", "email": "ann@example.com"}}

    roots = [{"uri": "file:///work", "name": "work"}, {"uri": "file:///tmp"}]
    async with Client(serve(wire), sampling_handler=sample, elicitation_handler=elicit, roots=lambda: roots) as client:
        result = await client.call_tool("test_sampling", {"prompt": "Capital of France?"})
        assert result["content"][0]["text"] == "LLM response: Paris"
        assert prompts[0]["messages"][0]["content"] == {"type": "text", "text": "Capital of France?"}
        result = await client.call_tool("test_elicitation", {"message": "Who?"})
        assert result["content"][0]["text"] == (
            'User response: <action: accept, content: {"username": "ann", "email": "ann@example.com"}>')
        result = await client.call_tool("list_roots")
        assert result["content"][0]["text"] == "work file:///work\nfile:///tmp"
    assert [r["method"] for r in client.server_requests] == ["sampling/createMessage", "elicitation/create",
                                                             "roots/list"]


@aio
async def test_without_a_handler_the_capability_is_not_declared(wire) -> None:
    async with Client(serve(wire)) as client:
        result = await client.call_tool("test_sampling", {"prompt": "hi"})
        assert result["isError"] is True
        assert client.server_requests == []


@aio
async def test_logs_reach_on_log_after_set_log_level(wire) -> None:
    logs: list[dict[str, Any]] = []
    async with Client(serve(wire), on_log=logs.append) as client:
        assert await client.set_log_level("info") == {}
        await client.call_tool("test_tool_with_logging")
    assert [entry["data"] for entry in logs] == ["Tool execution started", "Tool processing data",
                                                 "Tool execution completed"]
    assert [n["method"] for n in client.notifications] == ["notifications/message"] * 3


@aio
async def test_resources_prompts_completion_and_ping(wire) -> None:
    async with Client(serve(wire)) as client:
        assert await client.ping() == {}
        uris = [r["uri"] for r in await client.list_resources()]
        assert "test://static-text" in uris
        assert [t["uriTemplate"] for t in await client.list_resource_templates()] == ["test://template/{id}/data"]
        read = await client.read_resource("test://static-text")
        assert read["contents"][0]["uri"] == "test://static-text"
        assert "test_simple_prompt" in [p["name"] for p in await client.list_prompts()]
        prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        assert prompt["messages"][0]["role"] == "user"
        done = await client.complete("test_prompt_with_arguments", "arg1", "pa")
        assert done["completion"]["values"] == ["paris", "park", "party"]
        assert await client.subscribe("test://watched-resource") == {}
        await client.call_tool("test_trigger_resource_update")
        assert await client.unsubscribe("test://watched-resource") == {}
        assert [n["params"] for n in client.notifications if n["method"] == "notifications/resources/updated"] == [
            {"uri": "test://watched-resource"}]
        with pytest.raises(RpcError) as err:
            await client.read_resource("test://nope")
        assert err.value.code == -32002 and err.value.data == {"uri": "test://nope"}


@aio
async def test_send_raw_garbage_gets_an_unmatched_parse_error(wire) -> None:
    async with Client(serve(wire)) as client:
        await client.send_raw(b"{oops\n")
        assert await client.ping() == {}  # answered after the garbage, in order
    assert [m["error"]["code"] for m in client.unmatched] == [-32700]
    assert client.unmatched[0].get("id") is None


@aio
async def test_noise_on_stdout_is_kept_and_never_crashes_the_client() -> None:
    async with Client(shlex.quote(SCRIPT)) as client:  # "server.py" alone runs with this interpreter
        assert (await client.call_tool("add", {"a": 1, "b": 2}))["structuredContent"] == {"result": 3}
        assert client.stdout_noise == [b"hello from the server", b"{not json", b'{"json": "but not JSON-RPC"}',
                                       b"[1, 2]"]
        assert "noisy server starting" in client.stderr


@aio
async def test_a_crashing_server_fails_the_pending_request_with_its_exit_code_and_stderr() -> None:
    async with Client([sys.executable, SCRIPT, "crash"]) as client:
        with pytest.raises(ClientError) as err:
            await client.call_tool("anything")
        assert "exited with code 3" in str(err.value) and "boom: simulated crash" in str(err.value)
        assert client.returncode == 3
        with pytest.raises(ClientError, match="code 3"):
            await client.ping()  # later requests fail at once
        # and code that only listens learns it too: nothing more will come
        assert client.stream_state.state == "stopped" and "code 3" in client.stream_state.reason


@aio
async def test_a_server_that_exits_before_the_handshake_is_reported_with_its_exit_code_and_stderr() -> None:
    # A process that exits at once closes its stdin before initialize is written: the client
    # said only "the server's stdin is closed", or "cannot write to the server: [Errno 32] Broken
    # pipe", without the exit code or what the server printed on stderr.
    for _ in range(5):  # the race goes either way from one run to the next
        with pytest.raises(ClientError) as err:
            async with Client(["sh", "-c", "echo 'Error: missing API key FOO' >&2; exit 3"]):
                pass
        assert "exited with code 3" in str(err.value), str(err.value)
        assert "missing API key FOO" in str(err.value)
        assert "stdin is closed" not in str(err.value)


@aio
async def test_a_command_string_env_and_cwd(tmp_path) -> None:
    code = "import os, sys; sys.stderr.write(os.environ['MCPKIT_TEST_VAR'] + ' ' + os.getcwd()); " \
           "from mcpkit.reference import server; server.run()"
    command = f"{sys.executable} -c \"{code}\""
    async with Client(command, env={"MCPKIT_TEST_VAR": "marker"}, cwd=str(tmp_path)) as client:
        await client.ping()
    assert client.stderr.startswith(f"marker {tmp_path}")


@aio
async def test_a_missing_command_is_a_client_error(tmp_path) -> None:
    with pytest.raises(ClientError, match="cannot start"):
        async with Client([str(tmp_path / "no-such-server")]):
            pass
