"""The poisoning scan (proxy/scan.py; the rules security.* of ``mcpkit check`` and ``mcpkit proxy
--scan``) over the listings of real servers nobody here wrote with an attack in mind: the official
Python SDK's and TypeScript SDK's peers, @modelcontextprotocol/server-everything, -filesystem and
-memory, two typical FastMCP servers (servers/fastmcp_server.py) and mcpkit's own examples.

None may get an error finding (under ``--scan block`` it would withhold an honest tool), and the
counts per server are the ones docs/security.md reports: a detector that starts firing on one of
them fails here first.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client
from mcpkit.proxy.scan import scan_listing
from tests.check.peers.corpus import HERE, ROOT, peer, serving
from tests.conftest import component_missing

#: (errors, warnings) per server; docs/security.md has the same table
#: each test starts what it needs: a parallel run spreads them over its workers (tests/conftest.py)
SPLIT_ACROSS_WORKERS = True
MEASURED = {
    "sdk-stdio": (0, 0),
    "ts-stdio": (0, 0),
    "everything-stdio": (0, 0),
    "filesystem-stdio": (0, 0),
    "memory-stdio": (0, 0),
    "fastmcp-tracker": (0, 0),
    # check_password_strength(password): a parameter named like a secret is a warning, whatever
    # the tool is for; it never blocks
    "fastmcp-assistant": (0, 1),
    "mcpkit-weather": (0, 0),
    "mcpkit-board": (0, 0),
    "mcpkit-composition": (0, 0),
    "mcpkit-design_api": (0, 0),
    "mcpkit-workspace": (0, 0),
}


def _fastmcp_python() -> str:
    """A Python that imports fastmcp (a dev dependency): this one, or FASTMCP_PYTHON."""
    python = os.environ.get("FASTMCP_PYTHON") or sys.executable
    done = subprocess.run([python, "-c", "import fastmcp"], capture_output=True, timeout=120)
    if done.returncode != 0:
        component_missing(f"fastmcp is not importable by {python} (pip install -e '.[dev]', or set FASTMCP_PYTHON)")
    return python


def _target(name: str, tmp: Path) -> tuple[Any, dict[str, Any]]:
    """The command line of ``name`` and the Client options it needs."""
    if name.startswith("fastmcp-"):
        return [_fastmcp_python(), str(HERE / "servers" / "fastmcp_server.py"), name.split("-", 1)[1]], {}
    if name.startswith("mcpkit-"):
        example = name.split("-", 1)[1]
        argv = [sys.executable, "-m", "mcpkit", "serve", str(ROOT / "examples" / f"{example}.py")]
        if example == "workspace":
            argv += ["--root", str(tmp)]
        if example == "design_api":  # its stdio caller's key, as a client's configuration gives it
            return argv, {"inherit_env": ["PYTHONPATH"], "env": {"DESIGN_API_KEY": "dk_scan_0123456789abcdef"}}
        return argv, {"inherit_env": ["PYTHONPATH"]}
    return None, {}


async def _listing(target: Any, **options: Any) -> dict[str, list[dict[str, Any]]]:
    async with Client(target, **options) as client:
        caps = client.server_capabilities
        return {"tools": await client.list_tools() if "tools" in caps else [],
                "prompts": await client.list_prompts() if "prompts" in caps else [],
                "resourceTemplates": await client.list_resource_templates() if "resources" in caps else []}


@pytest.mark.asyncio
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(MEASURED))
async def test_no_real_server_gets_an_error_finding(name: str, tmp_path: Path) -> None:
    argv, options = _target(name, tmp_path)
    if argv is not None:
        listing = await _listing(argv, **options)
    else:
        with serving(peer(name, tmp_path)) as (target, env):
            listing = await _listing(target, env=env or None)
    assert listing["tools"], name  # the server was read, not an empty answer
    found = scan_listing(listing)
    errors = [f.line() for f in found if f.severity == "error"]
    assert not errors, errors
    assert (len(errors), len(found) - len(errors)) == MEASURED[name], [f"{f.rule}: {f.line()}" for f in found]
