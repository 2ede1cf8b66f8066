"""The MCP Inspector CLI (pinned 2.12.0) drives ``mcpkit serve`` over stdio.

Every test runs

    npx @modelcontextprotocol/inspector@2.12.0 --cli --method METHOD [...] -- <mcpkit serve>

where ``<mcpkit serve>`` is ``python -m mcpkit serve`` under the traffic tap (the ``wire``
fixture), so the Inspector's own client handles the handshake and parses every answer, and each
server message is also checked against the official schema of the negotiated revision.

``tools/install-node-deps.sh`` installs the Inspector and the Node.js it needs (>= 22.19; Node.js
22 from the npm package ``node-linux-<arch>`` when the system node is older) into a cache, once; the
tests run ``npx`` in that install's folder with ``--yes=false``, so npx takes the installed 2.12.0
and never downloads. ``MCPKIT_INSPECTOR`` (the path the installer prints) skips the installer call.
Without npm the tests skip, except under ``CI``, where they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.conftest import mcpkit_command
from tests.wire import WireLog
from tests.contract import JSON_SCHEMA_2020_12_INPUT

ROOT = Path(__file__).resolve().parents[2]
INSTALLER = ROOT / "tools" / "install-node-deps.sh"
INSPECTOR_VERSION = "2.12.0"
PACKAGE = f"@modelcontextprotocol/inspector@{INSPECTOR_VERSION}"
CALL_TIMEOUT = 90  # seconds for one Inspector run; a run takes about 1.5 s here
INSTALL_TIMEOUT = 900

# The installer may download (about 10 s with a warm network) the first time this runs.
pytestmark = [pytest.mark.interop, pytest.mark.timeout(INSTALL_TIMEOUT + 60)]

# Tools the conformance contract (§2.2) requires, and the reference server's demo tools.
CONTRACT_TOOLS = {
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_tool_with_logging",
    "test_tool_with_progress",
    "test_error_handling",
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
    "json_schema_2020_12_tool",
    "test_reconnection",
}
DEMO_TOOLS = {
    "add",
    "echo",
    "countdown",
    "sleep",
    "list_roots",
    "test_trigger_tool_change",
    "test_trigger_prompt_change",
    "test_trigger_resource_update",
}
# Diagnostics of the 2026-07-28 conformance contract (CONTRACT-2026 §2.3).
MODERN_TOOLS = {"test_missing_capability", "test_streaming_elicitation", "test_logging_tool", "test_x_mcp_header"} | {
    f"test_input_required_result_{n}" for n in (
        "elicitation", "sampling", "list_roots", "request_state", "multiple_inputs", "multi_round",
        "tampered_state", "capabilities",
    )
} | {"greet", "slow_compute", "failing_job", "protocol_error_job", "confirm_delete", "multi_input", "test_tool_with_task"}


def _unavailable(message: str) -> None:
    """The Inspector cannot run here: a failure in CI, a skip on a developer's machine."""
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(f"{message} (CI is set: the Inspector interop test must run)", pytrace=False)
    pytest.skip(message)


@dataclass(frozen=True)
class Inspector:
    home: Path  # the install: node_modules/ with the Inspector, bin/node, bin/mcp-inspector

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        # bin/node first: npx, and the Inspector it starts, run on the Node.js the installer chose.
        env["PATH"] = f"{self.home / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["npm_config_update_notifier"] = "false"
        env["npm_config_fund"] = "false"
        env["npm_config_audit"] = "false"
        env["MCP_INSPECTOR_SECRET_STORE"] = "memory"  # never look for an OS keychain
        return env


