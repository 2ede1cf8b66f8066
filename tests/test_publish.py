"""mcpkit registry: a server.json for the official MCP Registry (schema 2025-12-11)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mcpkit import Server
from mcpkit.publish import REGISTRY_SCHEMA, server_json, validate_server_json

ROOT = Path(__file__).resolve().parents[1]


def test_a_pypi_package_over_stdio_from_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "weather-mcp"\nversion = "1.4.0"\ndescription = "Forecasts"\n'
        '[project.urls]\nRepository = "https://github.com/you/weather-mcp"\n')
    doc = server_json(Server("weather", "0.0.1", description="Daily forecasts for any city."),
                      name="io.github.you/weather", pyproject=tmp_path / "pyproject.toml", entry="weather.server:app")
    assert doc == {
        "$schema": REGISTRY_SCHEMA, "name": "io.github.you/weather", "description": "Daily forecasts for any city.",
        "version": "1.4.0", "repository": {"url": "https://github.com/you/weather-mcp", "source": "github"},
        "packages": [{"registryType": "pypi", "identifier": "weather-mcp", "version": "1.4.0", "runtimeHint": "uvx",
                      "transport": {"type": "stdio"},
                      "packageArguments": [{"type": "positional", "value": "weather.server:app"}]}],
    }


def test_a_policied_server_lists_the_switches_it_reads_and_a_remote():
    from mcpkit.policy import Policy

    server = Server("ws", "2.0.0", policy=Policy.secure(root="/tmp"))
    doc = server_json(server, name="com.example/ws", package="ws-mcp", remote_url="https://mcp.example.com/mcp")
    names = [e["name"] for e in doc["packages"][0]["environmentVariables"]]
    assert names[:3] == ["MCPKIT_READ_ONLY", "MCPKIT_ALLOW_DESTRUCTIVE", "MCPKIT_ALLOW_OPEN_WORLD"]
    assert doc["remotes"] == [{"type": "streamable-http", "url": "https://mcp.example.com/mcp"}]


def test_mistakes_are_one_line_each():
    with pytest.raises(SystemExit, match="reverse-DNS"):
        server_json(Server("w", "1.0"), name="weather", package="w")
    with pytest.raises(SystemExit, match="nothing to publish"):
        server_json(Server("w", "1.0"), name="io.github.you/w")
    assert validate_server_json({"name": "a/b", "description": "d", "version": "^1.0"}) == [
        "the version must be one exact release (got '^1.0')"]


def test_the_command_writes_the_file(tmp_path):
    out = tmp_path / "server.json"
    proc = subprocess.run([sys.executable, "-m", "mcpkit", "registry", str(ROOT / "examples" / "board.py"),
                           "--name", "io.github.you/board", "--pyproject", str(ROOT / "pyproject.toml"),
                           "--output", str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["packages"][0]["identifier"] == "mcpkit" and doc["name"] == "io.github.you/board"
    assert "mcp-name: io.github.you/board" in proc.stderr and proc.stdout == ""
