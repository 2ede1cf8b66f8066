"""The policy's steps run as one hook (chain.PolicedCall) for a sync tool with nothing else in
its pipeline, and as separate steps otherwise. Both must answer and audit every call alike:
each case here runs twice, once composed and once with a no-op guard installed (which keeps
the steps apart), and the answers and audit lines are compared after the correlation ids and
durations are set aside."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Context, Server, ToolError
from mcpkit.policy import AuditLog, Gates, Policy, RateLimiter
from mcpkit.policy.audit import read_lines
from mcpkit.policy.chain import POLICED_CALL
from mcpkit.policy.limits import Limits
from mcpkit.server.session import ServerSession
from mcpkit.server.tasks import EXTENSION as TASKS
from tests.policy.test_envelope_hosts import add_result_tools

MODERN = "2026-07-28"
_VOLATILE = {"correlationId", "dev.mcpkit/correlationId", "durationMs", "parentCorrelationId", "time", "retryAfterMs", "taskId", "createdAt", "lastUpdatedAt"}


class _Pass:
    """An installed guard that lets everything through: the policy's steps stay apart."""

    def check(self, cc: Any) -> None:
        return None


def _server(audit_path: Path, contract: bool) -> Server:
    policy = Policy(
        gates=Gates(read_only=True),
        contract=contract,
        audit=AuditLog(audit_path),
        rate_limiter=RateLimiter("5/min"),
        limits=Limits(max_argument_bytes=400, max_result_bytes=2_000, timeout=0.2, sanitize=True),
    )
    server = Server("fused", policy=policy)

    @server.tool(read_only=True, open_world=False)
    def add(a: int, b: int) -> int:
        return a + b

    add_result_tools(server)

    @server.tool(read_only=True, open_world=False)
    def boom() -> int:
        raise RuntimeError("internal detail")

    @server.tool(read_only=True, open_world=False)
    def declines() -> int:
        raise ToolError("not now", code="E_BUSY", suggested_fix="later")

    @server.tool(read_only=True, open_world=False)
    def colored() -> str:
        return "\x1b[31mred\x1b[0m"

    @server.tool(read_only=True, open_world=False)
    def huge() -> str:
        return "x" * 5_000

    @server.tool(read_only=True, open_world=False)
    def echo(text: str) -> str:
        return text

    @server.tool(read_only=True, open_world=False)
    def slow() -> str:
        time.sleep(0.6)
        return "late"

    @server.tool(read_only=True, open_world=False, task="required")
    def report() -> str:
        return "done"

    @server.tool(destructive=True)
    def wipe() -> str:
        return "wiped"

    @server.tool(read_only=True, open_world=False)
    def outer(ctx: Context) -> dict[str, Any]:
        inner = ctx.call_tool("add", {"a": 2, "b": 3})  # its ids and duration are in its answer
        return {"isError": bool(inner.get("isError")), "text": len(inner["content"][0]["text"]) > 0}

    return server


CALLS: list[tuple[str, Any]] = [
    ("add", {"a": 1, "b": 2}),
    ("weather", {"city": "Oslo"}),
    ("full", {}),
    ("refuses", {}),
    ("boom", {}),
    ("declines", {}),
    ("colored", {}),
    ("huge", {}),
    ("echo", {"text": "y" * 1_000}),  # over max_argument_bytes
    ("add", {"a": "one", "b": 2}),  # invalid arguments
    ("wipe", {}),  # refused by the read-only gate
    ("outer", {}),  # a nested call takes the same path
    ("slow", {}),  # answered E_TIMEOUT by the deadline
    ("report", {}),  # a task under 2026-07-28 (audited as one), an ordinary call before it
    ("add", {"a": 1, "b": 1}),
    ("add", {"a": 1, "b": 1}),
    ("add", {"a": 1, "b": 1}),
    ("add", {"a": 1, "b": 1}),  # the sixth add in a minute: rate limited
]


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "*" if k in _VOLATILE else _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, str) and value.startswith("{"):
        try:
            return {"json": _scrub(json.loads(value))}
        except ValueError:
            pass
    if isinstance(value, str) and "correlation id" in value:
        return value.split("correlation id")[0]
    if isinstance(value, str):
        return re.sub(r"\d+ (ms|bytes)", r"N \1", value)  # retry-after and sizes move with the clock
    return value


