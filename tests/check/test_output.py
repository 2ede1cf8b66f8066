"""The report: JSON, JUnit XML, SARIF 2.1.0, the table, the progress line, the command line, its
options and its exit codes (0 clean, 1 findings, 2 the checker could not do its job)."""

from __future__ import annotations

import io
import json
from xml.etree import ElementTree as ET

import jsonschema
import pytest

from mcpkit.check import Report, render_table, run_checks
from mcpkit.check.cli import main
from mcpkit.check.formats import junit_xml, sarif
from mcpkit.check.render import Progress
from tests.check.helpers import fixture

REVISION = "2025-11-25"

#: the part of the SARIF 2.1.0 schema (sarif-schema-2.1.0.json, OASIS) that code-scanning UIs read,
#: written down with the schema's own property names, types and enums
SARIF_SHAPE = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "$schema": {"type": "string", "format": "uri"},
        "version": {"const": "2.1.0"},
        "runs": {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "required": ["tool"],
            "properties": {
                "tool": {"type": "object", "required": ["driver"], "properties": {"driver": {
                    "type": "object", "required": ["name"],
                    "properties": {
                        "name": {"type": "string"}, "version": {"type": "string"},
                        "informationUri": {"type": "string"},
                        "rules": {"type": "array", "items": {
                            "type": "object", "required": ["id"],
                            "properties": {
                                "id": {"type": "string"},
                                "shortDescription": {"$ref": "#/$defs/message"},
                                "fullDescription": {"$ref": "#/$defs/message"},
                                "help": {"$ref": "#/$defs/message"},
                                "helpUri": {"type": "string"},
                                "defaultConfiguration": {"type": "object", "properties": {
                                    "level": {"enum": ["none", "note", "warning", "error"]}}},
                                "properties": {"type": "object"},
                            },
                        }},
                    },
                }}},
                "invocations": {"type": "array", "items": {
                    "type": "object", "required": ["executionSuccessful"],
                    "properties": {"executionSuccessful": {"type": "boolean"}, "exitCode": {"type": "integer"}},
                }},
                "results": {"type": "array", "items": {
                    "type": "object", "required": ["message"],
                    "properties": {
                        "ruleId": {"type": "string"},
                        "ruleIndex": {"type": "integer", "minimum": -1},
                        "level": {"enum": ["none", "note", "warning", "error"]},
                        "message": {"$ref": "#/$defs/message"},
                        "baselineState": {"enum": ["new", "unchanged", "updated", "absent"]},
                        "locations": {"type": "array", "items": {"type": "object", "properties": {
                            "physicalLocation": {"type": "object", "properties": {
                                "artifactLocation": {"type": "object", "properties": {"uri": {"type": "string"}}}}},
                            "logicalLocations": {"type": "array", "items": {"type": "object"}},
                        }}},
                    },
                }},
            },
        }},
    },
    "$defs": {"message": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}},
}


@pytest.fixture(scope="module")
def report() -> Report:
    """wrong_error_codes at one revision, tools called: two warning-level failures."""
    import asyncio

    return asyncio.run(run_checks(fixture("wrong_error_codes"), revisions=[REVISION], call_read_only=True,
                                  progress=False))


def test_json_shape(report: Report) -> None:
    data = json.loads(json.dumps(report.to_json()))
    assert set(data) == {"target", "transport", "server", "negotiated", "revisions", "summary", "exit_code",
                         "duration", "findings", "rules", "fail_on", "error", "incomplete", "notes", "tools_called"}
    assert data["transport"] == "stdio"
    assert data["negotiated"] == {REVISION: REVISION}
    assert data["exit_code"] == 0 and data["fail_on"] == "error"  # warnings only
    assert data["server"] == {"name": "fixture", "version": "1.0.0"}
    failed = [f for f in data["findings"] if f["status"] == "fail"]
    assert sorted(f["rule"] for f in failed) == ["errors.invalid-arguments", "errors.unknown-tool"]
    assert all(set(f) >= {"rule", "severity", "status", "message", "revision"} for f in data["findings"])
    assert {f["revision"] for f in failed} == {REVISION}
    summary = data["summary"]
    assert summary["fail"] == 2 and summary["errors"] == 0 and summary["warnings"] == 1 and summary["infos"] == 1
    unknown = data["rules"]["errors.unknown-tool"]  # no RFC 2119 keyword in the spec: advice
    assert unknown["severity"] == "info" and unknown["keyword"] == "advice" and unknown["requirements"] == ["TL-10"]
    assert data["tools_called"][0] == {"tool": "add", "revision": REVISION,
                                       "why": "arguments missing their required properties"}
    assert {t["tool"] for t in data["tools_called"]} == {"add", "echo"}  # both annotated readOnlyHint


