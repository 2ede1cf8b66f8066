"""The stdio transport against the real process: ``mcpkit serve`` driven line by line over pipes.

Each test spawns the server (through the traffic tap, so every line it writes is validated against
the official schema of the negotiated revision when the test ends), writes lines to its stdin and
reads its stdout with a timeout, so a hang fails the test instead of blocking the suite.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import tempfile
import textwrap
import threading
import time
from collections import Counter
from typing import Any

import pytest

from tests.conftest import mcpkit_command

TIMEOUT = 15.0  # generous: a loaded CI machine, two Python start-ups (tap and server)


class ServerProcess:
    """A stdio MCP server process, driven like a client: write lines, read lines with a timeout."""

    def __init__(self, argv: list[str], cwd: str | None = None) -> None:
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, cwd=cwd
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self.raw_lines: list[bytes] = []  # every line the server wrote, in order
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._next_id = 10_000

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.raw_lines.append(line)
            self._lines.put(line)
        self._lines.put(None)

    # ------------------------------------------------------------------ writing

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def request(self, method: str, params: dict[str, Any] | None = None, rid: Any = None) -> Any:
        """Send a request; returns its id."""
        if rid is None:
            self._next_id += 1
            rid = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return rid

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    # ------------------------------------------------------------------ reading

    def read_line(self, timeout: float = TIMEOUT) -> bytes | None:
        """The next line the server wrote, or None at EOF; fails after ``timeout`` seconds."""
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"no line from the server within {timeout} s; stderr:\n{self.stderr()[-2000:]}"
            ) from None

    def recv(self, timeout: float = TIMEOUT) -> Any:
        line = self.read_line(timeout)
        assert line is not None, f"the server closed stdout; stderr:\n{self.stderr()[-2000:]}"
        assert line.endswith(b"\n")
        return json.loads(line)

    def answer(self, rid: Any, timeout: float = TIMEOUT, others: list[Any] | None = None) -> Any:
        """Read until the response to ``rid``; what came before it goes to ``others`` (or must not exist)."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.recv(max(0.01, deadline - time.monotonic()))
            if isinstance(message, dict) and "method" not in message and message.get("id") == rid:
                return message
            if others is None:
                raise AssertionError(f"expected the answer to {rid!r}, got {message!r}")
            others.append(message)

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = TIMEOUT) -> Any:
        return self.answer(self.request(method, params), timeout)

    def ping(self, timeout: float = TIMEOUT) -> None:
        rid = self.request("ping")
        assert self.answer(rid, timeout) == {"jsonrpc": "2.0", "id": rid, "result": {}}

    def initialize(self, version: str = "2025-11-25", capabilities: dict[str, Any] | None = None) -> Any:
        params = {
            "protocolVersion": version,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "stdio-test", "version": "1.0"},
        }
        result = self.call("initialize", params)["result"]
        assert result["protocolVersion"] == version
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")

    # ------------------------------------------------------------------ ending

    def wait(self, timeout: float = TIMEOUT) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(timeout)
        return code

    def finish(self, timeout: float = TIMEOUT) -> int:
        """Close stdin (the stdio shutdown signal) and wait for the exit code."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.close_stdin()
            except BrokenPipeError:
                pass
        return self.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)
        streams = [self.proc.stdin]
        if not self._reader.is_alive():  # closing a pipe another thread reads would block
            streams.append(self.proc.stdout)
        for stream in streams:
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self._stderr.close()


def _assert_all_lines_are_jsonrpc(lines: list[bytes]) -> None:
    for line in lines:
        message = json.loads(line)  # ST-02: only JSON-RPC on stdout
        for m in message if isinstance(message, list) else [message]:
            assert isinstance(m, dict) and m.get("jsonrpc") == "2.0", line
            assert ("method" in m) or ("result" in m) != ("error" in m), line


@pytest.fixture
def serve(wire: Any):
    """Start servers (through the tap unless ``tap=False``); all are killed at teardown."""
    started: list[ServerProcess] = []

    def start(*args: str, tap: bool = True, cwd: str | None = None) -> ServerProcess:
        argv = mcpkit_command("serve", *args)
        server = ServerProcess(wire.command(argv) if tap else argv, cwd=cwd)
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill()


@pytest.fixture
def server(serve: Any) -> ServerProcess:
    return serve()


@pytest.fixture
def ready(server: ServerProcess) -> ServerProcess:
    server.initialize()
    return server


def _add(a: int, b: int) -> dict[str, Any]:
    return {"name": "add", "arguments": {"a": a, "b": b}}


def _sleep(seconds: float) -> dict[str, Any]:
    return {"name": "sleep", "arguments": {"seconds": seconds}}


# --------------------------------------------------------------------------- garbage in


@pytest.mark.req("ST-04", "BP-06", "PG-01", "LC-04")
def test_invalid_json_gets_a_parse_error_without_id_and_serving_goes_on(server):
    server.write(b"this is not json\n")
    answer = server.recv()
    assert "id" not in answer
    assert answer["error"]["code"] == -32700
    assert answer["error"]["message"] == "Parse error: the message is not valid UTF-8 JSON."
    server.ping()  # before initialize
    server.initialize()
    server.write(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"\n')
    answer = server.recv()
    assert "id" not in answer and answer["error"]["code"] == -32700
    server.ping()
    assert server.finish() == 0


INVALID_UTF8 = [
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xff\xfe"}}',  # a bad byte in a string
    b"\xc3\x28",  # a bad sequence
    b'{"jsonrpc":"2.0","id":2,"method":"p\xed\xa0\x80ng"}',  # an encoded surrogate
]


@pytest.mark.req("BP-02", "ST-04")
def test_invalid_utf8_gets_a_parse_error(ready):
    for line in INVALID_UTF8:
        ready.write(line + b"\n")
        answer = ready.recv()
        assert "id" not in answer, line
        assert answer["error"]["code"] == -32700, line
        ready.ping()
    assert ready.finish() == 0


WRONG_TYPES = [
    (b"42", None),
    (b'"ping"', None),
    (b'{"jsonrpc":"1.0","id":3,"method":"ping"}', 3),
    (b'{"id":4,"method":"ping"}', 4),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', None),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', None),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', None),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', None),
    (b'{"jsonrpc":"2.0","id":5,"method":"tools/list","params":[1]}', 5),
    (b'{"jsonrpc":"2.0","id":"s","method":"tools/call","params":"x"}', "s"),
    (b"[]", None),
    (b'[{"jsonrpc":"2.0","id":6,"method":"ping"}]', None),  # no batches in 2025-11-25
]


@pytest.mark.req("BP-01", "BP-03", "BP-06", "ST-04")
def test_wrong_types_get_invalid_request(ready):
    for line, rid in WRONG_TYPES:
        ready.write(line + b"\n")
        answer = ready.recv()
        assert answer["error"]["code"] == -32600, line
        if rid is None:
            assert "id" not in answer, line
        else:
            assert answer["id"] == rid, line
        ready.ping()  # serving goes on, and the bad line got exactly one answer
    assert ready.finish() == 0


@pytest.mark.req("ST-04")
def test_a_huge_id_with_deep_nesting_does_not_end_the_server(serve):
    # Without the tap: its wire checker decodes every line with the stdlib json module and itself
    # fails on this nesting with RecursionError (it only expects ValueError).
    ready = serve(tap=False)
    ready.initialize()
    depth = 1000
    ready.write(
        b'{"jsonrpc":"2.0","id":1e20,"method":"ping","params":{"x":' + b"[" * depth + b"]" * depth + b"}}\n"
    )
    others: list[Any] = []
    ready.answer(ready.request("ping"), others=others)  # the server is still there
    assert len(others) == 1 and "id" not in others[0] and others[0]["error"]["code"] in (-32600, -32700)


@pytest.mark.req("BP-01", "BP-06", "ST-04")
def test_invalid_messages_whose_id_is_readable_echo_it(serve):
    # Run WITHOUT the tap: its wire checker pairs an error with a pending request only when the
    # request had a string "method", so it rejects these legitimate answers (the id is readable,
    # so BP-06 wants it echoed). The answers are checked here instead.
    server = serve(tap=False)
    server.initialize()
    server.write(b'{"jsonrpc":"2.0","id":7,"method":7}\n{"jsonrpc":"2.0","id":"e"}\n')
    first, second = server.recv(), server.recv()
    assert (first["id"], first["error"]["code"]) == (7, -32600)
    assert first["error"]["message"] == 'The "method" member must be a non-empty string.'
    assert (second["id"], second["error"]["code"]) == ("e", -32600)
    server.ping()
    assert server.finish() == 0


@pytest.mark.req("ST-04")
def test_blank_lines_notifications_and_responses_nobody_asked_for_are_ignored(ready):
    ready.write(b"\n   \n\t\n\r\n")
    ready.send({"jsonrpc": "2.0", "method": "notifications/unknown", "params": {"x": 1}})
    ready.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "never-sent"}})
    ready.send({"jsonrpc": "2.0", "id": 424242, "result": {}})
    ready.send({"jsonrpc": "2.0", "error": {"code": -32700, "message": "client could not parse"}})
    ready.ping()  # the first line after them is the ping's answer
    assert ready.finish() == 0


# --------------------------------------------------------------------------- methods and lifecycle


@pytest.mark.req("BP-06")
def test_unknown_method_is_method_not_found(ready):
    answer = ready.call("no/such/method", {})
    assert answer["error"]["code"] == -32601
    assert answer["error"]["message"] == "Method not found: no/such/method"
    ready.ping()


@pytest.mark.req("LC-01", "LC-04", "PG-01", "BP-09")
def test_requests_before_initialize_are_refused_but_ping_works(server):
    answer = server.call("tools/list")
    assert answer["error"]["code"] == -32600
    assert "initialize" in answer["error"]["message"]
    answer = server.call("tools/call", _add(1, 2))
    assert answer["error"]["code"] == -32600
    # a notification before initialize is not answered: the next line is the ping's answer
    server.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
    server.ping()
    server.initialize()
    answer = server.call("tools/call", _add(1, 2))
    assert answer["result"]["structuredContent"] == {"result": 3}
    assert server.finish() == 0


@pytest.mark.req("LC-02", "LC-01")
@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_each_revision_is_negotiated_over_stdio(server, version):
    result = server.initialize(version)
    assert result["serverInfo"]["name"] == "mcpkit-reference"
    answer = server.call("tools/call", _add(20, 22))
    assert "error" not in answer and answer["result"].get("isError") is not True
    assert answer["result"]["content"][0]["type"] == "text"
    assert server.finish() == 0


@pytest.mark.req("BP-13", "ST-01")
def test_a_batch_line_under_2025_03_26(server):
    server.initialize("2025-03-26")
    server.write(
        b'[{"jsonrpc":"2.0","id":"a","method":"ping"},'
        b'{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}},'
        b'{"jsonrpc":"2.0","method":"notifications/x"}]\n'
    )
    batch = server.recv()
    assert isinstance(batch, list) and sorted(m["id"] for m in batch) == ["a", "b"]
    by_id = {m["id"]: m for m in batch}
    assert by_id["a"]["result"] == {}
    assert by_id["b"]["result"]["content"][0]["type"] == "text"
    server.ping()
    assert server.finish() == 0


# --------------------------------------------------------------------------- size limit


@pytest.mark.req("ST-04", "BP-06")
def test_a_line_over_the_size_limit_is_refused_and_the_next_request_works(serve):
    server = serve("--max-message-bytes", "1000")
    server.initialize()
    text = "x" * 5000
    rid = server.request("tools/call", {"name": "echo", "arguments": {"text": text}})
    answer = server.recv()
    assert "id" not in answer
    assert answer["error"]["code"] == -32600
    assert answer["error"]["message"].startswith("Message too large: ")
    assert answer["error"]["message"].endswith("exceeds the limit of 1000 bytes.")
    assert answer["error"]["data"] == {"limit": 1000}
    # the oversized request was discarded, not run: the next line is the ping's answer
    server.ping()
    # a message under the limit still works
    answer = server.call("tools/call", {"name": "echo", "arguments": {"text": "y" * 800}})
    assert answer["result"]["content"] == [{"type": "text", "text": "y" * 800}]
    assert rid not in [json.loads(line).get("id") for line in server.raw_lines]
    assert server.finish() == 0


@pytest.mark.req("ST-04")
def test_an_oversized_line_streamed_in_pieces_gets_one_error(serve):
    server = serve("--max-message-bytes", "1000")
    server.initialize()
    server.write(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"')
    for _ in range(4):
        server.write(b"z" * 1500)
        time.sleep(0.05)
    server.write(b'"}}\n')
    answer = server.recv()
    assert answer["error"]["code"] == -32600 and "id" not in answer
    server.ping()  # exactly one error: the next line answers the ping
    assert server.finish() == 0


# --------------------------------------------------------------------------- concurrency


@pytest.mark.req("BP-04", "BP-06")
def test_a_duplicate_in_flight_id_is_refused_and_the_first_call_still_answers(serve):
    # Run WITHOUT the tap: its wire checker pairs responses with requests by id and keeps one
    # pending request per id, so the legitimate second answer to id 7 would be reported as
    # "answers no pending client request". Both answers are checked here instead.
    server = serve(tap=False)
    server.initialize()
    server.request("tools/call", _sleep(1), rid=7)
    server.request("ping", rid=7)
    first = server.recv()
    assert first["id"] == 7 and first["error"]["code"] == -32600
    assert "already used" in first["error"]["message"]
    second = server.recv()
    assert second == {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "Slept 1 s"}]}}
    assert server.finish() == 0


@pytest.mark.req("PG-01")
def test_a_slow_sync_tool_does_not_delay_ping(ready):
    slow = ready.request("tools/call", _sleep(3))
    started = time.monotonic()
    ready.ping(timeout=10)
    assert time.monotonic() - started < 1.0, "ping waited for the sync tool"
    # other calls are not delayed either
    assert ready.call("tools/call", _add(2, 2), timeout=10)["result"]["structuredContent"] == {"result": 4}
    assert time.monotonic() - started < 2.0
    answer = ready.answer(slow, timeout=15)
    assert answer["result"]["content"] == [{"type": "text", "text": "Slept 3 s"}]
    assert ready.finish() == 0


@pytest.mark.req("BP-05", "ST-01")
def test_many_pipelined_requests_are_each_answered_once(ready):
    count = 2000
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": _add(n, 2 * n)}).encode()
        for n in range(count)
    ]
    writer = threading.Thread(target=ready.write, args=(b"\n".join(lines) + b"\n",))
    writer.start()
    answers: dict[int, Any] = {}
    for _ in range(count):
        message = ready.recv(timeout=30)
        assert message["id"] not in answers, f"answered twice: {message['id']}"
        answers[message["id"]] = message
    writer.join(30)
    assert sorted(answers) == list(range(count))
    for n, message in answers.items():
        assert message["result"]["structuredContent"] == {"result": 3 * n}, message
    ready.ping()
    assert ready.finish() == 0


@pytest.mark.req("BP-05")
def test_more_pipelined_async_calls_than_the_in_flight_limit(ready):
    # 600 async calls that each wait 0.2 s: more than the 256 the reader lets run at once, so it
    # must pause reading and resume as calls finish (backpressure), without losing a line.
    count = 600
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": f"r{n}", "method": "tools/call",
                    "params": {"name": "test_reconnection", "arguments": {}}}).encode()
        for n in range(count)
    ]
    writer = threading.Thread(target=ready.write, args=(b"\n".join(lines) + b"\n",))
    writer.start()
    seen = Counter(ready.recv(timeout=30)["id"] for _ in range(count))
    writer.join(30)
    assert seen == Counter(f"r{n}" for n in range(count))
    ready.ping()
    assert ready.finish() == 0


@pytest.mark.req("CN-01", "PR-04")
def test_a_cancelled_call_gets_no_answer_and_no_more_progress(ready):
    rid = ready.request("tools/call", {"name": "countdown", "arguments": {"seconds": 3}, "_meta": {"progressToken": "cd"}})
    first = ready.recv()
    assert first["method"] == "notifications/progress"
    assert first["params"]["progressToken"] == "cd" and first["params"]["progress"] == 0
    ready.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid, "reason": "enough"}})
    before: list[Any] = []
    ready.answer(ready.request("ping"), others=before)
    assert all(m.get("id") != rid for m in before)
    time.sleep(1.5)  # past the countdown's next tick
    after: list[Any] = []
    ready.answer(ready.request("ping"), others=after)
    assert after == [], "messages for a cancelled request"
    # a cancel for it now (and for an unknown id) is ignored, not answered
    ready.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})
    ready.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "nobody"}})
    ready.ping()
    assert ready.finish() == 0
    assert all(json.loads(line).get("id") != rid for line in ready.raw_lines)


@pytest.mark.req("PR-01", "PR-02", "PR-03", "PR-04")
def test_progress_over_stdio_echoes_the_token_increases_and_stops_with_the_answer(ready):
    rid = ready.request("tools/call", {"name": "countdown", "arguments": {"seconds": 2}, "_meta": {"progressToken": 42}})
    before: list[Any] = []
    answer = ready.answer(rid, others=before)
    assert answer["result"]["content"] == [{"type": "text", "text": "Lift-off"}]
    assert [m["method"] for m in before] == ["notifications/progress"] * 2
    assert [m["params"] for m in before] == [
        {"progressToken": 42, "progress": 0, "total": 2, "message": "2 s left"},
        {"progressToken": 42, "progress": 1, "total": 2, "message": "1 s left"},
    ]
    ready.ping()  # nothing for it after its answer
    assert ready.finish() == 0


# --------------------------------------------------------------------------- shutdown


@pytest.mark.req("ST-07", "LC-09")
def test_eof_with_a_call_in_flight_still_writes_its_answer_and_exits_0(ready):
    rid = ready.request("tools/call", _sleep(1))
    ready.close_stdin()
    answer = ready.recv()
    assert answer == {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "Slept 1 s"}]}}
    assert ready.read_line() is None  # stdout closed after it
    assert ready.wait() == 0


@pytest.mark.req("ST-07", "LC-09")
def test_eof_with_an_async_call_in_flight(ready):
    rid = ready.request("tools/call", {"name": "test_reconnection", "arguments": {}})
    ready.close_stdin()
    answer = ready.answer(rid)
    assert answer["result"]["content"] == [{"type": "text", "text": "Reconnection test completed successfully"}]
    assert ready.wait() == 0


@pytest.mark.req("ST-07", "LC-09")
def test_eof_of_an_idle_server_exits_promptly_with_0(ready):
    started = time.monotonic()
    assert ready.finish() == 0
    assert time.monotonic() - started < 5
    assert ready.read_line() is None


@pytest.mark.req("ST-07")
def test_eof_while_a_tool_waits_for_the_client_exits_promptly(serve):
    # without the tap, so that the teardown's kill reaches the server itself and leaves no orphan
    server = serve(tap=False)
    server.initialize(capabilities={"roots": {}})
    server.request("tools/call", {"name": "list_roots", "arguments": {}})
    assert server.recv()["method"] == "roots/list"
    server.close_stdin()
    assert server.wait(timeout=5) == 0  # not the 10 s drain timeout: nobody can answer any more


@pytest.mark.req("ST-01", "ST-07")
def test_crlf_line_endings_and_a_last_line_without_newline(server):
    server.initialize()
    server.write(b'{"jsonrpc":"2.0","id":"crlf","method":"ping"}\r\n')
    assert server.recv() == {"jsonrpc": "2.0", "id": "crlf", "result": {}}
    server.write(b'{"jsonrpc":"2.0","id":"last","method":"ping"}')
    server.close_stdin()
    assert server.recv() == {"jsonrpc": "2.0", "id": "last", "result": {}}
    assert server.read_line() is None
    assert server.wait() == 0


def test_a_client_that_stops_reading_ends_the_server():
    # A plain Popen without the tap (which keeps draining the server's stdout after its own reader
    # is gone) and without a reader thread (closing a pipe another thread reads would block).
    proc = subprocess.Popen(mcpkit_command("serve"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline()) == {"jsonrpc": "2.0", "id": 1, "result": {}}
        proc.stdout.close()  # the server's next write fails with EPIPE
        proc.stdin.write(b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n')
        proc.stdin.flush()
        assert proc.wait(TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()


@pytest.mark.req("LC-09")
def test_sigterm_with_a_call_in_flight_still_writes_its_answer_and_exits_0(ready):
    rid = ready.request("tools/call", _sleep(1))
    ready.ping()  # answered while the sleep runs: the call is surely in flight now
    ready.proc.send_signal(signal.SIGTERM)  # the tap forwards it to the server
    answer = ready.answer(rid)
    assert answer["result"]["content"] == [{"type": "text", "text": "Slept 1 s"}]
    assert ready.wait() == 0


# --------------------------------------------------------------------------- stdout stays protocol-only


NOISY_SERVER = textwrap.dedent(
    """
    import logging
    import os
    import sys

    from mcpkit import Server

    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="LOG %(name)s %(message)s")
    server = Server("noisy", "1.0")


    @server.tool
    def noisy() -> str:
        \"\"\"Writes to stdout in every way a handler can.\"\"\"
        print("noise from print")
        sys.stdout.write("noise from sys.stdout\\n")
        sys.stdout.flush()
        os.write(1, b"raw noise on fd 1\\n")
        logging.getLogger("noisy").warning("noise from logging")
        return "done"


    @server.tool
    async def noisy_async() -> str:
        \"\"\"The same from an async handler.\"\"\"
        print("async noise", flush=True)
        os.write(1, b"async raw noise\\n")
        return "done async"
    """
)


@pytest.mark.req("ST-02", "ST-03", "ST-01")
def test_stdout_carries_only_protocol_messages(serve, tmp_path):
    path = tmp_path / "noisy_server.py"
    path.write_text(NOISY_SERVER)
    server = serve(str(path))
    server.initialize()
    for tool, text in (("noisy", "done"), ("noisy_async", "done async")):
        answer = server.call("tools/call", {"name": tool, "arguments": {}})
        assert answer["result"]["content"] == [{"type": "text", "text": text}]
    server.ping()
    assert server.finish() == 0
    _assert_all_lines_are_jsonrpc(server.raw_lines)
    err = server.stderr()
    for noise in ("noise from print", "noise from sys.stdout", "raw noise on fd 1", "LOG noisy noise from logging",
                  "async noise", "async raw noise"):
        assert noise in err, f"{noise!r} missing from stderr:\n{err}"


@pytest.mark.req("ST-02", "ST-03")
def test_output_while_the_server_module_is_imported_stays_off_stdout(serve, tmp_path):
    path = tmp_path / "import_noise.py"
    path.write_text(
        "import os\nfrom mcpkit import Server\nprint('noise at import time')\n"
        "os.write(1, b'raw noise at import time\\n')\nserver = Server('n', '1')\n"
    )
    server = serve(str(path))
    server.initialize()
    assert server.finish() == 0
    _assert_all_lines_are_jsonrpc(server.raw_lines)
    assert "noise at import time" in server.stderr()
    assert "raw noise at import time" in server.stderr()


# --------------------------------------------------------------------------- server -> client from a sync tool


SAMPLING_SERVER = textwrap.dedent(
    """
    from mcpkit import Context, Server

    server = Server("sampler", "1.0")


    @server.tool
    def ask(question: str, ctx: Context) -> str:
        \"\"\"A SYNC tool that asks the client's model.\"\"\"
        result = ctx.sample(question, max_tokens=20)
        return "model said: " + result["content"]["text"]
    """
)


@pytest.mark.req("PG-01")
def test_a_sync_tool_waiting_for_the_client_gets_its_answer(serve, tmp_path):
    path = tmp_path / "sampling_server.py"
    path.write_text(SAMPLING_SERVER)
    server = serve(str(path))
    server.initialize(capabilities={"sampling": {}})
    rid = server.request("tools/call", {"name": "ask", "arguments": {"question": "2+2?"}})
    request = server.recv()
    assert request["method"] == "sampling/createMessage"
    assert request["params"]["messages"] == [{"role": "user", "content": {"type": "text", "text": "2+2?"}}]
    assert request["params"]["maxTokens"] == 20
    # the sync tool blocks its thread; the server must still read our lines (ping, then the answer)
    server.ping(timeout=5)
    server.send(
        {
            "jsonrpc": "2.0",
            "id": request["id"],
            "result": {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"},
        }
    )
    answer = server.answer(rid)
    assert answer["result"]["content"] == [{"type": "text", "text": "model said: 4"}]
    assert server.finish() == 0


NESTED = '''
import asyncio
from mcpkit import Context, Server

server = Server("nested")


@server.tool
async def double(x: int) -> int:
    await asyncio.sleep(0)
    return 2 * x


@server.tool
def outer(x: int, ctx: Context) -> int:
    return ctx.call_tool("double", {"x": x})["structuredContent"]["result"]
'''


def test_a_sync_tools_nested_call_of_an_async_tool_is_the_first_to_need_the_loop(serve, tmp_path):
    # stdio starts its loop with the first async handler: a sync tool calling an async one as the
    # very first call was refused ("is async: await ctx.call_tool_async"), and worked once any
    # async handler had run; so was a rate-limited sync tool whose bucket lives in a shared store
    path = tmp_path / "nested.py"
    path.write_text(NESTED)
    server = serve(str(path))
    server.initialize()
    rid = server.request("tools/call", {"name": "outer", "arguments": {"x": 21}})
    answer = server.answer(rid)
    assert answer["result"].get("isError") is not True, answer
    assert answer["result"]["structuredContent"] == {"result": 42}
