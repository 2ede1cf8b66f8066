"""mcpkit.bridge.RpcBridge against a real socket peer: handshake, ids, timeouts, cancellation,
error mapping, link loss and recovery."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from mcpkit.bridge import LengthPrefixed, NdJson, RpcBridge, Subprocess, Tcp, Unix
from mcpkit.bridge.framing import FrameError
from mcpkit.protocol.errors import E_INTERNAL, E_NOT_CONNECTED, E_NOT_FOUND, E_PERMISSION_DENIED, E_TIMEOUT, ToolError

from .backend import Backend, BackendError

FAST = {"probe_interval": 0.2, "backoff_initial": 0.05, "backoff_max": 0.2}


@pytest.fixture
def backend() -> Iterator[Backend]:
    peer = Backend().start()
    yield peer
    peer.stop()


def make(peer: Backend, **kw: Any) -> RpcBridge:
    options: dict[str, Any] = {"token": "s3cret-token", **FAST, **kw}
    return RpcBridge("editor", Tcp("127.0.0.1", peer.port), **options)


async def eventually(predicate: Any, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


@pytest.mark.asyncio
async def test_handshake_then_requests_are_answered(backend: Backend) -> None:
    backend.handlers["add"] = lambda p: p["a"] + p["b"]
    bridge = make(backend)
    bridge.start()
    try:
        assert await bridge.wait_up(10)
        assert await bridge.request("add", {"a": 2, "b": 3}) == 5
        assert bridge.peer["name"] == "fake" and bridge.schema_version == 1
        hello = backend.received[0]
        assert hello["method"] == "hello"
        assert hello["params"]["protocolVersion"] == "1" and hello["params"]["token"] == "s3cret-token"
    finally:
        bridge.stop()


@pytest.mark.asyncio
async def test_a_wrong_token_never_connects_and_says_why(backend: Backend) -> None:
    backend.handlers["add"] = lambda p: 1
    bridge = make(backend, token="wrong")
    bridge.start()
    try:
        assert not await bridge.wait_up(0.5)
        await eventually(lambda: bridge.last_error is not None)
        assert "bad token" in bridge.last_error
        with pytest.raises(ToolError) as info:
            await bridge.request("add", {})
        assert info.value.code == E_NOT_CONNECTED and info.value.retryable
        details = info.value.details
        assert details["breaker"] == "closed" and "bad token" in details["lastError"]
        assert details["retryAfterMs"] >= 1
        assert not any(m.get("method") == "add" for m in backend.received)
    finally:
        bridge.stop()


@pytest.mark.asyncio
async def test_another_protocol_version_is_refused(backend: Backend) -> None:
    backend.version = "2"
    bridge = make(backend)
    bridge.start()
    try:
        assert not await bridge.wait_up(0.5)
        await eventually(lambda: bridge.last_error is not None)
        assert "protocol version mismatch" in bridge.last_error and "'2'" in bridge.last_error
    finally:
        bridge.stop()


@pytest.mark.asyncio
async def test_answers_are_matched_by_id_whatever_their_order(backend: Backend) -> None:
    async def slow(p: dict[str, Any]) -> str:
        await asyncio.sleep(p["delay"])
        return p["tag"]

    backend.handlers["echo"] = slow
    bridge = make(backend)
    bridge.start()
    try:
        assert await bridge.wait_up(10)
        results = await asyncio.gather(
            bridge.request("echo", {"delay": 0.3, "tag": "slow"}),
            bridge.request("echo", {"delay": 0.0, "tag": "fast"}),
            bridge.request("echo", {"delay": 0.1, "tag": "middle"}),
        )
        assert results == ["slow", "fast", "middle"]
    finally:
        bridge.stop()


@pytest.mark.asyncio
async def test_a_timed_out_call_is_cancelled_at_the_backend_and_does_not_block_the_link(backend: Backend) -> None:
    release = asyncio.Event()

    async def stuck(p: dict[str, Any]) -> str:
        await asyncio.sleep(30)
        return "late"

    backend.handlers["stuck"] = stuck
    backend.handlers["quick"] = lambda p: "ok"
    bridge = make(backend)
    bridge.start()
    try:
        assert await bridge.wait_up(10)
        with pytest.raises(ToolError) as info:
            await bridge.request("stuck", {}, timeout=0.2)
        assert info.value.code == E_TIMEOUT and info.value.retryable
        stuck_id = next(m["id"] for m in backend.received if m.get("method") == "stuck")
        await eventually(lambda: stuck_id in backend.cancelled)
        assert await bridge.request("quick", {}) == "ok"  # the link is fine
        assert bridge.up and bridge.stats["failures"] == 0
        release.set()
    finally:
        bridge.stop()


@pytest.mark.asyncio
async def test_cancelling_the_caller_cancels_the_backend_request(backend: Backend) -> None:
    async def stuck(p: dict[str, Any]) -> str:
        await asyncio.sleep(30)
        return "late"

    backend.handlers["stuck"] = stuck
    bridge = make(backend)
    bridge.start()
    try:
        assert await bridge.wait_up(10)
        task = asyncio.ensure_future(bridge.request("stuck", {}))
        await eventually(lambda: any(m.get("method") == "stuck" for m in backend.received))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        stuck_id = next(m["id"] for m in backend.received if m.get("method") == "stuck")
        await eventually(lambda: stuck_id in backend.cancelled)
    finally:
        bridge.stop()


@pytest.mark.asyncio
async def test_backend_errors_are_mapped_by_the_declared_table(backend: Backend) -> None:
    def fail(p: dict[str, Any]) -> None:
        raise BackendError(p["code"], "nope", p.get("data"))

    backend.handlers["fail"] = fail
    bridge = make(backend, errors={-32004: E_NOT_FOUND, "locked": E_PERMISSION_DENIED})
    bridge.start()
    try:
        assert await bridge.wait_up(10)
        with pytest.raises(ToolError) as info:
            await bridge.request("fail", {"code": -32004})
        assert info.value.code == E_NOT_FOUND and info.value.message == "editor: nope"
        assert info.value.details["backend"] == {"code": -32004, "message": "nope"}
        with pytest.raises(ToolError) as info:
            await bridge.request("fail", {"code": -1, "data": {"kind": "locked", "suggestedFix": "Unlock it."}})
        assert info.value.code == E_PERMISSION_DENIED and info.value.suggested_fix == "Unlock it."
        with pytest.raises(ToolError) as info:
            await bridge.request("fail", {"code": 12345})
        assert info.value.code == E_INTERNAL
        assert bridge.up  # errors are answers, not link failures
    finally:
        bridge.stop()


@pytest.mark.asyncio
async def test_sync_tools_call_from_worker_threads_and_the_backend_cannot_call_us(backend: Backend) -> None:
    backend.handlers["add"] = lambda p: p["a"] + p["b"]
    bridge = make(backend)
    bridge.start()
    try:
        assert await bridge.wait_up(10)
        loop = asyncio.get_running_loop()
        results = await asyncio.gather(*(loop.run_in_executor(None, lambda i=i: bridge.request_sync("add", {"a": i, "b": 1}))
                                         for i in range(5)))
        assert results == [1, 2, 3, 4, 5]
        with pytest.raises(ToolError) as info:
            await loop.run_in_executor(None, lambda: bridge.request_sync("missing"))
        assert info.value.code == "E_UNSUPPORTED"  # -32601 by the default table
        bridge.notify("editor/log", {"line": "hello"})
        await eventually(lambda: any(m.get("method") == "editor/log" for m in backend.received))
    finally:
        bridge.stop()


@pytest.mark.asyncio
async def test_a_hung_backend_fails_its_probe_and_the_link_is_replaced(backend: Backend) -> None:
    bridge = make(backend, probe_timeout=0.3)
    seen: list[bool] = []
    bridge.on_change(seen.append)
    bridge.start()
    try:
        assert await bridge.wait_up(10)
        hellos = backend.hellos
        backend.silent = {"ping"}  # still connected, no longer answering
        await eventually(lambda: seen == [True, False])
        assert bridge.last_error == "BackendTimeout: no answer to ping within 0.3 s"
        await eventually(lambda: backend.hellos > hellos)  # it keeps trying new links
        backend.silent = set()
        assert await bridge.wait_up(10)
        assert seen == [True, False, True]
    finally:
        bridge.stop()


def test_an_error_table_naming_an_unknown_code_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown codes"):
        RpcBridge("x", Tcp("127.0.0.1", 1), errors={1: "E_NOPE"})


@pytest.mark.asyncio
async def test_losing_the_backend_fails_pending_calls_and_it_comes_back() -> None:
    backend = Backend().start()
    port = backend.port

    async def stuck(p: dict[str, Any]) -> str:
        await asyncio.sleep(30)
        return "late"

    backend.handlers["stuck"] = stuck
    bridge = RpcBridge("editor", Tcp("127.0.0.1", port), token="s3cret-token", **FAST)
    seen: list[bool] = []
    bridge.on_change(seen.append)
    bridge.start()
    again = None
    try:
        assert await bridge.wait_up(10)
        task = asyncio.ensure_future(bridge.request("stuck", {}))
        await eventually(lambda: any(m.get("method") == "stuck" for m in backend.received))
        backend.stop()
        with pytest.raises(ToolError) as info:
            await task
        assert info.value.code == E_NOT_CONNECTED and info.value.retryable
        await eventually(lambda: not bridge.up)
        with pytest.raises(ToolError) as info:
            await bridge.request("stuck", {})
        assert info.value.details["lastError"] and info.value.details["breaker"] in ("closed", "open")
        assert info.value.details["retryAfterMs"] >= 1
        again = Backend(port=port).start()
        again.handlers["quick"] = lambda p: "back"
        assert await bridge.wait_up(10)
        assert await bridge.request("quick", {}) == "back"
        assert seen == [True, False, True]
    finally:
        bridge.stop()
        if again is not None:
            again.stop()


@pytest.mark.asyncio
async def test_length_prefixed_frames_over_a_unix_socket() -> None:
    # a short directory: Unix socket paths are limited to ~100 bytes
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        path = os.path.join(tmp, "b.sock")
        framing = LengthPrefixed()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while (message := await framing.read(reader)) is not None:
                if "id" in message:
                    result = {"protocolVersion": "1"} if message["method"] == "hello" else message.get("params")
                    writer.write(framing.encode({"jsonrpc": "2.0", "id": message["id"], "result": result}))

        server = await asyncio.start_unix_server(serve, path)
        bridge = RpcBridge("helper", Unix(path), framing=LengthPrefixed(), **FAST)
        bridge.start()
        try:
            assert await bridge.wait_up(10)
            big = {"text": "x" * 200_000}
            assert await bridge.request("echo", big) == big
        finally:
            bridge.stop()
            server.close()


@pytest.mark.asyncio
async def test_a_subprocess_peer_over_stdio_and_its_process_group_is_killed(tmp_path: Any) -> None:
    child = tmp_path / "peer.py"
    child.write_text(textwrap.dedent("""
        import json, os, sys
        for line in sys.stdin:
            m = json.loads(line)
            if "id" not in m:
                continue
            r = {"protocolVersion": "1"} if m["method"] == "hello" else {"pid": os.getpid()}
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\\n")
            sys.stdout.flush()
    """))
    bridge = RpcBridge("helper", Subprocess([sys.executable, str(child)]), **FAST)
    bridge.start()
    try:
        assert await bridge.wait_up(20)
        pid = (await bridge.request("whoami"))["pid"]
        assert os.getpgid(pid) == pid  # its own process group
    finally:
        bridge.stop()
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        assert asyncio.get_running_loop().time() < deadline, "the child outlived the bridge"
        await asyncio.sleep(0.02)


@pytest.mark.asyncio
async def test_framing_refuses_oversized_and_malformed_input() -> None:
    reader = asyncio.StreamReader(limit=64)
    reader.feed_data(b"x" * 100 + b"\n")
    with pytest.raises(FrameError, match="longer than"):
        await NdJson(max_bytes=63).read(reader)
    reader = asyncio.StreamReader()
    reader.feed_data(b"\n{not json}\n")
    with pytest.raises(FrameError, match="not JSON"):
        await NdJson().read(reader)
    reader = asyncio.StreamReader()
    reader.feed_data(LengthPrefixed().encode({"a": 1})[:2])
    reader.feed_eof()
    with pytest.raises(FrameError, match="frame header"):
        await LengthPrefixed().read(reader)
    reader = asyncio.StreamReader()
    reader.feed_data(b"\x7f\xff\xff\xff")
    with pytest.raises(FrameError, match="announced"):
        await LengthPrefixed(max_bytes=1000).read(reader)
    reader = asyncio.StreamReader()
    reader.feed_data(b'{"a": 1}\n')
    reader.feed_eof()
    framing = NdJson()
    assert await framing.read(reader) == {"a": 1}
    assert await framing.read(reader) is None
