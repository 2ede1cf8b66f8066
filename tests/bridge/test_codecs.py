"""Plugins with protocols of their own, spoken unchanged: each framing (length-prefixed with a
chosen header, lines, WebSocket) and each message shape (JSON-RPC, Fields, Custom) against a fake
plugin that speaks it; reconnects, a plugin dying mid-call, and answers to ids never sent."""

from __future__ import annotations

import asyncio
import logging
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.bridge import (
    Answer,
    Call,
    Custom,
    Event,
    Fields,
    JsonRpc,
    LengthPrefixed,
    NdJson,
    RpcBridge,
    Tcp,
    WebSocket,
)
from mcpkit.bridge.codecs import Reply
from mcpkit.protocol.errors import E_INTERNAL, E_NOT_CONNECTED, E_PERMISSION_DENIED, ToolError
from tests.harness import connect

from .plugins import Hangup, Plugin

FAST = {"probe_interval": 0.2, "backoff_initial": 0.05, "backoff_max": 0.2}
CHANGED = "notifications/tools/list_changed"


def commands(handlers: dict[str, Callable[[Any], Any]], *, name: str = "command", params: str = "params",
             rid: str = "id") -> Callable[[Any], Any]:
    """A plugin speaking ``{name: command, params: ..., rid: n}`` -> ``{rid: n, "result"|"error": ...}``;
    a handler may be a coroutine function, or raise Hangup (the plugin crashes mid-call)."""

    async def serve(message: dict[str, Any]) -> list[Any]:
        if rid not in message:
            return []
        command = message[name]
        if command == "ping":
            return [{rid: message[rid], "result": "pong"}]
        handler = handlers.get(command)
        if handler is None:
            return [{rid: message[rid], "error": f"unknown command {command}"}]
        try:
            result = handler(message[params])
            if asyncio.iscoroutine(result):
                result = await result
        except LookupError as exc:
            return [{rid: message[rid], "error": {"message": str(exc.args[0]), "code": "locked"}}]
        return [{rid: message[rid], "result": result}]

    return serve


