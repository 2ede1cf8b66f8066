"""``mcpkit proxy``: the command, its guard rails, tool policy files and mcpServers configs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit.client import Client, RpcError
from mcpkit.proxy import ToolPolicy, ToolPolicyError, load_mcp_servers
from mcpkit.proxy.config import ConfigError, parse_target
from tests.test_http import free_port, wait_listening

aio = pytest.mark.asyncio
PY = sys.executable
SERVE = [PY, "-m", "mcpkit", "serve"]
PROXY = [PY, "-m", "mcpkit", "proxy"]


# ------------------------------------------------------------------------------ the command


@aio
async def test_proxy_command_serves_an_upstream_over_stdio() -> None:
    async with Client([*PROXY, "--", *SERVE]) as client:
        assert client.server_info["name"] == "mcpkit-reference"
        names = {t["name"] for t in await client.list_tools()}
        assert {"add", "echo", "test_sampling"} <= names
        assert (await client.call_tool("add", {"a": 20, "b": 22}))["structuredContent"] == {"result": 42}


@aio
async def test_host_schemas_lists_the_strict_variant_and_maps_its_nulls_back(tmp_path: Path) -> None:
    from mcpkit.hosts import tool_problems

    # PYTHONPATH, when set, names the mcpkit under test (the proxy process must run the same)
    async with Client([*PROXY, "--host-schemas", "openai-strict", "--", *SERVE], inherit_env=["PYTHONPATH"]) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
        assert [str(p) for t in tools.values() for p in tool_problems(t, ["openai-strict"])] == []
        schema = tools["json_schema_2020_12_tool"]["inputSchema"]
        assert schema["required"] == ["name", "address"] and "$defs" not in schema
        # the host sends null for the address it leaves out; the upstream's schema (an object, no
        # extra keys) is what the call is validated against, and it never sees the null
        result = await client.call_tool("json_schema_2020_12_tool", {"name": "Ada", "address": None})
        assert not result.get("isError"), result
        refused = await client.call_tool("json_schema_2020_12_tool", {"name": "Ada", "address": "Paris"})
        assert refused.get("isError") is True and "address" in refused["content"][0]["text"]


@aio
async def test_read_only_hides_and_refuses_write_tools_and_audits_every_call(tmp_path: Path) -> None:
    audit = tmp_path / "audit.log"
    async with Client([*PROXY, "--read-only", "--audit", str(audit), "--", *SERVE]) as client:
        tools = await client.list_tools()
        assert tools and all(t.get("annotations", {}).get("readOnlyHint") is True for t in tools)
        names = {t["name"] for t in tools}
        assert "add" in names and "test_simple_text" not in names
        refused = await client.call_tool("test_simple_text")
        assert refused.get("isError") is True and "read-only" in refused["content"][0]["text"]
        assert (await client.call_tool("echo", {"text": "hi"}))["content"][0]["text"] == "hi"
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(line["tool"], line["outcome"]) for line in lines] == [("test_simple_text", "denied"), ("echo", "ok")]


@aio
async def test_the_proxys_own_switches_stay_the_proxys(tmp_path: Path) -> None:
    """MCPKIT_READ_ONLY=1 is the proxy's gate: its mcpkit upstream, which has no policy and would
    refuse a policy switch, starts without it; an upstream's own env may still set one."""
    async with Client([*PROXY, "--", *SERVE], env={"MCPKIT_READ_ONLY": "1"}) as client:
        names = {t["name"] for t in await client.list_tools()}
        assert "echo" in names and "test_simple_text" not in names
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"ref": {"command": PY, "args": ["-m", "mcpkit", "serve"],
                                                         "env": {"MCPKIT_READ_ONLY": "1"}}}}))
    done = subprocess.run([*PROXY, "--config", str(config)], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "MCPKIT_READ_ONLY" in done.stderr, done.stderr  # the upstream's own refusal


@aio
async def test_the_proxys_gate_messages_name_its_own_flags_not_the_servers_code() -> None:
    # they said "declare read_only=True or turn read-only mode off in the server's code" and
    # "(set in the server's code)": a proxy has no code of ours and the upstream's is not ours
    async with Client([*PROXY, "--read-only", "--deny-destructive", "--", *SERVE]) as client:
        await client.list_tools()
        refused = await client.call_tool("test_simple_text")
        text = refused["content"][0]["text"]
        assert "--read-only" in text and "server's code" not in text, text
        warned: list[str] = []
        for _ in range(200):  # the warning is written by another process: wait for it, not a fixed time
            warned = [line for line in client.stderr.splitlines() if "test_simple_text: hidden" in line]
            if warned:
                break
            await asyncio.sleep(0.05)
    assert warned and "server's code" not in warned[0] and "declare read_only=True" not in warned[0], warned
    assert "read_only = true" in warned[0] and "--tool-policy" in warned[0] and "drop --read-only" in warned[0]


@aio
async def test_a_tool_policy_file_overrides_what_the_upstream_claims(tmp_path: Path) -> None:
    policy = tmp_path / "tools.toml"
    policy.write_text('[tools.add]\nread_only = false\ndestructive = true\n\n'
                      '[tools."test_simple_*"]\nread_only = true\nopen_world = false\n\n'
                      '[tools."test_*"]\nhidden = true\n\n[tools.test_simple_text]\nhidden = false\n')
    async with Client([*PROXY, "--read-only", "--tool-policy", str(policy), "--", *SERVE]) as client:
        names = {t["name"] for t in await client.list_tools()}
        assert "add" not in names  # declared read-only upstream, overridden: hidden by --read-only
        assert "test_simple_text" in names  # undeclared upstream, made read-only here
        assert not any(n.startswith("test_") and n != "test_simple_text" for n in names)  # hidden = true
        assert (await client.call_tool("add", {"a": 1, "b": 2})).get("isError") is True
        assert (await client.call_tool("test_simple_text"))["content"][0]["type"] == "text"
        with pytest.raises(RpcError):
            await client.call_tool("test_image_content")  # not mirrored at all


@aio
async def test_several_upstreams_from_an_mcpservers_config(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "ref": {"command": PY, "args": ["-m", "mcpkit", "serve"]},
        "broken": {"command": PY, "args": ["-c", "raise SystemExit(3)"]},
        "off": {"command": "does-not-exist", "disabled": True},
    }}))
    async with Client([*PROXY, "--config", str(config)]) as client:
        names = {t["name"] for t in await client.list_tools()}
        assert "ref_add" in names and not any(n.startswith("broken_") for n in names)
        assert (await client.call_tool("ref_add", {"a": 1, "b": 2}))["structuredContent"] == {"result": 3}
        assert "broken" in client.stderr and "retrying" in client.stderr


