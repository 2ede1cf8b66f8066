"""``mcpkit check`` on the fixture servers: each broken one fails exactly its fault's rules, with the
severity the spec's keyword gives (MUST -> error, SHOULD -> warning, advice -> info)."""

from __future__ import annotations

import sys
import time

import pytest

from mcpkit.check import run_checks
from mcpkit.check.model import EXIT_INFRASTRUCTURE
from tests.check.helpers import FIXTURES, HANDSHAKE_ONLY, by_rule, fixture, http_fixture

LEGACY = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]


def _failed(report) -> set[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return {(f.rule, f.severity) for f in report.failed()}


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("name", "expected", "exit_code"),
    [
        ("good", set(), 0),
        ("no_templates", set(), 0),  # templates are optional within resources (RS-01, RS-03)
        ("broken_templates", {("capabilities.backed", "error")}, 1),  # but served, they must answer
        ("stdout_noise", {("stdio.stdout-clean", "error")}, 1),
        ("bad_tool_names", {("tools.name", "warning")}, 0),
        ("invalid_schema", {("schema.input-valid", "error")}, 1),
        ("wrong_error_codes", {("errors.unknown-tool", "info"), ("errors.invalid-arguments", "warning")}, 0),
        ("absent_list_changed", {("capabilities.backed", "error")}, 1),
        ("echo_version", {("lifecycle.negotiation", "error")}, 1),
        ("bad_output", {("tools.read-only-output", "error")}, 1),
        ("lazy_tools", {("capabilities.list-changed", "warning")}, 0),
        ("answers_notifications", {("protocol.notification-unanswered", "error")}, 1),
        ("ignores_eof", {("stdio.exit-on-eof", "warning")}, 0),
        ("no_ping", {("lifecycle.ping", "error")}, 1),  # and the notification rule's barrier still holds
        ("broken_pages", {("pagination.cursor", "warning")}, 0),
        ("restarts_on_bad_cursor", {("pagination.invalid-cursor", "warning")}, 0),
        ("wrong_not_found_code", {("resources.not-found-code", "warning")}, 0),
        ("no_description", {("tools.description", "info")}, 0),
        ("no_validation", {("tools.input-validated", "error")}, 1),
        ("bad_server_info", {("lifecycle.handshake", "error")}, 1),
        ("invalid_output_schema", {("schema.output-valid", "error")}, 1),
        ("root_one_of", {("hosts.claude", "info"), ("hosts.openai", "info"), ("hosts.gemini", "info")}, 0),
        ("many_tools", {("hosts.openai", "info")}, 0),  # 129 tools; Cursor and VS Code are not default hosts
        ("poisoned", {("security.invisible-characters", "error"), ("security.model-instructions", "error"),
                      ("security.suspicious-instructions", "warning"), ("security.context-parameters", "error"),
                      ("security.secret-parameters", "warning"), ("security.long-description", "warning"),
                      ("hosts.openai", "info")}, 1),  # OpenAI: the long description is over 1024 characters
        ("error_object", {("protocol.error-object", "error")}, 1),
        ("result_and_error", {("protocol.result-or-error", "error")}, 1),
        ("progress_foreign_token", {("progress.token", "error")}, 1),
        ("progress_down", {("progress.increases", "error")}, 1),
        ("prompts_undeclared", {("capabilities.declared", "error")}, 1),
        ("tasks_unbacked", {("capabilities.backed", "error")}, 1),
        ("task_required_base", set(), 0),
        ("task_required_runs", {("tasks.required", "error")}, 1),
        ("templates_base", set(), 0),
        ("templates_unserved", {("resources.templates-served", "info")}, 0),
        ("read_other_uri", {("resources.read-uri", "info")}, 0),
    ],
)
async def test_a_fixture_fails_exactly_the_rules_of_its_fault(
    name: str, expected: set[tuple[str, str]], exit_code: int,
) -> None:
    report = await run_checks(fixture(name), call_read_only=True, progress=False)
    assert _failed(report) == expected, [f.to_dict() for f in report.failed()]
    assert report.negotiated == HANDSHAKE_ONLY
    assert report.exit_code == exit_code
    if expected:  # a warning or info fails the run when asked to
        report.fail_on = "info"
        assert report.exit_code == 1


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("name", "safe", "expected", "called"),
    [
        # the correct twin: the list change is announced, the missing id refused
        ("plugin_base", ("install_plugin", "delete_*"), set(), {"install_plugin", "delete_note"}),
        ("plugin_silent", ("install_plugin",), {("capabilities.list-changed", "warning")}, {"install_plugin"}),
        ("plugin_unvalidated", ("delete_note",), {("tools.input-validated", "error")}, {"delete_note"}),
        # not marked safe: neither tool is called (not read-only), so neither fault can show
        ("plugin_silent", (), set(), set()),
        ("plugin_unvalidated", (), set(), set()),
    ],
)
async def test_tools_marked_safe_are_called_and_show_their_faults(
    name: str, safe: tuple[str, ...], expected: set[tuple[str, str]], called: set[str],
) -> None:
    """--safe-tool NAME lets the checker call a tool that is not read-only: a list it changes
    without list_changed, or its missing required argument accepted, is then named."""
    report = await run_checks(fixture(name), safe_tools=safe, progress=False)
    assert _failed(report) == expected, [f.to_dict() for f in report.failed()]
    assert {t["tool"] for t in report.tools_called} == called