async def eventually(predicate: Any, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


@pytest.fixture
def plugins() -> Iterator[list[Plugin]]:
    started: list[Plugin] = []
    yield started
    for plugin in started:
        plugin.stop()


@pytest.fixture
def bridges() -> Iterator[list[RpcBridge]]:
    made: list[RpcBridge] = []
    yield made
    for bridge in made:
        bridge.stop()


async def up(bridges: list[RpcBridge], bridge: RpcBridge) -> RpcBridge:
    bridges.append(bridge)
    bridge.start()
    assert await bridge.wait_up(10), bridge.last_error
    return bridge


# ------------------------------------------------------------------ framings


def test_length_prefixed_headers() -> None:
    little = LengthPrefixed(header="<I")
    assert little.encode({"a": 1}) == struct.pack("<I", 7) + b'{"a":1}'
    assert LengthPrefixed(header=">H").encode([]) == b"\x00\x02[]"
    assert LengthPrefixed().encode(1)[:4] == b"\x00\x00\x00\x01"  # the default is unchanged
    assert LengthPrefixed(header=">H").max_bytes == 65535  # no frame can announce more
    with pytest.raises(ValueError, match="does not fit"):
        LengthPrefixed(header="<H").encode("x" * 70_000)
    for bad in ("I", "<i", ">d", "<II"):
        with pytest.raises(ValueError, match="byte order"):
            LengthPrefixed(header=bad)


@pytest.mark.asyncio
async def test_a_two_byte_header_is_read_back() -> None:
    framing = LengthPrefixed(header="<H")
    reader = asyncio.StreamReader()
    reader.feed_data(framing.encode({"id": 1}) + framing.encode({"id": 2}))
    reader.feed_eof()
    assert [await framing.read(reader), await framing.read(reader), await framing.read(reader)] == [
        {"id": 1}, {"id": 2}, None]


def test_a_websocket_frames_its_own_messages() -> None:
    with pytest.raises(ValueError, match="drop framing="):
        RpcBridge("x", WebSocket("ws://127.0.0.1:1/"), framing=NdJson())
    with pytest.raises(ValueError, match="ws:// or wss://"):
        WebSocket("http://127.0.0.1:1/")


# ------------------------------------------------------------------ one example per shape and framing


@pytest.mark.asyncio
async def test_fields_over_little_endian_length_prefixes(plugins: list[Plugin], bridges: list[RpcBridge]) -> None:
    """A C#-style plugin: ``{"command", "params", "id"}`` in frames with a little-endian length,
    its own handshake command that echoes no protocol version, errors as plain messages."""
    nodes = ["Main Camera"]

    def handshake(p: dict[str, Any]) -> Any:
        return {"ok": p.get("token") == "tok"}

    def move(p: dict[str, Any]) -> Any:
        if p["node"] not in nodes:
            raise LookupError(f"no node named {p['node']}")
        return {"moved": p["node"], "to": [p["x"], p["y"]]}

    plugin = Plugin(commands({"handshake": handshake, "move": move, "nodes": lambda p: list(nodes)}),
                    framing=LengthPrefixed(header="<I")).start()
    plugins.append(plugin)
    bridge = await up(bridges, RpcBridge(
        "editor", Tcp("127.0.0.1", plugin.port), framing=LengthPrefixed(header="<I"), codec=Fields(method="command"),
        hello="handshake", protocol_version=None, token="tok", errors={"locked": E_PERMISSION_DENIED}, **FAST))
    assert bridge.peer == {"ok": True}
    assert plugin.received[0] == {"command": "handshake", "params": {"client": {"name": "mcpkit"}, "token": "tok"},
                                  "id": 1}
    # a tool call goes out as the tool's own command, with its arguments as the parameters
    moved = await bridge.request("tools/call", {"name": "move", "arguments": {"node": "Main Camera", "x": 1, "y": 2}})
    assert moved == {"moved": "Main Camera", "to": [1, 2]}
    assert {"command": "move", "params": {"node": "Main Camera", "x": 1, "y": 2}} .items() <= plugin.received[-1].items()
    assert await bridge.request("nodes") == ["Main Camera"]
    assert plugin.received[-1]["params"] == {}  # no params: an empty object, never a missing field
    with pytest.raises(ToolError) as refused:
        await bridge.request("tools/call", {"name": "move", "arguments": {"node": "Ghost", "x": 0, "y": 0}})
    assert refused.value.code == E_PERMISSION_DENIED and refused.value.message == "editor: no node named Ghost"
    with pytest.raises(ToolError) as unknown:
        await bridge.request("explode")
    assert unknown.value.code == E_INTERNAL and unknown.value.message == "editor: unknown command explode"
    assert not unknown.value.retryable


@pytest.mark.asyncio
async def test_fields_over_lines_with_string_ids_and_events(plugins: list[Plugin], bridges: list[RpcBridge]) -> None:
    """A line-delimited plugin with its own field names, string ids, results spread over the
    answer itself, and events of its own renamed to the kit's notifications."""

    def serve(message: dict[str, Any]) -> list[Any]:
        if message["cmd"] == "sum":
            return [{"ref": message["ref"], "value": sum(message["args"]["values"]), "unit": "m"}]
        return [{"ref": message["ref"], "error": "", "alive": True}]  # ping; an empty error is none

    plugin = Plugin(serve, framing=NdJson()).start()
    plugins.append(plugin)
    codec = Fields(method="cmd", params="args", id="ref", result=None, event="event",
                   events={"changed": CHANGED}, constant={"type": "request"}, string_ids=True)
    bridge = RpcBridge("editor", Tcp("127.0.0.1", plugin.port), codec=codec, hello=None, **FAST)
    seen: list[tuple[str, Any]] = []
    bridge.on_notification(lambda method, params: seen.append((method, params)))
    await up(bridges, bridge)
    assert await bridge.request("sum", {"values": [1, 2, 3]}) == {"value": 6, "unit": "m"}
    sent = plugin.received[-1]
    assert sent["type"] == "request" and isinstance(sent["ref"], str) and sent["cmd"] == "sum"
    plugin.send({"type": "event", "event": "changed", "args": {"why": "package"}})
    plugin.send({"type": "event", "event": "selection", "args": {"node": "Player"}})
    await eventually(lambda: len(seen) == 2)
    assert seen == [(CHANGED, {"why": "package"}), ("selection", {"node": "Player"})]


@pytest.mark.asyncio
async def test_custom_codec_over_lines(plugins: list[Plugin], bridges: list[RpcBridge]) -> None:
    """A plugin speaking arrays (``["call", id, name, args]`` -> ``["ok"|"fail", id, ...]``),
    read by an encode/decode pair; it has no ping, so the link's end alone says it is down."""

    def serve(message: list[Any]) -> list[Any]:
        _, rid, name, args = message
        if name == "echo":
            return [["ok", rid, args]]
        return [["fail", rid, f"{name}?"]]

    def encode(call: Call) -> Any:
        return ["call", call.id, call.command, call.arguments]

    def decode(message: Any) -> Answer | Event | None:
        if message[0] == "ok":
            return Answer(message[1], result=message[2])
        if message[0] == "fail":
            return Answer(message[1], error=message[2])
        return Event(message[1], message[2]) if message[0] == "event" else None

    plugin = Plugin(serve).start()
    plugins.append(plugin)
    bridge = await up(bridges, RpcBridge("editor", Tcp("127.0.0.1", plugin.port), codec=Custom(encode, decode),
                                         hello=None, probe_method=None, **FAST))
    assert await bridge.request("tools/call", {"name": "echo", "arguments": {"a": [1]}}) == {"a": [1]}
    assert plugin.received[-1] == ["call", 1, "echo", {"a": [1]}]  # an array is one message, not a batch
    with pytest.raises(ToolError, match=r"editor: nope\?"):
        await bridge.request("nope", {})
    plugin.stop()
    await eventually(lambda: not bridge.up)  # no probe: the link's end is enough
    with pytest.raises(ToolError) as down:
        await bridge.request("echo", {})
    assert down.value.code == E_NOT_CONNECTED and down.value.retryable


@pytest.mark.asyncio
async def test_the_json_rpc_contract_over_a_websocket(plugins: list[Plugin], bridges: list[RpcBridge],
                                                      wire: Any) -> None:
    """A WebSocket plugin speaking the default contract (hello echoing protocolVersion, ping,
    tools/list, tools/call, list_changed), its tools mirrored into a server."""
    tools = [{"name": "spin", "description": "Spin a node.",
              "inputSchema": {"type": "object", "properties": {"deg": {"type": "number"}}, "required": ["deg"]}}]

    def serve(m: dict[str, Any]) -> list[Any]:
        if "id" not in m:
            return []
        method, params = m["method"], m.get("params") or {}
        if method == "hello":
            result: Any = {"protocolVersion": params["protocolVersion"], "name": "ws-plugin"}
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {"tools": tools}
        elif method == "tools/call" and params["name"] == "spin":
            result = {"content": [{"type": "text", "text": f"spun {params['arguments']['deg']}"}]}
        else:
            return [{"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": f"no {method}"}}]
        return [{"jsonrpc": "2.0", "id": m["id"], "result": result}]

    plugin = Plugin(serve, websocket=True).start()
    plugins.append(plugin)
    server = Server("ws-bridge")
    bridge = RpcBridge("editor", WebSocket(plugin.url), token="tok", **FAST)
    server.mirror(bridge, resources=False)
    await up(bridges, bridge)
    assert bridge.peer["name"] == "ws-plugin"
    assert plugin.received[0]["params"] == {"client": {"name": "mcpkit"}, "protocolVersion": "1", "token": "tok"}
    async with connect(server, wire) as h:
        assert [t["name"] for t in (await h.request("tools/list"))["tools"]] == ["spin"]
        spun = await h.request("tools/call", {"name": "spin", "arguments": {"deg": 90}})
        assert spun["content"][0]["text"] == "spun 90"
        n = len(h.notifications_of(CHANGED))
        tools.append({"name": "stop", "inputSchema": {"type": "object"}})
        plugin.send({"jsonrpc": "2.0", "method": CHANGED})
        await h.wait_notification(CHANGED, n + 1)
        assert {t["name"] for t in (await h.request("tools/list"))["tools"]} == {"spin", "stop"}


