"""Light imports: serving stdio pulls in nothing it does not use (start-up time and RSS)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

HEAVY = ("uvicorn", "starlette", "redis", "pydantic", "httpx", "rich", "mcp", "jsonschema", "ssl", "asyncio",
         "cryptography", "jwt", "yaml", "websockets")


def _modules_after(code: str) -> set[str]:
    script = textwrap.dedent(code) + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_import_mcpkit_is_cheap() -> None:
    mods = _modules_after("import mcpkit")
    assert not any(m.startswith("mcpkit.server") or m.startswith("mcpkit.protocol") for m in mods)
    assert not {m for m in mods if m.split(".")[0] in HEAVY}


@pytest.mark.req("ST-10")
def test_serving_a_sync_server_on_stdio_imports_nothing_heavy(tmp_path, wire) -> None:
    """A sync-only server, after the handshake and a call, has imported no HTTP, Redis, auth,
    CLI-only or pydantic package, and not even asyncio (it starts on the first async handler)."""
    server = tmp_path / "srv.py"
    server.write_text(
        textwrap.dedent(
            """
            import json, os, sys
            from mcpkit import Server
            server = Server("light")

            @server.tool
            def add(a: int, b: int) -> int:
                return a + b

            @server.tool
            def modules() -> str:
                return json.dumps(sorted(sys.modules))

            server.run()
            """
        )
    )
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "modules", "arguments": {}}},
    ]
    stdin = "".join(json.dumps(m) + "\n" for m in lines)
    out = subprocess.run(
        wire.command([sys.executable, str(server)]), input=stdin, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    answers = {m["id"]: m for m in map(json.loads, out.stdout.splitlines()) if "id" in m}
    assert answers[2]["result"]["structuredContent"] == {"result": 3}
    mods = set(json.loads(answers[3]["result"]["content"][0]["text"]))
    heavy = sorted(m for m in mods if m.split(".")[0] in HEAVY)
    assert heavy == [], f"stdio serving imported {heavy}"
    assert "mcpkit.cli" not in mods
    assert not any(m.startswith(("mcpkit.transports.http", "mcpkit.auth")) for m in mods)
    # the Redis stores' shared module only where a store is configured
    assert "mcpkit.stores.redis_base" not in mods


@pytest.mark.parametrize("extra", ["uvicorn", "redis"])
def test_optional_dependencies_are_optional(extra: str) -> None:
    """The core declares only orjson, jsonschema-rs and PyYAML; HTTP and Redis live in extras."""
    import tomllib
    from pathlib import Path

    meta = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]
    assert not any(dep.startswith(extra) for dep in meta["dependencies"])
