"""Scopes hold on every route to an item, not only on the request body the HTTP layer reads.

A token without scope ``admin`` is refused a tool declared ``scopes=["admin"]`` when it calls
it directly (403), and must be refused the same tool reached through a batch tool
(``ctx.call_tool``, sync and async), through a manager tool's action, and the completions of a
scoped prompt or template (CP-05). A subscription to a scoped resource is checked too.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from mcpkit import Context, Server
from mcpkit.auth.tokens import AccessToken
from mcpkit.policy import Gates, Policy
from mcpkit.policy.chain import ERROR_META_KEY
from tests.auth.test_http_auth import Tokens, as_user, auth_for, bearer, challenge_params
from tests.harness import RpcError, connect
from tests.test_http import init_params, jsonrpc

USER = AccessToken("mallory", client_id="cli", scopes=frozenset({"mcp", "files:read"}))
ADMIN = AccessToken("root", client_id="cli", scopes=frozenset({"mcp", "admin", "prompts", "files:read"}))


class MemoryAudit:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def record(self, entry: dict[str, Any]) -> None:
        self.lines.append(dict(entry))


def make_server(policy: Any = None) -> tuple[Server, list[str]]:
    server = Server("scoped", policy=policy)
    ran: list[str] = []

    @server.tool(destructive=False, open_world=False, scopes=["admin"])
    def reset(target: str) -> str:
        ran.append(f"reset {target}")
        return f"reset {target}"

    @server.tool(read_only=True, open_world=False)
    def batch(calls: list[dict[str, Any]], ctx: Context) -> list[Any]:
        return [ctx.call_tool(c["name"], c.get("arguments")) for c in calls]

    @server.tool(read_only=True, open_world=False)
    async def abatch(calls: list[dict[str, Any]], ctx: Context) -> list[Any]:
        return [await ctx.call_tool_async(c["name"], c.get("arguments")) for c in calls]

    ops = server.manager("ops", description="Operations.")
    ops.action(reset, name="reset", destructive=False, open_world=False)

    @ops.action(read_only=True, open_world=False)
    def status() -> str:
        return "fine"

    @server.prompt(scopes=["prompts"], completions={"topic": lambda value: ["salaries", "layoffs"]})
    def board(topic: str) -> str:
        return f"Board notes on {topic}"

    @server.resource_template("secret://{name}", scopes=["admin"],
                              completions={"name": lambda value: ["root-password", "payroll"]})
    def secret(name: str) -> str:
        return f"secret {name}"

    @server.resource("secret://index", scopes=["admin"])
    def index() -> str:
        return "everything"

    return server, ran


def _refused(result: dict[str, Any]) -> bool:
    return result.get("isError") is True and result["_meta"][ERROR_META_KEY]["code"] == "E_PERMISSION_DENIED"


# ------------------------------------------------------------------------------------- over HTTP


@pytest.mark.req("AU-09")
@pytest.mark.asyncio
@pytest.mark.parametrize("batch", ["batch", "abatch"])
async def test_a_scoped_tool_is_refused_through_a_batch_tool(clients, batch):
    server, ran = make_server()
    app = clients.app(server, auth=auth_for(Tokens(user=USER, admin=ADMIN)))
    client = as_user(clients.asgi(app), "user")
    await client.initialize()
    direct = await client.post(jsonrpc("tools/call", {"name": "reset", "arguments": {"target": "db"}}, 5))
    assert direct.status == 403
    result = await client.result("tools/call", {"name": batch, "arguments": {
        "calls": [{"name": "reset", "arguments": {"target": "db"}}]}})
    inner = result["structuredContent"]["result"][0]
    assert _refused(inner), inner
    assert "admin" in inner["content"][0]["text"]
    assert ran == []  # the handler never ran
    # the same route with a token that has the scope works: the refusal is about the scope
    admin = as_user(clients.asgi(app), "admin")
    await admin.initialize()
    result = await admin.result("tools/call", {"name": batch, "arguments": {
        "calls": [{"name": "reset", "arguments": {"target": "db"}}]}})
    assert result["structuredContent"]["result"][0]["content"] == [{"type": "text", "text": "reset db"}]
    assert ran == ["reset db"]


@pytest.mark.req("AU-09")
@pytest.mark.asyncio
async def test_a_scoped_tool_is_refused_through_a_manager_action(clients):
    server, ran = make_server()
    client = as_user(clients.asgi(clients.app(server, auth=auth_for(Tokens(user=USER)))), "user")
    await client.initialize()
    # named in the request body: 403 before anything runs, with the challenge naming the
    # action's scope, as for the tool itself, so a client can step up (AU-09, AU-10)
    direct = await client.post(jsonrpc("tools/call", {"name": "ops", "arguments": {"action": "reset",
                                                                                  "target": "db"}}, 5))
    assert direct.status == 403
    challenge = challenge_params(direct.headers["www-authenticate"])
    assert challenge["error"] == "insufficient_scope" and "admin" in challenge["scope"].split(), challenge
    # reached through a batch tool: refused in the call path
    result = await client.result("tools/call", {"name": "batch", "arguments": {"calls": [
        {"name": "ops", "arguments": {"action": "reset", "target": "db"}}]}})
    assert _refused(result["structuredContent"]["result"][0]), result
    assert ran == []
    ok = await client.result("tools/call", {"name": "ops", "arguments": {"action": "status"}})
    assert ok["content"] == [{"type": "text", "text": "fine"}]
    # an action named oddly is not a 403: the call path answers it
    for odd in ({"action": ["reset"]}, {"action": "nope"}, {}):
        answered = await client.post(jsonrpc("tools/call", {"name": "ops", "arguments": odd}, 6))
        assert answered.status != 403, odd


@pytest.mark.asyncio
async def test_names_that_are_no_strings_get_invalid_params_not_a_crash(clients):
    """The scope check reads names from the body before the session validates them: a list
    or an object there is answered -32602 by the session, not an exception in the app."""
    server, ran = make_server()
    client = as_user(clients.asgi(clients.app(server, auth=auth_for(Tokens(user=USER)))), "user")
    await client.initialize()
    for method, params in (
        ("tools/call", {"name": ["reset"]}),
        ("tools/call", {"name": {"a": 1}}),
        ("prompts/get", {"name": ["board"]}),
        ("resources/read", {"uri": ["secret://index"]}),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": ["board"]},
                                 "argument": {"name": "topic", "value": ""}}),
        ("completion/complete", {"ref": {"type": "ref/resource", "uri": ["secret://index"]},
                                 "argument": {"name": "name", "value": ""}}),
    ):
        answer = await client.call(method, params)
        assert answer["error"]["code"] == -32602, (method, params, answer)
    assert ran == []
    ok = await client.result("tools/call", {"name": "ops", "arguments": {"action": "status"}})
    assert ok["content"][0]["text"] == "fine"


@pytest.mark.req("AU-09")
@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["mount", "include"])
async def test_a_composed_managers_action_gets_403_when_named_in_the_body(clients, how):
    """The parent's mirror of a mounted manager carries the actions' scopes: the HTTP layer
    reads them from the body as it does a plain tool's."""
    from mcpkit.proxy import upstreams_of

    child, ran = make_server()
    parent = Server("parent")
    getattr(parent, how)(child, prefix="c")
    try:
        client = as_user(clients.asgi(clients.app(parent, auth=auth_for(Tokens(user=USER)))), "user")
        await client.initialize()
        direct = await client.post(jsonrpc("tools/call", {"name": "c_ops", "arguments": {"action": "reset",
                                                                                        "target": "db"}}, 5))
        assert direct.status == 403
        assert "admin" in challenge_params(direct.headers["www-authenticate"])["scope"].split()
        assert ran == []
        ok = await client.result("tools/call", {"name": "c_ops", "arguments": {"action": "status"}})
        assert ok["content"][0]["text"] == "fine"
    finally:
        for upstream in upstreams_of(parent):
            upstream.close()


