"""--metrics: Prometheus text at /metrics whose numbers move with traffic."""

from __future__ import annotations

import re
import urllib.request

import pytest

from tests.test_http import clients, start_server, stop_server  # noqa: F401 - clients is a fixture

pytest.importorskip("prometheus_client", reason="the metrics tests need prometheus-client (the dev extra)")


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        assert reply.headers["content-type"].startswith("text/plain")
        return reply.read().decode()


def value(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split(" ")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.asyncio
async def test_serve_metrics_is_scraped_and_moves_with_traffic(clients):
    proc, port = start_server("--metrics")
    try:
        before = scrape(port)
        assert "mcp_server_requests_total" in before or "# HELP mcp_server_requests" in before
        client = clients.tcp(port)
        await client.initialize()
        for i in range(3):
            await client.tool("add", {"a": i, "b": 1})
        await client.tool("test_error_handling", {})
        after = scrape(port)
        assert value(after, "mcp_server_requests_total", method="tools/call", tool="add", outcome="ok") == 3
        assert value(after, "mcp_server_requests_total", method="tools/call", tool="test_error_handling",
                     outcome="tool_error") == 1
        assert value(after, "mcp_server_operation_duration_seconds_count", method="tools/call") == 4
        assert value(after, "mcp_server_active_sessions") == 1
        assert (await client.delete()).status == 200
        assert value(scrape(port), "mcp_server_active_sessions") == 0
    finally:
        assert "Traceback" not in stop_server(proc)


def test_the_metrics_page_keeps_the_host_guard():
    import asyncio

    from mcpkit import Server
    from tests.test_http import AsgiDriver

    async def go() -> int:
        reply = await AsgiDriver(Server("s").http_app(metrics=True)).open("GET", "/metrics", {"host": "evil.example"})
        return reply.status

    assert asyncio.run(go()) == 403


def test_names_a_client_makes_up_are_one_label_and_do_not_grow_the_page():
    """Unknown tool, method, prompt and notification names are counted under one label: the
    page's series are bounded by what the server defines, not by what clients send."""
    import asyncio

    from mcpkit import Client, Server
    from mcpkit.observe import PrometheusMetrics

    server = Server("s")

    @server.tool(read_only=True, open_world=False)
    def add(a: int, b: int) -> int:
        return a + b

    metrics = PrometheusMetrics().attach(server)

    async def traffic(n: int) -> None:
        async with Client(server) as client:
            await client.call_tool("add", {"a": 1, "b": 2})
            for i in range(n):
                with pytest.raises(Exception):  # -32602 in 2025-11-25
                    await client.call_tool(f"made_up_{i}", {})
                with pytest.raises(Exception):
                    await client.request(f"made/up/{i}", {})
                await client.notify(f"notifications/made_up_{i}", {})
            await client.ping()  # the notifications before it are handled by then

    asyncio.run(traffic(3))
    small = metrics.render().decode()
    asyncio.run(traffic(200))
    text = metrics.render().decode()
    assert "made_up" not in text and "made/up" not in text
    assert len(text.splitlines()) == len(small.splitlines())  # the same series, other counts
    assert value(text, "mcp_server_requests_total", method="tools/call", tool="add", outcome="ok") == 2
    assert value(text, "mcp_server_requests_total", method="tools/call", tool="other", outcome="error") == 203
    assert value(text, "mcp_server_requests_total", method="other", tool="", outcome="error") == 203
    assert value(text, "mcp_server_notifications_total", method="other") == 203


def test_under_auth_the_metrics_page_needs_the_same_token(tmp_path):
    """A real ``mcpkit serve --http --auth ... --metrics``: tool names, traffic and sessions are
    not for whoever reaches the port."""
    import os
    import secrets
    import urllib.error

    from mcpkit.auth.static import hash_token

    token = "scraper-" + secrets.token_hex(16)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{hash_token(token)} scraper mcp\n")
    os.chmod(tokens, 0o600)
    proc, port = start_server("--metrics", "--auth", f"tokens:{tokens}")
    try:
        def get(headers: dict[str, str]) -> tuple[int, str]:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=10) as reply:
                    return reply.status, reply.read().decode()
            except urllib.error.HTTPError as refused:
                return refused.code, refused.headers.get("www-authenticate", "")

        status, challenge = get({})
        assert status == 401 and challenge.startswith("Bearer")
        assert get({"Authorization": "Bearer not-" + token})[0] == 401
        status, text = get({"Authorization": f"Bearer {token}"})
        assert status == 200 and "mcp_server_active_sessions" in text
    finally:
        stderr = stop_server(proc)
        assert "Traceback" not in stderr and token not in stderr


def test_a_bridge_only_manager_actions_require_is_on_the_page():
    from mcpkit import Server
    from mcpkit.observe import PrometheusMetrics
    from mcpkit.policy import Bridge

    def refused() -> None:
        raise ConnectionRefusedError("no editor")

    editor = Bridge("editor", refused)
    server = Server("s")
    scene = server.manager("scene")

    @scene.action(read_only=True, open_world=False, requires=editor)
    def save() -> str:
        return "saved"

    text = PrometheusMetrics().attach(server).render().decode()
    assert 'mcp_server_bridge_up{bridge="editor"} 0.0' in text
