"""Per-item rules hold whichever way an item is reached (the request pipeline).

- SandboxPath parameters of resource templates and prompts are confined as a tool's are.
- A manager tool's action is rate-limited, timed out and size-capped as itself.
- Whatever fails, an OSError while a path is being bound included, a call gets a proper
  answer (never -32603) and leaves exactly one audit line.
"""

from __future__ import annotations

import errno
import time
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Context, Server
from mcpkit.policy import Gates, Policy, RateLimiter, SandboxPath, confined
from mcpkit.policy.chain import ERROR_META_KEY
from mcpkit.policy.sandbox import Sandbox
from tests.harness import RpcError, connect

LATEST = "2025-11-25"


class MemoryAudit:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def record(self, entry: dict[str, Any]) -> None:
        self.lines.append(dict(entry))


def _code(result: dict[str, Any]) -> str | None:
    return result["_meta"][ERROR_META_KEY]["code"] if result.get("isError") else None


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("inside")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("the outside secret")
    return root, outside / "secret"


def _confined_items(server: Server) -> None:
    @server.resource_template("ws://confined/{+path}")
    def read(path: SandboxPath) -> str:
        return Path(path).read_text()

    @server.prompt()
    def show(path: SandboxPath) -> str:
        return f"The file says: {Path(path).read_text()}"


# ------------------------------------------------------------------- 13.10: templates and prompts


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_sandbox_paths_of_templates_and_prompts_are_confined(wire, tree):
    root, secret = tree
    server = Server("t", policy=Policy(sandbox=Sandbox([root])))
    _confined_items(server)
    async with connect(server, wire, LATEST) as c:
        inside = await c.request("resources/read", {"uri": "ws://confined/notes.txt"})
        assert inside["contents"][0]["text"] == "inside"  # resolved inside the root
        for uri in (f"ws://confined/{secret}", "ws://confined/../outside/secret"):
            with pytest.raises(RpcError) as refused:
                await c.request("resources/read", {"uri": uri})
            assert refused.value.code == -32602, uri
            assert "outside" in refused.value.message or "sandbox" in refused.value.message
        with pytest.raises(RpcError) as refused:
            await c.request("prompts/get", {"name": "show", "arguments": {"path": str(secret)}})
        assert refused.value.code == -32602
        got = await c.request("prompts/get", {"name": "show", "arguments": {"path": "notes.txt"}})
        assert got["messages"][0]["content"]["text"] == "The file says: inside"


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_sandbox_paths_without_a_sandbox_are_refused_not_read(wire, tree):
    _, secret = tree
    server = Server("t")
    _confined_items(server)
    async with connect(server, wire, LATEST) as c:
        with pytest.raises(RpcError) as refused:
            await c.request("resources/read", {"uri": f"ws://confined/{secret}"})
        assert refused.value.code == -32602 and "no sandbox" in refused.value.message
        with pytest.raises(RpcError):
            await c.request("prompts/get", {"name": "show", "arguments": {"path": str(secret)}})


# ------------------------------------------------------------------- 13.12: actions as themselves


