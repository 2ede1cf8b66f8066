"""The terminal output: a table of rules grouped by family, a summary line, and a progress line."""

from __future__ import annotations

import sys
from typing import IO, Any

from .model import SEVERITIES, Finding, Report

__all__ = ["render_table", "Progress", "rule_status"]

_COLORS = {"pass": "32", "fail": "31", "skip": "2", "warning": "33", "error": "31", "info": "36", "dim": "2",
           "bold": "1"}


def _paint(text: str, style: str, color: bool) -> str:
    return f"\x1b[{_COLORS[style]}m{text}\x1b[0m" if color else text


def rule_status(findings: list[Finding]) -> str:
    """fail if any finding failed, pass if any passed, else skip."""
    statuses = {f.status for f in findings}
    return "fail" if "fail" in statuses else "pass" if "pass" in statuses else "skip"


def _summary(report: Report, color: bool) -> str:
    c = report.counts()
    per_rule: dict[str, list[Finding]] = {}
    for f in report.findings:
        per_rule.setdefault(f.rule, []).append(f)
    statuses = [rule_status(fs) for fs in per_rule.values()]
    name = ""
    if report.server_info:
        name = f"{report.server_info.get('name', '?')} {report.server_info.get('version', '')}".strip() + ", "
    accepted = [v for v, a in report.negotiated.items() if a == v]
    parts = [
        f"{len(per_rule)} rules: {statuses.count('pass')} passed, {statuses.count('fail')} failed, "
        f"{statuses.count('skip')} skipped",
        f"{c['errors']} error(s), {c['warnings']} warning(s), {c['infos']} info",
    ]
    if c["baselined"]:
        parts.append(f"{c['baselined']} in the baseline")
    code = report.exit_code
    verdict = (_paint("FAILED", "fail", color) if code == 1 else _paint("INCOMPLETE", "fail", color) if code == 2
               else _paint("OK", "pass", color))
    return (f"{verdict}  {name}revisions {', '.join(accepted) or 'none'} ({report.transport}): "
            + "; ".join(parts) + f" in {report.duration:.1f} s")


def render_table(report: Report, color: bool = False) -> str:
    """The findings as a table grouped by rule family, failures with their revision and fix."""
    per_rule: dict[str, list[Finding]] = {}
    for f in report.findings:
        per_rule.setdefault(f.rule, []).append(f)
    width = max([len(r) for r in per_rule] + [4])
    lines: list[str] = [f"mcpkit check {report.target}", ""]
    header = f"  {'RULE':<{width}}  {'SEVERITY':<8}  {'RESULT':<6}  MESSAGE"
    lines.append(_paint(header, "bold", color))
    families: dict[str, list[str]] = {}
    for rule_id in per_rule:
        families.setdefault(rule_id.split(".", 1)[0], []).append(rule_id)
    for family in sorted(families):
        lines.append(_paint(family, "bold", color))
        for rule_id in sorted(families[family]):
            findings = per_rule[rule_id]
            status = rule_status(findings)
            failing = [f for f in findings if f.status == "fail"]
            severity = min((f.severity for f in failing), key=SEVERITIES.index) if failing else findings[0].severity
            shown = [f for f in findings if f.status == status]
            message = shown[0].message
            if status != "fail":  # one line: the message most revisions share, and how many
                counts: dict[str, int] = {}
                for f in shown:
                    counts[f.message] = counts.get(f.message, 0) + 1
                message = max(counts, key=counts.__getitem__)  # ties: the first revision's
            revisions = sorted({f.revision for f in shown if f.revision and f.message == message})
            if status != "fail" and revisions and len(revisions) > 1:
                message += f" ({len(revisions)} revisions)"
            sev = _paint(f"{severity:<8}", severity if status == "fail" else "dim", color)
            res = _paint(f"{status.upper():<6}", status, color)
            lines.append(f"  {rule_id:<{width}}  {sev}  {res}  {message if status != 'fail' else ''}".rstrip())
            if status == "fail":
                for f in shown:
                    where = f"[{f.revision}] " if f.revision else ""
                    known = " (in the baseline)" if f.baselined else ""
                    lines.append(f"      {_paint(where, 'dim', color)}{f.message}{known}")
                rule = report.rules.get(rule_id)
                if rule is not None:
                    lines.append(_paint(f"      fix: {rule.fix} ({', '.join(rule.requirements)})", "dim", color))
    lines.append("")
    called = sorted({str(t.get("tool")) for t in report.tools_called})
    lines.append("tools called: " + (", ".join(called) if called else "none"))
    for note in report.notes:
        lines.append(f"note: {note}")
    if report.incomplete:
        lines.append(f"incomplete: {report.incomplete}; the rules that had not run are listed as skipped ('not run')")
    lines.append(_summary(report, color))
    return "\n".join(lines)


class Progress:
    """One self-erasing line on a terminal's stderr: which rule runs now."""

    def __init__(self, enabled: bool, stream: IO[str] | None = None) -> None:
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.count = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.enabled and self.count:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()

    def step(self, rule_id: str, revision: str | None) -> None:
        self.count += 1
        if self.enabled:
            where = f" [{revision}]" if revision else ""
            self.stream.write(f"\r\x1b[2Kmcpkit check: {self.count} checks run, now {rule_id}{where}")
            self.stream.flush()
