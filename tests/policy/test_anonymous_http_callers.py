"""On an HTTP server without auth nobody is named, and every caller used to be one "anonymous":
one client spending its rate budget spent everyone's, and the audit trail could not tell
clients apart. Each address is now a caller of its own, ``anonymous@ADDRESS``; stdio keeps
"anonymous" (one client), and a named principal is unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit import Server
from mcpkit.policy import Policy
from mcpkit.policy.ratelimit import RateLimiter
from tests.harness import connect
from tests.policy.test_pipeline_rules import MemoryAudit
from tests.test_http import clients  # noqa: F401 - a fixture

LATEST = "2025-11-25"


def limited_server() -> tuple[Server, MemoryAudit]:
    audit = MemoryAudit()
    server = Server("shared", policy=Policy(rate_limiter=RateLimiter("2/min"), audit=audit))

    @server.tool(read_only=True, open_world=False)
    def look() -> str:
        return "seen"

    return server, audit


async def client_at(clients: Any, app: Any, address: str) -> Any:
    """An initialized HTTP client of ``app`` whose requests come from ``address``."""
    client = clients.asgi(app)
    client.driver.client = (address, 40000)
    await client.initialize()
    return client


async def look_from(clients: Any, app: Any, address: str, tool: str = "look", times: int = 3) -> list[bool]:
    """Whether each of ``times`` calls of ``tool`` from ``address`` was refused."""
    client = await client_at(clients, app, address)
    refused = []
    for _ in range(times):
        refused.append(bool((await client.tool(tool)).get("isError")))
    return refused


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_each_address_has_its_own_rate_budget_and_audit_name_without_auth(clients):
    server, audit = limited_server()
    app = clients.app(server)
    assert await look_from(clients, app, "10.0.0.1") == [False, False, True]
    # another client is not refused for what the first one spent
    assert await look_from(clients, app, "10.0.0.2") == [False, False, True]
    assert {line["principal"] for line in audit.lines} == {"anonymous@10.0.0.1", "anonymous@10.0.0.2"}


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_an_ipv6_client_is_its_64_network_not_each_address_in_it(clients):
    """One IPv6 host is commonly given a whole /64: were each address a caller of its own, it
    could spend a fresh budget from each of them."""
    server, audit = limited_server()
    app = clients.app(server)
    assert await look_from(clients, app, "2001:db8:1:2::5") == [False, False, True]
    assert await look_from(clients, app, "2001:db8:1:2:ffff::9") == [True, True, True]  # the same /64
    assert await look_from(clients, app, "2001:db8:1:3::5") == [False, False, True]  # another one
    assert await look_from(clients, app, "::ffff:10.0.0.7") == [False, False, True]  # IPv4, mapped
    # the budget is the /64's; the audit name is each host's own address
    assert [line["principal"] for line in audit.lines][::3] == [
        "anonymous@2001:db8:1:2::5", "anonymous@2001:db8:1:2:ffff::9", "anonymous@2001:db8:1:3::5",
        "anonymous@10.0.0.7"]


@pytest.mark.asyncio
async def test_a_stdio_caller_is_still_anonymous(wire):
    server, audit = limited_server()
    async with connect(server, wire, LATEST) as c:
        await c.request("tools/call", {"name": "look", "arguments": {}})
    assert [line["principal"] for line in audit.lines] == ["anonymous"]


@pytest.mark.parametrize("revision", [None, "2026-07-28"])
@pytest.mark.asyncio
async def test_a_mounted_childs_rate_limits_and_audit_name_each_address(clients, revision):
    """A mounted Server's own rate limits and audit lines name the parent's caller
    (server/session.caller_of). A child driven over 2026-07-28 saw no parent call at all
    (proxy/forwarding._exchange_modern did not set CURRENT_CALL): every address of the parent was
    the child's one "anonymous", so one client spent every other's budget there (and an
    authenticated caller's ctx.principal was None in the child)."""
    audit = MemoryAudit()
    parent = Server("parent")
    child = Server("child", policy=Policy(audit=audit))

    @child.tool(read_only=True, open_world=False, rate_limit="1/min")
    def once() -> str:
        return "ok"

    upstream = parent.mount(child, prefix="c", **({"protocol_version": revision} if revision else {}))
    try:
        app = clients.app(parent)
        refused = [*await look_from(clients, app, "10.0.0.1", "c_once", 2),
                   *await look_from(clients, app, "10.0.0.2", "c_once", 2)]
        assert [(line["principal"], line["tool"]) for line in audit.lines] == [
            ("anonymous@10.0.0.1", "once")] * 2 + [("anonymous@10.0.0.2", "once")] * 2
        assert refused == [False, True, False, True]
    finally:
        upstream.close()


@pytest.mark.asyncio
async def test_a_mounted_childs_completion_rate_limit_is_each_addresss_own(clients):
    """A mounted Server's completions are rate-limited per caller (CompletionRateLimit) too:
    the parent forwarded them with no call (``_forward(None, ...)``), so the child counted every
    caller of the parent as its one "anonymous" and a second address was refused on the first
    one's bucket."""
    parent = Server("parent")
    child = Server("child", policy=Policy(rate_limiter=RateLimiter("2/min")))

    @child.prompt(completions={"who": lambda value: ["alice", "bob"]})
    def greet(who: str) -> str:
        return f"hi {who}"

    upstream = parent.mount(child, prefix="c")
    try:
        app = clients.app(parent)
        answered = []
        for address in ("10.0.0.1", "10.0.0.2"):
            client = await client_at(clients, app, address)
            for _ in range(3):
                answer = await client.call("completion/complete", {
                    "ref": {"type": "ref/prompt", "name": "c_greet"}, "argument": {"name": "who", "value": ""}})
                answered.append("result" in answer)
        assert answered == [True, True, False, True, True, False]
    finally:
        upstream.close()


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_one_session_from_two_addresses_keeps_the_name_of_the_address_that_opened_it(clients):
    """A session id used from a second address (shared, or stolen) does not rename the session's
    caller, neither the calls in flight from the first address nor its own: the name is the
    session's first address. Two hosts of one IPv6 /64 on sessions of their own are two names,
    never one merged ``anonymous@::/64``."""
    server, audit = limited_server()
    app = clients.app(server)
    client = await client_at(clients, app, "::1")
    await client.tool("look")
    client.driver.client = ("::2", 40001)  # the same session id, now from another address
    await client.tool("look")
    other = await client_at(clients, app, "::3")
    await other.tool("look")
    assert [line["principal"] for line in audit.lines] == ["anonymous@::1", "anonymous@::1", "anonymous@::3"]
    # one budget for the /64 still: ::3 was refused on what ::1 spent
    assert [line.get("code") for line in audit.lines] == [None, None, "E_RATE_LIMITED"]
