"""`serve --otel` says when nothing records its spans, and `--otel-console` is the five-minute
look at them: the OpenTelemetry SDK printing each span as a JSON line on stderr, stdout left to
the protocol."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import mcpkit_command

SERVER = '''from mcpkit import Server

server = Server("traced", "1.0")


@server.tool(read_only=True, open_world=False)
def hello(name: str) -> str:
    return "hello " + name
'''

CALLS = "\n".join(json.dumps(m) for m in [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hello", "arguments": {"name": "Ada"}}},
]) + "\n"


@pytest.fixture
def traced(tmp_path: Path) -> str:
    path = tmp_path / "traced.py"
    path.write_text(SERVER)
    return str(path)


def _serve(traced: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcpkit_command("serve", traced, *flags), input=CALLS, capture_output=True, text=True,
                          timeout=60)


def test_otel_without_an_sdk_configured_says_so_in_one_line(traced):
    done = _serve(traced, "--otel")
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "no OpenTelemetry SDK is configured" in line]
    assert len(warned) == 1 and "--otel-console" in warned[0], done.stderr


def test_otel_console_prints_each_span_on_stderr_and_keeps_stdout_the_protocols(traced):
    done = _serve(traced, "--otel-console")
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]  # every stdout line is a message
    assert answers[-1]["result"]["content"][0]["text"] == "hello Ada"
    spans = [json.loads(line) for line in done.stderr.splitlines() if line.startswith('{"name"')]
    call = next(s for s in spans if s["name"] == "tools/call hello")
    assert call["kind"] == "SpanKind.SERVER" and call["attributes"]["gen_ai.tool.name"] == "hello"
    assert call["resource"]["attributes"]["service.name"] == "traced"
    assert "no OpenTelemetry SDK" not in done.stderr
