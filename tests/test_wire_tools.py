"""The wire tools of the test suite: the tap proxy (tests/tap.py) and the schema validator
(tests/wire.py)."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.wire import (
    PRE_NEGOTIATION_REVISION,
    REVISIONS,
    WireLog,
    check_wire_log,
    result_definition,
    validate_server_message,
)

ROOT = Path(__file__).resolve().parent.parent
TAP = ROOT / "tests" / "tap.py"

ECHO_CHILD = textwrap.dedent(
    """
    import sys, time
    for line in sys.stdin.buffer:
        sys.stdout.buffer.write(b"echo:" + line)
        sys.stdout.buffer.flush()
    time.sleep(0.2)  # still alive after its stdin closed
    sys.stdout.buffer.write(b"bye\\n")
    sys.stdout.buffer.flush()
    sys.exit(3)
    """
)


def _records(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --------------------------------------------------------------------------- tap


def test_tap_relays_bytes_exactly_and_logs_every_line(tmp_path):
    log = tmp_path / "wire.jsonl"
    lines = [b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n', b"\xff\xfe not utf-8 \xc3\xa9\n", b"\r\n", b"tail"]
    proc = subprocess.run(
        [sys.executable, str(TAP), str(log), "--", sys.executable, "-c", ECHO_CHILD],
        input=b"".join(lines),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == b"".join(b"echo:" + line for line in lines) + b"bye\n"
    records = _records(log)
    c2s = [r["line"] for r in records if r["dir"] == "c2s"]
    s2c = [r["line"] for r in records if r["dir"] == "s2c"]
    assert c2s == ['{"jsonrpc":"2.0","id":1,"method":"ping"}', "\ufffd\ufffd not utf-8 é", "\r", "tail"]
    # The child got "tail" without a newline, so its echo and "bye" form one line.
    assert s2c == ["echo:" + c2s[0], "echo:" + c2s[1], "echo:\r", "echo:tailbye"]
    assert all(set(r) == {"dir", "line"} for r in records)
    # A request is always logged before the answer it caused.
    order = [(r["dir"], r["line"]) for r in records]
    assert order.index(("c2s", c2s[0])) < order.index(("s2c", s2c[0]))


def test_tap_flushes_each_line_and_lets_the_child_finish(tmp_path):
    log = tmp_path / "wire.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(TAP), str(log), "--", sys.executable, "-c", ECHO_CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        for n in range(3):
            proc.stdin.write(b"line %d\n" % n)
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], 10)
            assert ready, "no answer: a line was not relayed or not flushed"
            assert proc.stdout.readline() == b"echo:line %d\n" % n
        proc.stdin.close()  # EOF: the tap closes the child's stdin; the child says bye and exits 3
        assert proc.stdout.read() == b"bye\n"
        assert proc.wait(timeout=30) == 3
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [r["dir"] for r in _records(log)].count("s2c") == 4


def test_tap_appends_and_reports_signal_deaths(tmp_path):
    log = tmp_path / "wire.jsonl"
    log.write_text('{"dir": "c2s", "line": "earlier run"}\n')
    child = "import os, signal, sys; print('x', flush=True); os.kill(os.getpid(), signal.SIGTERM)"
    proc = subprocess.run(
        [sys.executable, str(TAP), str(log), "--", sys.executable, "-c", child],
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 128 + 15
    assert proc.stdout == b"x\n"
    assert _records(log) == [{"dir": "c2s", "line": "earlier run"}, {"dir": "s2c", "line": "x"}]


def test_tap_usage_errors(tmp_path):
    proc = subprocess.run([sys.executable, str(TAP), str(tmp_path / "log")], capture_output=True, timeout=60)
    assert proc.returncode == 2 and b"usage" in proc.stderr
    proc = subprocess.run(
        [sys.executable, str(TAP), str(tmp_path / "log"), "--", str(tmp_path / "no-such-program")],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 127


# --------------------------------------------------------------------------- validate_server_message

INIT_RESULT = {"capabilities": {"tools": {"listChanged": True}}, "serverInfo": {"name": "mcpkit", "version": "0.1.0"}}
TOOL = {"name": "add", "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}}}}

VALID = [
    # (message, request_method)
    ({"jsonrpc": "2.0", "id": 1, "result": {"tools": [TOOL]}}, "tools/list"),
    ({"jsonrpc": "2.0", "id": "a", "result": {"tools": [], "nextCursor": "c2"}}, "tools/list"),
    ({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "3"}]}}, "tools/call"),
    ({"jsonrpc": "2.0", "id": 2, "result": {"content": [], "isError": True}}, "tools/call"),
    ({"jsonrpc": "2.0", "id": 3, "result": {}}, "ping"),
    ({"jsonrpc": "2.0", "id": 3, "result": {"_meta": {"x": 1}}}, "logging/setLevel"),
    ({"jsonrpc": "2.0", "id": 4, "result": {"contents": [{"uri": "file:///a.txt", "text": "hi"}]}}, "resources/read"),
    ({"jsonrpc": "2.0", "id": 4, "result": {"contents": [{"uri": "mem://b", "blob": "aGk="}]}}, "resources/read"),
    ({"jsonrpc": "2.0", "id": 5, "result": {"completion": {"values": ["a"]}}}, "completion/complete"),
    ({"jsonrpc": "2.0", "id": 6, "error": {"code": -32601, "message": "Method not found"}}, None),
    ({"jsonrpc": "2.0", "id": 6, "error": {"code": -32602, "message": "Bad", "data": {"x": [1]}}}, "tools/call"),
    # An error whose request id could not be read has no id in every revision (see tests/wire.py).
    ({"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}, None),
    ({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, None),
    ({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": {"a": 1}}}, None),
    ({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 7, "progress": 1, "total": 2}}, None),
    ({"jsonrpc": "2.0", "id": "s1", "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": "s2", "method": "roots/list"}, None),
]

INVALID = [
    # (message, request_method, text expected in the explanation)
    ({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "add"}]}}, "tools/list", "'inputSchema' is a required property"),
    ({"jsonrpc": "2.0", "id": 1, "result": {}}, "tools/list", "'tools' is a required property"),
    ({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "txt", "text": "3"}]}}, "tools/call", "'txt' is none of"),
    ({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text"}]}}, "tools/call", "'text' is a required property"),
    ({"jsonrpc": "2.0", "id": 2, "result": {"content": "3"}}, "tools/call", "is not of type 'array'"),
    ({"jsonrpc": "2.0", "id": 4, "result": {"contents": [{"uri": "mem://b", "blob": "not base64!"}]}}, "resources/read", "is not a 'byte'"),
    ({"jsonrpc": "2.0", "id": 4, "result": {"contents": [{"uri": "no scheme", "text": "x"}]}}, "resources/read", "is not a 'uri'"),
    ({"jsonrpc": "2.0", "id": 1, "result": INIT_RESULT}, "initialize", "'protocolVersion' is a required property"),
    ({"jsonrpc": "1.0", "id": 3, "result": {}}, "ping", "'2.0' was expected"),
    ({"id": 3, "result": {}}, "ping", "'jsonrpc' is a required property"),
    ({"jsonrpc": "2.0", "id": 1.5, "result": {}}, "ping", "is not of type 'string', 'integer'"),
    ({"jsonrpc": "2.0", "id": 3, "result": []}, "ping", "is not of type 'object'"),
    ({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}, None, '"id": null'),
    ({"jsonrpc": "2.0", "id": 6, "error": {"code": "-32601", "message": "Method not found"}}, None, "is not of type 'integer'"),
    ({"jsonrpc": "2.0", "id": 6, "error": {"code": -32601}}, None, "'message' is a required property"),
    ({"jsonrpc": "2.0", "id": 6, "result": {}, "error": {"code": 1, "message": "m"}}, "ping", "both `result` and `error`"),
    ({"jsonrpc": "2.0", "id": 6}, None, "neither a request, a notification"),
    ({"jsonrpc": "2.0", "method": "notifications/initialized"}, None, "not a server notification"),
    ({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "loud", "data": 1}}, None, "'loud' is not one of"),
    ({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}, None, "'progressToken' is a required property"),
    ({"jsonrpc": "2.0", "id": "s1", "method": "tools/list"}, None, "not a server request"),
    ({"jsonrpc": "2.0", "id": 9, "result": {}}, "no/such-method", "must be an error"),
    ("hello", None, "not an object"),
    ([{"jsonrpc": "2.0", "id": 3, "result": {}}], None, "batches exist only in MCP 2025-03-26"),
]


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-11-25", "2025-03-26", "2025-06-18"])
@pytest.mark.parametrize("message, method", VALID)
def test_valid_server_messages_pass(revision, message, method):
    validate_server_message(message, revision, method)


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-11-25"])
@pytest.mark.parametrize("message, method, expected", INVALID)
def test_invalid_server_messages_raise_with_an_explanation(revision, message, method, expected):
    with pytest.raises(AssertionError) as info:
        validate_server_message(message, revision, method)
    assert expected in str(info.value)


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-11-25"])
def test_initialize_result(revision):
    message = {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": revision, **INIT_RESULT}}
    validate_server_message(message, revision, "initialize")
    broken = {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": revision, "capabilities": {}, "serverInfo": {"name": "x"}}}
    with pytest.raises(AssertionError, match="'version' is a required property"):
        validate_server_message(broken, revision, "initialize")


def test_revision_specific_rules():
    structured = {"jsonrpc": "2.0", "id": 2, "result": {"content": [], "structuredContent": {"a": 1}}}
    validate_server_message(structured, "2025-06-18", "tools/call")
    link = {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "resource_link", "uri": "file:///x", "name": "x"}]}}
    validate_server_message(link, "2025-06-18", "tools/call")
    with pytest.raises(AssertionError, match="'resource_link' is none of"):
        validate_server_message(link, "2024-11-05", "tools/call")
    elicit_done = {"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": {"elicitationId": "e"}}
    validate_server_message(elicit_done, "2025-11-25")
    with pytest.raises(AssertionError, match="not a server notification in MCP 2025-06-18"):
        validate_server_message(elicit_done, "2025-06-18")
    # Batches: only 2025-03-26.
    batch = [{"jsonrpc": "2.0", "id": 1, "result": {}}, {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}]
    validate_server_message(batch, "2025-03-26", request_methods={1: "ping", 2: "tools/list"})
    with pytest.raises(AssertionError, match="batch element 1"):
        validate_server_message(batch, "2025-03-26", request_methods={1: "ping", 2: "tools/call"})
    with pytest.raises(AssertionError, match="empty JSON-RPC batch"):
        validate_server_message([], "2025-03-26")
    # 2026-07-28: results carry resultType; servers send no requests; ping is gone.
    modern = {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "tools": [TOOL], "ttlMs": 0, "cacheScope": "public"}}
    validate_server_message(modern, "2026-07-28", "tools/list")
    with pytest.raises(AssertionError, match="'resultType' is a required property"):
        validate_server_message({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}, "2026-07-28", "tools/list")
    with pytest.raises(AssertionError, match="servers send no requests"):
        validate_server_message({"jsonrpc": "2.0", "id": "s", "method": "roots/list"}, "2026-07-28")
    with pytest.raises(AssertionError, match="not a client request in MCP 2026-07-28"):
        validate_server_message({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}}, "2026-07-28", "ping")
    with pytest.raises(ValueError, match="unknown MCP revision"):
        validate_server_message({"jsonrpc": "2.0", "id": 1, "result": {}}, "2099-01-01", "ping")


def test_result_definitions_follow_the_schemas():
    assert result_definition("2024-11-05", "ping") == "EmptyResult"
    assert result_definition("2025-11-25", "tasks/result") == "GetTaskPayloadResult"
    assert result_definition("2026-07-28", "server/discover") == "DiscoverResult"
    for revision in REVISIONS:
        assert result_definition(revision, "tools/call") == "CallToolResult"
        with pytest.raises(KeyError):
            result_definition(revision, "notifications/initialized")


# --------------------------------------------------------------------------- WireLog / check_wire_log


def _write_log(path: Path, entries: list[tuple[str, object]]) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for direction, message in entries:
            line = message if isinstance(message, str) else json.dumps(message)
            fh.write(json.dumps({"dir": direction, "line": line}) + "\n")
    return path


def _session(revision: str) -> list[tuple[str, object]]:
    return [
        ("c2s", "this is not json"),
        ("s2c", {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}),
        ("c2s", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": revision, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}),
        ("s2c", {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": revision, **INIT_RESULT}}),
        ("c2s", {"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ("c2s", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        ("c2s", {"jsonrpc": "2.0", "id": "two", "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1}}}),
        ("s2c", {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "working"}}),
        ("s2c", {"jsonrpc": "2.0", "id": "two", "result": {"content": [{"type": "text", "text": "1"}]}}),
        ("s2c", {"jsonrpc": "2.0", "id": 1, "result": {"tools": [TOOL]}}),
        ("c2s", {"jsonrpc": "2.0", "id": 2, "method": "nope"}),
        ("s2c", {"jsonrpc": "2.0", "id": 2, "error": {"code": -32601, "message": "Method not found"}}),
    ]


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-11-25"])
def test_check_wire_log_accepts_a_valid_session(tmp_path, revision):
    log = _write_log(tmp_path / "wire.jsonl", _session(revision))
    assert check_wire_log(log) == 6
    wire = WireLog.read(log)
    assert len(wire) == 12 and wire.lines("c2s")[0] == "this is not json"
    assert [m.get("id") for m in wire.messages("c2s")] == [0, None, 1, "two", 2]


def test_check_wire_log_pairs_results_with_their_methods(tmp_path):
    entries = _session("2025-11-25")
    # Answer tools/list with a tools/call result: valid JSON-RPC, wrong for the method.
    entries[9] = ("s2c", {"jsonrpc": "2.0", "id": 1, "result": {"content": []}})
    log = _write_log(tmp_path / "wire.jsonl", entries)
    with pytest.raises(AssertionError) as info:
        check_wire_log(log)
    assert f"{log}:10:" in str(info.value)
    assert "ListToolsResult (answer to tools/list)" in str(info.value)
    assert "'tools' is a required property" in str(info.value)


def test_check_wire_log_uses_the_negotiated_revision(tmp_path):
    link = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "resource_link", "uri": "file:///x", "name": "x"}]}}
    for revision, ok in (("2025-06-18", True), ("2024-11-05", False)):
        entries = _session(revision)[2:5] + [("c2s", {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}), ("s2c", link)]
        log = _write_log(tmp_path / f"{revision}.jsonl", entries)
        if ok:
            assert check_wire_log(log) == 2
        else:
            with pytest.raises(AssertionError, match="in MCP 2024-11-05"):
                check_wire_log(log)


def test_check_wire_log_reports_every_problem(tmp_path):
    entries = _session("2025-11-25") + [
        ("s2c", "Server started!"),  # not JSON on stdout
        ("s2c", {"jsonrpc": "2.0", "id": 77, "result": {}}),  # answers nothing
        ("s2c", {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}),  # answers id 1 a second time
        ("s2c", {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}}),
    ]
    log = _write_log(tmp_path / "wire.jsonl", entries)
    with pytest.raises(AssertionError) as info:
        check_wire_log(log)
    text = str(info.value)
    assert text.startswith("4 problem(s)")
    assert f"{log}:13: server wrote a line that is not JSON" in text
    assert f"{log}:14: server response id 77 answers no pending client request" in text
    assert f"{log}:15: server response id 1 answers no pending client request" in text
    assert f"{log}:16:" in text and '"id": null' in text


def test_check_wire_log_rejects_an_unknown_negotiated_version(tmp_path):
    entries = _session("2025-11-25")[2:4]
    entries[1] = ("s2c", {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "1999-01-01", **INIT_RESULT}})
    log = _write_log(tmp_path / "wire.jsonl", entries)
    with pytest.raises(AssertionError, match="not a known MCP revision"):
        check_wire_log(log)


def test_messages_before_initialize_are_judged_as_2025_11_25(tmp_path):
    assert PRE_NEGOTIATION_REVISION == "2025-11-25"
    # elicitation/complete exists in 2025-11-25 only: valid before the handshake, not after a
    # 2024-11-05 one.
    note = {"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": {"elicitationId": "e"}}
    log = _write_log(tmp_path / "a.jsonl", [("s2c", note)] + _session("2024-11-05")[2:5])
    assert check_wire_log(log) == 2
    log = _write_log(tmp_path / "b.jsonl", _session("2024-11-05")[2:5] + [("s2c", note)])
    with pytest.raises(AssertionError, match="not a server notification in MCP 2024-11-05"):
        check_wire_log(log)


def test_wire_log_rejects_foreign_records(tmp_path):
    path = tmp_path / "wire.jsonl"
    path.write_text('{"direction": "in", "data": "x"}\n')
    with pytest.raises(ValueError, match=":1: not a {dir, line} log record"):
        WireLog.read(path)


FAKE_SERVER = textwrap.dedent(
    """
    import json, sys
    for raw in sys.stdin:
        msg = json.loads(raw)
        if "id" not in msg:
            continue
        if msg["method"] == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "fake", "version": "1"}}
        elif msg["method"] == "tools/list":
            result = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
        else:
            print(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                              "error": {"code": -32601, "message": "Method not found"}}), flush=True)
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
    """
)


def test_tap_and_check_wire_log_end_to_end(tmp_path):
    log = tmp_path / "wire.jsonl"
    requests = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 2, "method": "prompts/list"},
    ]
    proc = subprocess.run(
        [sys.executable, str(TAP), str(log), "--", sys.executable, "-c", FAKE_SERVER],
        input="".join(json.dumps(r) + "\n" for r in requests).encode(),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 3
    assert check_wire_log(log) == 3