# ------------------------------------------------------------------ faults, on a stream and on a WebSocket


def _plugin(kind: str, handlers: dict[str, Callable[[Any], Any]], port: int = 0) -> Plugin:
    if kind == "websocket":
        return Plugin(commands(handlers), websocket=True, port=port).start()
    return Plugin(commands(handlers), framing=LengthPrefixed(), port=port).start()


def _bridge(kind: str, plugin: Plugin, **kw: Any) -> RpcBridge:
    where = WebSocket(plugin.url) if kind == "websocket" else Tcp("127.0.0.1", plugin.port)
    framing = {} if kind == "websocket" else {"framing": LengthPrefixed()}
    return RpcBridge("editor", where, codec=Fields(method="command"), hello=None, **framing, **FAST, **kw)


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["tcp", "websocket"])
async def test_a_plugin_that_dies_mid_call_gives_a_retryable_error(kind: str, plugins: list[Plugin],
                                                                   bridges: list[RpcBridge]) -> None:
    started = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def crash(p: Any) -> Any:
        loop.call_soon_threadsafe(started.set)
        raise Hangup

    plugin = _plugin(kind, {"crash": crash, "echo": lambda p: p})
    plugins.append(plugin)
    bridge = await up(bridges, _bridge(kind, plugin, call_timeout=60))
    call = asyncio.ensure_future(bridge.request("crash", {}))
    await started.wait()
    with pytest.raises(ToolError) as lost:
        await asyncio.wait_for(call, 10)  # not the 60 s call timeout: the link's end fails it
    assert lost.value.code == E_NOT_CONNECTED and lost.value.retryable
    assert await bridge.wait_up(10)  # the plugin still listens: the bridge is back
    assert await bridge.request("echo", {"n": 1}) == {"n": 1}


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["tcp", "websocket"])
async def test_the_bridge_reconnects_when_the_plugin_returns(kind: str, plugins: list[Plugin],
                                                             bridges: list[RpcBridge]) -> None:
    first = _plugin(kind, {"echo": lambda p: p})
    plugins.append(first)
    bridge = await up(bridges, _bridge(kind, first))
    assert await bridge.request("echo", {"n": 1}) == {"n": 1}
    first.stop()
    await eventually(lambda: not bridge.up)
    with pytest.raises(ToolError) as down:
        await bridge.request("echo", {"n": 2})
    assert down.value.code == E_NOT_CONNECTED and down.value.retryable
    second = _plugin(kind, {"echo": lambda p: {"again": p}}, port=first.port)
    plugins.append(second)
    assert await bridge.wait_up(10), bridge.last_error
    assert await bridge.request("echo", {"n": 3}) == {"again": {"n": 3}}
    assert second.connections >= 1


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["tcp", "websocket"])
async def test_an_answer_to_an_unknown_id_is_ignored_with_a_log_line(
        kind: str, plugins: list[Plugin], bridges: list[RpcBridge], caplog: pytest.LogCaptureFixture) -> None:
    plugin = _plugin(kind, {})
    strays = {"n": 0}

    def serve(message: dict[str, Any]) -> list[Any]:
        if message.get("command") != "work":
            return [{"id": message["id"], "result": "pong"}]
        strays["n"] += 1
        return [{"id": 99_999, "result": "not yours"}, {"id": "req-x", "result": "nor this"},
                {"id": message["id"], "result": "yours"}]

    plugin.serve = serve
    plugins.append(plugin)
    bridge = await up(bridges, _bridge(kind, plugin))
    with caplog.at_level(logging.WARNING, logger="mcpkit.bridge"):
        assert await bridge.request("work", {}) == "yours"
    assert strays["n"] == 1 and bridge.up
    lines = [r.getMessage() for r in caplog.records if r.name == "mcpkit.bridge"]
    assert "bridge editor: dropped an answer to unknown request id 99999" in lines
    assert "bridge editor: dropped an answer to unknown request id 'req-x'" in lines
    assert await bridge.request("work", {}) == "yours"  # the link is fine


