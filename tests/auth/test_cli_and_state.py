"""Authorization on the command line, and multi-round-trip state bound to its user."""

from __future__ import annotations

import subprocess

import pytest

from mcpkit.protocol.errors import McpError
from mcpkit.protocol.sealed import Sealer
from mcpkit.server.rounds import Rounds
from tests.conftest import mcpkit_command


@pytest.mark.req("AU-01")
def test_a_stdio_server_takes_no_auth_options():
    done = subprocess.run(mcpkit_command("serve", "--auth", "tokens"), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    assert "--auth is for --http" in done.stderr and "environment" in done.stderr
    assert done.stdout == ""  # ST-02: nothing but protocol on stdout, even when refusing to start


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--auth", "jwt"], "--auth jwt needs --issuer and --resource"),
        (["--auth", "introspection"], "--auth introspection needs --introspection-url"),
        (["--auth", "magic"], "unknown --auth 'magic'"),
    ],
)
def test_incomplete_auth_options_are_refused_with_the_fix(args, message):
    done = subprocess.run(mcpkit_command("serve", "--http", "127.0.0.1:0", *args), capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0 and message in done.stderr


@pytest.mark.req("SEC-04", "MR-06")
def test_request_state_issued_to_one_user_does_not_resume_for_another():
    sealer = Sealer(b"k" * 32)
    params = {"name": "deploy", "arguments": {}}
    alice = Rounds("tools/call", params, sealer, principal="alice")
    alice.ask("confirm", "elicitation/create", {"message": "Deploy?"})
    state = alice.result()["requestState"]
    resumed = Rounds("tools/call", {**params, "requestState": state}, sealer, principal="alice")
    assert resumed.answers == {}
    for other in ("bob", None):
        with pytest.raises(McpError) as refused:
            Rounds("tools/call", {**params, "requestState": state}, sealer, principal=other)
        assert refused.value.code == -32602


def test_auth_configured_from_the_environment(monkeypatch):
    import httpx

    from mcpkit.auth import hash_token
    from tests.test_http import start_server, stop_server

    token = "env-configured-token-0123456789"
    monkeypatch.setenv("MCPKIT_AUTH", "tokens")
    monkeypatch.setenv("MCPKIT_AUTH_TOKENS", f"{hash_token(token)} alice mcp")
    proc, port = start_server()
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        accept = {"Accept": "application/json, text/event-stream"}
        assert httpx.post(url, json=body, headers=accept).status_code == 401
        ok = httpx.post(url, json=body, headers={**accept, "Authorization": f"Bearer {token}"})
        assert ok.status_code == 200
    finally:
        stderr = stop_server(proc)
    assert token not in stderr and "Traceback" not in stderr
