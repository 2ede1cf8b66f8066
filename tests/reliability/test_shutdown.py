"""Graceful shutdown of real processes on real signals: SIGTERM (docker stop, systemd, Kubernetes)
and Ctrl-C's SIGINT.

A client holding its standalone GET stream (every SDK client, the Inspector and Claude Code open
one) must not hold the server: the stream ends, cleanly, at once; a request in flight is answered
when it finishes within ``--shutdown-timeout``, and answered with an error when it does not; the
process exits 0 without a traceback. Every wait is a hang guard: a server that waited for its
streams would wait for the deadline of 30 s these tests give it (or, before, uvicorn's).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpkit.transports import SHUTDOWN_TIMEOUT
from tests.conftest import component_missing, mcpkit_command
from tests.reliability.support import (
    CANCEL_WITHIN,
    PROBE,
    STEP,
    HttpClient,
    HttpServer,
    Markers,
    has_traceback,
    new_tag,
    tool_call,
)
from tests.test_http import free_port, wait_listening
from tests.test_stdio import ServerProcess

pytestmark = pytest.mark.reliability

#: the deadline of servers whose open streams must not make them wait: far beyond every bound here
LONG = "30"
SIGNALS = [pytest.param(signal.SIGTERM, id="SIGTERM"), pytest.param(signal.SIGINT, id="SIGINT")]


@pytest.fixture(scope="module")
def markers(tmp_path_factory: pytest.TempPathFactory) -> Markers:
    return Markers(tmp_path_factory.mktemp("shutdown-markers"))


class Held:
    """A GET the client keeps open (the standalone stream, or a legacy /sse stream), read in a
    thread: how it ended, ``complete`` when the response finished properly."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.body = b""
        self.status: int | None = None
        self.ended: str | None = None
        self.opened = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(url, headers), daemon=True)
        self._thread.start()
        assert self.opened.wait(STEP), "the stream did not open"
        assert self.status == 200, (self.status, self.body)

    def _read(self, url: str, headers: dict[str, str]) -> None:
        try:
            with httpx.stream("GET", url, headers=headers, timeout=STEP) as response:
                self.status = response.status_code
                self.opened.set()
                for chunk in response.iter_bytes():
                    self.body += chunk
            self.ended = "complete"
        except Exception as exc:  # noqa: BLE001 - what the client saw is the finding
            self.ended = repr(exc)
        finally:
            self.opened.set()

    def wait(self) -> str | None:
        self._thread.join(STEP)
        return self.ended


def hold_get(client: HttpClient) -> Held:
    headers = {k: v for k, v in client.headers().items() if k != "content-type"}
    headers["accept"] = "text/event-stream"
    return Held(client.url, headers)


class InFlight:
    """A POST answered on an SSE stream, sent in a thread: its messages once the stream ended."""

    def __init__(self, client: HttpClient, message: Any) -> None:
        self.messages: list[Any] | None = None
        self.error: str | None = None
        http = httpx.Client(timeout=STEP)

        def send() -> None:
            try:
                response = http.post(client.url, content=json.dumps(message).encode(), headers=client.headers())
                self.messages = client.messages(response)
            except Exception as exc:  # noqa: BLE001
                self.error = repr(exc)
            finally:
                http.close()

        self._thread = threading.Thread(target=send, daemon=True)
        self._thread.start()

    def answer(self) -> Any:
        self._thread.join(STEP)
        assert self.error is None, self.error
        assert self.messages is not None, "no answer within the hang guard"
        return [m for m in self.messages if "method" not in m]


def running(client: HttpClient, markers: Markers, call: dict[str, Any]) -> InFlight:
    """A call of the probe sent, once its handler has started (its ``tag`` marks it)."""
    in_flight = InFlight(client, call)
    markers.wait(call["params"]["arguments"]["tag"], "started")
    return in_flight


def stop(server: HttpServer, sig: int = signal.SIGTERM) -> tuple[int, str]:
    """Send ``sig``; the exit code (within the hang guard) and stderr."""
    server.proc.send_signal(sig)
    try:
        code = server.proc.wait(STEP)
    except subprocess.TimeoutExpired:
        code = None
    stderr = server.stop()
    assert code is not None, f"still running {STEP} s after {signal.Signals(sig).name}; stderr:\n{stderr[-3000:]}"
    return code, stderr