@pytest.mark.req("CP-05", "AU-09")
@pytest.mark.asyncio
@pytest.mark.parametrize(("ref", "argument", "scope"), [
    ({"type": "ref/prompt", "name": "board"}, "topic", "prompts"),
    ({"type": "ref/resource", "uri": "secret://{name}"}, "name", "admin"),
])
async def test_completions_follow_the_scopes_of_what_they_complete(clients, ref, argument, scope):
    server, _ = make_server()
    app = clients.app(server, auth=auth_for(Tokens(user=USER, admin=ADMIN)))
    client = as_user(clients.asgi(app), "user")
    await client.initialize()
    params = {"ref": ref, "argument": {"name": argument, "value": ""}}
    reply = await client.post(jsonrpc("completion/complete", params, 9))
    assert reply.status == 403
    assert scope in challenge_params(reply.headers["www-authenticate"])["scope"].split()
    admin = as_user(clients.asgi(app), "admin")
    await admin.initialize()
    assert (await admin.result("completion/complete", params))["completion"]["values"]


# ------------------------------------------------------------------ in the call path itself


class _Auth:
    """What the scope step needs of a ResourceServer: which required scopes a token lacks."""

    def missing(self, access: Any, required: Any) -> list[str]:
        return sorted(set(required) - set(access.scopes))


