"""Hostile input over stdio: one long-lived ``mcpkit serve`` process gets garbage, line after line.

After every input the server must answer a ``ping`` with the right id within a few seconds, say
exactly what the input deserves (-32700 without id for what is not JSON, -32600 for what is JSON
but no valid message, with the id when it could be read, nothing for notifications and stray
responses), and write nothing to stdout that is not a JSON-RPC message (ST-02). At the end the
process must still be running, with no Traceback on stderr, and exit 0 when stdin closes.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings

from tests.conftest import mcpkit_command
from tests.reliability.hostile import (
    LIMIT,
    NOTHING,
    PARSE,
    Expect,
    answer,
    dumps,
    hostile_lines,
    invalid,
    is_error,
    nested,
    request,
    verdict,
)
from tests.reliability.support import REVISION, MiB, assert_jsonrpc, has_traceback
from tests.test_stdio import ServerProcess

pytestmark = pytest.mark.reliability

PING_TIMEOUT = 10.0  # a hang guard: a 16 MiB line is read, parsed and refused well within it


# ============================================================================ the server


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    # Without the traffic tap: hostile lines legitimately get errors that its checker, which pairs
    # answers with well-formed requests only, would report. Every line is checked here instead.
    proc = ServerProcess(mcpkit_command("serve"))
    try:
        proc.initialize(REVISION)
        yield proc
    finally:
        proc.kill()


_pings = itertools.count(1)


def exchange(server: ServerProcess, line: bytes, expect: Expect) -> None:
    """Write one line (then a ping), and check what came back for it."""
    assert b"\n" not in line
    server.write(line + b"\n")
    rid = f"rel-ping-{next(_pings)}"
    server.request("ping", rid=rid)
    replies: list[Any] = []
    try:
        pong = server.answer(rid, timeout=PING_TIMEOUT, others=replies)
    except AssertionError:
        raise AssertionError(
            f"no answer to ping within {PING_TIMEOUT} s after {line[:200]!r}; running: {server.proc.poll() is None}"
        ) from None
    assert pong == {"jsonrpc": "2.0", "id": rid, "result": {}}
    # a long line may still be in a handler when the ping overtakes it (the reader moves on)
    deadline = time.monotonic() + PING_TIMEOUT
    while expect.count is not None and len(replies) < expect.count and time.monotonic() < deadline:
        replies.append(server.recv(max(0.01, deadline - time.monotonic())))
    for message in replies:
        assert_jsonrpc(message)
    shown = [json.dumps(m)[:300] for m in replies]
    assert verdict(expect, replies), f"{expect.kind} (id {expect.id!r}) expected after {line[:200]!r}; got {shown}"
    assert server.proc.poll() is None, "the server exited"
    # ST-02: every line written so far is one JSON-RPC message (checked, then let go: some are MBs)
    written = len(server.raw_lines)
    for raw in server.raw_lines[:written]:
        assert raw.endswith(b"\n") and raw.count(b"\n") == 1
        assert_jsonrpc(json.loads(raw))
    del server.raw_lines[:written]


# ============================================================================ the tests


def _limit_line(size: int, rid: int) -> bytes:
    """A ping of exactly ``size`` bytes."""
    base = b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"pad":""}}' % rid
    line = base.replace(b'"pad":""', b'"pad":"' + b"p" * (size - len(base)) + b'"')
    assert len(line) == size
    return line


def _too_large(message: dict[str, Any]) -> bool:
    return message.get("error", {}).get("data") == {"limit": LIMIT}


BIG_INT = str(2**4000).encode()  # 1205 digits: beyond any double


def ping_with(rid: bytes, params: bytes = b"{}") -> bytes:
    return b'{"jsonrpc":"2.0","id":' + rid + b',"method":"ping","params":' + params + b"}"


def add_with(rid: int, a: bytes, b: bytes = b"1") -> bytes:
    params = b'{"name":"add","arguments":{"a":' + a + b',"b":' + b + b"}}"
    return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":' % rid + params + b"}"


def _sum_is(total: int) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m["result"]["structuredContent"] == {"result": total}


def _echo(rid: int, size: int) -> bytes:
    return dumps(request(rid, "tools/call", {"name": "echo", "arguments": {"text": "z" * size}}))


def _echoed(size: int) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m["result"]["content"] == [{"type": "text", "text": "z" * size}]

# (name, the line or what makes it when its test runs: some are tens of MB, expectation)
CORPUS: list[tuple[str, bytes | Callable[[], bytes], Expect]] = [
    ("invalid UTF-8 alone", b"\xff\xfe\xfd", PARSE),
    ("a UTF-8 byte order mark", b"\xef\xbb\xbf" + ping_with(b"1"), PARSE),
    ("NUL after a message", ping_with(b"2") + b"\x00", PARSE),
    ("a lone surrogate escape", ping_with(b'"\\ud800"'), Expect("parse_or_answer", "\ud800")),
    ("a bare carriage return", b"\r", NOTHING),
    ("arrays 10,000 deep", nested(10_000, "array"), PARSE),
    ("objects 10,000 deep", nested(10_000, "object"), PARSE),
    ("params 10,000 deep", ping_with(b"3", b'{"x":' + nested(10_000, "array") + b"}"), PARSE),
    ("1e400 as a parameter", ping_with(b"4", b'{"x":1e400}'), Expect("parse_or_answer", 4)),
    ("2**4000 as the id", ping_with(BIG_INT), Expect("parse_or_answer", 2**4000)),
    ("2**4000 as an argument", add_with(5, BIG_INT), Expect("parse_or_answer", 5)),
    ("-0 as the id", ping_with(b"-0"), answer(0)),
    ("-0 as an argument", add_with(6, b"-0", b"0"), answer(6, _sum_is(0))),
    ("2**64 as the id", ping_with(b"18446744073709551616"), answer(2**64)),
    ("a 6 MiB echo", lambda: _echo(7, 6 * MiB), answer(7, _echoed(6 * MiB))),
    ("a line of exactly the limit", lambda: _limit_line(LIMIT, 8), answer(8, lambda m: m.get("result") == {})),
    ("a line one byte over the limit", lambda: _limit_line(LIMIT + 1, 9), Expect("invalid", check=_too_large)),
    ("a line of 40 MiB", lambda: _limit_line(40 * MiB, 10), invalid()),
    ("a batch", b'[{"jsonrpc":"2.0","id":11,"method":"ping"}]', invalid()),
    ("an empty batch", b"[]", invalid()),
    ("a batch of numbers", b"[1,2,3]", invalid()),
    ("a batch holding initialize", dumps([request(12, "initialize", {})]), invalid()),
    ("a second initialize", dumps(request(13, "initialize", {"protocolVersion": REVISION, "capabilities": {}})),
     Expect("error", 13, code=-32600)),
    ("a method of 200,000 characters", lambda: dumps(request(14, "m" * 200_000)), Expect("error", 14, code=-32601)),
]


@pytest.mark.req("ST-04", "ST-01", "ST-02", "BP-01", "BP-02", "BP-03", "BP-06", "BP-13")
@pytest.mark.parametrize(("line", "expect"), [pytest.param(line, expect, id=name) for name, line, expect in CORPUS])
def test_a_hostile_line_gets_its_answer_and_the_server_goes_on(server, line, expect):
    line = line() if callable(line) else line
    if expect.check is not None and expect.kind == "invalid":  # the size errors: the check is on the error
        server.write(line + b"\n")
        rid = f"rel-ping-{next(_pings)}"
        server.request("ping", rid=rid)
        replies: list[Any] = []
        server.answer(rid, timeout=PING_TIMEOUT, others=replies)
        assert len(replies) == 1 and is_error(replies[0], -32600) and expect.check(replies[0]), replies
        assert replies[0]["error"]["message"].startswith("Message too large: ")
        return
    exchange(server, line, expect)


@pytest.mark.req("ST-04", "ST-02", "BP-01", "BP-02", "BP-03", "BP-06", "BP-09", "BP-13", "PG-01")
def test_fuzzed_lines_never_crash_or_hang_the_server(server):
    @settings(
        max_examples=400,
        deadline=None,
        derandomize=True,  # the same examples on every run: CI is reproducible
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(hostile_lines)
    def one_line(case: tuple[bytes, Expect]) -> None:
        line, expect = case
        event(f"expect {expect.kind}")
        event("size: " + ("over 1 MiB" if len(line) > MiB else "under 1 MiB"))
        exchange(server, line, expect)

    one_line()


@pytest.mark.req("ST-04", "ST-02", "ST-03", "ST-07")
def test_after_all_that_the_server_still_runs_and_exits_cleanly(server):
    # runs last in this module: the process that took every input above is still the first one
    server.ping()
    assert server.proc.poll() is None
    assert not has_traceback(server.stderr()), server.stderr()[-3000:]
    assert server.finish() == 0
    for raw in server.raw_lines:
        assert_jsonrpc(json.loads(raw))