def test_junit_agrees_with_the_exit_code(report: Report) -> None:
    root = ET.fromstring(junit_xml(report))
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    names = [c.get("name") for c in cases]
    assert len(names) == len(set(names)) == int(suite.get("tests", "0"))
    assert "errors.unknown-tool [2025-11-25]" in names
    assert "lifecycle.negotiation" in names  # a server-wide rule has no revision
    assert all(float(c.get("time", "-1")) >= 0 for c in cases)
    # warnings do not fail the run at --fail-on error: no <failure>, the message in <system-out>
    assert suite.get("failures") == "0"
    unknown = next(c for c in cases if c.get("name") == "errors.unknown-tool [2025-11-25]")
    assert "info: an unknown tool got -32601" in (unknown.findtext("system-out") or "")
    report.fail_on = "info"
    try:
        suite = ET.fromstring(junit_xml(report)).find("testsuite")
    finally:
        report.fail_on = "error"
    assert suite is not None and suite.get("failures") == "2"
    failure = next(c for c in suite.findall("testcase") if c.get("name") == "errors.unknown-tool [2025-11-25]")
    node = failure.find("failure")
    assert node is not None and node.get("type") == "info"
    assert "requirements: TL-10 (advice)" in (node.text or "")
    skipped = [c for c in suite.findall("testcase") if c.find("skipped") is not None]
    assert suite.get("skipped") == str(len(skipped))


def test_sarif_has_the_shape_of_sarif_2_1_0(report: Report) -> None:
    log = sarif(report)
    jsonschema.validate(log, SARIF_SHAPE)
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted(report.rules)
    levels = {r["id"]: r["defaultConfiguration"]["level"] for r in rules}
    assert levels["errors.invalid-arguments"] == "warning" and levels["errors.unknown-tool"] == "note"
    assert {r["ruleId"] for r in run["results"]} == {"errors.unknown-tool", "errors.invalid-arguments"}
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["message"]["text"].startswith("[2025-11-25] ")
    assert run["invocations"] == [{"executionSuccessful": True, "exitCode": 0}]