async def _as(c: Any, token: AccessToken) -> None:
    c.session.access_token = token
    c.session.principal = token.subject


@pytest.mark.req("CP-05", "AU-09")
@pytest.mark.asyncio
async def test_the_call_path_refuses_completions_reads_and_subscriptions_without_the_scope(wire):
    """Whatever transport delivered the request: the step every route takes checks the scopes."""
    from mcpkit.server.scopes import ScopeStep

    server, _ = make_server()
    server._install_step("scopes", ScopeStep(_Auth()))
    async with connect(server, wire, "2025-11-25") as c:
        await _as(c, USER)
        for method, params in (
            ("completion/complete", {"ref": {"type": "ref/prompt", "name": "board"},
                                     "argument": {"name": "topic", "value": "s"}}),
            ("completion/complete", {"ref": {"type": "ref/resource", "uri": "secret://{name}"},
                                     "argument": {"name": "name", "value": ""}}),
            ("resources/read", {"uri": "secret://payroll"}),
            ("resources/read", {"uri": "secret://index"}),
            ("resources/subscribe", {"uri": "secret://index"}),
            ("prompts/get", {"name": "board", "arguments": {"topic": "salaries"}}),
        ):
            with pytest.raises(RpcError) as refused:
                await c.request(method, params)
            assert refused.value.code == -32602 and "Insufficient scope" in refused.value.message, (method, params)
        assert c.session.subscriptions == set()
        await _as(c, ADMIN)
        assert (await c.request("resources/read", {"uri": "secret://payroll"}))["contents"][0]["text"] == \
            "secret payroll"
        completion = await c.request("completion/complete", {"ref": {"type": "ref/prompt", "name": "board"},
                                                              "argument": {"name": "topic", "value": ""}})
        assert completion["completion"]["values"] == ["salaries", "layoffs"]


@pytest.mark.req("AU-09", "TL-11")
@pytest.mark.asyncio
async def test_nested_refusals_are_audited_once_each_under_a_policy(wire):
    audit = MemoryAudit()
    from mcpkit.server.scopes import ScopeStep

    server, ran = make_server(Policy(gates=Gates(), audit=audit))
    server._install_step("scopes", ScopeStep(_Auth()))
    async with connect(server, wire, "2025-11-25") as c:
        await _as(c, USER)
        result = await c.request("tools/call", {"name": "batch", "arguments": {"calls": [
            {"name": "reset", "arguments": {"target": "db"}}, {"name": "ops", "arguments": {"action": "reset",
                                                                                         "target": "db"}}]}})
    inner = result["structuredContent"]["result"]
    assert all(_refused(r) for r in inner), inner
    assert ran == []
    assert [(a["tool"], a["action"], a["outcome"], a["code"]) for a in audit.lines] == [
        ("reset", None, "denied", "E_PERMISSION_DENIED"), ("ops", "reset", "denied", "E_PERMISSION_DENIED"),
        ("batch", None, "ok", None)]


@pytest.mark.req("AU-09", "TX-01")
@pytest.mark.asyncio
async def test_a_scoped_tool_is_not_started_as_a_2026_07_28_task_without_the_scope(wire):
    """The task route: the refusal comes before any task exists (no CreateTaskResult)."""
    from mcpkit.server.scopes import ScopeStep

    server, ran = make_server()

    @server.tool(destructive=False, open_world=False, scopes=["admin"], task="optional")
    def rebuild(target: str) -> str:
        ran.append(f"rebuild {target}")
        return "rebuilt"

    server._install_step("scopes", ScopeStep(_Auth()))
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    async with connect(server, _Modern(wire), None) as c:
        await _as(c, USER)
        refused = await c.request("tools/call", {"name": "rebuild", "arguments": {"target": "db"}, "_meta": meta})
        assert refused.get("resultType") != "task" and _refused(refused), refused
        await _as(c, ADMIN)
        created = await c.request("tools/call", {"name": "rebuild", "arguments": {"target": "db"}, "_meta": meta})
        assert created["resultType"] == "task"


