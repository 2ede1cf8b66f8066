"""examples/openapi_example.py against the design API of tests/bridge/designs_api.py, served locally
with the OpenAPI document FastAPI generates: listed, called, gated, and judged by mcpkit check."""

from __future__ import annotations

import importlib.util
import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.bridge.designs_api import KEY, DesignsApi
from tests.harness import connect

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "openapi_example.py"
_modules = itertools.count()


@pytest.fixture
def api() -> Iterator[DesignsApi]:
    served = DesignsApi().start()
    yield served
    served.stop()


def load(monkeypatch: pytest.MonkeyPatch, api: DesignsApi) -> Any:
    monkeypatch.setenv("DESIGN_API_URL", api.url)
    monkeypatch.setenv("DESIGN_API_KEY", KEY)
    for switch in ("MCPKIT_READ_ONLY", "MCPKIT_ALLOW_DESTRUCTIVE", "MCPKIT_ALLOW_OPEN_WORLD"):
        monkeypatch.delenv(switch, raising=False)
    spec = importlib.util.spec_from_file_location(f"openapi_example_{next(_modules)}", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.asyncio
async def test_the_example_lists_the_reads_and_the_export_and_calls_them(
        monkeypatch: pytest.MonkeyPatch, api: DesignsApi, wire: Any) -> None:
    example = load(monkeypatch, api)
    async with connect(example.server, wire) as h:
        listing = await h.request("tools/list")
        # admin left out; createDesign and deleteDesign destructive, hidden until allowed
        assert sorted(t["name"] for t in listing["tools"]) == ["export_design", "getDesign", "listDesigns"]
        found = await h.request("tools/call", {"name": "listDesigns", "arguments": {}})
        assert [d["id"] for d in found["structuredContent"]["designs"]] == ["d1"]
        url = await h.request("tools/call", {"name": "export_design", "arguments": {"design_id": "d1",
                                                                                    "format": "svg"}})
        assert url["structuredContent"] == {"url": "https://cdn.example/d1.svg"}
        refused = await h.request("tools/call", {"name": "deleteDesign", "arguments": {"design_id": "d1"}})
        assert refused["isError"] is True and "MCPKIT_ALLOW_DESTRUCTIVE" in refused["content"][0]["text"]
    assert "d1" in api.designs


def test_mcpkit_check_passes_for_claude_openai_and_gemini(api: DesignsApi) -> None:
    """The example served as users serve it, judged by `mcpkit check` with the host rules, its
    read-only tools called against the API."""
    env = {**os.environ, "DESIGN_API_URL": api.url, "DESIGN_API_KEY": KEY, "MCPKIT_ALLOW_DESTRUCTIVE": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "mcpkit", "check", "--hosts", "claude,openai,gemini", "--fail-on", "warning",
         "--call-tools", "--pass-env", "DESIGN_API_URL", "--pass-env", "DESIGN_API_KEY", "--pass-env",
         "MCPKIT_ALLOW_DESTRUCTIVE", "--pass-env", "PYTHONPATH", "--no-color", str(EXAMPLE)],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 failed" in run.stdout, run.stdout
    for host in ("Claude", "OpenAI", "Google Gemini"):  # all five, destructive ones allowed here
        assert f"5 tool(s) acceptable to {host}" in run.stdout, run.stdout
    assert ("GET", "/designs", KEY) in api.requests  # a read-only tool, called