@pytest.mark.asyncio
async def test_the_good_fixture_passes_every_rule_on_every_revision() -> None:
    report = await run_checks(fixture("good"), call_read_only=True, progress=False)
    per_rule = {rule_id: by_rule(report, rule_id) for rule_id in report.rules}
    everywhere = {v: "pass" for v in LEGACY}
    for rule_id in ("lifecycle.ping", "tools.description", "schema.input-valid", "errors.unknown-tool",
                    "resources.not-found-code", "pagination.cursor", "pagination.invalid-cursor",
                    "capabilities.backed", "protocol.notification-unanswered"):
        assert per_rule[rule_id] == everywhere, rule_id
    # annotations (readOnlyHint) exist from 2025-03-26: the invalid-argument call needs them
    assert per_rule["tools.input-validated"] == {**everywhere, "2024-11-05": "skip"}
    # TL-06 and the isError rule for invalid arguments are 2025-11-25 requirements
    assert per_rule["tools.name"] == {"2025-11-25": "pass"}
    assert per_rule["errors.invalid-arguments"] == {"2025-11-25": "pass"}
    # outputSchema (and so structuredContent) exists from 2025-06-18
    assert per_rule["schema.output-valid"] == {"2025-06-18": "pass", "2025-11-25": "pass"}
    assert per_rule["tools.read-only-output"] == {"2025-06-18": "pass", "2025-11-25": "pass"}
    assert per_rule["capabilities.list-changed"] == {v: "skip" for v in LEGACY}  # no listChanged declared
    assert by_rule(report, "lifecycle.handshake") == everywhere
    assert by_rule(report, "lifecycle.negotiation") == {None: "pass"}
    assert by_rule(report, "stdio.exit-on-eof") == {None: "pass"}
    assert by_rule(report, "stdio.framing") == {**everywhere, None: "pass"}  # None: the made-up revision
    assert report.server_info == {"name": "fixture", "version": "1.0.0"}
    assert {t["tool"] for t in report.tools_called} == {"add", "echo"}  # both annotated readOnlyHint


@pytest.mark.asyncio
async def test_stdout_noise_names_the_banner_on_each_revision() -> None:
    report = await run_checks(fixture("stdout_noise"), progress=False)
    failed = report.failed()
    # every process printed it: the four handshakes, the refused 2026-07-28 probe, the made-up revision
    assert sorted(str(f.revision) for f in failed) == sorted([*LEGACY, "2026-07-28", "None"])
    assert {f.detail["lines"][0] for f in failed} == {"Starting the fixture server v1.0 ..."}