class _Modern:
    """The harness names no revision before a handshake; these requests are 2026-07-28 ones."""

    def __init__(self, wire: Any) -> None:
        self.wire = wire

    def record(self, message: Any, revision: str, method: str | None) -> None:
        self.wire.record(message, "2026-07-28", method)


@pytest.mark.req("AU-09", "CP-05")
@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["mount", "include"])
async def test_a_composed_childs_scopes_hold_in_the_parent(wire, how):
    """A mounted child runs in memory without the caller's token, so it cannot check its own
    scopes: its items keep them in the parent, whose pipeline does (as include's copies do)."""
    from mcpkit.server.scopes import ScopeStep
    from mcpkit.proxy import upstreams_of

    child, ran = make_server()
    parent = Server("parent")
    getattr(parent, how)(child, prefix="c")
    parent._install_step("scopes", ScopeStep(_Auth()))
    try:
        async with connect(parent, wire, "2025-11-25") as c:
            await _as(c, USER)
            result = await c.request("tools/call", {"name": "c_reset", "arguments": {"target": "db"}})
            assert _refused(result), result
            for method, params in (
                ("resources/read", {"uri": "secret://c/index"}),
                ("resources/read", {"uri": "secret://c/payroll"}),
                ("prompts/get", {"name": "c_board", "arguments": {"topic": "salaries"}}),
                ("completion/complete", {"ref": {"type": "ref/prompt", "name": "c_board"},
                                         "argument": {"name": "topic", "value": ""}}),
            ):
                with pytest.raises(RpcError) as refused:
                    await c.request(method, params)
                assert "Insufficient scope" in refused.value.message, (method, params)
            assert ran == []
            await _as(c, ADMIN)
            result = await c.request("tools/call", {"name": "c_reset", "arguments": {"target": "db"}})
            assert result["content"][0]["text"] == "reset db"
    finally:
        for upstream in upstreams_of(parent):
            upstream.close()


@pytest.mark.req("AU-09", "CP-05", "TL-11")
@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["mount", "include"])
async def test_a_composed_managers_action_scopes_hold_in_the_parent(wire, how):
    """A manager action's scopes (those of the tool registered with the same function) are
    checked in the parent, whose caller has the token: a mounted manager is mirrored as a plain
    tool, and the child it is forwarded to never sees the token. The refusal is audited."""
    from mcpkit.server.scopes import ScopeStep
    from mcpkit.proxy import upstreams_of

    child, ran = make_server()
    audit = MemoryAudit()
    parent = Server("parent", policy=Policy(audit=audit))
    getattr(parent, how)(child, prefix="c")
    parent._install_step("scopes", ScopeStep(_Auth()))
    try:
        async with connect(parent, wire, "2025-11-25") as c:
            await _as(c, USER)
            result = await c.request("tools/call", {"name": "c_ops", "arguments": {"action": "reset",
                                                                                   "target": "db"}})
            assert _refused(result), result
            assert "admin" in result["content"][0]["text"]
            # through the child's batch tool too (its nested call is the parent's)
            result = await c.request("tools/call", {"name": "c_batch", "arguments": {"calls": [
                {"name": "ops", "arguments": {"action": "reset", "target": "db"}}]}})
            assert _refused(result["structuredContent"]["result"][0]), result
            assert ran == []
            ok = await c.request("tools/call", {"name": "c_ops", "arguments": {"action": "status"}})
            assert ok["content"][0]["text"] == "fine"
            denied = [line for line in audit.lines if line["outcome"] == "denied"]
            assert [(line["tool"], line["principal"], line["code"]) for line in denied] == [
                ("c_ops", "mallory", "E_PERMISSION_DENIED")] * 2, audit.lines
            await _as(c, ADMIN)
            result = await c.request("tools/call", {"name": "c_ops", "arguments": {"action": "reset",
                                                                                   "target": "db"}})
            assert result["content"][0]["text"] == "reset db", result
            assert ran == ["reset db"]
    finally:
        for upstream in upstreams_of(parent):
            upstream.close()


