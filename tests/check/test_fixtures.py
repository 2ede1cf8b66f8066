"""``mcpkit check`` on the fixture servers: each broken one fails exactly its fault's rules."""

from __future__ import annotations

import pytest

from mcpkit.check import run_checks
from tests.check.helpers import HANDSHAKE_ONLY, by_rule, fixture, http_fixture

LEGACY = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("good", set()),
        ("stdout_noise", {"stdio.stdout-clean"}),
        ("bad_tool_names", {"tools.name"}),
        ("invalid_schema", {"schema.input-valid"}),
        ("wrong_error_codes", {"errors.unknown-tool", "errors.invalid-arguments"}),
        ("absent_list_changed", {"capabilities.backed"}),
        ("echo_version", {"lifecycle.negotiation"}),
        ("bad_output", {"tools.read-only-output"}),
    ],
)
async def test_a_fixture_fails_exactly_the_rules_of_its_fault(name: str, expected: set[str]) -> None:
    report = await run_checks(fixture(name), call_read_only=True, progress=False)
    assert report.failed_rules() == expected, [f.to_dict() for f in report.failed()]
    assert report.negotiated == HANDSHAKE_ONLY
    assert report.exit_code == (1 if expected else 0)


@pytest.mark.asyncio
async def test_the_good_fixture_passes_every_rule_on_every_revision() -> None:
    report = await run_checks(fixture("good"), call_read_only=True, progress=False)
    per_rule = {rule_id: by_rule(report, rule_id) for rule_id in report.rules}
    everywhere = {v: "pass" for v in LEGACY}
    for rule_id in ("lifecycle.ping", "tools.name", "tools.description", "schema.input-valid",
                    "errors.unknown-tool", "errors.invalid-arguments", "resources.not-found-code",
                    "pagination.cursor", "pagination.invalid-cursor", "capabilities.backed", "stdio.stdout-clean"):
        assert per_rule[rule_id] == everywhere, rule_id
    # outputSchema (and so structuredContent) exists from 2025-06-18, annotations from 2025-03-26
    assert per_rule["schema.output-valid"] == {**everywhere, "2024-11-05": "skip", "2025-03-26": "skip"}
    assert per_rule["tools.read-only-output"] == {**everywhere, "2024-11-05": "skip"}
    assert by_rule(report, "lifecycle.handshake") == everywhere
    assert by_rule(report, "lifecycle.negotiation") == {None: "pass"}
    assert report.server_info == {"name": "fixture", "version": "1.0.0"}


@pytest.mark.asyncio
async def test_stdout_noise_names_the_banner_on_each_revision() -> None:
    report = await run_checks(fixture("stdout_noise"), progress=False)
    failed = report.failed()
    assert sorted(f.revision for f in failed) == LEGACY
    assert {f.detail["lines"][0] for f in failed} == {"Starting the fixture server v1.0 ..."}


@pytest.mark.asyncio
async def test_bad_tool_names_name_the_offending_tools() -> None:
    report = await run_checks(fixture("bad_tool_names"), revisions=["2025-11-25"], progress=False)
    assert sorted(f.message for f in report.failed()) == [
        "tool name 'echo' is used by 2 tools",
        "tool name 'my tool!' is not 1-128 characters of A-Z a-z 0-9 _ - .",
    ]


@pytest.mark.asyncio
async def test_invalid_schemas_name_the_root_type_and_the_bad_keyword() -> None:
    report = await run_checks(fixture("invalid_schema"), revisions=["2025-11-25"], progress=False)
    failed = {f.detail["tool"]: f.message for f in report.failed()}
    assert set(failed) == {"listy", "broken"}
    assert failed["listy"] == "tool 'listy' inputSchema has type 'array' at its root; it must be \"object\""
    assert failed["broken"].startswith("tool 'broken' inputSchema: not a valid JSON Schema: \"x\" is not of type")