@pytest.mark.req("ST-01")
@pytest.mark.asyncio
async def test_pretty_printed_json_is_reported_as_such_at_once() -> None:
    """ST-01: the handshake answer spread over 20 lines is named, not "no answer within 10 s"; the
    run stops after the first connection instead of waiting once per revision."""
    started = time.monotonic()
    report = await run_checks(fixture("pretty_printed"), progress=False)
    assert time.monotonic() - started < 8  # far below one 10 s request timeout
    assert _failed(report) == {("stdio.framing", "error")}
    [failure] = report.failed()
    assert failure.revision == "2025-11-25"
    assert failure.message.startswith("1 JSON-RPC message(s) pretty-printed over several lines (the first, id 1, ")
    assert "the handshake answer was among them" in failure.message
    assert report.exit_code == 1 and report.error is None
    assert report.notes and "the other revisions were not tried" in report.notes[0]


@pytest.mark.asyncio
async def test_an_id_echoed_as_a_string_is_named_at_once_not_waited_for() -> None:
    """A server answering request 1 with the id "1": the handshake fails at once, named by
    protocol.response-id (not "no answer within 10 s", not a handshake failure)."""
    started = time.monotonic()
    report = await run_checks(fixture("string_ids"), revisions=["2025-11-25"], progress=False)
    assert time.monotonic() - started < 8  # far below one 10 s request timeout
    [failure] = report.failed()
    assert (failure.rule, failure.revision) == ("protocol.response-id", "2025-11-25")
    assert failure.message.startswith("a response carries the id '1' (a str); the requests were numbered with "
                                      "integers")
    assert report.exit_code == 1 and report.error is None


@pytest.mark.asyncio
async def test_an_id_echoed_as_a_string_on_an_sse_stream_is_named_too() -> None:
    """Over Streamable HTTP the misnumbered answer comes on a stream that then ends: it still is the
    answer (named by protocol.response-id), not "the stream ended before its answer"."""
    with http_fixture("string_ids_sse") as url:
        report = await run_checks(url, progress=False)
    assert _failed(report) == {("protocol.response-id", "error")}, [f.to_dict() for f in report.failed()]
    assert {f.revision for f in report.failed()} == set(LEGACY)
    assert report.exit_code == 1 and report.error is None


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
    """Before 2025-11-25 -32602 and an isError result are both allowed; from then on it is isError
    (TL-10, SEP-1303), a SHOULD: a warning."""
    report = await run_checks(fixture("wrong_error_codes"), call_read_only=True, progress=False)
    assert by_rule(report, "errors.invalid-arguments") == {"2025-11-25": "fail"}
    assert by_rule(report, "tools.input-validated") == {"2024-11-05": "skip", "2025-03-26": "pass",
                                                        "2025-06-18": "pass", "2025-11-25": "pass"}
    assert by_rule(report, "errors.unknown-tool") == {v: "fail" for v in LEGACY}
    unknown = next(f for f in report.failed() if f.rule == "errors.unknown-tool")
    assert unknown.message == "an unknown tool got -32601 Method not found; it is -32602 Invalid params"
    assert unknown.severity == "info"  # the spec states it with no RFC 2119 keyword


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


@pytest.mark.req("TL-13")
@pytest.mark.asyncio
async def test_a_list_that_changes_without_its_notification_is_named() -> None:
    report = await run_checks(fixture("lazy_tools"), revisions=["2025-11-25"], progress=False)
    [failure] = report.failed()
    assert failure.message == ("tools/list changed during the connection (added ['plugin_status']) without "
                               "notifications/tools/list_changed")


@pytest.mark.req("BP-09")
@pytest.mark.asyncio
async def test_an_answered_notification_shows_the_answer() -> None:
    report = await run_checks(fixture("answers_notifications"), revisions=["2025-11-25"], progress=False)
    [failure] = report.failed()
    assert failure.message == "1 response(s) to notifications (error -32601, id None)"


@pytest.mark.req("ST-07")
@pytest.mark.asyncio
async def test_a_server_that_ignores_eof_is_terminated_and_reported() -> None:
    report = await run_checks(fixture("ignores_eof"), revisions=["2025-11-25"], progress=False)
    [failure] = report.failed()
    assert failure.rule == "stdio.exit-on-eof" and failure.severity == "warning"
    assert failure.message.startswith("the server was still running ")
    assert "s after its stdin was closed (1 of 1 processes) and had to be terminated" in failure.message


