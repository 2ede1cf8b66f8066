"""The report: JSON, JUnit XML, the table, the progress line, the command line and its exit code."""

from __future__ import annotations

import io
import json
from xml.etree import ElementTree as ET

import pytest

from mcpkit.check import Report, render_table, run_checks
from mcpkit.check.cli import main
from mcpkit.check.render import Progress
from tests.check.helpers import fixture

REVISION = "2025-11-25"


@pytest.fixture(scope="module")
def report() -> Report:
    """wrong_error_codes at one revision: two error-level failures."""
    import asyncio

    return asyncio.run(run_checks(fixture("wrong_error_codes"), revisions=[REVISION], progress=False))


def test_json_shape(report: Report) -> None:
    data = json.loads(json.dumps(report.to_json()))
    assert set(data) == {"target", "transport", "server", "negotiated", "revisions", "summary", "exit_code",
                         "duration", "findings", "rules"}
    assert data["transport"] == "stdio"
    assert data["negotiated"] == {REVISION: REVISION}
    assert data["revisions"] == [REVISION]
    assert data["exit_code"] == 1
    assert data["server"] == {"name": "fixture", "version": "1.0.0"}
    failed = [f for f in data["findings"] if f["status"] == "fail"]
    assert sorted(f["rule"] for f in failed) == ["errors.invalid-arguments", "errors.unknown-tool"]
    assert all(set(f) >= {"rule", "severity", "status", "message", "revision"} for f in data["findings"])
    assert {f["revision"] for f in failed} == {REVISION}
    assert data["summary"]["fail"] == 2 and data["summary"]["errors"] == 2 and data["summary"]["warnings"] == 0
    unknown = data["rules"]["errors.unknown-tool"]
    assert unknown["severity"] == "error" and unknown["requirements"] == ["TL-10"] and unknown["fix"]


def test_junit_has_one_testcase_per_rule_and_revision(report: Report, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "check.xml"
    report.to_junit(str(path))
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    names = [c.get("name") for c in cases]
    assert len(names) == len(set(names)) == int(suite.get("tests", "0"))
    assert "errors.unknown-tool [2025-11-25]" in names
    assert "lifecycle.negotiation" in names  # a server-wide rule has no revision
    failed = {c.get("name"): c.find("failure") for c in cases if c.find("failure") is not None}
    assert set(failed) == {"errors.unknown-tool [2025-11-25]", "errors.invalid-arguments [2025-11-25]"}
    assert suite.get("failures") == "2"
    failure = failed["errors.unknown-tool [2025-11-25]"]
    assert failure.get("type") == "error"
    assert "requirements: TL-10" in (failure.text or "")
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert suite.get("skipped") == str(len(skipped))


def test_table_lists_failures_with_their_fix(report: Report) -> None:
    text = render_table(report, color=False)
    assert "\x1b[" not in text
    assert "errors.unknown-tool" in text and "FAIL" in text
    assert "[2025-11-25] an unknown tool got -32601 Method not found; it is -32602 Invalid params" in text
    assert "fix: answer tools/call naming a tool you do not have" in text
    last = text.splitlines()[-1]
    assert last.startswith("FAILED  fixture 1.0.0, revisions 2025-11-25 (stdio): ")
    assert "2 error(s), 0 warning(s)" in last
    assert "\x1b[31m" in render_table(report, color=True)


def test_progress_is_drawn_only_when_enabled() -> None:
    shown, hidden = io.StringIO(), io.StringIO()
    with Progress(True, shown) as bar:
        bar.step("tools.name", REVISION)
    with Progress(False, hidden) as bar:
        bar.step("tools.name", REVISION)
    assert "tools.name [2025-11-25]" in shown.getvalue() and shown.getvalue().endswith("\r\x1b[2K")
    assert hidden.getvalue() == ""


def test_cli_exit_codes_json_and_junit(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert main([*fixture("good"), "--revision", REVISION]) == 0
    assert "OK  fixture 1.0.0" in capsys.readouterr().out
    junit = tmp_path / "out.xml"
    code = main([*fixture("wrong_error_codes"), "--json", "--junit", str(junit), "--revision", REVISION])
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    assert data["exit_code"] == 1 and junit.is_file()


def test_cli_warnings_alone_exit_zero(capsys) -> None:  # type: ignore[no-untyped-def]
    """Only error-level failures make the exit code 1: restrict the run to a warning rule that fails."""
    from tests.check.helpers import http_fixture

    with http_fixture("no_host_guard") as url:
        assert main([url, "--rule", "http.host-guard", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert [f["rule"] for f in data["findings"] if f["status"] == "fail"] == ["http.host-guard"]
        assert main([url, "--rule", "http.origin-guard"]) == 1


def test_cli_refuses_an_unknown_revision_and_a_bad_header(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main([*fixture("good"), "--revision", "1999-01-01"]) == 2
    assert "unknown revision '1999-01-01'" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--header wants 'Name: value'"):
        main(["http://127.0.0.1:1/mcp", "--header", "no-colon"])


def test_a_quoted_command_line_is_split() -> None:
    from mcpkit.check.cli import _target

    assert _target(["python server.py --flag"]) == ["python", "server.py", "--flag"]
    assert _target(["python", "server.py"]) == ["python", "server.py"]
    assert _target(["http://127.0.0.1:8000/mcp"]) == "http://127.0.0.1:8000/mcp"
