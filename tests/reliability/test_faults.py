"""Faults: clients that vanish mid-call, and a server that dies mid-call.

The probe server (servers/cancel_probe.py) has an async tool, ``hold``, whose ``finally`` block
writes a marker file saying whether the task was cancelled or ran to its end: the only way to see
from outside that a handler was really cancelled (the reference ``countdown`` has no such
``finally``, and a cancelled call just stops sending). Every wait is a hang guard, never a
performance bound.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mcpkit import Client
from mcpkit.client.errors import ClientError
from tests.conftest import mcpkit_command
from tests.reliability.support import (
    BOTH,
    CANCEL_WITHIN,
    MODERN,
    PROBE,
    REVISION,
    STEP,
    HttpClient,
    HttpServer,
    Markers,
    assert_healthy,
    has_traceback,
    http_request,
    new_tag,
    tool_call,
)
from tests.test_stdio import ServerProcess, serve  # noqa: F401  (serve: a fixture)

pytestmark = pytest.mark.reliability


@pytest.fixture(scope="module")
def markers(tmp_path_factory: pytest.TempPathFactory) -> Markers:
    return Markers(tmp_path_factory.mktemp("probe-markers"))


@pytest.fixture(scope="module")
def probe_http(markers: Markers) -> Iterator[HttpServer]:
    server = HttpServer(target=PROBE, env={"CANCEL_PROBE_DIR": str(markers.dir)})
    try:
        yield server
    finally:
        stderr = server.stop()
        assert not has_traceback(stderr), stderr[-3000:]


@pytest.fixture
def probe_env(markers: Markers, monkeypatch: pytest.MonkeyPatch) -> Markers:
    """Stdio probe servers started in this test inherit the marker directory."""
    monkeypatch.setenv("CANCEL_PROBE_DIR", str(markers.dir))
    return markers


def modern_call(rid: Any, name: str, arguments: dict[str, Any], token: Any) -> tuple[bytes, list[str]]:
    """A 2026-07-28 tools/call: the body and the headers it needs (HM-11, HM-15)."""
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
            "progressToken": token}
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments,
                                                                          "_meta": meta}}
    headers = [f"MCP-Protocol-Version: {MODERN}", "Mcp-Method: tools/call", f"Mcp-Name: {name}"]
    return json.dumps(body).encode(), headers


def open_stream(server: HttpServer, body: bytes, extra: list[str]) -> socket.socket:
    """POST over a raw socket and read until the first progress event; returns the open socket."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=STEP)
    headers = [f"Host: 127.0.0.1:{server.port}", "Content-Type: application/json", f"Accept: {BOTH}", *extra]
    sock.sendall(http_request(server.port, "POST", headers, body))
    seen = b""
    while b"notifications/progress" not in seen:
        chunk = sock.recv(4096)
        assert chunk, f"the stream ended before any progress: {seen!r}"
        seen += chunk
    assert seen.startswith(b"HTTP/1.1 200"), seen[:200]
    return sock


def session_headers(client: HttpClient) -> list[str]:
    return [f"Mcp-Session-Id: {client.session_id}", f"MCP-Protocol-Version: {REVISION}"]


# ============================================================================ HTTP: the client goes away


@pytest.mark.req("HM-10", "CN-05")
def test_http_2026_a_dropped_stream_cancels_the_handler_and_its_finally_runs(probe_http, markers):
    tag = new_tag("modern-drop")
    body, headers = modern_call(1, "hold", {"tag": tag, "seconds": 60}, token="p")
    sock = open_stream(probe_http, body, headers)
    assert markers.read(tag, "finally") is None  # it is running
    sock.close()  # the client goes away after the first progress event
    assert markers.wait(tag, "finally") == "cancelled"
    assert_healthy(probe_http.url)


@pytest.mark.req("HL-10")
def test_http_2025_a_dropped_stream_is_no_cancellation_the_call_runs_to_its_end(probe_http, markers):
    with HttpClient(probe_http.url) as client:
        client.initialize()
        tag = new_tag("legacy-drop")
        body = json.dumps(tool_call(1, "hold", {"tag": tag, "seconds": 1.0}, token="p")).encode()
        sock = open_stream(probe_http, body, session_headers(client))
        sock.close()
        # HL-10: in the handshake era a disconnect is not a cancellation: the call completes
        assert markers.wait(tag, "finally", timeout=STEP) == "completed"
    assert_healthy(probe_http.url)


