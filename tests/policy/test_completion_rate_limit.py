"""completion/complete is rate-limited by the policy's limiter, per principal (CP-05).

A client asks for completions as its user types; without a limit, a caller could query a
completer (a database lookup, a directory listing) as fast as it can send. With a policy rate
limiter, completions draw from one bucket per principal, whatever they complete, at the
limiter's default rate; a refusal is a JSON-RPC error with ``retryAfterMs``, the shape any
E_RATE_LIMITED of a non-tool request takes.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit import Server
from mcpkit.policy import Policy, RateLimiter
from tests.harness import RpcError, connect

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}

PROMPT = {"ref": {"type": "ref/prompt", "name": "board"}, "argument": {"name": "topic", "value": "s"}}
TEMPLATE = {"ref": {"type": "ref/resource", "uri": "notes://{name}"}, "argument": {"name": "name", "value": ""}}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_server(limiter: Any, who: dict[str, str]) -> tuple[Server, list[str]]:
    server = Server("completing", policy=Policy(rate_limiter=limiter, principal=lambda session, req: who["name"]))
    asked: list[str] = []

    def topics(value: str) -> list[str]:
        asked.append(value)
        return ["salaries", "sales"]

    @server.prompt(completions={"topic": topics})
    def board(topic: str) -> str:
        return f"Board notes on {topic}"

    @server.resource_template("notes://{name}", completions={"name": lambda value: ["a", "b"]})
    def note(name: str) -> str:
        return f"note {name}"

    @server.tool(read_only=True, open_world=False)
    def look() -> str:
        return "ok"

    return server, asked


async def complete(c: Any, params: dict[str, Any], version: str) -> dict[str, Any]:
    if version == MODERN:
        params = {**params, "_meta": META}
    return await c.request("completion/complete", params)  # type: ignore[no-any-return]


@pytest.mark.req("CP-05")
@pytest.mark.asyncio
@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", MODERN])
async def test_completions_are_rate_limited_per_principal(wire, version):
    clock = FakeClock()
    who = {"name": "alice"}
    server, asked = make_server(RateLimiter("3/min", clock=clock), who)
    async with connect(server, wire, None if version == MODERN else version) as c:
        # one bucket for every completion of a principal: prompts and templates alike
        assert (await complete(c, PROMPT, version))["completion"]["values"] == ["salaries", "sales"]
        assert (await complete(c, TEMPLATE, version))["completion"]["values"] == ["a", "b"]
        await complete(c, PROMPT, version)
        with pytest.raises(RpcError) as refused:
            await complete(c, PROMPT, version)
        assert len(asked) == 2  # the refused completion never reached the completer
        error = refused.value
        assert error.code == -32603
        assert error.message.startswith("Rate limit exceeded for completion/complete (3/min per caller)")
        assert error.data["code"] == "E_RATE_LIMITED" and error.data["retryable"] is True
        assert error.data["details"] == {"retryAfterMs": 20_000, "limit": "3/min"}
        with pytest.raises(RpcError):
            await complete(c, TEMPLATE, version)
        # tools keep their own buckets, and another principal has its own
        meta = {"_meta": META} if version == MODERN else {}
        assert not (await c.request("tools/call", {"name": "look", "arguments": {}, **meta})).get("isError")
        who["name"] = "bob"
        assert (await complete(c, PROMPT, version))["completion"]["values"]
        who["name"] = "alice"
        clock.now += 20.0  # the advertised wait gives one token back
        assert (await complete(c, PROMPT, version))["completion"]["values"]
        with pytest.raises(RpcError):
            await complete(c, PROMPT, version)


@pytest.mark.req("CP-05")
@pytest.mark.asyncio
async def test_completions_are_not_limited_without_a_default_rate(wire):
    """A limiter with no default rate only meters tools given a rate_limit= of their own."""
    server, asked = make_server(RateLimiter(None), {"name": "alice"})
    async with connect(server, wire, "2025-11-25") as c:
        for _ in range(20):
            await complete(c, PROMPT, "2025-11-25")
    assert len(asked) == 20


@pytest.mark.req("CP-05")
@pytest.mark.asyncio
async def test_secure_policy_limits_completions(wire, monkeypatch):
    monkeypatch.setenv("MCPKIT_RATE_LIMIT", "2/min")
    server = Server("secure", policy=Policy.secure(audit=None))

    @server.prompt(completions={"topic": lambda value: ["x"]})
    def board(topic: str) -> str:
        return topic

    async with connect(server, wire, "2025-11-25") as c:
        await complete(c, PROMPT, "2025-11-25")
        await complete(c, PROMPT, "2025-11-25")
        with pytest.raises(RpcError) as refused:
            await complete(c, PROMPT, "2025-11-25")
    assert refused.value.data["code"] == "E_RATE_LIMITED" and refused.value.data["details"]["retryAfterMs"] > 0


class DownStore:
    def take(self, key: str, capacity: float, refill_per_s: float, now: float, cost: float = 1.0) -> float:
        from mcpkit.stores.redis_base import StoreUnavailable

        raise StoreUnavailable("redis is down")


@pytest.mark.req("CP-05")
@pytest.mark.asyncio
async def test_a_store_that_is_down_refuses_completions_with_a_retry_hint(wire):
    """Failing closed, as for tools: a limit that cannot be checked is not waived."""
    server, asked = make_server(RateLimiter("3/min", store=DownStore()), {"name": "alice"})
    async with connect(server, wire, "2025-11-25") as c:
        with pytest.raises(RpcError) as refused:
            await complete(c, PROMPT, "2025-11-25")
    assert asked == []
    assert refused.value.data["code"] == "E_NOT_CONNECTED" and refused.value.data["retryable"] is True
    assert "rate limit cannot be checked" in refused.value.message