@pytest.fixture(scope="session")
def inspector() -> Inspector:
    if shutil.which("npm") is None or shutil.which("npx") is None:
        _unavailable("npm/npx is not installed: the Inspector test needs them (Debian: apt-get install npm)")
    wrapper = os.environ.get("MCPKIT_INSPECTOR", "").strip()
    if not wrapper:
        try:
            done = subprocess.run(
                ["bash", str(INSTALLER)],
                capture_output=True, text=True, timeout=INSTALL_TIMEOUT, stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"{INSTALLER} did not finish within {INSTALL_TIMEOUT} s", pytrace=False)
        if done.returncode == 3:
            _unavailable(done.stderr.strip())
        if done.returncode != 0 or not done.stdout.strip():
            pytest.fail(f"{INSTALLER} failed (exit {done.returncode}):\n{done.stderr[-3000:]}", pytrace=False)
        wrapper = done.stdout.strip().splitlines()[-1]
    home = Path(wrapper).resolve().parent.parent
    manifest = home / "node_modules" / "@modelcontextprotocol" / "inspector" / "package.json"
    try:
        version = json.loads(manifest.read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError) as exc:
        pytest.fail(f"no Inspector install at {home} ({exc}); MCPKIT_INSPECTOR={wrapper!r}", pytrace=False)
    if version != INSPECTOR_VERSION:
        pytest.fail(f"{manifest} is version {version}, not the pinned {INSPECTOR_VERSION}", pytrace=False)
    return Inspector(home)


@dataclass
class Run:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    log: WireLog  # what went over the server's stdio

    def json(self) -> Any:
        try:
            return json.loads(self.stdout)
        except ValueError:
            raise AssertionError(f"the Inspector printed no JSON:\n{self.describe()}") from None

    def describe(self) -> str:
        return f"$ {' '.join(self.argv)}\nexit {self.returncode}\nstdout:\n{self.stdout[-3000:]}\nstderr:\n{self.stderr[-3000:]}"


def run_inspector(inspector: Inspector, wire: Any, *cli_args: str) -> Run:
    """``npx @modelcontextprotocol/inspector@2.12.0 --cli CLI_ARGS -- <mcpkit serve under the tap>``."""
    server = wire.command(mcpkit_command("serve"))
    log_path = wire.logs[-1]
    argv = ["npx", "--yes=false", PACKAGE, "--cli", *cli_args]
    if os.environ.get("PYTHONPATH"):
        # The Inspector hands a stdio server only a small default environment.
        argv += ["-e", f"PYTHONPATH={os.environ['PYTHONPATH']}"]
    argv += ["--", *server]
    proc = subprocess.Popen(
        argv,
        cwd=inspector.home,  # npx resolves the package from this folder's node_modules
        env=inspector.env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=CALL_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"the Inspector did not finish within {CALL_TIMEOUT} s:\n$ {' '.join(argv)}\n{stderr[-3000:]}")
    log = WireLog.read(log_path) if os.path.exists(log_path) else WireLog([])
    return Run(argv, proc.returncode, stdout, stderr, log)


def _answer(log: WireLog, method: str) -> dict[str, Any]:
    """The server's response to the (first) client request *method* in *log*."""
    requests = [m for m in log.messages("c2s") if isinstance(m, dict) and m.get("method") == method and "id" in m]
    assert requests, f"the Inspector sent no {method}"
    wanted = requests[0]["id"]
    for message in log.messages("s2c"):
        if isinstance(message, dict) and message.get("id") == wanted and "method" not in message:
            return message
    raise AssertionError(f"the server never answered {method} (id {wanted!r})")


# --------------------------------------------------------------------------- handshake


@pytest.mark.req("LC-01", "LC-02", "LC-06", "TL-01", "RS-01", "PM-01")
def test_initialize_through_the_inspector(inspector: Inspector, wire: Any) -> None:
    run = run_inspector(inspector, wire, "--method", "initialize")
    assert run.returncode == 0, run.describe()
    result = run.json()
    assert result["serverInfo"]["name"] == "mcpkit-reference"
    assert result["serverInfo"]["version"]
    # The Inspector asks for the latest revision; the server answers with that same one.
    initialize = next(m for m in run.log.messages("c2s") if isinstance(m, dict) and m.get("method") == "initialize")
    assert initialize["params"]["protocolVersion"] == "2025-11-25"
    assert initialize["params"]["clientInfo"] == {"name": "inspector-cli", "version": INSPECTOR_VERSION}
    assert result["protocolVersion"] == "2025-11-25"
    caps = result["capabilities"]
    assert caps["tools"] == {"listChanged": True}
    assert caps["resources"] == {"subscribe": True, "listChanged": True}
    assert caps["prompts"] == {"listChanged": True}
    assert caps["logging"] == {}
    assert caps["completions"] == {}
    # initialize was the first thing on the wire, and the server sent nothing before its answer.
    first_c2s = run.log.messages("c2s")[0]
    assert first_c2s.get("method") == "initialize"
    assert run.log.messages("s2c")[0].get("id") == first_c2s["id"]