@pytest.mark.req("HL-18", "HL-17")
def test_http_deleting_the_session_cancels_its_calls_and_ends_their_streams(probe_http, markers):
    with HttpClient(probe_http.url) as client:
        client.initialize()
        tag = new_tag("delete")
        body = json.dumps(tool_call(1, "hold", {"tag": tag, "seconds": 60}, token="p")).encode()
        sock = open_stream(probe_http, body, session_headers(client))
        try:
            response = client.http.delete(client.url, headers=client.headers())
            assert response.status_code == 200
            assert markers.wait(tag, "finally") == "cancelled"
            sock.settimeout(CANCEL_WITHIN)
            rest = b""
            while not (b"\r\n" + rest).endswith(b"\r\n0\r\n\r\n"):  # the last chunk (a timeout: a hang)
                chunk = sock.recv(65536)
                assert chunk, rest
                rest += chunk
            assert b'"id":1,' not in rest, rest  # no answer for the cancelled call
        finally:
            sock.close()
        # the session is gone (HL-17)
        assert client.post({"jsonrpc": "2.0", "id": 2, "method": "ping"}).status_code == 404
    assert_healthy(probe_http.url)


# ============================================================================ stdio: cancel, close stdin


def _hold(ready: ServerProcess, tag: str, seconds: float) -> Any:
    """Start hold; returns its request id once its first progress arrived."""
    rid = ready.request("tools/call", {"name": "hold", "arguments": {"tag": tag, "seconds": seconds},
                                       "_meta": {"progressToken": tag}})
    first = ready.recv()
    assert first["method"] == "notifications/progress" and first["params"]["progressToken"] == tag, first
    return rid


@pytest.mark.req("CN-01", "ST-06")
def test_stdio_notifications_cancelled_cancels_the_handler_and_nothing_more_is_sent(serve, probe_env):  # noqa: F811
    ready = serve(PROBE)
    ready.initialize()
    tag = new_tag("stdio-cancel")
    rid = _hold(ready, tag, 60)
    cancel = {"requestId": rid, "reason": "enough"}
    ready.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
    assert probe_env.wait(tag, "finally") == "cancelled"
    before: list[Any] = []
    ready.answer(ready.request("ping"), others=before)  # progress already on its way may still arrive
    assert all(m.get("method") == "notifications/progress" for m in before), before
    after: list[Any] = []
    ready.answer(ready.request("ping"), others=after)
    assert after == [], "messages for a cancelled request"
    assert ready.finish() == 0
    assert all(json.loads(line).get("id") != rid for line in ready.raw_lines)  # never answered (CN-01)


@pytest.mark.req("ST-07", "LC-09")
def test_stdio_closing_stdin_mid_call_answers_it_then_exits(serve, probe_env):  # noqa: F811
    ready = serve(PROBE)
    ready.initialize()
    tag = new_tag("stdio-eof")
    rid = _hold(ready, tag, 1.0)
    ready.close_stdin()
    others: list[Any] = []
    answer = ready.answer(rid, others=others)
    assert answer["result"]["content"] == [{"type": "text", "text": f"held {tag}"}]
    assert all(m.get("method") == "notifications/progress" for m in others)
    assert ready.read_line() is None  # then stdout closes
    assert ready.wait() == 0
    assert probe_env.read(tag, "finally") == "completed"