# ------------------------------------------------------------------- one user, two tokens, one session

NARROW = AccessToken("alice", client_id="cli", scopes=frozenset({"mcp"}))
WIDE = AccessToken("alice", client_id="cli", scopes=frozenset({"mcp", "admin"}))


@pytest.mark.req("AU-09")
@pytest.mark.asyncio
async def test_a_call_keeps_the_token_it_was_sent_with_when_its_user_steps_up_meanwhile(clients):
    """A user may step up to a wider token within one session (AU-11). A call sent with the
    narrow token and still running is judged by that token: a tool it reaches through
    ``ctx.call_tool`` after the step-up is refused, and ``ctx.access_token`` stays the narrow
    one, not whichever token the session saw last."""
    server, ran = make_server()
    started, go = threading.Event(), threading.Event()
    seen: list[list[str]] = []

    @server.tool(read_only=True, open_world=False)
    def slow_batch(calls: list[dict[str, Any]], ctx: Context) -> list[Any]:
        started.set()
        go.wait(10)
        seen.append(sorted(ctx.access_token.scopes))
        return [ctx.call_tool(c["name"], c.get("arguments")) for c in calls]

    app = clients.app(server, auth=auth_for(Tokens(narrow=NARROW, wide=WIDE)))
    client = as_user(clients.asgi(app), "narrow")
    await client.initialize()
    slow = await client.post(jsonrpc("tools/call", {"name": "slow_batch", "arguments": {
        "calls": [{"name": "reset", "arguments": {"target": "db"}}]}}, 7))
    assert await asyncio.to_thread(started.wait, 10)
    # the same user, the same session, a token with the scope: its own call runs
    stepped = await client.result("tools/call", {"name": "reset", "arguments": {"target": "cache"}},
                                  authorization=bearer("wide"))
    assert stepped["content"] == [{"type": "text", "text": "reset cache"}]
    go.set()
    [answer] = [m for m in await client.messages(slow) if m.get("id") == 7]
    inner = answer["result"]["structuredContent"]["result"][0]
    assert _refused(inner), inner
    assert ran == ["reset cache"]  # "reset db" never ran
    assert seen == [["mcp"]]


def test_a_session_judges_each_message_by_the_token_it_was_fed_with():
    """What the transport passes with a message wins over the session's latest token, which
    another request of the same user may have changed while this one was read off the loop."""
    from mcpkit.server.session import ServerSession

    server = Server("tokens")
    seen: list[Any] = []

    @server.tool()
    def whoami(ctx: Context) -> str:
        seen.append(ctx.access_token)
        return "ok"

    session = ServerSession(server, lambda batch: None, inline_sync=True)
    session.feed_message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    session.feed_message({"jsonrpc": "2.0", "method": "notifications/initialized"})
    session.access_token = WIDE
    session.feed_message({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                          "params": {"name": "whoami", "arguments": {}}}, None, NARROW)
    session.feed_message({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                          "params": {"name": "whoami", "arguments": {}}})
    assert seen == [NARROW, WIDE]  # without one: the session's