def test_sarif_of_a_run_that_could_not_start() -> None:
    bad = Report(target="x", transport="stdio", error="could not start the server: 'x': not found")
    log = sarif(bad)
    jsonschema.validate(log, SARIF_SHAPE)
    [invocation] = log["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 2
    root = ET.fromstring(junit_xml(bad))
    assert root.get("errors") == "1"


def test_table_lists_failures_with_their_fix(report: Report) -> None:
    text = render_table(report, color=False)
    assert "\x1b[" not in text
    assert "errors.unknown-tool" in text and "FAIL" in text
    assert "[2025-11-25] an unknown tool got -32601 Method not found; it is -32602 Invalid params" in text
    assert "fix: answer tools/call naming a tool you do not have" in text
    assert "tools called: add" in text
    last = text.splitlines()[-1]
    assert last.startswith("OK  fixture 1.0.0, revisions 2025-11-25 (stdio): ")
    assert "0 error(s), 1 warning(s), 1 info" in last
    assert "\x1b[33m" in render_table(report, color=True)


def test_progress_is_drawn_only_when_enabled() -> None:
    shown, hidden = io.StringIO(), io.StringIO()
    with Progress(True, shown) as bar:
        bar.step("tools.name", REVISION)
    with Progress(False, hidden) as bar:
        bar.step("tools.name", REVISION)
    assert "tools.name [2025-11-25]" in shown.getvalue() and shown.getvalue().endswith("\r\x1b[2K")
    assert hidden.getvalue() == ""


def test_safe_tool_with_no_tool_calls_is_one_line_and_exit_2(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main([*fixture("good"), "--no-tool-calls", "--safe-tool", "echo"]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "--no-tool-calls and --safe-tool contradict each other" in err


def test_cli_exit_codes_and_formats(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert main([*fixture("good"), "--revision", REVISION]) == 0
    assert "OK  fixture 1.0.0" in capsys.readouterr().out
    junit = tmp_path / "out.xml"
    code = main([*fixture("absent_list_changed"), "--format", "json", "--junit", str(junit), "--revision", REVISION])
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    assert data["exit_code"] == 1 and ET.parse(junit).getroot().get("failures") == "1"
    out = tmp_path / "check.sarif"
    assert main([*fixture("absent_list_changed"), "--format", "sarif", "-o", str(out), "--revision", REVISION]) == 1
    jsonschema.validate(json.loads(out.read_text()), SARIF_SHAPE)


def test_cli_fail_on_and_skip(capsys) -> None:  # type: ignore[no-untyped-def]
    args = [*fixture("wrong_error_codes"), "--revision", REVISION]
    assert main(args) == 0  # advice (info): an unknown tool got -32601
    assert main([*args, "--fail-on", "warning"]) == 0
    assert main([*args, "--fail-on", "info"]) == 1
    assert main([*args, "--fail-on", "info", "--skip", "errors"]) == 0  # a family
    assert main([*args, "--fail-on", "info", "--rule", "lifecycle.ping"]) == 0
    assert main([*args, "--fail-on", "warning", "--call-tools"]) == 1  # invalid arguments: a SHOULD
    capsys.readouterr()


def test_cli_baseline_lets_known_findings_pass_and_new_ones_fail(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    baseline = tmp_path / "baseline.json"
    assert main([*fixture("absent_list_changed"), "--revision", REVISION, "--format", "json",
                 "-o", str(baseline)]) == 1
    assert main([*fixture("absent_list_changed"), "--revision", REVISION, "--baseline", str(baseline)]) == 0
    assert "(in the baseline)" in capsys.readouterr().out
    # a server with another fault: its failures are new
    assert main([*fixture("invalid_schema"), "--revision", REVISION, "--baseline", str(baseline)]) == 1
    capsys.readouterr()


@pytest.mark.parametrize("option", ["--rule", "--skip"])
def test_cli_refuses_an_unknown_rule_with_exit_code_2(option: str, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main([*fixture("good"), option, "tools.nmae"]) == 2
    err = capsys.readouterr().err
    assert "unknown rule 'tools.nmae'" in err and "--list-rules" in err


def test_cli_infrastructure_failures_exit_2_without_advice(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["/nonexistent/mcp-server --stdio"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no table, no "fix:" advice
    assert captured.err.startswith("mcpkit check: could not start the server: ")


def test_cli_refuses_an_unknown_revision_a_bad_header_and_a_bad_baseline(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert main([*fixture("good"), "--revision", "1999-01-01"]) == 2
    assert "unknown revision '1999-01-01'" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--header wants 'Name: value'"):
        main(["http://127.0.0.1:1/mcp", "--header", "no-colon"])
    (tmp_path / "b.json").write_text("[1, 2]")
    assert main([*fixture("good"), "--baseline", str(tmp_path / "b.json")]) == 2
    assert "has no findings list" in capsys.readouterr().err
    assert main([*fixture("good"), "--sse"]) == 2


def test_cli_list_rules(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["--list-rules"]) == 0
    text = capsys.readouterr().out
    assert "stdio.exit-on-eof" in text and "SHOULD" in text and "ST-07" in text
    assert main(["--list-rules", "--format", "json"]) == 0
    listed = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert listed["http.origin-guard"]["severity"] == "error" and listed["http.origin-guard"]["keyword"] == "MUST"
    assert listed["resources.not-found-code"]["keywords"] == {"2026-07-28": "MUST"}


def test_cli_quick_checks_one_revision(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main([*fixture("good"), "--quick", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["negotiated"] == {"2025-11-25": "2025-11-25"} and data["revisions"] == ["2025-11-25"]


def test_a_quoted_command_line_is_split() -> None:
    from mcpkit.check.cli import _target

    assert _target(["python server.py --flag"]) == ["python", "server.py", "--flag"]
    assert _target(["python", "server.py"]) == ["python", "server.py"]
    assert _target(["http://127.0.0.1:8000/mcp"]) == "http://127.0.0.1:8000/mcp"


def test_table_shows_the_skip_reason_most_revisions_share() -> None:
    # `mcpkit check weather.py` showed "no tool annotated readOnlyHint: true has required
    # properties" (true only of 2024-11-05, which has no annotations) for a read-only tool, and
    # hid the reason of the four other revisions: "pass --call-tools"
    from mcpkit.check.model import Finding

    report = Report(target="weather.py", transport="stdio")
    report.findings = [Finding("tools.input-validated", "error", "skip", "no tool annotated readOnlyHint",
                               "2024-11-05")]
    report.findings += [Finding("tools.input-validated", "error", "skip", "calling tools is off (pass --call-tools)",
                                rev) for rev in ("2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")]
    line = next(x for x in render_table(report).splitlines() if "tools.input-validated" in x)
    assert line.endswith("calling tools is off (pass --call-tools) (4 revisions)"), line
