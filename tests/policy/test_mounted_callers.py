"""A mounted Server names the parent's caller (server/session.caller_of, ctx.principal) on every
route, not only while the parent's call is in flight through the innermost mount:

- a Server mounted in a mounted Server (grandchild) saw no caller at all: its tools' ctx.principal
  was None and every caller of the parent was its one "anonymous", one rate budget for all;
- a mounted child's tool run as a 2026-07-28 task lost its caller the moment the CreateTaskResult
  went back: from its first await on, ctx.principal was None, so a tool keeping each caller's data
  apart by it mixed every caller's into one.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcpkit import Context, Server
from mcpkit.auth.tokens import AccessToken
from mcpkit.policy import Policy
from mcpkit.proxy import upstreams_of
from tests.auth.test_scopes_everywhere import _Modern
from tests.harness import connect
from tests.policy.test_anonymous_http_callers import look_from
from tests.policy.test_pipeline_rules import MemoryAudit
from tests.test_http import clients  # noqa: F401 - a fixture

MODERN = "2026-07-28"
TASKS = {"io.modelcontextprotocol/protocolVersion": MODERN,
         "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}


def _close(*servers: Server) -> None:
    for server in servers:
        for upstream in upstreams_of(server):
            upstream.close()


@pytest.mark.req("TL-11")
@pytest.mark.parametrize("revision", [None, MODERN])
@pytest.mark.asyncio
async def test_a_server_mounted_in_a_mount_names_each_caller(clients, wire, revision):
    audit = MemoryAudit()
    grand = Server("grand", policy=Policy(audit=audit))
    seen: list[Any] = []

    @grand.tool(read_only=True, open_world=False, rate_limit="1/min")
    def once(ctx: Context) -> str:
        seen.append(ctx.principal)
        return "ok"

    child, parent = Server("child"), Server("parent")
    options = {"protocol_version": revision} if revision else {}
    child.mount(grand, prefix="g", **options)
    parent.mount(child, prefix="c", **options)
    try:
        for _ in range(100):
            if "c_g_once" in parent._tools:
                break
            await asyncio.sleep(0.02)
        app = clients.app(parent)
        refused = [*await look_from(clients, app, "10.0.0.1", "c_g_once", 2),
                   *await look_from(clients, app, "10.0.0.2", "c_g_once", 2)]
        # each address its own budget in the grandchild, and its own audit name
        assert refused == [False, True, False, True]
        assert [line["principal"] for line in audit.lines] == ["anonymous@10.0.0.1"] * 2 + \
            ["anonymous@10.0.0.2"] * 2
        assert seen == [None, None]  # no principal without auth, but not another caller's either
        # with a named principal, the grandchild's tool sees it
        async with connect(parent, wire, "2025-11-25") as c:
            c.session.principal = "alice"
            assert (await c.request("tools/call", {"name": "c_g_once", "arguments": {}})).get("isError") is not True
        assert seen[-1] == "alice"
    finally:
        _close(child, parent)


@pytest.mark.req("TX-07")
@pytest.mark.asyncio
async def test_a_mounted_childs_task_keeps_its_callers_principal_after_the_call_returned(wire):
    child = Server("child")
    seen: list[tuple[str, Any, Any]] = []

    async def work(arguments: dict[str, Any], ctx: Context) -> str:
        seen.append(("start", ctx.principal, ctx.access_token.subject if ctx.access_token else None))
        await asyncio.sleep(0.1)  # the parent's call has answered with the CreateTaskResult by now
        seen.append(("later", ctx.principal, ctx.access_token.subject if ctx.access_token else None))
        return "done"

    work.takes_ctx = True  # type: ignore[attr-defined]
    child.add_tool("work", work, input_schema={"type": "object"}, task="optional")
    parent = Server("parent")
    parent.mount(child, protocol_version=MODERN)
    try:
        for _ in range(100):
            if "work" in parent._tools:
                break
            await asyncio.sleep(0.02)
        async with connect(parent, _Modern(wire), None) as c:
            c.session.principal = "alice"
            c.session.access_token = AccessToken("alice", client_id="cli", scopes=frozenset())
            created = await c.request("tools/call", {"name": "work", "arguments": {}, "_meta": TASKS})
            assert created["resultType"] == "task"
            await asyncio.sleep(0.3)
        assert seen == [("start", "alice", "alice"), ("later", "alice", "alice")]
    finally:
        _close(parent)