@pytest.fixture(params=["asyncio", "uvloop"])
def probe(markers: Markers, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Start an HTTP server of the probe (``mcpkit serve``, ``proxy`` or ``dev``) on each event
    loop users run (MCPKIT_LOOP); stopped at the end."""
    started: list[HttpServer] = []
    env = {"CANCEL_PROBE_DIR": str(markers.dir), "MCPKIT_LOOP": request.param}

    def start(*args: str, command: str = "serve") -> HttpServer:
        target = None if command == "proxy" else PROBE
        server = HttpServer(*args, target=target, command=command, env=env)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.alive():
            server.stop()


def proxy_args(*args: str) -> list[str]:
    """``mcpkit proxy --http ... ARGS -- mcpkit serve PROBE``: the probe on stdio behind the proxy,
    given by name the variable that says where its markers go (a command upstream sees only an
    allow-list of the proxy's environment)."""
    return [*args, "--pass-env", "CANCEL_PROBE_DIR", "--", *mcpkit_command("serve", PROBE)]


# ============================================================================ a held GET stream


@pytest.mark.req("LC-09", "HL-12")
@pytest.mark.parametrize("sig", SIGNALS)
@pytest.mark.parametrize("command", ["serve", "proxy", "dev"])
def test_a_held_get_stream_ends_cleanly_and_the_server_exits_0(probe, command, sig):
    args = ["--shutdown-timeout", LONG] if command != "dev" else []
    server = probe(*(proxy_args(*args) if command == "proxy" else args), command=command)
    with HttpClient(server.url) as client:
        client.initialize()
        held = hold_get(client)
        code, stderr = stop(server, sig)
        assert held.wait() == "complete", held.ended  # the response ended, not a reset
    assert code == 0, stderr[-3000:]
    assert not has_traceback(stderr), stderr[-3000:]


def test_a_held_legacy_sse_stream_ends_cleanly(probe):
    server = probe("--shutdown-timeout", LONG)
    held = Held(f"http://127.0.0.1:{server.port}/sse", {"accept": "text/event-stream"})
    code, stderr = stop(server)
    assert held.wait() == "complete", held.ended
    assert held.body.startswith(b"event: endpoint\n")
    assert code == 0 and not has_traceback(stderr), stderr[-3000:]


# ============================================================================ requests in flight


@pytest.mark.req("LC-09", "HL-08")
@pytest.mark.parametrize("command", ["serve", "proxy"])
def test_a_call_that_finishes_within_the_deadline_is_answered(probe, markers, command):
    args = ["--shutdown-timeout", LONG]
    server = probe(*(proxy_args(*args) if command == "proxy" else args), command=command)
    tag = new_tag("finishes")
    with HttpClient(server.url) as client:
        client.initialize()
        held = hold_get(client)
        call = running(client, markers, tool_call(7, "hold", {"tag": tag, "seconds": 1.0}))
        code, stderr = stop(server)
        assert held.wait() == "complete", held.ended
        [answer] = call.answer()
    assert answer["id"] == 7 and answer["result"]["content"] == [{"type": "text", "text": f"held {tag}"}], answer
    assert markers.read(tag, "finally") == "completed"
    assert code == 0 and not has_traceback(stderr), stderr[-3000:]


@pytest.mark.parametrize("tool", ["hold", "block"])  # async: cancelled; sync: its thread is left behind
def test_a_call_past_the_deadline_is_answered_with_an_error(probe, markers, tool):
    server = probe("--shutdown-timeout", "1")
    tag = new_tag("past")
    with HttpClient(server.url) as client:
        client.initialize()
        call = running(client, markers, tool_call(8, tool, {"tag": tag, "seconds": 60}))
        code, stderr = stop(server)
        [answer] = call.answer()
    assert answer["id"] == 8 and answer["error"]["code"] == -32603, answer
    assert "shutting down" in answer["error"]["message"]
    if tool == "hold":
        assert markers.read(tag, "finally") == "cancelled"
    assert code == 0 and not has_traceback(stderr), stderr[-3000:]


def test_a_second_ctrl_c_ends_a_call_at_once(probe, markers):
    server = probe("--shutdown-timeout", LONG)
    tag = new_tag("second")
    with HttpClient(server.url) as client:
        client.initialize()
        held = hold_get(client)
        call = running(client, markers, tool_call(10, "hold", {"tag": tag, "seconds": 60}))
        server.proc.send_signal(signal.SIGINT)
        assert held.wait() == "complete", held.ended  # the shutdown began; the call waits for its deadline
        code, stderr = stop(server, signal.SIGINT)
        [answer] = call.answer()
    assert answer["error"]["code"] == -32603, answer
    assert markers.read(tag, "finally") == "cancelled"
    assert code == 0 and not has_traceback(stderr), stderr[-3000:]


@pytest.mark.req("LC-09")
@pytest.mark.parametrize("sig", SIGNALS)
@pytest.mark.parametrize("command", ["serve", "proxy"])
def test_stdio_a_call_past_the_deadline_is_cancelled_and_the_server_exits_0(markers, monkeypatch, command, sig):
    monkeypatch.setenv("CANCEL_PROBE_DIR", str(markers.dir))
    if command == "proxy":
        server = ServerProcess(mcpkit_command("proxy", *proxy_args("--shutdown-timeout", "1")))
    else:
        server = ServerProcess(mcpkit_command("serve", PROBE, "--shutdown-timeout", "1"))
    try:
        server.initialize()
        tag = new_tag("stdio-past")
        server.request("tools/call", {"name": "hold", "arguments": {"tag": tag, "seconds": 60}})
        markers.wait(tag, "started")
        server.proc.send_signal(sig)
        assert server.wait(STEP) == 0
        # behind the proxy the handler runs in the upstream's process, which may finish its
        # cancellation a moment after the proxy has exited (a loaded machine showed it); and if
        # the proxy's notifications/cancelled did not reach it before the proxy exited, the
        # upstream sees only its stdin's end and cancels at its own drain deadline (5 s, ST-07)
        within = CANCEL_WITHIN if command == "serve" else SHUTDOWN_TIMEOUT + CANCEL_WITHIN
        assert markers.wait(tag, "finally", within) == "cancelled"
        assert not has_traceback(server.stderr()), server.stderr()[-3000:]
    finally:
        server.kill()


# ============================================================================ mcpkit dev --reload


def test_dev_reload_restarts_without_a_traceback(tmp_path):
    pytest.importorskip("watchfiles")
    source = tmp_path / "server.py"
    source.write_text(textwrap.dedent('''
        from mcpkit import Server

        server = Server("reloaded", "1.0")


        @server.tool
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b
        '''))
    server = HttpServer("--reload", target=str(source), command="dev")
    try:
        with HttpClient(server.url) as client:
            client.initialize()
            held = hold_get(client)  # the inspector page holds one: the page's session outlives restarts
            source.write_text(source.read_text() + "\n# changed\n")
            deadline = time.monotonic() + STEP
            while "changed; restarting" not in server.stderr():
                assert time.monotonic() < deadline, server.stderr()
                time.sleep(0.1)
            while True:  # the restarted server serves the same session, through the page's port
                try:
                    answer = client.call("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
                    if "result" in answer and not answer["result"].get("isError"):
                        break  # while it restarts, a call is refused as retryable (E_NOT_CONNECTED)
                except (httpx.HTTPError, AssertionError):
                    pass
                assert time.monotonic() < deadline, "the server did not come back"
                time.sleep(0.1)
            assert answer["result"].get("structuredContent") == {"result": 3}, answer
        code, stderr = stop(server)
        held.wait()  # ended with the process, not before
    finally:
        if server.alive():
            server.stop()
    assert code == 0, stderr[-3000:]
    assert "changed; restarting" in stderr, stderr
    assert not has_traceback(stderr), stderr[-3000:]


# ============================================================================ --workers


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A Redis for the workers to share: ``MCPKIT_TEST_REDIS``, or a redis-server of this test's own."""
    pytest.importorskip("redis")
    url = os.environ.get("MCPKIT_TEST_REDIS")
    if url:
        yield url
        return
    if shutil.which("redis-server") is None:
        component_missing("no Redis for --workers: install redis-server, or set MCPKIT_TEST_REDIS")
    from tests.stores.conftest import RedisProcess

    redis = RedisProcess()
    redis.start()
    try:
        yield redis.url
    finally:
        redis.stop()


def test_workers_sigterm_to_the_parent_stops_every_worker(redis_url):
    prefix = f"shutdown{secrets.token_hex(4)}:"
    server = HttpServer("--workers", "2", "--shutdown-timeout", LONG, target=PROBE,
                        env={"MCPKIT_STORE": f"{redis_url}?prefix={prefix}"})
    try:
        with HttpClient(server.url) as client:
            client.initialize()
            held = [hold_get(client)]
            with HttpClient(server.url) as other:  # likely on the other worker: both hold a stream
                other.initialize()
                held.append(hold_get(other))
                workers = _workers(server.pid)
                assert len(workers) == 2, workers
                code, stderr = stop(server)
                assert [h.wait() for h in held] == ["complete", "complete"], [h.ended for h in held]
    finally:
        if server.alive():
            server.stop()
        _forget(redis_url, prefix)
    assert code == 0, stderr[-3000:]
    assert not has_traceback(stderr), stderr[-3000:]
    assert [pid for pid in workers if _alive(pid)] == []


def _forget(url: str, prefix: str) -> None:
    """Delete what the workers stored under ``prefix``."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=prefix + "*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def _workers(pid: int) -> list[int]:
    """The worker processes of ``pid`` (multiprocessing's spawned children, not its resource tracker)."""
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(child) for child in found if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# ============================================================================ the audit log


AUDITED = textwrap.dedent('''
    from mcpkit import Server
    from mcpkit.policy import AuditLog, Policy

    # buffered for a minute: its lines reach the file only when the server writes them out
    audit = AuditLog.from_env(flush_interval=60)  # MCPKIT_AUDIT_LOG
    server = Server("audited", "1.0", policy=Policy(audit=audit))


    @server.tool(read_only=True, open_world=False)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b
    ''')


def test_the_audit_log_has_every_call_after_sigterm(tmp_path):
    source = tmp_path / "audited.py"
    source.write_text(AUDITED)
    log = tmp_path / "audit.log"
    server = HttpServer("--shutdown-timeout", LONG, target=str(source), env={"MCPKIT_AUDIT_LOG": str(log)})
    with HttpClient(server.url) as client:
        client.initialize()
        for n in range(5):
            assert client.tool("add", {"a": n, "b": 1})["structuredContent"] == {"result": n + 1}
    code, stderr = stop(server)
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    assert [(line["tool"], line["arguments"], line["outcome"]) for line in lines] == [
        ("add", {"a": n, "b": 1}, "ok") for n in range(5)]
    assert code == 0 and not has_traceback(stderr), stderr[-3000:]


# ============================================================================ an app under the user's own uvicorn


EMBEDDED = textwrap.dedent('''
    import sys

    sys.path.insert(0, {probe_dir!r})
    from cancel_probe import server

    app = server.http_app()
    ''')


def test_an_app_under_a_uvicorn_of_its_own_ends_its_streams(tmp_path, markers):
    """``uvicorn module:app``: the app puts itself in front of uvicorn's signal handlers."""
    pytest.importorskip("uvicorn")
    (tmp_path / "embedded.py").write_text(EMBEDDED.format(probe_dir=str(Path(PROBE).parent)))
    port = free_port()
    errlog = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "embedded:app", "--port", str(port), "--log-level", "warning",
         "--timeout-graceful-shutdown", LONG],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog,
        env={**os.environ, "CANCEL_PROBE_DIR": str(markers.dir)})
    try:
        wait_listening(proc, port)
        with HttpClient(f"http://127.0.0.1:{port}/mcp") as client:
            client.initialize()
            held = hold_get(client)
            tag = new_tag("embedded")
            call = running(client, markers, tool_call(9, "hold", {"tag": tag, "seconds": 1.0}))
            proc.send_signal(signal.SIGTERM)
            assert held.wait() == "complete", held.ended
            [answer] = call.answer()
            assert answer["result"]["content"] == [{"type": "text", "text": f"held {tag}"}], answer
        # uvicorn raises the SIGTERM again once it has shut down: killed by it, as it chose
        assert proc.wait(STEP) in (0, -signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        errlog.seek(0)
        stderr = errlog.read().decode("utf-8", "replace")
        errlog.close()
    assert not has_traceback(stderr), stderr[-3000:]