def _manager_server(audit: MemoryAudit) -> Server:
    server = Server("t", policy=Policy(gates=Gates(), audit=audit, rate_limiter=RateLimiter("600/min")))

    @server.tool(destructive=False, open_world=False, rate_limit="2/min")
    def move(source: str) -> str:
        return f"moved {source}"

    @server.tool(read_only=True, open_world=False, timeout=0.2)
    def slow() -> str:
        time.sleep(1.0)
        return "late"

    @server.tool(destructive=False, open_world=False, max_argument_bytes=64)
    def note(text: str) -> str:
        return "noted"

    files = server.manager("files", description="Files.")
    files.action(move, name="move", destructive=False, open_world=False)
    files.action(slow, name="slow", read_only=True, open_world=False)
    files.action(note, name="note", destructive=False, open_world=False)
    return server


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_an_action_is_rate_limited_as_itself_and_shares_the_tools_bucket(wire):
    audit = MemoryAudit()
    server = _manager_server(audit)
    async with connect(server, wire, LATEST) as c:
        first = await c.request("tools/call", {"name": "move", "arguments": {"source": "a"}})
        second = await c.request("tools/call", {"name": "files", "arguments": {"action": "move", "source": "b"}})
        third = await c.request("tools/call", {"name": "files", "arguments": {"action": "move", "source": "c"}})
    assert _code(first) is None and _code(second) is None
    assert _code(third) == "E_RATE_LIMITED", third
    assert [(a["tool"], a["action"], a["outcome"]) for a in audit.lines][-1] == ("files", "move", "denied")


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_an_action_is_timed_out_and_size_capped_as_itself(wire):
    audit = MemoryAudit()
    server = _manager_server(audit)
    async with connect(server, wire, LATEST) as c:
        started = time.monotonic()
        timed_out = await c.request("tools/call", {"name": "files", "arguments": {"action": "slow"}})
        assert time.monotonic() - started < 0.9  # answered at the action's deadline, not the handler's end
        big = await c.request("tools/call", {"name": "files", "arguments": {"action": "note", "text": "x" * 200}})
    assert _code(timed_out) == "E_TIMEOUT", timed_out
    assert _code(big) == "E_SCHEMA_VALIDATION" or "too large" in big["content"][0]["text"], big
    assert big.get("isError") is True


# ------------------------------------------------------------------- 13.20: one answer, one line


class _RacingSandbox(Sandbox):
    """A sandbox whose path check meets a file system that changes under it."""

    def resolve(self, value: Any, must_exist: bool = False) -> Path:
        raise OSError(errno.ELOOP, "Too many levels of symbolic links", str(value))


@pytest.mark.req("TL-10")
@pytest.mark.asyncio
async def test_an_oserror_while_binding_a_path_is_answered_and_audited_once(wire, tmp_path):
    audit = MemoryAudit()
    server = Server("t", policy=Policy(gates=Gates(), audit=audit, sandbox=_RacingSandbox([tmp_path])))

    @server.tool(read_only=True, open_world=False)
    def read(path: SandboxPath) -> str:
        return "unreachable"

    @server.tool(read_only=True, open_world=False)
    def batch(calls: list[dict[str, Any]], ctx: Context) -> list[Any]:
        return [ctx.call_tool(c["name"], c.get("arguments")) for c in calls]

    files = server.manager("files", description="Files.")
    files.action(read, name="read", read_only=True, open_world=False)

    async with connect(server, wire, LATEST) as c:
        direct = await c.request("tools/call", {"name": "read", "arguments": {"path": "race/x"}})
        assert len(audit.lines) == 1
        action = await c.request("tools/call", {"name": "files", "arguments": {"action": "read", "path": "race/x"}})
        assert len(audit.lines) == 2
        nested = await c.request("tools/call", {"name": "batch", "arguments": {"calls": [
            {"name": "read", "arguments": {"path": "race/x"}}]}})
    for result in (direct, action, nested["structuredContent"]["result"][0]):
        assert _code(result) == "E_PERMISSION_DENIED", result
    assert [(a["tool"], a["outcome"], a["code"]) for a in audit.lines] == [
        ("read", "denied", "E_PERMISSION_DENIED"), ("files", "denied", "E_PERMISSION_DENIED"),
        ("read", "denied", "E_PERMISSION_DENIED"), ("batch", "ok", None)]


RacingPath = confined(_RacingSandbox([Path(__file__).parent]))


@pytest.mark.req("TL-10")
@pytest.mark.asyncio
async def test_an_oserror_while_binding_is_a_tool_error_without_a_policy_too(wire):
    server = Server("t")

    @server.tool(read_only=True)
    def read(path: RacingPath) -> str:  # type: ignore[valid-type]
        return "unreachable"

    async with connect(server, wire, LATEST) as c:
        result = await c.request("tools/call", {"name": "read", "arguments": {"path": "x"}})
    assert result["isError"] is True
