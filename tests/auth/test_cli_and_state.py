"""Authorization on the command line, and multi-round-trip state bound to its user."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mcpkit.protocol.errors import McpError
from mcpkit.protocol.sealed import Sealer
from mcpkit.server.rounds import Rounds
from tests.conftest import mcpkit_command

#: the environment of these commands, without an MCPKIT_AUTH* setting of the caller's
ENV_WITHOUT_AUTH = {k: v for k, v in os.environ.items() if not k.startswith("MCPKIT_AUTH")}


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


#: a tokens file the HTTP tests below may name (never read: every case is refused before)
TOKENS = "/nonexistent/tokens.txt"
#: an address of no machine here (RFC 5737): a command that got past its options would stop at the
#: bind with another line, rather than serve until the test's timeout
HTTP = ["--http", "192.0.2.1:8000"]


@pytest.mark.parametrize(("args", "line"), [
    # each was accepted and did nothing
    ([*HTTP, "--resource", "https://mcp.example.com/mcp"],
     ("--resource needs --auth (tokens, jwt or introspection), and no --auth is given: add --auth MODE, or drop "
      "--resource")),
    ([*HTTP, "--scope", "notes:read"], "--scope needs --auth (tokens, jwt or introspection)"),
    ([*HTTP, "--jwks-uri", "https://id.example.com/jwks"],
     "--jwks-uri needs --auth jwt, and no --auth is given: add --auth jwt, or drop --jwks-uri"),
    ([*HTTP, "--auth", f"tokens:{TOKENS}", "--issuer", "https://id.example.com"],
     "--issuer needs --auth jwt or introspection, not --auth tokens: drop --issuer"),
    ([*HTTP, "--auth", f"tokens:{TOKENS}", "--jwt-types", "at+jwt,JWT"],
     "--jwt-types needs --auth jwt, not --auth tokens: drop --jwt-types"),
    ([*HTTP, "--auth", "jwt", "--issuer", "https://id.example.com", "--resource", "https://mcp.example.com/mcp",
      "--introspection-url", "https://id.example.com/introspect"],
     "--introspection-url needs --auth introspection, not --auth jwt: drop --introspection-url"),
    (["--resource", "https://mcp.example.com/mcp"],
     ("--resource is for --http; a stdio server takes its credentials from the environment (AU-01): drop "
      "--resource, or add --http HOST:PORT")),
])
@pytest.mark.parametrize("command", ["serve", "proxy"])
def test_an_auth_option_where_it_does_nothing_is_refused_naming_the_mode_it_needs(command, args, line):
    upstream = ["--", sys.executable, "-c", "pass"] if command == "proxy" else []
    done = subprocess.run(mcpkit_command(command, *args, *upstream), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, check=False, env=ENV_WITHOUT_AUTH)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(f"mcpkit: {line}"), done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(("env", "args", "line"), [
    # it said "--auth is for --http" to a user who had given no --auth
    ({"MCPKIT_AUTH": "jwt"}, [], ("MCPKIT_AUTH is for --http; a stdio server takes its credentials from the "
                                  "environment (AU-01): unset MCPKIT_AUTH, or add --http HOST:PORT")),
    ({"MCPKIT_AUTH": "jwt"}, HTTP, "MCPKIT_AUTH=jwt needs --issuer and --resource (or --audience)"),
    ({"MCPKIT_AUTH": "magic"}, HTTP, "unknown MCPKIT_AUTH 'magic'"),
    ({"MCPKIT_AUTH_RESOURCE": "https://mcp.example.com/mcp"}, HTTP,
     ("MCPKIT_AUTH_RESOURCE needs --auth (tokens, jwt or introspection), and no --auth is given: add --auth "
      "MODE, or unset MCPKIT_AUTH_RESOURCE")),
    ({"MCPKIT_AUTH": f"tokens:{TOKENS}", "MCPKIT_AUTH_JWKS_URI": "https://id.example.com/jwks"}, HTTP,
     "MCPKIT_AUTH_JWKS_URI needs --auth jwt, not MCPKIT_AUTH=tokens: unset MCPKIT_AUTH_JWKS_URI"),
    ({"MCPKIT_AUTH_JWT_TYPES": "id_token"}, [*HTTP, "--auth", "jwt", "--issuer", "https://id.example.com",
                                             "--resource", "https://mcp.example.com/mcp"],
     "MCPKIT_AUTH_JWT_TYPES: token_types may not include"),
    # the command line still wins, and is what is named
    ({"MCPKIT_AUTH": "jwt"}, ["--auth", "tokens"], "--auth is for --http"),
])
def test_an_auth_setting_from_the_environment_is_named_as_the_variable(env, args, line):
    done = subprocess.run(mcpkit_command("serve", *args), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, check=False, env={**ENV_WITHOUT_AUTH, **env})
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(f"mcpkit: {line}"), done.stderr


@pytest.mark.parametrize("command", ["serve", "proxy"])
def test_introspection_without_an_audience_is_one_warning_line_with_the_fix(command):
    # it was "IntrospectionVerifier(https://...) has no audience: the authorization server alone
    # decides ...": no "mcpkit:", no fix. Not refused: RFC 7662 §4 lets the authorization server
    # judge the audience (docs/auth.md)
    upstream = ["--", sys.executable, "-c", "pass"] if command == "proxy" else []
    done = subprocess.run(mcpkit_command(command, *HTTP, "--auth", "introspection", "--introspection-url",
                                         "https://id.example.com/introspect", *upstream),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False,
                          env=ENV_WITHOUT_AUTH)
    lines = done.stderr.splitlines()
    assert lines[0] == ("mcpkit: warning: --auth introspection without --resource or --audience: a token's audience "
                        "is checked by the authorization server only, not here (AU-05); give --resource URL (this "
                        "server's URI) or --audience URI"), done.stderr
    assert not any("IntrospectionVerifier(" in line for line in lines), done.stderr
    given = subprocess.run(mcpkit_command(command, *HTTP, "--auth", "introspection", "--introspection-url",
                                          "https://id.example.com/introspect", "--resource",
                                          "https://mcp.example.com/mcp", *upstream),
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False,
                           env=ENV_WITHOUT_AUTH)
    assert "audience" not in given.stderr, given.stderr


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