@pytest.fixture(scope="module")
def drained(markers: Markers) -> dict[str, Any]:
    """stdin closes while a call runs far longer than the drain timeout (StdioServer.drain_timeout,
    10 s): what the server did, observed once for the tests below."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CANCEL_PROBE_DIR", str(markers.dir))
        ready = ServerProcess(mcpkit_command("serve", PROBE))
    try:
        ready.initialize()
        tag = new_tag("stdio-drain")
        rid = _hold(ready, tag, 600)
        started = time.monotonic()
        ready.close_stdin()
        lines = []
        while (line := ready.read_line(timeout=30)) is not None:  # hang guard: a 10 s drain, then the exit
            lines.append(json.loads(line))
        code = ready.wait(timeout=30)
        return {"code": code, "seconds": time.monotonic() - started, "finally": markers.read(tag, "finally"),
                "answered": [m for m in lines if m.get("id") == rid], "stderr": ready.stderr()}
    finally:
        ready.kill()


@pytest.mark.req("ST-07", "LC-09")
def test_stdio_closing_stdin_with_a_call_past_the_drain_timeout_still_exits(drained, figures):
    assert drained["code"] == 0
    assert drained["answered"] == []
    assert drained["finally"] is not None  # its finally block ran, one way or another
    figures.record("stdio_exit_after_eof_with_a_call_past_the_drain_timeout", seconds=round(drained["seconds"], 2))


def test_stdio_a_call_past_the_drain_timeout_is_cancelled_cleanly(drained):
    assert drained["finally"] == "cancelled", drained["finally"]
    assert "Task was destroyed but it is pending" not in drained["stderr"], drained["stderr"]


# ============================================================================ the server dies mid-call


@pytest.mark.req("HL-05")
def test_a_server_killed_mid_call_fails_every_kind_of_client_promptly(markers, figures):
    server = HttpServer(target=PROBE, env={"CANCEL_PROBE_DIR": str(markers.dir)})
    outcomes: dict[str, tuple[str, float]] = {}
    killed_at: list[float] = []
    try:
        # 1. a raw socket reading the SSE stream of a call
        raw_tag = new_tag("kill-raw")
        with HttpClient(server.url) as client:
            client.initialize()
            body = json.dumps(tool_call(1, "hold", {"tag": raw_tag, "seconds": 60}, token="p")).encode()
            sock = open_stream(server, body, session_headers(client))

            def read_raw() -> None:
                sock.settimeout(STEP)
                data = b""
                try:
                    while chunk := sock.recv(65536):
                        data += chunk
                    what = "eof"
                except ConnectionResetError:
                    what = "reset"
                except TimeoutError:
                    what = "hang"
                complete = data.endswith(b"0\r\n\r\n")  # a chunked body that ended properly
                outcomes["raw socket"] = (what + (" after a complete body" if complete else ""), _since(killed_at))

            # 2. httpx streaming the answer of another call
            httpx_tag = new_tag("kill-httpx")

            def read_httpx() -> None:
                try:
                    with client.http.stream("POST", client.url, headers=client.headers(),
                                            content=json.dumps(tool_call(2, "hold", {"tag": httpx_tag, "seconds": 60},
                                                                         token="q"))) as response:
                        for _ in response.iter_bytes():
                            pass
                    outcomes["httpx"] = ("the stream ended normally", _since(killed_at))
                except httpx.TransportError as exc:
                    outcomes["httpx"] = (type(exc).__name__, _since(killed_at))

            # 3. mcpkit's own client
            client_tag = new_tag("kill-client")

            def call_with_mcpkit_client() -> None:
                async def run() -> None:
                    async with Client(server.url, timeout=60) as mcp:
                        await mcp.call_tool("hold", {"tag": client_tag, "seconds": 60})

                try:
                    asyncio.run(run())
                    outcomes["mcpkit.Client"] = ("returned", _since(killed_at))
                except ClientError as exc:
                    outcomes["mcpkit.Client"] = (type(exc).__name__, _since(killed_at))
                except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                    outcomes["mcpkit.Client"] = (f"unexpected {type(exc).__name__}: {exc}", _since(killed_at))

            readers = [threading.Thread(target=f, daemon=True) for f in (read_raw, read_httpx, call_with_mcpkit_client)]
            for t in readers:
                t.start()
            for tag in (raw_tag, httpx_tag, client_tag):  # every call is in flight
                markers.wait(tag, "started", timeout=STEP)
            killed_at.append(time.monotonic())
            os.kill(server.pid, signal.SIGKILL)
            for t in readers:
                t.join(STEP + 5)
            sock.close()
    finally:
        server.stop()
    assert server.proc.returncode == -signal.SIGKILL
    assert outcomes["raw socket"][0] in ("eof", "reset"), outcomes
    assert outcomes["httpx"][0] in ("RemoteProtocolError", "ReadError"), outcomes
    assert outcomes["mcpkit.Client"][0] == "ClientError", outcomes
    for kind, (_, seconds) in outcomes.items():
        assert seconds < CANCEL_WITHIN, f"{kind} waited {seconds:.1f} s for a dead server"
    figures.record("http_clients_after_sigkill_mid_call",
                   **{kind.replace(" ", "_").replace(".", "_"): {"outcome": what, "seconds": round(s, 3)}
                      for kind, (what, s) in outcomes.items()})


def _since(mark: list[float]) -> float:
    return time.monotonic() - mark[0] if mark else -1.0


@pytest.mark.req("ST-07")
def test_a_stdio_server_killed_mid_call_closes_its_stdout(serve, probe_env):  # noqa: F811
    ready = serve(PROBE, tap=False)
    ready.initialize()
    tag = new_tag("stdio-kill")
    _hold(ready, tag, 60)
    ready.proc.kill()
    deadline = time.monotonic() + CANCEL_WITHIN
    while (line := ready.read_line(timeout=max(0.01, deadline - time.monotonic()))) is not None:
        assert json.loads(line).get("method") == "notifications/progress"
    assert ready.wait() == -signal.SIGKILL
    assert probe_env.read(tag, "finally") is None  # killed: no finally runs
