"""isolation="process": a handler that holds the GIL (a catastrophic ``re`` match) or never
returns is killed at its deadline and answered E_TIMEOUT, while the server keeps serving: ping
is answered meanwhile, the next call is served, stdin EOF ends the server (policy/isolation.py).

Without isolation a catastrophic match holds the GIL in the server process: the deadline
thread cannot run, so neither the timeout nor a ping is answered until the match ends.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Context, Server
from tests.conftest import mcpkit_command
from tests.reliability.support import wait_for
from tests.test_stdio import ServerProcess

pytestmark = pytest.mark.reliability

RUNAWAY = str(Path(__file__).resolve().parent / "servers" / "runaway.py")
EVIL = "a" * 40 + "!"  # (\w+\s?)*$ on 40 letters and a '!': 2^40 ways to fail, hours in re
STEP = 10.0  # a hang guard, never a performance assertion


def call(proc: ServerProcess, name: str, arguments: dict[str, Any] | None = None) -> Any:
    return proc.request("tools/call", {"name": name, "arguments": arguments or {}})


def error_code(result: dict[str, Any]) -> str:
    assert result["isError"] is True, result
    return result["_meta"]["dev.mcpkit/error"]["code"]


@pytest.fixture
def runaway() -> Any:
    proc = ServerProcess(mcpkit_command("serve", RUNAWAY))
    proc.initialize()
    yield proc
    proc.kill()


@pytest.mark.parametrize("tool,arguments", [("redos", {"text": EVIL}), ("spin", {})])
def test_a_runaway_handler_is_killed_at_its_deadline_while_the_server_serves(runaway, tool, arguments):
    worker = runaway.answer(call(runaway, "pid"))["result"]["structuredContent"]["result"]
    server_pid = runaway.answer(call(runaway, "server_pid"))["result"]["structuredContent"]["result"]
    assert worker != server_pid
    rid = call(runaway, tool, arguments)
    time.sleep(0.3)  # the handler is running now
    others: list[Any] = []
    for _ in range(3):  # the server answers while the handler runs
        ping = runaway.request("ping")
        assert runaway.answer(ping, timeout=STEP, others=others)["result"] == {}
        added = runaway.answer(call(runaway, "add", {"a": 2, "b": 3}), timeout=STEP, others=others)
        assert added["result"]["structuredContent"] == {"result": 5}
    assert all(m.get("id") == rid for m in others), others
    late = [m for m in others if m.get("id") == rid]
    answer = late[0] if late else runaway.answer(rid, timeout=STEP)
    assert error_code(answer["result"]) == "E_TIMEOUT"
    assert "worker process was stopped" in answer["result"]["content"][0]["text"]
    # the worker was killed and replaced: the next call is served, by another process
    again = runaway.answer(call(runaway, "pid"), timeout=STEP)["result"]["structuredContent"]["result"]
    assert again not in (worker, server_pid)
    with pytest.raises(ProcessLookupError):
        os.kill(worker, 0)
    assert runaway.answer(call(runaway, "redos", {"text": "short words"}), timeout=STEP)["result"][
        "structuredContent"] == {"result": True}
    assert runaway.finish() == 0  # stdin EOF ends the server
    assert "Traceback" not in runaway.stderr()


def test_a_cancelled_call_kills_its_worker(monkeypatch):
    monkeypatch.setenv("MCPKIT_ISOLATION_WORKERS", "1")  # one worker: the one pid() reports runs spin_long
    proc = ServerProcess(mcpkit_command("serve", RUNAWAY))
    try:
        proc.initialize()
        worker = proc.answer(call(proc, "pid"))["result"]["structuredContent"]["result"]
        rid = call(proc, "spin_long")
        time.sleep(0.3)
        proc.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})
        assert wait_for(lambda: not _alive(worker)), "the cancelled call's worker is still running"
        again = proc.answer(call(proc, "pid"), timeout=STEP)["result"]["structuredContent"]["result"]
        assert again != worker
        assert proc.finish() == 0
    finally:
        proc.kill()
    assert not any(json.loads(line).get("id") == rid for line in proc.raw_lines)  # CN-01: no answer


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie (killed, not yet reaped) is not running
        return f.read().split(") ", 1)[1][0] != "Z"


def test_errors_raised_in_a_worker_keep_their_meaning(runaway):
    codes = {}
    for kind in ("missing", "tool", "value"):
        codes[kind] = error_code(runaway.answer(call(runaway, "fail", {"kind": kind}), timeout=STEP)["result"])
    assert codes == {"missing": "E_NOT_FOUND", "tool": "E_PERMISSION_DENIED", "value": "E_INTERNAL"}
    assert "bad value" in runaway.stderr()  # the worker's traceback is logged by the server


def test_isolation_is_refused_where_a_worker_could_not_run_the_handler():
    server = Server("refusals")
    with pytest.raises(ValueError, match="isolation='process'"):
        server.tool(isolation="thread")(lambda: 1)

    def local() -> int:
        return 1

    with pytest.raises(TypeError, match="module-level function"):
        server.tool(isolation="process")(local)
    with pytest.raises(TypeError, match="cannot take a Context"):
        server.tool(isolation="process")(_with_context)
    with pytest.raises(TypeError, match="module-level function"):
        server.add_tool("raw", lambda arguments: 1, input_schema={"type": "object"}, isolation="process")


def _with_context(ctx: Context) -> int:
    return 1


def test_over_http_other_sessions_are_served_while_a_runaway_handler_is_killed():
    from concurrent.futures import ThreadPoolExecutor

    from tests.reliability.support import HttpClient, HttpServer, assert_healthy

    server = HttpServer(target=RUNAWAY)
    try:
        with HttpClient(server.url) as attacker, HttpClient(server.url) as victim, ThreadPoolExecutor(2) as pool:
            attacker.initialize()
            victim.initialize()
            runaway = [pool.submit(attacker.tool, "redos", {"text": EVIL}), pool.submit(attacker.tool, "spin", {})]
            time.sleep(0.3)
            for _ in range(3):  # another session, while both handlers run
                assert victim.call("ping")["result"] == {}
                assert victim.tool("add", {"a": 2, "b": 3})["structuredContent"] == {"result": 5}
            for future in runaway:
                assert error_code(future.result(timeout=STEP)) == "E_TIMEOUT"
            assert victim.tool("redos", {"text": "short words"})["structuredContent"] == {"result": True}
        assert_healthy(server.url)
    finally:
        errors = server.stop()
    assert "Traceback" not in errors