# --------------------------------------------------------------------------- tools


@pytest.mark.req("ST-01", "TL-05")
def test_tools_list_through_the_inspector(inspector: Inspector, wire: Any) -> None:
    # The acceptance command: npx @modelcontextprotocol/inspector@2.12.0 --cli --method tools/list -- mcpkit serve
    run = run_inspector(inspector, wire, "--method", "tools/list")
    assert run.returncode == 0, run.describe()
    tools = run.json()["tools"]
    names = [tool["name"] for tool in tools]
    assert len(names) == len(set(names)), names
    assert set(names) == CONTRACT_TOOLS | DEMO_TOOLS | MODERN_TOOLS
    for tool in tools:
        assert tool["description"], tool
        assert tool["inputSchema"]["type"] == "object", tool
    by_name = {tool["name"]: tool for tool in tools}
    # The raw 2020-12 schema arrives exactly as registered: $schema, $defs and the $ref kept.
    assert by_name["json_schema_2020_12_tool"]["inputSchema"] == JSON_SCHEMA_2020_12_INPUT
    assert by_name["json_schema_2020_12_tool"]["description"] == "Tool with JSON Schema 2020-12 features"
    assert by_name["test_simple_text"]["inputSchema"] == {"type": "object", "properties": {}, "additionalProperties": False}
    assert by_name["add"]["inputSchema"] == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    assert by_name["add"]["outputSchema"] == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    }
    assert by_name["add"]["annotations"] == {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}
    # The Inspector printed what the server sent, and the server sent one compact JSON-RPC message
    # per line on stdout.
    answer = _answer(run.log, "tools/list")
    assert answer["result"]["tools"] == tools
    for line in run.log.lines("s2c"):
        message = json.loads(line)
        assert isinstance(message, dict) and message["jsonrpc"] == "2.0", line


@pytest.mark.req("TL-07", "TL-08", "TL-09")
def test_tools_call_add_through_the_inspector(inspector: Inspector, wire: Any) -> None:
    run = run_inspector(inspector, wire, "--method", "tools/call", "--tool-name", "add", "--tool-arg", "a=2", "b=3")
    assert run.returncode == 0, run.describe()
    result = run.json()
    assert result == {"content": [{"type": "text", "text": '{"result":5}'}], "structuredContent": {"result": 5}}
    # The Inspector coerced the key=value pairs by the listed inputSchema: integers on the wire.
    call = next(m for m in run.log.messages("c2s") if isinstance(m, dict) and m.get("method") == "tools/call")
    assert call["params"] == {"name": "add", "arguments": {"a": 2, "b": 3}}
    # structuredContent conforms to the outputSchema the server listed in the same session, and the
    # text block carries the same JSON.
    listed = _answer(run.log, "tools/list")["result"]["tools"]
    output_schema = next(tool for tool in listed if tool["name"] == "add")["outputSchema"]
    jsonschema.validate(result["structuredContent"], output_schema)
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


@pytest.mark.req("TL-09")
def test_tools_call_simple_text_through_the_inspector(inspector: Inspector, wire: Any) -> None:
    run = run_inspector(inspector, wire, "--method", "tools/call", "--tool-name", "test_simple_text")
    assert run.returncode == 0, run.describe()
    assert run.json() == {"content": [{"type": "text", "text": "This is a simple text response for testing."}]}