@aio
async def test_a_shared_tool_policy_rule_for_one_upstream_does_not_reach_a_tool_of_another(tmp_path: Path) -> None:
    """[tools.files_read] is upstream files's read; upstream tickets's own tool named files_read
    (listed tickets_files_read) used to take its read_only = true and pass --read-only."""
    marker = tmp_path / "written"
    (tmp_path / "files.py").write_text(
        "from mcpkit import Server\nserver = Server('files')\n"
        "@server.tool\ndef read() -> str:\n    return 'read'\n")
    (tmp_path / "tickets.py").write_text(
        "import pathlib\nfrom mcpkit import Server\nserver = Server('tickets')\n"
        "@server.tool(name='files_read')\ndef files_read() -> str:\n"
        f"    pathlib.Path({str(marker)!r}).write_text('x')\n    return 'wrote'\n")
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        name: {"command": PY, "args": ["-m", "mcpkit", "serve", str(tmp_path / f"{name}.py")]}
        for name in ("files", "tickets")}}))
    policy = tmp_path / "tools.toml"
    policy.write_text('[tools.files_read]\nread_only = true\nopen_world = false\n')
    async with Client([*PROXY, "--read-only", "--tool-policy", str(policy), "--config", str(config)]) as client:
        assert [t["name"] for t in await client.list_tools()] == ["files_read"]
        refused = await client.call_tool("tickets_files_read")
        assert refused.get("isError") is True and "read-only" in refused["content"][0]["text"]
        assert (await client.call_tool("files_read"))["content"][0]["text"] == "read"
    assert not marker.exists()


