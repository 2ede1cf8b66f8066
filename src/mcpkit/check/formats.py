"""The report in the formats CI systems read (JUnit XML, SARIF 2.1.0), and the rule list
(``--list-rules``, and docs/rules.md, which is generated from the rules)."""

from __future__ import annotations

import json
import os
from typing import Any
from xml.etree import ElementTree as ET

from .model import FRAMEWORKS, Report, Rule, severity_of
from .registry import all_rules

__all__ = ["junit_xml", "write_junit", "sarif", "rules_listing", "rules_markdown", "reproduce", "SARIF_SCHEMA"]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_INFO_URI = "https://github.com/mcpkit/mcpkit/blob/main/docs/rules.md"
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
#: where the servers of Rule.example are, and the port docs/rules.md starts an HTTP one on
FIXTURES = "tests/check/fixtures"
_PORT = 8000
#: the option that runs a rule that runs only when asked for (runner.OPTIONAL)
#: and the rules that need a tool called (--call-tools lets them call the read-only ones)
_ASKED = {"tools.read-only-output": "--call-tools", "conformance.suite": "--conformance",
          "security.pin-drift": "--pin mcp-lock.json", "errors.invalid-arguments": "--call-tools",
          "tools.input-validated": "--call-tools"}


def junit_xml(report: Report) -> str:
    """One testcase per rule x revision, with its time. It agrees with the exit code: only the
    failures that fail the run (at or above --fail-on, not in the baseline) are <failure>s; the
    others are reported in <system-out>. A checker that could not do its job is an <error>."""
    blocking = {id(f) for f in report.blocking()}
    suite = ET.Element("testsuite", name="mcpkit check", hostname=report.target)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if report.error is not None or report.incomplete is not None:
        counts["tests"] += 1
        counts["errors"] += 1
        case = ET.SubElement(suite, "testcase", classname="mcpkit.check", name="the checker ran", time="0")
        error = ET.SubElement(case, "error", type="infrastructure", message=report.error or report.incomplete or "")
        error.text = report.error or report.incomplete
    for (rule_id, revision), items in report.grouped().items():
        counts["tests"] += 1
        case = ET.SubElement(
            suite, "testcase", classname=f"mcpkit.check.{rule_id.split('.', 1)[0]}",
            name=f"{rule_id} [{revision}]" if revision else rule_id,
            time=f"{max(f.duration for f in items):.3f}",
        )
        fails = [f for f in items if f.status == "fail"]
        failing = [f for f in fails if id(f) in blocking]
        rule = report.rules.get(rule_id)
        if failing:
            counts["failures"] += 1
            text = "\n".join(f.message for f in failing)
            if rule is not None:
                text += f"\nrequirements: {', '.join(rule.requirements)} ({rule.keyword_at(revision)})\nfix: {rule.fix}"
            failure = ET.SubElement(case, "failure", type=failing[0].severity, message=failing[0].message)
            failure.text = text
        elif fails:
            out = ET.SubElement(case, "system-out")
            out.text = "\n".join(
                f"{f.severity}{' (baselined)' if f.baselined else ''}: {f.message}" for f in fails
            )
        elif all(f.status == "skip" for f in items):
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=items[0].message)
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", f"{report.duration:.3f}")
    root = ET.Element("testsuites", name="mcpkit check", tests=str(counts["tests"]),
                      failures=str(counts["failures"]), errors=str(counts["errors"]), time=f"{report.duration:.3f}")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(report: Report, path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(junit_xml(report))


def _artifact(report: Report) -> str | None:
    """A file of the server's to anchor results on: the first existing file on the command line."""
    if report.transport != "stdio":
        return None
    for part in report.target.split():
        if os.path.isfile(part) and not os.access(part, os.X_OK):
            return os.path.relpath(part).replace(os.sep, "/") if not os.path.isabs(part) else part
    return None


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": rule.id.replace(".", "/"),
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.quote or rule.title},
        "help": {"text": rule.fix},
        "helpUri": f"{_INFO_URI}#{rule.id.replace('.', '')}",
        "defaultConfiguration": {"level": _SARIF_LEVEL[rule.severity]},
        "properties": {"requirements": list(rule.requirements), "keyword": rule.keyword,
                       "revisions": list(rule.revisions), "tags": ["mcp", rule.family]},
    }


