"""Items registered, replaced or removed while the server serves keep their rules.

A manager tool's action takes the options, scopes and isolation of the plain tool registered
with the same function (its twin). What a manager enforces is resolved once, so a twin
registered, replaced or removed after the manager's first call must resolve it again: else the
action keeps running under the rules of the registry as it was.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit import Server
from mcpkit.auth.tokens import AccessToken
from mcpkit.policy import Gates, Policy, RateLimiter
from mcpkit.policy.chain import ERROR_META_KEY
from mcpkit.server.scopes import ScopeStep
from tests.harness import connect
from tests.policy.test_chain import FakeClock

LATEST = "2025-11-25"
USER = AccessToken("mallory", client_id="cli", scopes=frozenset({"mcp"}))


class _Auth:
    def missing(self, access: Any, required: Any) -> list[str]:
        return sorted(set(required) - set(access.scopes))


def _code(result: dict[str, Any]) -> str | None:
    return result["_meta"][ERROR_META_KEY]["code"] if result.get("isError") else None


def _move(source: str) -> str:
    return f"moved {source}"


def _manager_server() -> Server:
    server = Server("t", policy=Policy(gates=Gates(), rate_limiter=RateLimiter("600/min")))
    server._install_step("scopes", ScopeStep(_Auth()))
    files = server.manager("files", description="Files.")
    files.action(_move, name="move", destructive=False, open_world=False)
    return server


@pytest.mark.req("TL-11", "AU-09")
@pytest.mark.asyncio
async def test_a_twin_registered_after_the_managers_first_call_scopes_and_limits_the_action(wire):
    server = _manager_server()
    move = {"name": "files", "arguments": {"action": "move", "source": "a"}}
    async with connect(server, wire, LATEST) as c:
        c.session.access_token, c.session.principal = USER, USER.subject
        assert _code(await c.request("tools/call", move)) is None  # no twin yet: the manager's rules
        server.tool(name="move", destructive=False, open_world=False, scopes=["admin"])(_move)
        refused = await c.request("tools/call", move)
        assert _code(refused) == "E_PERMISSION_DENIED", refused  # was: moved a, without scope admin
        assert "admin" in refused["content"][0]["text"]
        # replaced by a twin without scopes but with a rate limit of its own: that limit holds
        server.tool(name="move", destructive=False, open_world=False, rate_limit="1/min", replace=True)(_move)
        assert _code(await c.request("tools/call", move)) is None
        assert _code(await c.request("tools/call", move)) == "E_RATE_LIMITED"
        # the twin removed: the action is the manager's again (its 600/min)
        server.remove_tool("move")
        assert _code(await c.request("tools/call", move)) is None


@pytest.mark.req("AU-09")
def test_a_resource_or_app_is_published_with_its_scopes_and_a_refused_one_not_at_all():
    """Scopes were set after the item was in the registry and announced: a read racing the
    registration found it unscoped, and its pipeline was chained (and kept) without the check."""
    server = Server("t")
    published: list[tuple[str, tuple[str, ...]]] = []
    announce = server._changed

    def spy(kind: str) -> None:
        published.extend((uri, tuple(item.scopes)) for uri, item in server._resources.items())
        announce(kind)

    server._changed = spy  # type: ignore[method-assign]
    server.resource("secret://payroll", scopes=["admin"])(lambda: "payroll")
    server.app("ui://board/view", html="<p>board</p>", scopes=["admin"])
    assert published and all(scopes == ("admin",) for _, scopes in published), published
    with pytest.raises(ValueError):
        server.resource("secret://ledger", scopes=["admin"], ttl_ms=-1)(lambda: "ledger")
    assert "secret://ledger" not in server._resources  # was: registered, unscoped, then the error


class _ChangedMidBuild:
    """Middleware whose applicability is asked while an item's steps are chosen: the first time,
    another thread puts the server into read-only mode then (the operator's switch)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.switched = False

    def applies(self, kind: str, item: Any) -> bool:
        if kind == "call_tool" and not self.switched:
            import threading

            self.switched = True
            switch = threading.Thread(target=setattr, args=(self.server, "policy", Policy(gates=Gates(read_only=True))))
            switch.start()
            switch.join()
        return False

    def on_call_tool(self, cc: Any, call_next: Any) -> Any:
        return call_next(cc)


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_a_policy_set_while_a_tool_s_steps_are_chosen_is_enforced(wire):
    """The steps were chosen under the old policy and kept in the cache the change had just
    made: the gates of the new one never applied to the tool (it wrote in read-only mode)."""
    server = Server("t")
    ran: list[str] = []

    @server.tool(destructive=False, open_world=False)
    def write(text: str) -> str:
        ran.append(text)
        return "written"

    server.add_middleware(_ChangedMidBuild(server))
    async with connect(server, wire, LATEST) as c:
        for text in ("a", "b"):
            refused = await c.request("tools/call", {"name": "write", "arguments": {"text": text}})
            assert _code(refused) == "E_PERMISSION_DENIED", refused
    assert ran == []


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_an_action_s_rate_limit_is_not_refilled_by_a_tool_named_like_it(wire):
    """Action "move" of "files" (1/min of its own) and a plain tool named "files.move" (the
    policy's 600/min) shared one bucket: each call of the plain tool refilled it at 600/min, so
    the action ran every 0.2 s instead of once a minute."""
    clock = FakeClock()
    server = Server("t", policy=Policy(gates=Gates(), rate_limiter=RateLimiter("600/min", clock=clock)))
    server.tool(name="files.move", read_only=True, open_world=False)(lambda: "listed")
    files = server.manager("files", description="Files.")
    files.action(_move, name="move", destructive=False, open_world=False, rate_limit="1/min")
    move = {"name": "files", "arguments": {"action": "move", "source": "a"}}
    async with connect(server, wire, LATEST) as c:
        assert _code(await c.request("tools/call", move)) is None
        for _ in range(3):
            clock.now += 0.2
            assert _code(await c.request("tools/call", {"name": "files.move", "arguments": {}})) is None
            refused = await c.request("tools/call", move)
            assert _code(refused) == "E_RATE_LIMITED", refused  # was: moved a, three more times
            assert "'files.move'" in refused["content"][0]["text"]


@pytest.mark.req("AU-09", "TL-11")
@pytest.mark.asyncio
async def test_a_twin_registered_in_a_mounted_child_scopes_the_mirrored_action(wire):
    """A mounted child's manager is mirrored as a plain tool with the scopes of its actions, read
    from the child's resolved settings: those were kept from before the twin existed."""
    import asyncio

    from mcpkit.proxy import upstreams_of

    child = Server("child")
    ops = child.manager("ops", description="Operations.")
    ops.action(_move, name="move", destructive=False, open_world=False)
    parent = Server("parent")
    parent.mount(child, prefix="c")
    parent._install_step("scopes", ScopeStep(_Auth()))
    move = {"name": "c_ops", "arguments": {"action": "move", "source": "a"}}
    try:
        async with connect(parent, wire, LATEST) as c:
            c.session.access_token, c.session.principal = USER, USER.subject
            assert (await c.request("tools/call", move))["content"][0]["text"] == "moved a"
            child.tool(name="move", destructive=False, open_world=False, scopes=["admin"])(_move)
            for _ in range(100):  # the parent mirrors the child's change (a hang guard of 5 s)
                mirrored = parent._tools.get("c_ops")
                if mirrored is not None and getattr(mirrored, "action_scopes", None):
                    break
                await asyncio.sleep(0.05)
            refused = await c.request("tools/call", move)
            assert refused.get("isError") is True, refused  # was: moved a, without scope admin
            assert "admin" in refused["content"][0]["text"]
    finally:
        for upstream in upstreams_of(parent):
            upstream.close()