@pytest.mark.parametrize(("args", "message"), [
    ([], "give a TARGET"),
    (["--config", "/nonexistent/mcp.json"], "cannot read /nonexistent/mcp.json"),
    ([f"a={PY} -V", f"{PY} -V"], "several upstreams need a name"),
    (["--tool-policy", "/nonexistent/tools.toml", "--", PY], "cannot read the tool policy"),
    (["--", PY, "-c", "raise SystemExit(3)"], "exited"),
    # an audit file that cannot be written: refused at start, not a traceback and a lost line
    # on every call
    (["--audit", f"{PY}/audit.log", "--", PY], f"cannot open the audit log {PY}/audit.log"),
    (["--http", "127.0.0.1:1", "--auth", "tokens:/nonexistent/tokens.txt", "--", PY], "/nonexistent/tokens.txt"),
    # --timeout -1 and --connect-timeout 0 used to wait and then blame the upstream ("no answer
    # within 0.0 s"); --probe-interval 0 named the Bridge's parameters (backoff_initial, jitter ...)
    (["--timeout", "-1", "--", PY], "argument --timeout: must be a positive number of seconds, got '-1'"),
    (["--connect-timeout", "0", "--", PY], "argument --connect-timeout: must be a positive number of seconds"),
    (["--probe-interval", "0", "--", PY], "argument --probe-interval: must be a positive number of seconds"),
    # an unknown revision was offered upstream, where the upstream silently answered another
    (["--protocol-version", "1999-01-01", "--", PY],
     "argument --protocol-version: unknown revision '1999-01-01'; give one of 2024-11-05, 2025-03-26"),
    # options of HTTP serving were accepted and ignored on stdio, as `mcpkit serve` refuses them
    (["--json", "--", PY], "--json applies to HTTP only; add --http HOST:PORT or drop --json"),
    (["--allow-host", "x.example", "--", PY], "--allow-host applies to HTTP only"),
    (["--header-timeout", "1", "--", PY], "--header-timeout applies to HTTP only"),
    (["--auth", "tokens", "--", PY], "--auth is for --http"),
    # the connection limits were never read, so an impossible one was served
    (["--http", "127.0.0.1:0", "--max-connections", "0", "--", PY], "max-connections must be a positive integer"),
    (["--host-schemas", "bard", "--", PY], "argument --host-schemas: invalid choice: 'bard' (choose from 'auto'"),
])
def test_a_configuration_mistake_is_one_line_without_a_traceback(args: list[str], message: str) -> None:
    done = subprocess.run([*PROXY, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("command", [
    ["sh", "-c", "echo 'Error: missing API key' >&2; exit 3"],  # exits before initialize is written
    [PY, "-c", "import sys; sys.stderr.write('Error: missing API key'); sys.exit(3)"],
])
def test_an_upstream_that_exits_at_once_is_one_line_with_its_exit_code_and_stderr(command: list[str]) -> None:
    # used to be three lines (two WARNINGs and the failure, each repeating the same text wrapped
    # in "ConnectionError: upstream ...: ClientError: "), and for a fast exit only "the server's
    # stdin is closed"
    done = subprocess.run([*PROXY, "--", *command], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("mcpkit proxy: upstream ") and "did not start: the server exited with code 3; " \
        "stderr: Error: missing API key" in lines[0], lines[0]
    assert "ConnectionError" not in lines[0] and "ClientError" not in lines[0]


NO_SUCH = "mcpkit-no-such-command-xyz"


@pytest.mark.parametrize(("args", "line"), [
    # used to run on with two WARNING lines and a "ConnectionError: upstream a: cannot start 'x'
    # ...; retrying in the background" line per upstream, exit 0, serving nothing
    ([f"a={NO_SUCH}", f"b={NO_SUCH} --stdio"],
     f"upstreams 'a' and 'b' cannot start: {NO_SUCH!r} is not a command on PATH; install it, or give its full path"),
    ([f"ref={PY} -m mcpkit serve", f"a={NO_SUCH}"],
     f"upstream 'a' cannot start: {NO_SUCH!r} is not a command on PATH; install it, or give its full path"),
    (["--", NO_SUCH],
     f"cannot start the upstream: {NO_SUCH!r} is not a command on PATH; install it, or give its full path"),
    (["--", "./no-such-server"], "cannot start the upstream: './no-such-server' does not exist"),
])
def test_an_upstream_command_that_is_not_there_is_one_line_with_the_fix(args: list[str], line: str) -> None:
    done = subprocess.run([*PROXY, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                          check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mcpkit proxy: {line}"), done.stderr
    assert done.stdout == ""


def test_an_upstream_file_that_is_not_executable_or_a_config_command_missing_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\n")
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"files": {"command": NO_SUCH, "args": ["/srv"]},
                                                 "tool": {"command": str(script)}}}))
    done = subprocess.run([*PROXY, "--config", str(config)], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 2
    expected = (f"mcpkit proxy: upstream 'files' cannot start: {NO_SUCH!r} is not a command on PATH; install it, "
                f"or give its full path; upstream 'tool' cannot start: {str(script)!r} is not executable; chmod +x "
                f"it, or start it with its interpreter (e.g. \"node {script}\" or \"python {script}\")")
    assert done.stderr.splitlines() == [expected], done.stderr


@aio
async def test_a_url_upstream_that_is_down_is_still_retried_in_the_background() -> None:
    # documented (docs/proxy.md, "Several upstreams"): only a command that is not there is refused
    async with Client([*PROXY, "down=http://127.0.0.1:9/mcp", f"ref={PY} -m mcpkit serve"]) as client:
        assert "ref_add" in {t["name"] for t in await client.list_tools()}
        assert "down" in client.stderr and "retrying in the background" in client.stderr


# ------------------------------------------------------------------------------ tool policy files


def test_tool_policy_rules_apply_in_file_order_and_exact_names_last(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[tools.write_file]\nread_only = false\nscopes = ["files:write"]\n\n'
                    '[tools."*"]\nread_only = true\nrate_limit = "5/min"\n\n'
                    '[tools."fs_write_*"]\ntimeout = 30\n')
    policy = ToolPolicy.from_file(path)
    assert policy.resolve("fs_write_file", "write_file") == {
        "read_only": False, "rate_limit": "5/min", "timeout": 30, "scopes": ["files:write"]}
    assert policy.resolve("fs_read_file", "read_file") == {"read_only": True, "rate_limit": "5/min"}
    assert ToolPolicy.annotate({"readOnlyHint": True, "title": "T"}, {"read_only": False, "open_world": True}) == {
        "readOnlyHint": False, "title": "T", "openWorldHint": True}


@pytest.mark.parametrize(("text", "message"), [
    ("[tools.x]\nread_only = 1\n", "read_only must be true or false"),
    ("[tools.x]\nwrite = true\n", "unknown key(s) write"),
    ("[tools.x]\nrate_limit = \"lots\"\n", "rate_limit"),
    # a number used to get "a rate must be a Rate, a string like '100/min' or None, got int"
    ("[tools.x]\nrate_limit = 10\n", "rate_limit must be a string such as \"10/min\" (or false), got 10"),
    ("[tools.x]\ntimeout = -1\n", "timeout must be a positive number"),
    ("[tools.x]\nscopes = \"a\"\n", "scopes must be a list"),
    ("[tools.x]\nread_only = true\ndestructive = true\n", "both read_only and destructive"),
    ("[other]\n", "unknown section"),
    ("[tools\n", "not valid TOML"),
])
def test_a_bad_tool_policy_names_the_entry_and_the_fix(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ToolPolicyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ToolPolicy.from_file(path)


# ------------------------------------------------------------------------------ targets and configs


def test_targets_are_urls_or_command_lines_with_an_optional_name() -> None:
    assert parse_target("https://x.example/mcp").transport == "http"
    spec = parse_target("web=https://x.example/mcp?a=b")
    assert (spec.name, spec.target, spec.transport) == ("web", "https://x.example/mcp?a=b", "http")
    assert parse_target("sse+https://x.example/sse").transport == "sse"
    spec = parse_target("files=npx -y server '/srv/my files'")
    assert (spec.name, spec.target) == ("files", ["npx", "-y", "server", "/srv/my files"])
    with pytest.raises(ConfigError):
        parse_target("  ")


@aio
async def test_a_server_file_target_is_served_as_every_other_command_serves_it(tmp_path: Path) -> None:
    # `mcpkit proxy server.py` ran "server.py" as a program ("not executable; chmod +x it"),
    # where `mcpkit list server.py` serves it
    server = tmp_path / "weather.py"
    server.write_text("from mcpkit import Server\nserver = Server('weather')\n\n"
                      "@server.tool\ndef forecast(city: str) -> str:\n    return f'sun in {city}'\n")
    async with Client([*PROXY, f"w={server}"]) as client:
        assert [t["name"] for t in await client.list_tools()] == ["forecast"]
        result = await client.call_tool("forecast", {"city": "Oslo"})
        assert result["content"][0]["text"] == "sun in Oslo"
    spec = parse_target(str(server))
    assert spec.target == [sys.executable, "-m", "mcpkit", "serve", str(server)]


def test_a_server_file_that_is_not_there_is_one_line(tmp_path: Path) -> None:
    gone = tmp_path / "gone.py"
    done = subprocess.run([*PROXY, str(gone)], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.strip() == f"mcpkit proxy: no such file: {gone}", done.stderr


def test_mcp_servers_files_as_hosts_write_them(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("TICKETS_TOKEN", "s3cret")
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
                  "env": {"A": "1"}},
        "tickets": {"url": "https://t.example/mcp", "headers": {"Authorization": "Bearer ${TICKETS_TOKEN}"}},
        "legacy": {"type": "sse", "url": "https://old.example/sse"},
        "off": {"command": "x", "disabled": True},
    }}))
    specs = load_mcp_servers(path)
    assert [(s.name, s.transport) for s in specs] == [("files", "stdio"), ("tickets", "http"), ("legacy", "sse")]
    assert specs[0].target == ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv"]
    assert specs[0].options()["env"]["A"] == "1"
    assert specs[1].headers == {"Authorization": "Bearer s3cret"}