def sarif(report: Report) -> dict[str, Any]:
    """The report as a SARIF 2.1.0 log: one run, the rules as reportingDescriptors, each failure
    a result (baselined ones with baselineState "unchanged")."""
    from .. import __version__

    rules = sorted(report.rules.values(), key=lambda r: r.id)
    index = {r.id: i for i, r in enumerate(rules)}
    artifact = _artifact(report)
    results = []
    for f in report.failed():
        result: dict[str, Any] = {
            "ruleId": f.rule,
            "level": _SARIF_LEVEL[f.severity],
            "message": {"text": (f"[{f.revision}] " if f.revision else "") + f.message},
            "locations": [{"logicalLocations": [{"name": report.target, "kind": "module"}]}],
            "properties": {"revision": f.revision, "detail": f.detail},
        }
        if artifact:
            result["locations"][0]["physicalLocation"] = {"artifactLocation": {"uri": artifact}}
        if f.rule in index:
            result["ruleIndex"] = index[f.rule]
        if f.baselined:
            result["baselineState"] = "unchanged"
        results.append(result)
    invocation: dict[str, Any] = {"executionSuccessful": report.error is None and report.incomplete is None,
                                  "exitCode": report.exit_code}
    problem = report.error or report.incomplete
    if problem:
        invocation["toolExecutionNotifications"] = [{"level": "error", "message": {"text": problem}}]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "mcpkit check", "version": __version__, "informationUri": _INFO_URI,
                                "rules": [_sarif_rule(r) for r in rules]}},
            "invocations": [invocation],
            "results": results,
            "properties": {"target": report.target, "transport": report.transport, "negotiated": report.negotiated,
                           "toolsCalled": report.tools_called},
        }],
    }


def _revisions(rule: Rule) -> str:
    return ", ".join(rule.revisions) if rule.revisions else "all"


def rules_listing(fmt: str) -> str:
    """``--list-rules``: a table (text), JSON, or the Markdown of docs/rules.md."""
    rules = sorted(all_rules().values(), key=lambda r: r.id)
    if fmt == "markdown":
        return rules_markdown()
    if fmt == "json":
        return json.dumps([{
            "id": r.id, "severity": r.severity, "keyword": r.keyword, "keywords": r.keywords,
            "requirements": list(r.requirements), "revisions": list(r.revisions), "scope": r.scope,
            "transports": list(r.transports), "default": r.default, "title": r.title, "fix": r.fix,
            "quote": r.quote, "source": r.source, "fixes": r.fixes, "reproduce": r.reproduce,
        } for r in rules], indent=2)
    width = max(len(r.id) for r in rules)
    lines = [f"{'RULE':<{width}}  {'SEVERITY':<8}  {'KEYWORD':<7}  REQUIREMENTS / REVISIONS / WHAT"]
    for r in rules:
        keyword = r.keyword + ("*" if r.keywords else "")
        extra = "" if r.default else "  (on request)"
        lines.append(f"{r.id:<{width}}  {r.severity:<8}  {keyword:<7}  {', '.join(r.requirements)}; "
                     f"{_revisions(r)}; {r.title}{extra}")
    lines.append("")
    lines.append("* the keyword differs by revision; see docs/rules.md")
    return "\n".join(lines)


