"""``/healthz`` and ``/readyz`` of the HTTP app (transports/health.py): a load balancer's probes,
answered without a credential, behind the Host check, 503 from /readyz while not ready."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import httpx
import pytest

from mcpkit.auth import StaticTokens
from mcpkit.auth.resource import ResourceServer
from tests.test_http import free_port, wait_listening
from tests.test_http_hosting import _server

aio = pytest.mark.asyncio
TOKEN = "a-long-enough-static-token-0123456789abcdef"


async def _get(app: Any, path: str, *, host: str = "127.0.0.1", method: str = "GET") -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as http:
        return await http.request(method, path)


@aio
async def test_healthz_and_readyz_answer_without_a_token_while_mcp_needs_one() -> None:
    auth = ResourceServer(StaticTokens({TOKEN: {"subject": "ci", "scopes": ""}}))
    app = _server().http_app(auth=auth)
    live = await _get(app, "/healthz")
    assert live.status_code == 200 and live.json() == {"status": "ok"}
    assert live.headers["cache-control"] == "no-store"
    ready = await _get(app, "/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}
    assert (await _get(app, "/readyz", method="HEAD")).status_code == 200
    assert (await _get(app, "/mcp")).status_code == 401  # the probes open nothing else


@aio
async def test_readyz_is_503_with_the_reason_while_the_readiness_check_says_no() -> None:
    state = {"ready": False}

    def readiness() -> tuple[bool, dict[str, Any]]:
        return state["ready"], {"upstreams": {"files": {"state": "connected" if state["ready"] else "failed"}}}

    app = _server().http_app(readiness=readiness)
    down = await _get(app, "/readyz")
    assert down.status_code == 503
    assert down.json() == {"status": "not ready", "upstreams": {"files": {"state": "failed"}}}
    assert (await _get(app, "/healthz")).status_code == 200  # alive all the same: no restart for an upstream
    state["ready"] = True
    assert (await _get(app, "/readyz")).status_code == 200


@aio
async def test_the_probes_obey_the_host_check() -> None:
    app = _server().http_app()
    assert (await _get(app, "/healthz", host="evil.example")).status_code == 403
    allowed = _server().http_app(allowed_hosts=["mcp.example.com"])
    assert (await _get(allowed, "/healthz", host="mcp.example.com")).status_code == 200


@aio
async def test_health_off_leaves_the_paths_to_the_app() -> None:
    assert (await _get(_server().http_app(health=False), "/healthz")).status_code == 404


def test_mcpkit_serve_http_answers_healthz() -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mcpkit", "serve", "--http", f"127.0.0.1:{port}"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(proc, port, timeout=60)
        answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30)
        assert answer.status_code == 200 and json.loads(answer.text) == {"status": "ok"}
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=30).status_code == 200
    finally:
        proc.terminate()
        proc.wait(15)


@aio
async def test_readyz_is_503_once_the_graceful_shutdown_began_while_healthz_stays_200() -> None:
    app = _server().http_app()
    assert (await _get(app, "/readyz")).status_code == 200
    await _get(app, "/mcp")  # the first MCP request starts the app on this loop (as the lifespan does)
    app.drain(30.0)
    try:
        draining = await _get(app, "/readyz")
        assert draining.status_code == 503 and draining.json() == {"status": "draining"}
        assert (await _get(app, "/healthz")).status_code == 200
    finally:
        app.close_all()


@pytest.mark.parametrize("options", [{}, {"cors_origins": ["https://app.example"]}])
def test_a_setting_written_on_the_app_reaches_the_mcp_app_through_its_wrappers(options: dict[str, Any]) -> None:
    # the health and CORS wrappers forwarded reads only: a write landed on the wrapper, unread
    app = _server().http_app(**options)
    app.session_idle_timeout = 42.0
    inner = app
    while type(inner).__name__ != "McpHttpApp":
        inner = inner.app
    assert inner is not app and inner.session_idle_timeout == 42.0
    assert app.session_idle_timeout == 42.0