@pytest.mark.req("AU-09", "TL-11")
@pytest.mark.asyncio
async def test_calls_refused_with_403_before_dispatch_are_audited(clients, tmp_path):
    """The HTTP transport refuses a request naming an item beyond the token's scopes before
    any session sees it; under a policy with an audit log each refused call still leaves its
    line (denied, insufficient_scope, the scopes it lacked), arguments redacted."""
    from mcpkit.policy import AuditLog
    from mcpkit.policy.audit import read_lines

    audit = AuditLog(tmp_path / "audit.log")
    server, ran = make_server(Policy(gates=Gates(), audit=audit))
    client = as_user(clients.asgi(clients.app(server, auth=auth_for(Tokens(user=USER)))), "user")
    await client.initialize()
    refused = [
        jsonrpc("tools/call", {"name": "reset", "arguments": {"target": "db", "password": "hunter2"}}, 5),
        jsonrpc("tools/call", {"name": "ops", "arguments": {"action": "reset", "target": "db"}}, 6),
        jsonrpc("resources/read", {"uri": "secret://payroll"}, 7),
        jsonrpc("prompts/get", {"name": "board", "arguments": {"topic": "layoffs"}}, 8),
        jsonrpc("completion/complete", {"ref": {"type": "ref/prompt", "name": "board"},
                                        "argument": {"name": "topic", "value": "s"}}, 9),
    ]
    for message in refused:
        assert (await client.post(message)).status == 403
    assert ran == []
    lines = read_lines(tmp_path / "audit.log")
    kinds = ("tool", "resource", "prompt", "completion")
    assert [[(k, line[k]) for k in kinds if k in line] for line in lines] == [
        [("tool", "reset")], [("tool", "ops")], [("resource", "secret:[REDACTED]")],  # as a read's line would say
        [("prompt", "board")], [("completion", "board")]]
    assert all(line["outcome"] == "denied" and line["code"] == "insufficient_scope" and line["principal"] == "mallory"
               for line in lines), lines
    assert [line["requiredScopes"] for line in lines] == [["admin"], ["admin"], ["admin"], ["prompts"], ["prompts"]]
    assert lines[0]["arguments"] == {"target": "db", "password": "[REDACTED]"}
    assert lines[1]["action"] == "reset"
    assert lines[3]["arguments"] == {"topic": "layoffs"}
    # an allowed call is audited by the call path as before, once
    await client.result("tools/call", {"name": "ops", "arguments": {"action": "status"}})
    assert [(line.get("tool"), line["outcome"]) for line in read_lines(tmp_path / "audit.log")[5:]] == [("ops", "ok")]


@pytest.mark.req("AU-09", "TL-11")
@pytest.mark.asyncio
@pytest.mark.parametrize("name", ["innocent", 5, None])
async def test_a_refused_completions_audit_line_names_what_was_completed_not_what_the_caller_added(clients, name):
    """The transport judges a ref/resource by its uri; a ``name`` the caller adds to the ref must
    not become what the refusal's line says was completed."""
    audit = MemoryAudit()
    server, _ = make_server(Policy(gates=Gates(), audit=audit))
    client = as_user(clients.asgi(clients.app(server, auth=auth_for(Tokens(user=USER)))), "user")
    await client.initialize()
    plain = {"type": "ref/resource", "uri": "secret://{name}"}
    for rid, ref in ((5, plain), (6, {**plain, "name": name})):
        reply = await client.post(jsonrpc("completion/complete", {"ref": ref, "argument": {"name": "name", "value": "r"}},
                                          rid))
        assert reply.status == 403
    assert [line["completion"] for line in audit.lines] == ["secret://{name}"] * 2


@pytest.mark.req("AU-09", "TL-11")
@pytest.mark.asyncio
async def test_a_refused_calls_audit_line_names_the_caller_as_the_policy_does(clients):
    """``Policy(principal=...)`` names the caller in the call path's lines; a refusal's line
    names the same caller, so a trail filtered by principal shows its refusals too. A refused
    notification ran nothing and writes no line; a refused subscription says it was one."""
    audit = MemoryAudit()
    policy = Policy(gates=Gates(), audit=audit, principal=lambda session, request: f"tenant-7/{session.principal}")
    server, _ = make_server(policy)
    client = as_user(clients.asgi(clients.app(server, auth=auth_for(Tokens(user=USER)))), "user")
    await client.initialize()
    await client.result("tools/call", {"name": "ops", "arguments": {"action": "status"}})
    assert (await client.post(jsonrpc("tools/call", {"name": "reset", "arguments": {"target": "db"}}, 9))).status == 403
    notification = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "reset", "arguments": {}}}
    assert (await client.post(notification)).status == 403
    assert (await client.post(jsonrpc("resources/subscribe", {"uri": "secret://index"}, 10))).status == 403
    assert [(line.get("tool", line.get("subscription")), line["outcome"], line["principal"]) for line in audit.lines] == [
        ("ops", "ok", "tenant-7/mallory"), ("reset", "denied", "tenant-7/mallory"),
        ("secret://index", "denied", "tenant-7/mallory")]
    assert "subscription" in audit.lines[2]


