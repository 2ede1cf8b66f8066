"""``mcpkit check`` on mcpkit's own servers: the reference server (stdio, HTTP, in memory) and the
workspace example pass every rule."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.check import run_checks
from mcpkit.protocol.revisions import SUPPORTED_VERSIONS
from tests.check.helpers import by_rule
from tests.conftest import mcpkit_command
from tests.test_http import start_server, stop_server

WORKSPACE = Path(__file__).resolve().parents[2] / "examples" / "workspace.py"
EVERY_REVISION = {v: v for v in SUPPORTED_VERSIONS}
#: what the checks on our servers verify about them
CHECKED = ("LC-01", "LC-02", "PG-01", "PG-03", "VN-03", "TL-05", "TL-06", "TL-07", "TL-10", "JS-04", "RS-08",
           "LC-06", "PA-01")


#: what the conformance suite's contract makes the reference server offer, as host advice: the
#: tool name it requires is 65 characters under Claude Code's mcp__<server>__ prefix, and its
#: 2020-12 $schema tool exists to test that dialect, which Gemini CLI's draft-07 validator refuses
CONTRACT_WARNINGS = {("hosts.claude", "test_input_required_result_multiple_inputs"),
                     ("hosts.gemini", "json_schema_2020_12_tool")}


def _no_failures(report, allowed: set[tuple[str, str]] = frozenset()) -> None:  # type: ignore[no-untyped-def]
    failed = [f for f in report.failed()
              if not (f.severity == "info" and {(f.rule, t) for t in f.detail.get("tools", ())} <= allowed)]
    assert failed == [], [f.to_dict() for f in failed]
    assert report.negotiated == EVERY_REVISION
    assert report.exit_code == 0


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    proc, port = start_server()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_server(proc)


@pytest.mark.asyncio
@pytest.mark.req(*CHECKED, "ST-02")
async def test_the_reference_server_on_stdio_passes() -> None:
    report = await run_checks(mcpkit_command("serve"), call_read_only=True, progress=False)
    _no_failures(report, CONTRACT_WARNINGS)
    # None: the connection offering a made-up revision
    assert by_rule(report, "stdio.stdout-clean") == {**{v: "pass" for v in SUPPORTED_VERSIONS}, None: "pass"}
    assert by_rule(report, "stdio.exit-on-eof") == {None: "pass"}
    assert by_rule(report, "resources.not-found-code") == {v: "pass" for v in SUPPORTED_VERSIONS}
    assert by_rule(report, "tools.read-only-output")["2025-11-25"] == "pass"
    assert report.server_info is not None and report.server_info["name"] == "mcpkit-reference"


@pytest.mark.asyncio
@pytest.mark.req(*CHECKED, "HS-01", "HS-02", "HL-16", "HL-17", "HL-18")
async def test_the_reference_server_over_http_passes(http_url: str) -> None:
    report = await run_checks(http_url, call_read_only=True, progress=False)
    _no_failures(report, CONTRACT_WARNINGS)
    for rule_id in ("http.host-guard", "http.origin-guard", "http.session", "http.session-unknown",
                    "http.session-required", "http.notification-accepted", "http.protocol-version-header"):
        assert by_rule(report, rule_id) == {None: "pass"}, rule_id
    assert "stdio.stdout-clean" not in report.rules


@pytest.mark.asyncio
async def test_the_workspace_example_passes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "notes.txt").write_text("hello\n")
    command = mcpkit_command("serve", str(WORKSPACE), "--root", str(tmp_path))
    report = await run_checks(command, call_read_only=True, progress=False)
    _no_failures(report)
    assert report.server_info is not None and report.server_info["name"] == "workspace"
    assert by_rule(report, "schema.output-valid")["2025-11-25"] == "pass"


@pytest.mark.asyncio
async def test_an_in_memory_server_is_checked_without_the_transport_rules() -> None:
    from mcpkit.reference import server

    report = await run_checks(server, progress=False)
    _no_failures(report, CONTRACT_WARNINGS)
    assert report.transport == "memory"
    assert not any(r.startswith(("stdio.", "http.")) for r in report.rules)


def test_the_reference_server_over_legacy_sse_with_the_cli(capsys) -> None:  # type: ignore[no-untyped-def]
    """--sse checks an HTTP+SSE endpoint (2024-11-05) like `mcpkit list --sse` reaches one."""
    from mcpkit.check.cli import main

    proc, port = start_server()
    try:
        assert main([f"http://127.0.0.1:{port}/sse", "--sse", "--format", "json"]) == 0
    finally:
        stop_server(proc)
    import json

    data = json.loads(capsys.readouterr().out)
    assert data["transport"] == "sse" and data["exit_code"] == 0
    assert data["negotiated"]["2024-11-05"] == "2024-11-05"
    assert not any(rule.startswith(("http.", "stdio.")) for rule in data["rules"])