@pytest.mark.req("TL-10")
def test_tool_error_is_a_result_for_the_inspector(inspector: Inspector, wire: Any) -> None:
    run = run_inspector(inspector, wire, "--method", "tools/call", "--tool-name", "test_error_handling")
    # The CLI prints the result and exits 5 with its tool_is_error envelope: a tool error, not a
    # protocol error.
    assert run.returncode == 5, run.describe()
    assert run.json() == {
        "content": [{"type": "text", "text": "This tool intentionally returns an error for testing"}],
        "isError": True,
        "_meta": {"dev.mcpkit/error": {"code": "E_INTERNAL", "details": None, "retryable": False,
                                       "message": "This tool intentionally returns an error for testing",
                                       "suggestedFix": None}},
    }
    assert '"code":"tool_is_error"' in run.stderr.replace(" ", ""), run.describe()
    answer = _answer(run.log, "tools/call")
    assert "error" not in answer and answer["result"]["isError"] is True


# --------------------------------------------------------------------------- resources and prompts


@pytest.mark.req("RS-03")
def test_resources_read_through_the_inspector(inspector: Inspector, wire: Any) -> None:
    run = run_inspector(inspector, wire, "--method", "resources/read", "--uri", "test://static-text")
    assert run.returncode == 0, run.describe()
    assert run.json() == {
        "contents": [
            {
                "uri": "test://static-text",
                "mimeType": "text/plain",
                "text": "This is the content of the static text resource.",
            }
        ]
    }


@pytest.mark.req("PM-03")
def test_prompts_get_through_the_inspector(inspector: Inspector, wire: Any) -> None:
    run = run_inspector(inspector, wire, "--method", "prompts/get", "--prompt-name", "test_simple_prompt")
    assert run.returncode == 0, run.describe()
    assert run.json() == {
        "description": "A simple prompt without arguments.",
        "messages": [{"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}],
    }
    run = run_inspector(
        inspector, wire,
        "--method", "prompts/get", "--prompt-name", "test_prompt_with_arguments",
        "--prompt-args", "arg1=testValue1", "arg2=testValue2",
    )
    assert run.returncode == 0, run.describe()
    assert run.json()["messages"] == [
        {
            "role": "user",
            "content": {"type": "text", "text": "Prompt with arguments: arg1='testValue1', arg2='testValue2'"},
        }
    ]


# --------------------------------------------------------------------------- over HTTP


@pytest.fixture
def http_server(serving_loop: str) -> Any:
    """``mcpkit serve --http`` on a free loopback port; yields its base URL."""
    import socket
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        mcpkit_command("serve", "--http", f"127.0.0.1:{port}"),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"mcpkit serve --http did not start: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def run_inspector_url(inspector: Inspector, url: str, transport: str, *cli_args: str) -> Run:
    argv = ["npx", "--yes=false", PACKAGE, "--cli", url, "--transport", transport, *cli_args]
    proc = subprocess.run(
        argv, cwd=inspector.home, env=inspector.env(), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=CALL_TIMEOUT,
    )
    return Run(argv, proc.returncode, proc.stdout, proc.stderr, WireLog([]))


@pytest.mark.req("HL-01", "HL-06", "HL-15", "TL-05", "TL-07")
@pytest.mark.parametrize(("transport", "path"), [("http", "/mcp"), ("sse", "/sse")])
def test_the_inspector_over_http(inspector: Inspector, http_server: str, transport: str, path: str) -> None:
    """Streamable HTTP at /mcp and the legacy HTTP+SSE transport at /sse, one server."""
    url = http_server + path
    listed = run_inspector_url(inspector, url, transport, "--method", "tools/list")
    assert listed.returncode == 0, listed.describe()
    tools = {tool["name"]: tool for tool in listed.json()["tools"]}
    assert set(tools) == CONTRACT_TOOLS | DEMO_TOOLS | MODERN_TOOLS
    assert tools["json_schema_2020_12_tool"]["inputSchema"] == JSON_SCHEMA_2020_12_INPUT
    called = run_inspector_url(inspector, url, transport, "--method", "tools/call", "--tool-name", "add",
                               "--tool-arg", "a=2", "b=3")
    assert called.returncode == 0, called.describe()
    assert called.json() == {"content": [{"type": "text", "text": '{"result":5}'}], "structuredContent": {"result": 5}}