@pytest.mark.req("AU-09", "BP-04", "CN-01")
@pytest.mark.asyncio
async def test_a_narrow_request_cannot_take_over_the_id_of_a_cancelled_wide_one_on_legacy_sse(clients):
    """Legacy HTTP+SSE lets a request reuse the id of one cancelled while its handler runs on.
    A narrow-token request under the id of a cancelled wide-token call was handed that call's
    Context, and so its token: its ``ctx.call_tool`` reached a tool needing the wide scope. It
    is refused now, and runs nothing."""
    server, ran = make_server()
    started, go = threading.Event(), threading.Event()

    @server.tool(read_only=True, open_world=False)
    def slow(ctx: Context) -> str:
        started.set()
        go.wait(10)
        return "slow done"

    app = clients.app(server, auth=auth_for(Tokens(narrow=NARROW, wide=WIDE)))
    driver = clients.asgi(app, revision="2024-11-05").driver
    stream = await driver.open("GET", "/sse", {"accept": "text/event-stream", "authorization": bearer("wide")})
    assert stream.status == 200
    endpoint = (await stream.next_event()).data

    async def send(message: dict[str, Any], token: str) -> None:
        reply = await driver.open("POST", endpoint, {"content-type": "application/json",
                                                     "authorization": bearer(token)}, json.dumps(message).encode())
        assert reply.status == 202, reply.status

    try:
        await send(jsonrpc("initialize", init_params("2024-11-05"), 1), "wide")
        assert (await stream.next_event()).json()["id"] == 1
        await send(jsonrpc("notifications/initialized"), "wide")
        await send(jsonrpc("tools/call", {"name": "slow", "arguments": {}}, 7), "wide")
        assert await asyncio.to_thread(started.wait, 10)
        await send(jsonrpc("notifications/cancelled", {"requestId": 7}), "wide")
        await send(jsonrpc("tools/call", {"name": "batch", "arguments": {
            "calls": [{"name": "reset", "arguments": {"target": "db"}}]}}, 7), "narrow")
        answer = (await asyncio.wait_for(stream.next_event(), 10)).json()
        assert answer["id"] == 7 and answer["error"]["code"] == -32600, answer
        assert ran == []
    finally:
        go.set()
        await stream.disconnect()


@pytest.mark.req("AU-06", "AU-09")
@pytest.mark.asyncio
async def test_requests_refused_before_their_body_is_read_are_audited_and_the_discovery_probe_is_not(
        clients, tmp_path):
    """A token that does not verify, a malformed header and a token without the server-wide
    scopes are refused before the body is read: an audit trail must still show those attempts
    (who, from where, why), never the token itself. A request with no credentials at all is how
    every client finds the authorization server (AU-06): it is not an attempt, and not a line."""
    from mcpkit.policy import AuditLog
    from mcpkit.policy.audit import read_lines

    audit = AuditLog(tmp_path / "audit.log")
    server, ran = make_server(Policy(gates=Gates(), audit=audit))
    outsider = AccessToken("eve", client_id="cli", scopes=frozenset({"files:read"}))  # lacks "mcp"
    app = clients.app(server, auth=auth_for(Tokens(user=USER, outsider=outsider)))
    client = clients.asgi(app)
    call = jsonrpc("tools/call", {"name": "reset", "arguments": {"target": "db"}}, 5)
    assert (await client.post(call, authorization=None)).status == 401
    assert (await client.post(call, authorization="Bearer sk-live-0123456789abcdef")).status == 401
    assert (await client.post(call, authorization="Bearer expired-token")).status == 401
    assert (await client.post(call, authorization="Basic dXNlcjpodW50ZXIy")).status == 401
    assert (await client.post(call, authorization="Bearer outsider")).status == 403
    assert ran == []
    lines = read_lines(tmp_path / "audit.log")
    assert [(line["code"], line["principal"]) for line in lines] == [
        ("invalid_token", None), ("invalid_token", None), ("invalid_request", None),
        ("insufficient_scope", "eve")]
    assert all(line["outcome"] == "denied" and line["request"] == "POST /mcp" and line["remote"] == "127.0.0.1"
               for line in lines), lines
    assert lines[1]["reason"].startswith("Invalid access token")  # redacted as any text in a line is
    assert lines[3]["requiredScopes"] == ["mcp"]
    assert "requiredScopes" not in lines[0]
    text = (tmp_path / "audit.log").read_text()
    assert "sk-live-0123456789abcdef" not in text and "dXNlcjpodW50ZXIy" not in text
    # the refused never reached a session: an accepted call is audited once, by the call path
    ok = as_user(clients.asgi(app), "user")
    await ok.initialize()
    await ok.result("tools/call", {"name": "ops", "arguments": {"action": "status"}})
    assert [(line.get("tool"), line["outcome"]) for line in read_lines(tmp_path / "audit.log")[4:]] == [
        ("ops", "ok")]


