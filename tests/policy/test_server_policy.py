"""The policy seen from a Server: bridges and list_changed, secret hygiene, the one switch."""

from __future__ import annotations

import asyncio
import threading
import warnings

import pytest

from mcpkit import Server
from mcpkit.policy import Bridge, Gates, Policy
from mcpkit.policy.hygiene import SecretParameterWarning
from tests.harness import connect
from tests.policy.test_bridge import Clock, Peer
from tests.policy.test_chain import LATEST_HANDSHAKE, MemoryAudit, call, error_of, names


@pytest.mark.req("TL-13", "TL-02")
@pytest.mark.asyncio
async def test_a_bridge_that_dies_and_returns_hides_and_restores_its_tools(wire):
    clock, peer = Clock(), Peer()
    editor = Bridge("editor", peer.connect, probe=peer.probe, close=peer.close, probe_interval=1.0, backoff_initial=0.5,
                    jitter=0.0, clock=clock)
    audit = MemoryAudit()
    server = Server("b", policy=Policy(gates=Gates(), audit=audit))

    @server.tool(read_only=True, open_world=False)
    def status() -> str:
        return "fine"

    @server.tool(destructive=False, open_world=False, requires=editor)
    def open_file(path: str) -> str:
        return editor.call(lambda conn, p: f"opened {p} on connection {conn['id']}", path)

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        assert await names(c) == ["status"]  # not connected yet
        refused = await call(c, "open_file", {"path": "a"})
        assert error_of(refused)["code"] == "E_NOT_CONNECTED" and error_of(refused)["retryable"] is True

        editor.step()  # connects
        await c.wait_notification("notifications/tools/list_changed", 1)
        assert await names(c) == ["status", "open_file"]
        assert (await call(c, "open_file", {"path": "a"}))["content"][0]["text"] == "opened a on connection 0"

        peer.reachable = peer.healthy = False
        clock.t += 1.0
        editor.step()  # the probe fails: down
        await c.wait_notification("notifications/tools/list_changed", 2)
        assert await names(c) == ["status"]
        between = await call(c, "open_file", {"path": "b"})
        assert error_of(between)["code"] == "E_NOT_CONNECTED"

        peer.reachable = peer.healthy = True
        clock.t += 5.0
        editor.step()  # back
        await c.wait_notification("notifications/tools/list_changed", 3)
        assert await names(c) == ["status", "open_file"]
        assert not (await call(c, "open_file", {"path": "c"})).get("isError")
    changes = [n for n in c.notifications if n["method"] == "notifications/tools/list_changed"]
    assert len(changes) == 3  # up, down, up: each transition announced once
    assert [a["code"] for a in audit.lines if a["tool"] == "open_file"] == [
        "E_NOT_CONNECTED", None, "E_NOT_CONNECTED", None]


@pytest.mark.asyncio
async def test_a_list_made_as_the_bridge_comes_up_shows_its_tools(wire):
    # The server hears of a transition a moment after the bridge's up changes, on the bridge's
    # thread; a tools/list in that moment served the list cached while the bridge was down.
    clock, peer = Clock(), Peer()
    editor = Bridge("editor", peer.connect, probe=peer.probe, close=peer.close, jitter=0.0, clock=clock)
    entered, release = threading.Event(), threading.Event()

    def descheduled(up: bool) -> None:  # told before the server: its thread stalls here
        if up:
            entered.set()
            release.wait(5)

    editor.on_change(descheduled)
    server = Server("b")

    @server.tool(read_only=True)
    def status() -> str:
        return "fine"

    @server.tool(requires=editor)
    def open_file(path: str) -> str:
        return path

    loop = asyncio.get_running_loop()
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        assert await names(c) == ["status"]  # listed (and cached) while down
        stepping = loop.run_in_executor(None, editor.step)
        try:
            assert await loop.run_in_executor(None, entered.wait, 5)
            assert editor.up
            assert await names(c) == ["status", "open_file"]
        finally:
            release.set()
            await stepping
        await c.wait_notification("notifications/tools/list_changed", 1)
        assert await names(c) == ["status", "open_file"]


def test_a_credential_parameter_warns_once_with_the_fix():
    server = Server("h")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @server.tool
        def deploy(target: str, api_key: str, max_tokens: int = 5) -> str:
            return "ok"

        server.remove_tool("deploy")

        @server.tool(name="deploy")
        def deploy_again(target: str, api_key: str) -> str:
            return "ok"

    mine = [w for w in caught if issubclass(w.category, SecretParameterWarning)]
    assert len(mine) == 1
    text = str(mine[0].message)
    assert "'api_key'" in text and "environment" in text and "max_tokens" not in text