def test_a_url_from_the_environment_is_expanded_before_it_is_checked(tmp_path: Path, monkeypatch: Any) -> None:
    # "url": "${BASE}/mcp" was refused (an http server needs "url": "https://...") before ${BASE}
    # was read, though ${VAR} is read from the environment in every string
    monkeypatch.setenv("MCPKIT_TEST_BASE", "https://t.example")
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"t": {"url": "${MCPKIT_TEST_BASE}/mcp"}}}))
    [spec] = load_mcp_servers(path)
    assert (spec.target, spec.transport) == ("https://t.example/mcp", "http")


@pytest.mark.parametrize("servers", [{}, {"off": {"command": "x", "disabled": True}}])
def test_a_config_without_an_enabled_server_says_so(tmp_path: Path, servers: dict[str, Any]) -> None:
    # it said "give a TARGET (a URL or a command line), a command after --, or --config FILE",
    # to a user who had given --config FILE
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    done = subprocess.run([*PROXY, "--config", str(path)], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.strip() == f"mcpkit proxy: {path} has no enabled server in \"mcpServers\"", done.stderr


@pytest.mark.parametrize(("data", "message"), [
    ({"servers": {}}, 'no "mcpServers" object'),
    ({"mcpServers": {"a b": {"command": "x"}}}, "a name is 1-40 characters"),
    ({"mcpServers": {"a": {"args": ["x"]}}}, 'needs "command"'),
    ({"mcpServers": {"a": {"type": "ws", "url": "x"}}}, "unknown type 'ws'"),
    ({"mcpServers": {"a": {"url": "ftp://x"}}}, 'needs "url"'),
    ({"mcpServers": {"a": {"command": "x", "env": {"A": 1}}}}, "env must be an object of strings"),
    ({"mcpServers": {"a": {"url": "https://x/${NOT_SET_ANYWHERE}"}}}, "NOT_SET_ANYWHERE"),
    # "yes" (or "true") used to leave the server enabled without a word
    ({"mcpServers": {"a": {"command": "x", "disabled": "yes"}}}, "disabled must be true or false"),
])
def test_a_bad_mcp_servers_file_names_the_entry(tmp_path: Path, data: Any, message: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_mcp_servers(path)


@aio
async def test_http_auth_and_tool_policy_scopes_guard_an_upstream(tmp_path: Path) -> None:
    import os

    from mcpkit.client import ClientError

    tokens = tmp_path / "tokens.txt"
    tokens.write_text("reader-token-0123456789 alice\nadmin-token-0123456789 bob admin\n")
    os.chmod(tokens, 0o600)
    policy = tmp_path / "tools.toml"
    policy.write_text('[tools.echo]\nscopes = ["admin"]\n')
    with proxy_over_http("--auth", f"tokens:{tokens}", "--tool-policy", str(policy)) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        with pytest.raises(ClientError) as unauthorized:
            async with Client(url) as client:
                await client.list_tools()
        assert unauthorized.value.status == 401
        async with Client(url, headers={"Authorization": "Bearer reader-token-0123456789"}) as client:
            assert (await client.call_tool("add", {"a": 1, "b": 1}))["structuredContent"] == {"result": 2}
            with pytest.raises(ClientError) as forbidden:
                await client.call_tool("echo", {"text": "x"})
            assert forbidden.value.status == 403
        async with Client(url, headers={"Authorization": "Bearer admin-token-0123456789"}) as client:
            assert (await client.call_tool("echo", {"text": "x"}))["content"][0]["text"] == "x"


@aio
async def test_rate_limit_and_deny_switches() -> None:
    async with Client([*PROXY, "--rate-limit", "2/min", "--deny-open-world", "--", *SERVE]) as client:
        names = {t["name"] for t in await client.list_tools()}
        assert "add" in names and "test_simple_text" not in names  # undeclared: assumed open-world
        assert (await client.call_tool("add", {"a": 1, "b": 1})).get("isError") is not True
        assert (await client.call_tool("add", {"a": 1, "b": 1})).get("isError") is not True
        limited = await client.call_tool("add", {"a": 1, "b": 1})
        assert limited.get("isError") is True and "rate" in limited["content"][0]["text"].lower()


def test_the_connection_limits_apply_to_the_proxy_over_http() -> None:
    # --header-timeout, --keep-alive-timeout, --max-connections and --max-header-bytes were
    # accepted and never read: a silent connection stayed open for uvicorn's default
    import socket
    import time

    with proxy_over_http("--header-timeout", "0.5") as port:
        with socket.create_connection(("127.0.0.1", port)) as silent:
            silent.settimeout(5)
            started = time.monotonic()
            assert silent.recv(10) == b""  # closed by the proxy, not by the 5 s timeout here
            assert time.monotonic() - started < 3


@contextlib.contextmanager
def proxy_over_http(*options: str) -> Iterator[int]:
    """``mcpkit proxy --http 127.0.0.1:PORT OPTIONS -- mcpkit serve``, listening; its port."""
    port = free_port()
    proc = subprocess.Popen([*PROXY, "--http", f"127.0.0.1:{port}", *options, "--", *SERVE],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        try:
            wait_listening(proc, port, timeout=60)
        except RuntimeError as exc:  # exited, or not listening: say what it wrote
            stderr = proc.stderr.read().decode() if proc.poll() is not None and proc.stderr else ""
            raise AssertionError(f"{exc}\n{stderr}") from None
        yield port
    finally:
        proc.terminate()
        proc.wait(15)


def test_an_address_that_cannot_be_served_is_refused_before_any_upstream_starts(tmp_path: Path) -> None:
    # the upstreams were started first: a bad --http address was reported only after each had
    # run (or, for an upstream that failed, not at all: its own failure was the one line)
    marker = tmp_path / "started"
    upstream = [PY, "-c", f"open({str(marker)!r}, 'w').close()"]
    done = subprocess.run([*PROXY, "--http", "192.0.2.1:8000", "--", *upstream], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("mcpkit: cannot listen on 192.0.2.1:8000"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not marker.exists()  # the upstream was never run


def test_the_proxy_serves_on_the_port_it_bound_first() -> None:
    with proxy_over_http() as port:
        import httpx

        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        answer = httpx.post(f"http://127.0.0.1:{port}/mcp",
                            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params},
                            headers={"Accept": "application/json, text/event-stream"}, timeout=30)
        assert answer.status_code == 200, answer.text