@pytest.mark.asyncio
async def test_a_server_that_does_not_start_is_an_infrastructure_failure() -> None:
    report = await run_checks(["/nonexistent/mcp-server"], progress=False)
    assert report.exit_code == EXIT_INFRASTRUCTURE
    assert report.error is not None and report.error.startswith("could not start the server: ")
    assert report.failed() == []  # not a compliance finding
    assert list(report.negotiated) == ["2025-11-25"]  # one launch, not six


@pytest.mark.asyncio
async def test_a_server_that_crashes_before_answering_is_an_infrastructure_failure() -> None:
    command = [sys.executable, "-c", "import sys; sys.stderr.write('missing API_KEY\\n'); sys.exit(3)"]
    report = await run_checks(command, progress=False)
    assert report.exit_code == EXIT_INFRASTRUCTURE
    assert report.error is not None and "exited before answering" in report.error and "missing API_KEY" in report.error
    assert report.failed() == []


@pytest.mark.asyncio
async def test_a_refused_connection_is_an_infrastructure_failure() -> None:
    from tests.test_http import free_port

    url = f"http://127.0.0.1:{free_port()}/mcp"
    report = await run_checks(url, progress=False)
    assert report.exit_code == EXIT_INFRASTRUCTURE
    assert report.error is not None and report.error.startswith(f"could not connect to {url}")
    assert report.failed() == []


@pytest.mark.asyncio
async def test_the_deadline_bounds_the_worst_server() -> None:
    """A server that never answers and ignores EOF: without a deadline one request timeout (10 s)
    plus the EOF grace; with --deadline 2 the run ends near 2 s."""
    started = time.monotonic()
    report = await run_checks(fixture("hangs"), deadline=2.0, progress=False)
    took = time.monotonic() - started
    assert took < 2.0 + 6.0  # the deadline, then at most the process's termination
    assert report.incomplete == "the --deadline of 2 s ran out"
    assert report.exit_code == EXIT_INFRASTRUCTURE


@pytest.mark.asyncio
async def test_a_deadline_keeps_what_ran_and_lists_what_did_not() -> None:
    """A server that hangs on its first ping: at the deadline the connections are stopped
    and their processes killed, the findings of the rules that ran before the hang are reported,
    and every rule that did not run is listed as skipped ("not run")."""
    started = time.monotonic()
    report = await run_checks(fixture("hangs_on_ping"), deadline=5.0, progress=False)
    assert time.monotonic() - started < 5.0 + 4.0  # the deadline, then at most the kill
    assert report.incomplete == "the --deadline of 5 s ran out"
    assert report.exit_code == EXIT_INFRASTRUCTURE
    judged = [f for f in report.findings if f.status in ("pass", "fail")]
    not_run = [f for f in report.findings if f.status == "skip" and f.message == f"not run: {report.incomplete}"]
    assert {f.revision for f in judged} >= set(LEGACY)  # each connection's rules before the hang
    assert {f.revision for f in not_run} >= {*LEGACY, None}  # the rest, and the server rules
    assert "stdio.exit-on-eof" in {f.rule for f in not_run if f.revision is None}
    for revision in LEGACY:  # every rule of every revision is accounted for, as run or as not run
        listed = {f.rule for f in report.findings if f.revision == revision}
        assert listed >= {rid for rid, r in report.rules.items() if r.scope == "connection" and r.applies_to(revision)}


@pytest.mark.asyncio
async def test_http_fixture_without_host_and_origin_guards() -> None:
    with http_fixture("no_host_guard") as url:
        report = await run_checks(url, progress=False)
    assert _failed(report) == {("http.host-guard", "info"), ("http.origin-guard", "error")}
    assert report.negotiated == HANDSHAKE_ONLY
    for rule_id in ("http.session", "http.session-unknown", "http.session-required", "http.notification-accepted",
                    "http.protocol-version-header"):
        assert by_rule(report, rule_id) == {None: "pass"}, rule_id
    assert {f.detail["status"] for f in report.failed()} == {200}
    assert report.exit_code == 1  # the Origin guard is a MUST; the Host guard is advice


