"""API-key HTTP servers (mcpkit.auth.ApiKeyAuth) and the upstream helper (mcpkit.bridge.Upstream)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from mcpkit import Context, Server
from mcpkit.auth import ApiKeyAuth, api_key
from mcpkit.auth.static import hash_token
from mcpkit.bridge import Upstream
from mcpkit.protocol.errors import (
    E_NOT_CONNECTED,
    E_NOT_FOUND,
    E_PERMISSION_DENIED,
    E_RATE_LIMITED,
    E_SCHEMA_VALIDATION,
    ToolError,
)
from tests.test_http import clients, jsonrpc  # noqa: F401 - the fixture

KEY = "dk_live_0123456789abcdef"


def sending(client: Any, header: str, value: str) -> Any:
    """``client`` sending ``header: value`` on every request unless told otherwise."""
    base = client.headers

    def headers(**extra: str | None) -> dict[str, str]:
        extra.setdefault(header, value)
        return base(**extra)

    client.headers = headers
    return client


def keyed_server() -> Server:
    server = Server("design")

    @server.tool
    def whoami(ctx: Context) -> dict:
        return {"principal": ctx.principal, "key_tail": api_key(ctx)[-4:]}

    return server


@pytest.mark.asyncio
async def test_a_missing_key_gets_401_without_oauth_metadata(clients: Any) -> None:
    client = clients.asgi(clients.app(keyed_server(), auth=ApiKeyAuth(passthrough=True)))
    reply = await client.post(jsonrpc("initialize", {}, 1))
    assert reply.status == 401
    challenge = reply.headers["www-authenticate"]
    assert challenge == 'ApiKey realm="mcp", header="X-API-Key"'
    assert "resource_metadata" not in challenge
    assert "X-API-Key" in json.loads(await reply.read())["error"]["message"]
    # and no protected-resource metadata document pretends there is an authorization server
    reply = await client.driver.open("GET", "/.well-known/oauth-protected-resource", {})
    assert reply.status in (401, 404)


@pytest.mark.asyncio
async def test_the_key_reaches_the_handler_and_is_checked_on_every_request(clients: Any) -> None:
    auth = ApiKeyAuth({hash_token(KEY): {"subject": "studio-7", "scopes": "designs:read"}})
    client = sending(clients.asgi(clients.app(keyed_server(), auth=auth)), "x_api_key", KEY)
    await client.initialize()
    result = await client.result("tools/call", {"name": "whoami", "arguments": {}})
    assert result["structuredContent"] == {"principal": "studio-7", "key_tail": "cdef"}
    reply = await client.post(jsonrpc("tools/list", {}, 9), x_api_key="dk_live_wrong_wrong_wrong")
    assert reply.status == 401 and 'error="invalid_token"' in reply.headers["www-authenticate"]
    reply = await client.post(jsonrpc("tools/list", {}, 10), x_api_key=None)
    assert reply.status == 401


@pytest.mark.asyncio
async def test_a_bearer_key_and_a_verify_callable(clients: Any) -> None:
    seen: list[str] = []

    async def verify(key: str) -> str | None:
        seen.append(key)
        return "team-a" if key == KEY else None

    auth = ApiKeyAuth(verify=verify, header="Authorization")
    client = clients.asgi(clients.app(keyed_server(), auth=auth))
    reply = await client.post(jsonrpc("initialize", {}, 1))
    assert reply.status == 401 and reply.headers["www-authenticate"] == 'Bearer realm="mcp"'
    sending(client, "authorization", f"Bearer {KEY}")
    await client.initialize()
    result = await client.result("tools/call", {"name": "whoami", "arguments": {}})
    assert result["structuredContent"]["principal"] == "team-a"
    assert seen and all(k == KEY for k in seen)


def test_api_key_auth_configuration_errors() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        ApiKeyAuth()
    with pytest.raises(ValueError, match="exactly one"):
        ApiKeyAuth(passthrough=True, verify=lambda k: "x")
    with pytest.raises(ValueError, match="header"):
        ApiKeyAuth(passthrough=True, header="X Key")
    from mcpkit.auth.apikey import ApiKeyAccess

    access = ApiKeyAccess(subject="studio-7", key=KEY)
    assert KEY not in repr(access) and access.key == KEY  # never in a log line by accident


# ------------------------------------------------------------------------------------------ upstream


class FakeApi:
    """An upstream API: a script of answers per path, and what it received."""

    def __init__(self) -> None:
        self.script: dict[str, list[httpx.Response]] = {}
        self.requests: list[httpx.Request] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answers = self.script.get(request.url.path)
        if not answers:
            return httpx.Response(404, json={"message": f"no design at {request.url.path}"})
        return answers.pop(0) if len(answers) > 1 else answers[0]


def upstream(api: FakeApi, **kw: Any) -> tuple[Upstream, list[float], list[float]]:
    waits: list[float] = []
    now = [1000.0]

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    client = Upstream("https://api.example.com/v1", name="Design API", transport=httpx.MockTransport(api.handler),
                      sleep=sleep, clock=lambda: now[0], **kw)
    return client, waits, now


@pytest.mark.asyncio
async def test_429_waits_retry_after_then_succeeds_and_the_key_is_sent() -> None:
    api = FakeApi()
    api.script["/v1/designs"] = [httpx.Response(429, headers={"retry-after": "2"}),
                                 httpx.Response(429, headers={"retry-after": "1"}),
                                 httpx.Response(200, json={"designs": [1, 2]})]
    client, waits, _ = upstream(api)
    assert await client.get("/designs", key=KEY) == {"designs": [1, 2]}
    assert waits == [2.0, 1.0]
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in api.requests)


@pytest.mark.asyncio
async def test_still_limited_after_the_retries_is_e_rate_limited_with_retry_after() -> None:
    api = FakeApi()
    api.script["/v1/designs"] = [httpx.Response(429, headers={"retry-after": "3"})]
    client, waits, _ = upstream(api, retries=2)
    with pytest.raises(ToolError) as info:
        await client.get("/designs")
    assert info.value.code == E_RATE_LIMITED and info.value.retryable
    assert info.value.details["retryAfterMs"] == 3000 and info.value.details["status"] == 429
    assert waits == [3.0, 3.0] and len(api.requests) == 3
    api.script["/v1/designs"] = [httpx.Response(429, headers={"retry-after": "3600"})]
    waits.clear()
    with pytest.raises(ToolError) as info:  # longer than max_retry_after: answered at once
        await client.get("/designs")
    assert waits == [] and info.value.details["retryAfterMs"] == 3_600_000


@pytest.mark.asyncio
async def test_statuses_map_to_contract_codes_with_the_apis_message() -> None:
    api = FakeApi()
    api.script["/v1/private"] = [httpx.Response(403, json={"error": {"message": "plan does not include exports"}})]
    api.script["/v1/bad"] = [httpx.Response(422, json={"detail": "width must be positive"})]
    client, waits, _ = upstream(api)
    with pytest.raises(ToolError) as info:
        await client.get("/designs/nope")
    assert info.value.code == E_NOT_FOUND and "no design at" in info.value.message
    with pytest.raises(ToolError) as info:
        await client.get("/private")
    assert info.value.code == E_PERMISSION_DENIED and "plan does not include exports" in info.value.message
    with pytest.raises(ToolError) as info:
        await client.post("/bad", json={"width": -1})
    assert info.value.code == E_SCHEMA_VALIDATION
    assert waits == []  # client errors are never retried


@pytest.mark.asyncio
async def test_5xx_backs_off_retries_idempotent_calls_only_and_opens_the_breaker() -> None:
    api = FakeApi()
    api.script["/v1/render"] = [httpx.Response(503), httpx.Response(502), httpx.Response(200, json={"ok": True})]
    client, waits, now = upstream(api, failure_threshold=2, reset_timeout=30)
    assert await client.get("/render") == {"ok": True}
    assert len(waits) == 2 and waits[1] > waits[0]  # exponential
    api.script["/v1/render"] = [httpx.Response(500)]
    api.requests.clear()
    with pytest.raises(ToolError) as info:
        await client.post("/render")  # not idempotent: one attempt
    assert info.value.code == E_NOT_CONNECTED and info.value.retryable and len(api.requests) == 1
    with pytest.raises(ToolError):
        await client.get("/render")
    assert client.breaker == "open"
    api.requests.clear()
    with pytest.raises(ToolError) as info:
        await client.get("/render")
    assert api.requests == []  # fails fast while open
    assert info.value.code == E_NOT_CONNECTED
    assert info.value.details["breaker"] == "open" and info.value.details["lastError"] == "HTTP 500"
    assert 0 < info.value.details["retryAfterMs"] <= 30000
    now[0] += 31  # half-open: one trial
    api.script["/v1/render"] = [httpx.Response(200, json={"ok": True})]
    assert await client.get("/render") == {"ok": True}
    assert client.breaker == "closed"


@pytest.mark.asyncio
async def test_connection_errors_are_retried_then_reported_not_connected() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    client = Upstream("https://api.example.com", transport=httpx.MockTransport(refuse), sleep=sleep, retries=2)
    with pytest.raises(ToolError) as info:
        await client.get("/x")
    assert info.value.code == E_NOT_CONNECTED and "connection refused" in info.value.details["lastError"]
    assert len(waits) == 2


@pytest.mark.asyncio
async def test_retry_after_of_an_open_breaker_is_never_longer_than_its_reset_timeout() -> None:
    # (t + 30) - t is 30.000000000000114 for this t: ceil(wait * 1000) said 30001 ms
    api = FakeApi()
    api.script["/v1/render"] = [httpx.Response(500)]
    client, _, now = upstream(api, failure_threshold=1, reset_timeout=30)
    now[0] = 1000.1234567
    with pytest.raises(ToolError):
        await client.post("/render")
    with pytest.raises(ToolError) as info:
        await client.post("/render")
    assert info.value.details["breaker"] == "open"
    assert info.value.details["retryAfterMs"] == 30000