@pytest.mark.asyncio
async def test_invalid_arguments_are_judged_by_the_revision() -> None:
    """-32602 is right before 2025-11-25 and wrong from then on (TL-10, SEP-1303)."""
    report = await run_checks(fixture("wrong_error_codes"), progress=False)
    assert by_rule(report, "errors.invalid-arguments") == {
        "2024-11-05": "pass", "2025-03-26": "pass", "2025-06-18": "pass", "2025-11-25": "fail",
    }
    assert by_rule(report, "errors.unknown-tool") == {v: "fail" for v in LEGACY}
    unknown = next(f for f in report.failed() if f.rule == "errors.unknown-tool")
    assert unknown.message == "an unknown tool got -32601 Method not found; it is -32602 Invalid params"


@pytest.mark.asyncio
async def test_absent_capabilities_name_the_missing_methods() -> None:
    report = await run_checks(fixture("absent_list_changed"), revisions=["2025-06-18"], progress=False)
    assert sorted(f.detail["method"] for f in report.failed()) == ["prompts/list", "resources/subscribe"]


@pytest.mark.asyncio
async def test_a_made_up_revision_must_not_be_echoed() -> None:
    report = await run_checks(fixture("echo_version"), progress=False)
    [failure] = report.failed()
    assert failure.message == (
        "offered the made-up revision 2000-01-01, the server echoed it back instead of answering a revision "
        "it supports"
    )


@pytest.mark.asyncio
async def test_a_server_that_does_not_start_fails_the_handshake() -> None:
    report = await run_checks(fixture("no_such_fixture"), revisions=["2025-11-25"], progress=False)
    assert report.failed_rules() == {"lifecycle.handshake"}
    assert by_rule(report, "lifecycle.negotiation") == {None: "skip"}
    assert report.exit_code == 1


@pytest.mark.asyncio
async def test_http_fixture_without_host_and_origin_guards() -> None:
    with http_fixture("no_host_guard") as url:
        report = await run_checks(url, progress=False)
    assert report.failed_rules() == {"http.host-guard", "http.origin-guard"}
    assert report.negotiated == HANDSHAKE_ONLY
    assert by_rule(report, "http.session") == {None: "pass"}
    assert by_rule(report, "http.session-required") == {None: "pass"}
    assert {f.detail["status"] for f in report.failed()} == {200}
    assert report.exit_code == 1  # the Origin guard is error-level; the Host guard a warning


@pytest.mark.asyncio
async def test_output_is_checked_only_when_read_only_tools_may_be_called() -> None:
    quiet = await run_checks(fixture("bad_output"), progress=False)
    assert quiet.failed() == [] and "tools.read-only-output" not in quiet.rules
    report = await run_checks(fixture("bad_output"), call_read_only=True, revisions=["2025-06-18"], progress=False)
    [failure] = report.failed()
    assert failure.detail == {"tool": "add", "arguments": {"a": 0, "b": 0}}
    assert failure.message.startswith("tool 'add' structuredContent does not match the outputSchema: ")
    assert "sum" in failure.message


@pytest.mark.asyncio
async def test_the_conformance_suite_is_optional_and_skipped_without_its_runner(monkeypatch, tmp_path) -> None:
    from mcpkit.check.rules import conformance

    with http_fixture("no_host_guard") as url:
        report = await run_checks(url, rules={"conformance.suite"}, progress=False)
        assert report.findings == []  # not asked for
        monkeypatch.setattr(conformance, "runner_path", lambda: None)
        report = await run_checks(url, rules={"conformance.suite"}, conformance=True, progress=False)
        [skip] = report.findings
        assert skip.status == "skip" and skip.message.startswith("tools/conformance is not available")
        fake = tmp_path / "conformance"
        fake.write_text("#!/bin/sh\necho 'PASS server-initialize (3 checks passed, 0 failed)'\n"
                        "echo 'FAIL dns-rebinding-protection (1 checks passed, 2 failed)'\n"
                        "echo 'conformance: 2 scenarios'\necho 'conformance: 1 passed, 1 failed'\nexit 1\n")
        fake.chmod(0o755)
        monkeypatch.setattr(conformance, "runner_path", lambda: fake)
        monkeypatch.setattr(conformance.shutil, "which", lambda name: "/usr/bin/" + name)
        report = await run_checks(url, rules={"conformance.suite"}, conformance=True, progress=False)
    [failure] = report.findings
    assert failure.status == "fail"
    assert failure.message == "1 of 2 scenarios failed: dns-rebinding-protection"
    assert report.exit_code == 1