@pytest.mark.asyncio
async def test_an_api_key_that_is_refused_is_audited_without_the_key(clients):
    """The same for an API-key scheme: a wrong key and a key without the required scopes."""
    from mcpkit.auth import ApiKeyAuth

    audit = MemoryAudit()
    server, _ = make_server(Policy(gates=Gates(), audit=audit))
    auth = ApiKeyAuth({"good-key-0123456789abcdef01": {"subject": "studio-7", "scopes": "designs:read"}}, required_scopes=["mcp"])
    client = clients.asgi(clients.app(server, auth=auth))
    call = jsonrpc("tools/call", {"name": "reset", "arguments": {"target": "db"}}, 5)
    assert (await client.post(call, authorization=None, x_api_key="wrong-key-0123456789abcdef02")).status == 401
    assert (await client.post(call, authorization=None, x_api_key="good-key-0123456789abcdef01")).status == 403
    assert [(line["code"], line["principal"], line.get("requiredScopes")) for line in audit.lines] == [
        ("invalid_token", None, None), ("insufficient_scope", "studio-7", ["mcp"])]
    assert "wrong-key-0123456789abcdef02" not in str(audit.lines) and "good-key-0123456789abcdef01" not in str(audit.lines)


@pytest.mark.asyncio
async def test_bad_credentials_sent_in_bulk_cannot_flood_the_audit_log(clients, monkeypatch):
    """Anyone can send bad tokens: their lines are bounded per address and overall, so a flood
    cannot rotate the authenticated callers' lines out of the log; the next line written says
    how many were held back, and the callers' own calls are audited as ever."""
    from mcpkit.policy import reads

    monkeypatch.setattr(reads, "REFUSAL_LINES_PER_ADDRESS", (5.0, 0.001))
    monkeypatch.setattr(reads, "REFUSAL_LINES_OVERALL", (8.0, 0.001))
    audit = MemoryAudit()
    server, _ = make_server(Policy(gates=Gates(), audit=audit))
    app = clients.app(server, auth=auth_for(Tokens(user=USER)))
    call = jsonrpc("tools/call", {"name": "batch", "arguments": {"calls": []}}, 5)
    for address, count in (("10.0.0.1", 40), ("10.0.0.2", 2), ("10.0.0.3", 10)):
        client = clients.asgi(app)
        client.driver.client = (address, 40000)
        for _ in range(count):
            assert (await client.post(call, authorization="Bearer forged-token-0123456789")).status == 401
    # 5 from the first address (35 held back), 2 from the second, then the overall budget's last 1
    assert [line["remote"] for line in audit.lines] == ["10.0.0.1"] * 5 + ["10.0.0.2"] * 2 + ["10.0.0.3"]
    assert [line.get("withheld") for line in audit.lines] == [None] * 5 + [35, None, None]
    ok = as_user(clients.asgi(app), "user")
    await ok.initialize()
    await ok.result("tools/call", {"name": "batch", "arguments": {"calls": []}})
    assert audit.lines[-1].get("tool") == "batch" and audit.lines[-1]["outcome"] == "ok"


@pytest.mark.asyncio
async def test_rotating_ipv6_addresses_within_a_64_does_not_renew_the_audit_budget(clients, monkeypatch):
    from mcpkit.policy import reads

    monkeypatch.setattr(reads, "REFUSAL_LINES_PER_ADDRESS", (3.0, 0.001))
    audit = MemoryAudit()
    server, _ = make_server(Policy(gates=Gates(), audit=audit))
    app = clients.app(server, auth=auth_for(Tokens(user=USER)))
    call = jsonrpc("tools/call", {"name": "batch", "arguments": {"calls": []}}, 5)
    for n in range(1, 10):
        client = clients.asgi(app)
        client.driver.client = (f"2001:db8:7:7::{n:x}", 40000)
        assert (await client.post(call, authorization="Bearer forged-token-0123456789")).status == 401
    assert [line["remote"] for line in audit.lines] == ["2001:db8:7:7::1", "2001:db8:7:7::2", "2001:db8:7:7::3"]