# ------------------------------------------------------------------ the codecs alone


def test_json_rpc_reads_answers_events_and_refuses_a_plugins_requests() -> None:
    codec = JsonRpc()
    assert codec.request(Call(3, "tools/call", {"name": "a", "arguments": {}})) == {
        "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "a", "arguments": {}}}
    assert codec.request(Call(4, "ping")) == {"jsonrpc": "2.0", "id": 4, "method": "ping"}  # no params field
    assert codec.decode({"jsonrpc": "2.0", "id": 3, "result": [1]}) == Answer(3, result=[1])
    assert codec.decode({"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "m"}}) == Answer(
        3, error={"code": -1, "message": "m"})
    assert codec.decode({"jsonrpc": "2.0", "method": CHANGED}) == Event(CHANGED, None)
    refused = codec.decode({"jsonrpc": "2.0", "id": "p1", "method": "editor/ask"})
    assert isinstance(refused, Reply) and refused.message["id"] == "p1" and refused.message["error"]["code"] == -32601
    assert codec.decode("text") is None
    assert codec.cancel(3, "timed out") == {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                            "params": {"requestId": 3, "reason": "timed out"}}


def test_fields_reads_errors_results_and_events_by_name() -> None:
    codec = Fields(method="op", params="data", id="seq", result="out", error="fault", event="signal")
    assert codec.request(Call(1, "tools/call", {"name": "jump", "arguments": {"h": 2}})) == {
        "op": "jump", "data": {"h": 2}, "seq": 1}
    assert codec.request(Call(2, "tools/call", {"name": "jump"})) == {"op": "jump", "data": {}, "seq": 2}
    assert codec.decode({"seq": 1, "out": 5, "fault": None}) == Answer(1, result=5)
    assert codec.decode({"seq": 1, "out": 5, "fault": False}) == Answer(1, result=5)
    assert codec.decode({"seq": 1, "fault": "broke"}) == Answer(1, error="broke")
    assert codec.decode({"seq": 1, "fault": {"message": "broke", "code": 7}}) == Answer(
        1, error={"message": "broke", "code": 7})
    assert codec.decode({"signal": "saved", "data": {"path": "a"}}) == Event("saved", {"path": "a"})
    assert codec.decode({"noise": 1}) is None and codec.decode([1]) is None
    assert codec.cancel(1, "timed out") is None  # such protocols have no cancel message
    with pytest.raises(ValueError, match="three different fields"):
        Fields(method="x", params="x")


@pytest.mark.asyncio
async def test_a_decoder_that_fails_drops_one_message_not_the_link(
        plugins: list[Plugin], bridges: list[RpcBridge], caplog: pytest.LogCaptureFixture) -> None:
    plugin = Plugin(lambda m: [{"bad": True}, {"n": m["n"], "r": m["n"] * 2}]).start()
    plugins.append(plugin)

    def decode(message: Any) -> Answer | None:
        if message.get("bad"):
            raise KeyError("the decoder's own bug")
        return Answer(message["n"], result=message["r"])

    codec = Custom(lambda call: {"n": call.id}, decode)
    bridge = await up(bridges, RpcBridge("editor", Tcp("127.0.0.1", plugin.port), codec=codec, hello=None,
                                         probe_method=None, **FAST))
    with caplog.at_level(logging.WARNING, logger="mcpkit.bridge"):
        assert await bridge.request("double") == 2
        assert await bridge.request("double") == 4
    assert bridge.up
    assert sum("decode failed" in r.getMessage() for r in caplog.records) == 2


def test_a_missing_websocket_library_is_one_line_and_exit_2(tmp_path: Any) -> None:
    server = tmp_path / "server.py"
    server.write_text(textwrap.dedent("""
        import sys
        sys.modules["websockets"] = None  # as if mcpkit[websocket] were not installed
        from mcpkit import Server
        from mcpkit.bridge import RpcBridge, WebSocket
        editor = RpcBridge("editor", WebSocket("ws://127.0.0.1:9/plugin"))
        server = Server("s")
    """))
    run = subprocess.run([sys.executable, "-m", "mcpkit", "serve", str(server)], capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip().splitlines() == [
        "mcpkit: mcpkit.bridge.WebSocket needs websockets, which is not installed: pip install 'mcpkit[websocket]'"
        "  (run with -v for the traceback)"]
    assert run.stdout == ""


def test_a_websocket_bridge_imports_the_library_only_to_connect() -> None:
    code = ("import sys\nfrom mcpkit.bridge import RpcBridge, WebSocket\n"
            "RpcBridge('x', WebSocket('ws://127.0.0.1:9/'))\n"
            "print(sorted(m for m in sys.modules if m.startswith('websockets.asyncio')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