def _run(tmp_path: Path, version: str, contract: bool, fused: bool) -> tuple[list[Any], list[Any]]:
    path = tmp_path / ("fused" if fused else "apart") / "audit.log"
    server = _server(path, contract)
    if not fused:
        server._install_step("test-pass", _Pass())
    answers: dict[int, Any] = {}
    answered = threading.Condition()

    def send(batch: list) -> None:
        with answered:
            for out in batch:
                message = json.loads(out.payload)
                if "id" in message:
                    answers[message["id"]] = message.get("result", message.get("error"))
            answered.notify_all()

    session = ServerSession(server, send, inline_sync=True)
    meta = {}
    if version == MODERN:  # sessionless: every request names its revision, no handshake
        meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": version,
                          "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}}
    else:
        session.feed(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode())
        session.feed(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        session.flush()
    for i, (name, arguments) in enumerate(CALLS, start=1):
        session.feed(json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                 "params": {"name": name, "arguments": arguments, **meta}}).encode())
        session.flush()
        with answered:
            assert answered.wait_for(lambda i=i: i in answers, timeout=10), f"call {i} ({name}) unanswered"
    pipes = server._tool_pipes
    composed = [tool.name for tool, pipe in pipes.items() if pipe.steps == [POLICED_CALL]]
    assert bool(composed) is fused and (not fused or "add" in composed)
    server.policy.audit.close()
    return [_scrub(answers[i]) for i in range(1, len(CALLS) + 1)], [_scrub(line) for line in read_lines(path)]


@pytest.mark.parametrize("version", ["2025-11-25", "2025-03-26", MODERN])
@pytest.mark.parametrize("contract", [True, False])
def test_the_composed_steps_answer_and_audit_as_the_separate_ones(tmp_path, version, contract):
    fused = _run(tmp_path, version, contract, fused=True)
    apart = _run(tmp_path, version, contract, fused=False)
    for i, (a, b) in enumerate(zip(fused[0], apart[0], strict=True)):
        assert a == b, f"answer to {CALLS[i][0]} differs"
    assert fused[1] == apart[1]
    outcomes = [line["outcome"] for line in fused[1]]
    assert outcomes.count("ok") >= 5 and "denied" in outcomes and "error" in outcomes
    last = fused[0][-1]
    assert last.get("isError") is True  # the rate limit held in both


def test_a_tool_with_middleware_keeps_its_steps_apart(tmp_path):
    server = _server(tmp_path / "audit.log", True)
    server.add_middleware(lambda ctx, call_next: call_next(ctx))
    from mcpkit.server.pipes import build_pipe

    pipe = build_pipe(server, "call_tool", server._tools["add"])
    assert POLICED_CALL not in pipe.steps and len(pipe.steps) > 2


def test_middleware_added_after_the_first_calls_still_runs(tmp_path):
    """The composed step is chosen per pipe; a middleware added later (a refusal here) must be
    on the very next call, not only on tools not called yet."""
    server = _server(tmp_path / "audit.log", True)
    answers: list[Any] = []
    session = ServerSession(server, lambda batch: answers.extend(json.loads(o.payload) for o in batch),
                            inline_sync=True)
    session.feed(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode())
    session.feed(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}).encode()
    session.feed(call)
    session.flush()
    assert server._tool_pipes[server._tools["add"]].steps == [POLICED_CALL]
    assert answers[-1]["result"]["structuredContent"]["result"] == 3

    def refuse(ctx: Any, call_next: Any) -> Any:
        raise ToolError("closed for maintenance", code="E_PERMISSION_DENIED")

    server.add_middleware(refuse, hook="on_call_tool")
    session.feed(call.replace(b'"id": 1', b'"id": 2'))
    session.flush()
    refused = answers[-1]["result"]
    assert refused["isError"] is True and "closed for maintenance" in refused["content"][0]["text"]
    assert POLICED_CALL not in server._tool_pipes[server._tools["add"]].steps
    server.policy.audit.close()
    assert [line["outcome"] for line in read_lines(tmp_path / "audit.log")] == ["ok", "denied"]