@pytest.mark.req("HL-04", "HL-19")
@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("name", "rule_id", "message"),
    [
        ("notification_body", "http.notification-accepted",
         "a notification got HTTP 200 (application/json); an accepted notification gets 202 with no body"),
        ("version_header_ignored", "http.protocol-version-header",
         "a request with MCP-Protocol-Version: 1999-01-01 got HTTP 200; expected 400"),
        ("text_plain", "http.content-type",
         "initialize was answered HTTP 200 with Content-Type: text/plain; charset=utf-8; a request's answer is "
         "application/json or text/event-stream"),
        ("get_json", "http.get-stream",
         "GET on the endpoint got HTTP 200 with Content-Type: application/json; it is an SSE stream "
         "(text/event-stream) or 405"),
    ],
)
async def test_http_fixtures_fail_their_must(name: str, rule_id: str, message: str) -> None:
    with http_fixture(name) as url:
        report = await run_checks(url, progress=False)
    [failure] = report.failed()
    assert (failure.rule, failure.severity, failure.message) == (rule_id, "error", message)
    assert report.exit_code == 1


@pytest.mark.asyncio
async def test_the_guarded_http_fixture_passes() -> None:
    with http_fixture("http_base") as url:
        report = await run_checks(url, progress=False)
    assert report.failed() == [], [f.to_dict() for f in report.failed()]
    assert report.exit_code == 0
    for rule_id in ("http.content-type", "http.session-id", "http.get-stream"):
        assert by_rule(report, rule_id) == {None: "pass"}, rule_id


@pytest.mark.asyncio
async def test_a_session_id_with_a_space_is_named() -> None:
    with http_fixture("session_id_space") as url:
        report = await run_checks(url, progress=False)
    [failure] = report.failed()
    assert (failure.rule, failure.severity) == ("http.session-id", "error")
    assert failure.message.startswith("the session id 'session ") and failure.message.endswith(
        "' holds U+0020; only visible ASCII (0x21 to 0x7E) is allowed")


@pytest.mark.asyncio
async def test_output_is_checked_only_when_read_only_tools_may_be_called() -> None:
    quiet = await run_checks(fixture("bad_output"), progress=False)
    assert quiet.failed() == [] and "tools.read-only-output" not in quiet.rules and quiet.tools_called == []
    report = await run_checks(fixture("bad_output"), call_read_only=True, revisions=["2025-06-18"], progress=False)
    [failure] = report.failed()
    assert failure.detail == {"tool": "add", "arguments": {"a": 0, "b": 0}}
    assert failure.message.startswith("tool 'add' structuredContent does not match the outputSchema: ")
    assert "sum" in failure.message and failure.severity == "error"
    assert {t["tool"] for t in report.tools_called} == {"add", "echo"}


@pytest.mark.asyncio
async def test_a_tool_not_annotated_read_only_is_never_called() -> None:
    """The fixture's tools carry readOnlyHint from 2025-03-26 on; at 2024-11-05 there are no
    annotations, so nothing is called, even with --call-tools."""
    report = await run_checks(fixture("good"), call_read_only=True, revisions=["2024-11-05"], progress=False)
    assert report.tools_called == []
    assert by_rule(report, "tools.input-validated") == {"2024-11-05": "skip"}


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


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("name", "expected", "message"),
    [
        ("good", set(), None),
        ("negative_ttl", {("caching.ttl", "error")}, "tools/list page 2 carries ttlMs -1; it is an integer of 0 or more"),
        ("scope_per_page", {("caching.scope", "error")},
         "tools/list changes its cacheScope between pages (page 1: 'public', page 2: 'private')"),
    ],
)
async def test_caching_hints_are_judged_on_2026_07_28(
    name: str, expected: set[tuple[str, str]], message: str | None,
) -> None:
    """2026-07-28 caching hints: ttlMs is never negative (CA-02) and one list keeps one cacheScope
    over its pages (CA-04); the revisions without hints are not judged."""
    sys.path.insert(0, str(FIXTURES))
    try:
        import cache_hints
    finally:
        sys.path.remove(str(FIXTURES))
    report = await run_checks(getattr(cache_hints, name)(), progress=False)
    assert _failed(report) == expected, [f.to_dict() for f in report.failed()]
    assert {f.revision for f in report.findings if f.rule.startswith("caching.")} == {"2026-07-28"}
    if message is not None:
        assert message in {f.message for f in report.failed()}
    else:
        assert by_rule(report, "caching.ttl") == by_rule(report, "caching.scope") == {"2026-07-28": "pass"}