def test_policy_true_is_the_secure_policy_and_reads_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MCPKIT_ROOT", str(tmp_path))
    monkeypatch.setenv("MCPKIT_READ_ONLY", "1")
    monkeypatch.delenv("MCPKIT_AUDIT_LOG", raising=False)
    server = Server("s", policy=True)
    policy = server.policy
    assert policy.gates == Gates(read_only=True)
    assert [str(r) for r in policy.sandbox.roots] == [str(tmp_path.resolve())]
    assert policy.rate_limiter is not None and policy.limits.sanitize is True
    assert str(policy.audit.path) == str(tmp_path.resolve() / ".mcpkit" / "audit.log")
    monkeypatch.setenv("MCPKIT_POLICY", "1")
    assert Server("t").policy is not None
    monkeypatch.setenv("MCPKIT_POLICY", "0")
    assert Server("u").policy is None


def test_setting_a_policy_later_rewrites_what_tools_advertise():
    server = Server("late")

    @server.tool(read_only=True, open_world=False)
    def look() -> int:
        return 1

    assert server.tools["look"].output_schema == {"type": "object", "properties": {"result": {"type": "integer"}},
                                                  "required": ["result"]}
    server.policy = Policy(contract=True)
    assert server.tools["look"].output_schema["required"] == ["ok", "summary", "result", "error", "meta"]
    server.policy = None
    assert server.tools["look"].output_schema["required"] == ["result"]


@pytest.mark.asyncio
async def test_a_server_takes_the_policy_layer_from_the_policy_it_is_given(wire):
    """The server never looks the policy package up: the Policy it is given brings its layer,
    which chooses each call's steps, shapes what a tool advertises and guards the logs."""
    from mcpkit.policy import layer as policy_layer

    asked: list[str] = []

    class Layer:
        def __getattr__(self, name: str) -> object:
            asked.append(name)
            return getattr(policy_layer, name)

    class OwnPolicy(Policy):
        layer = Layer()

    server = Server("given", policy=OwnPolicy(gates=Gates()))

    @server.tool(read_only=True, open_world=False)
    def look() -> int:
        return 1

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        assert (await call(c, "look", {}))["structuredContent"] == {"result": 1}
    assert {"advertise", "visible", "steps", "started"} <= set(asked), asked


@pytest.mark.req("LG-05")
@pytest.mark.asyncio
async def test_log_messages_to_the_client_are_redacted_under_a_policy(wire):
    from mcpkit import Context

    server = Server("l", policy=Policy(gates=Gates(), redact_logs=True))
    token = "ghp_" + "B" * 36

    @server.tool(read_only=True, open_world=False)
    async def connect_repo(ctx: Context) -> str:
        await ctx.info(f"using token {token}")
        await ctx.warning({"authorization": "Bearer abcdefghijklmnop", "repo": "demo"})
        return "ok"

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        await c.request("logging/setLevel", {"level": "debug"})
        await call(c, "connect_repo", {})
        await c.settle()
    logs = [n["params"]["data"] for n in c.notifications if n["method"] == "notifications/message"]
    assert logs == ["using token [REDACTED]", {"authorization": "[REDACTED]", "repo": "demo"}]


@pytest.mark.asyncio
async def test_the_readme_guard_rails_example_runs_as_written(wire, tmp_path, monkeypatch):
    from pathlib import Path

    for name in ("MCPKIT_READ_ONLY", "MCPKIT_ALLOW_DESTRUCTIVE", "MCPKIT_ALLOW_OPEN_WORLD", "MCPKIT_AUDIT_LOG"):
        monkeypatch.delenv(name, raising=False)
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    code = readme.split("## Guard rails", 1)[1].split("```python", 1)[1].split("\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, object] = {}
    monkeypatch.chdir(tmp_path)  # its root is the directory it starts in
    exec(code, namespace)  # noqa: S102 - the README's own code
    server = namespace["server"]
    (tmp_path / "note.txt").write_text("hi")
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        assert await names(c) == ["read"]
        assert (await call(c, "read", {"path": "note.txt"}))["structuredContent"]["result"] == "hi"
        assert error_of(await call(c, "delete", {"path": "note.txt"}))["code"] == "E_PERMISSION_DENIED"
    assert (tmp_path / "note.txt").exists()


@pytest.mark.req("TL-10", "TL-11")
@pytest.mark.asyncio
async def test_a_call_to_a_tool_that_does_not_exist_is_audited_on_every_route(wire):
    """A name the server does not serve (a tool a proxy's tool policy hides is not mirrored at
    all) is refused, and audited, whether the client calls it or a tool calls it for it."""
    from tests.harness import RpcError
    from mcpkit import Context

    audit = MemoryAudit()
    server = Server("s", policy=Policy(gates=Gates(), audit=audit))

    @server.tool(read_only=True, open_world=False)
    def relay(name: str, ctx: Context) -> dict:
        return ctx.call_tool(name, {})

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        with pytest.raises(RpcError) as refused:
            await c.request("tools/call", {"name": "get_env", "arguments": {}})
        assert refused.value.code == -32602 and "Unknown tool" in refused.value.message
        await c.request("tools/call", {"name": "relay", "arguments": {"name": "get_env"}})
    assert [(a["tool"], a["outcome"], a["code"]) for a in audit.lines] == [
        ("get_env", "denied", "E_NOT_FOUND"), ("get_env", "denied", "E_NOT_FOUND"), ("relay", "ok", None)]
