"""Real clients against a protected server: `mcpkit serve tests/interop/auth_app.py --http ...
--auth tokens:FILE`, called by the official `mcp` client and by the MCP Inspector CLI with a
bearer token."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

from mcpkit.auth import hash_token
from tests.conftest import mcpkit_command
from tests.interop.test_inspector import CALL_TIMEOUT, PACKAGE, Inspector, inspector  # noqa: F401 - fixture
from tests.test_http import free_port, stop_server, wait_listening

APP = str(Path(__file__).resolve().parent / "auth_app.py")
ALICE = "alice-" + secrets.token_hex(16)  # mcp notes:write
BOB = "bob-" + secrets.token_hex(16)  # mcp only


@pytest.fixture(scope="module")
def protected(tmp_path_factory: pytest.TempPathFactory, serving_loop: str) -> Iterator[str]:
    """The protected server; yields its MCP endpoint URL."""
    tokens = tmp_path_factory.mktemp("auth") / "tokens"
    tokens.write_text(f"{hash_token(ALICE)} alice mcp notes:write\n{hash_token(BOB)} bob mcp\n")
    os.chmod(tokens, 0o600)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    errlog = open(tokens.parent / "stderr", "w+b")  # noqa: SIM115 - closed by stop_server
    proc = subprocess.Popen(
        mcpkit_command("serve", APP, "--http", f"127.0.0.1:{port}", "--auth", f"tokens:{tokens}",
                       "--resource", url, "--authorization-server", "https://id.example.com",
                       "--scope", "mcp", "--scope", "notes:write", "--required-scope", "mcp"),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog,
    )
    proc.errlog = errlog  # type: ignore[attr-defined]
    try:
        wait_listening(proc, port)
        yield url
    finally:
        stderr = stop_server(proc)
        assert "Traceback" not in stderr, stderr
        assert ALICE not in stderr and BOB not in stderr  # tokens never reach the logs


async def _with_client(url: str, token: str, body: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(15.0, read=30.0)) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            async with ClientSession(streams[0], streams[1], read_timeout_seconds=15) as session:
                with anyio.fail_after(15):
                    await session.initialize()
                    return await body(session)


@pytest.mark.interop
@pytest.mark.req("AU-05", "AU-13", "SEC-05")
def test_the_official_client_calls_a_protected_tool_with_a_bearer_token(protected):
    async def body(session: ClientSession) -> Any:
        tools = await session.list_tools()
        whoami = await session.call_tool("whoami", {})
        note = await session.call_tool("add_note", {"text": "hello"})
        return tools, whoami, note

    tools, whoami, note = anyio.run(_with_client, protected, ALICE, body)
    assert {t.name for t in tools.tools} == {"whoami", "add_note"}
    assert whoami.structured_content == {"principal": "alice", "scopes": ["mcp", "notes:write"]}
    assert isinstance(note.content[0], types.TextContent) and note.content[0].text == "noted: hello"


@pytest.mark.interop
@pytest.mark.req("AU-06", "AU-09")
def test_the_official_client_is_refused_without_the_right_token(protected):
    async def body(session: ClientSession) -> Any:
        return await session.call_tool("add_note", {"text": "nope"})

    # the client has no OAuth provider here, so it surfaces both refusals as errors of its own
    for token in (BOB, "not-a-token-" + secrets.token_hex(8)):
        with pytest.raises(Exception):  # noqa: B017, PT011 - an ExceptionGroup of the client's McpError
            anyio.run(_with_client, protected, token, body)
    # what it was told, read directly: 401 for no token, 403 naming the scope for bob's
    accept = {"Accept": "application/json, text/event-stream"}
    metadata = protected.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    reply = httpx2.post(protected, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=accept)
    assert reply.status_code == 401
    assert reply.headers["www-authenticate"] == f'Bearer scope="mcp", resource_metadata="{metadata}"'
    bob = {**accept, "Authorization": f"Bearer {BOB}"}
    init = httpx2.post(protected, headers=bob, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert init.status_code == 200
    session = {**bob, "Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    call = httpx2.post(protected, headers=session, json={
        "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add_note", "arguments": {"text": "x"}}})
    assert call.status_code == 403
    assert call.headers["www-authenticate"] == (
        f'Bearer error="insufficient_scope", error_description="needs scope notes:write", '
        f'scope="mcp notes:write", resource_metadata="{metadata}"'
    )
    assert httpx2.get(metadata).json()["scopes_supported"] == ["mcp", "notes:write"]


def _inspector(npx: Inspector, url: str, token: str | None, *cli_args: str) -> subprocess.CompletedProcess[str]:
    argv = ["npx", "--yes=false", PACKAGE, "--cli", url, "--transport", "http"]
    if token is not None:
        argv += ["--header", f"Authorization: Bearer {token}"]
    return subprocess.run(argv + list(cli_args), cwd=npx.home, env=npx.env(), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=CALL_TIMEOUT)


@pytest.mark.interop
@pytest.mark.req("AU-13")
def test_the_inspector_lists_and_calls_tools_of_a_protected_server(inspector, protected):  # noqa: F811
    listed = _inspector(inspector, protected, ALICE, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert {t["name"] for t in json.loads(listed.stdout)["tools"]} == {"whoami", "add_note"}
    called = _inspector(inspector, protected, ALICE, "--method", "tools/call", "--tool-name", "whoami")
    assert called.returncode == 0, called.stderr[-2000:]
    assert json.loads(called.stdout)["structuredContent"] == {"principal": "alice", "scopes": ["mcp", "notes:write"]}
    refused = _inspector(inspector, protected, None, "--method", "tools/list")
    assert refused.returncode != 0