def rules_markdown() -> str:
    """docs/rules.md: every rule with its spec quote, keyword, revisions and fixes."""
    rules = sorted(all_rules().values(), key=lambda r: r.id)
    out = [
        "# The rules of `mcpkit check`",
        "",
        "<!-- Generated by `mcpkit check --list-rules --format markdown > docs/rules.md`; "
        "tests/check/test_docs.py fails when it is stale. -->",
        "",
        "A failure's severity follows the spec's keyword: **MUST** (and MUST NOT) is an error, **SHOULD** a "
        "warning, **MAY** or advice without a normative keyword is info. Where revisions allow two "
        "behaviours both pass, and a rule whose outcome depends on a choice the spec leaves open is never "
        "an error. `--fail-on` sets the lowest severity that fails the run (default: error); exit codes are 0 "
        "(clean), 1 (findings), 2 (the checker could not do its job).",
        "",
        "Requirement ids refer to `spec/requirements.md`. Spec pages are under "
        "`docs/specification/<revision>/` of the specification repository.",
        "",
        "| rule | severity | keyword | requirements | revisions |",
        "|---|---|---|---|---|",
    ]
    for r in rules:
        keyword = r.keyword + "".join(f", {k} in {v}" for v, k in r.keywords.items())
        severity = severity_of(r.keyword) + "".join(f", {severity_of(k)} in {v}" for v, k in r.keywords.items())
        out.append(f"| [`{r.id}`](#{r.id.replace('.', '')}) | {severity} | {keyword} | "
                   f"{', '.join(r.requirements)} | {_revisions(r)} |")
    for r in rules:
        out += ["", f"## {r.id}", "", r.title[0].upper() + r.title[1:] + ".", ""]
        keyword = r.keyword + "".join(f" ({k} in {v})" for v, k in r.keywords.items())
        base = severity_of(r.keyword)
        out.append(f"- **Keyword:** {keyword}; a failure is {'an' if base == 'error' else 'a'} {base}" + "".join(f" ({_severity_word(k)} in {v})" for v, k in r.keywords.items()) + ".")
        out.append(f"- **Requirements:** {', '.join(r.requirements)}.")
        out.append(f"- **Revisions:** {_revisions(r)}.")
        if r.transports:
            out.append(f"- **Transports:** {', '.join(r.transports)}.")
        if not r.default:
            out.append("- **Runs only when asked for** (`--call-tools`, `--conformance` or `--pin FILE`).")
        out.append(f"- **Spec** ({r.source}):")
        out.append("")
        out.append(f"  > {r.quote}")
        out.append("")
        out.append(f"**Reproduce:** {reproduce(r)}")
        out.append("")
        if r.reproduce:
            out.append(f"**What it does:** {r.reproduce}.")
            out.append("")
        out.append(f"**How to fix it:** {r.fix}.")
        out.append("")
        for key, label in FRAMEWORKS.items():
            if key in r.fixes:
                out.append(f"- {label}: {r.fixes[key]}.")
    return "\n".join(out) + "\n"


def _http_only(rule: Rule) -> bool:
    return bool(rule.transports) and "stdio" not in rule.transports


def reproduce(rule: Rule) -> str:
    """How docs/rules.md says to see this rule fail: a fixture server of the repository that
    fails it (tests/check/test_docs.py runs each command), or the command for your own server."""
    name, *options = rule.example.split() or [""]
    flags = " ".join([*options, *([_ASKED[rule.id]] if rule.id in _ASKED and _ASKED[rule.id] not in options else []),
                      *([f"--hosts {rule.id.split('.', 1)[1]}"] if rule.family == "hosts" else []),
                      f"--rule {rule.id}"])
    if not name:
        target = f"http://127.0.0.1:{_PORT}/mcp" if _http_only(rule) else '"python server.py"'
        return (f"`mcpkit check {target} {flags}` against a server that breaks it (no server of the repository "
                "does).")
    script = f"{FIXTURES}/{name}.py"
    if _http_only(rule):
        return (f"`python {script} {_PORT} &` then `mcpkit check http://127.0.0.1:{_PORT}/mcp {flags}`: the "
                "repository's server fails it.")
    return f"`mcpkit check \"python {script}\" {flags}`: the repository's server fails it."


def _severity_word(keyword: str) -> str:
    return f"{'an' if severity_of(keyword) == 'error' else 'a'} {severity_of(keyword)}"

