"""What a check produces: rules, findings and the report (JSON and JUnit XML)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Rule", "Finding", "Report", "SEVERITIES", "STATUSES"]

SEVERITIES = ("error", "warning", "info")
STATUSES = ("pass", "fail", "skip")


@dataclass(frozen=True)
class Rule:
    """One rule: ``check(ctx)`` returns its findings (none means it passed)."""

    id: str
    severity: str
    #: the ids of spec/requirements.md it checks
    requirements: tuple[str, ...]
    #: what it checks, one line
    title: str
    #: how to fix a failure, one line
    fix: str
    check: Callable[[Any], Awaitable[list[Finding]]]
    #: "connection": run on each revision's connection; "server": once per run
    scope: str = "connection"
    #: the transports it applies to ("stdio", "http", "sse", "memory"); empty: every one
    transports: tuple[str, ...] = ()
    #: False for rules that only run when asked for (--call-read-only, --conformance)
    default: bool = True
    #: rules with a higher order run later on a connection (stdout cleanliness runs last)
    order: int = 0

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]


@dataclass
class Finding:
    rule: str
    severity: str
    status: str
    message: str
    revision: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.rule,
            "severity": self.severity,
            "status": self.status,
            "message": self.message,
            "revision": self.revision,
        }
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass
class Report:
    target: str
    transport: str
    findings: list[Finding] = field(default_factory=list)
    #: offered handshake revision -> the revision the server answered (or None when it refused)
    negotiated: dict[str, str | None] = field(default_factory=dict)
    server_info: dict[str, Any] | None = None
    started: float = field(default_factory=time.monotonic)
    duration: float = 0.0
    rules: dict[str, Rule] = field(default_factory=dict)

    @property
    def revisions(self) -> list[str]:
        """The revisions the checks ran under, in order."""
        seen: list[str] = []
        for f in self.findings:
            if f.revision and f.revision not in seen:
                seen.append(f.revision)
        return seen

    def failed(self, severity: str | None = None) -> list[Finding]:
        return [f for f in self.findings if f.status == "fail" and (severity is None or f.severity == severity)]

    def failed_rules(self) -> set[str]:
        return {f.rule for f in self.failed()}

    @property
    def exit_code(self) -> int:
        """1 when an error-level rule failed, else 0."""
        return 1 if self.failed("error") else 0

    def counts(self) -> dict[str, int]:
        out = {"pass": 0, "fail": 0, "skip": 0, "errors": 0, "warnings": 0}
        for f in self.findings:
            out[f.status] += 1
            if f.status == "fail":
                if f.severity == "error":
                    out["errors"] += 1
                elif f.severity == "warning":
                    out["warnings"] += 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "transport": self.transport,
            "server": self.server_info,
            "negotiated": self.negotiated,
            "revisions": self.revisions,
            "summary": self.counts(),
            "exit_code": self.exit_code,
            "duration": round(self.duration, 3),
            "findings": [f.to_dict() for f in self.findings],
            "rules": {
                rid: {
                    "severity": r.severity,
                    "requirements": list(r.requirements),
                    "title": r.title,
                    "fix": r.fix,
                }
                for rid, r in sorted(self.rules.items())
            },
        }

    def grouped(self) -> dict[tuple[str, str | None], list[Finding]]:
        """Findings per (rule, revision), in the order they were produced."""
        out: dict[tuple[str, str | None], list[Finding]] = {}
        for f in self.findings:
            out.setdefault((f.rule, f.revision), []).append(f)
        return out

    def to_junit(self, path: str) -> None:
        """JUnit XML: one testcase per rule x revision; failures as <failure>, skips as <skipped>."""
        from xml.etree import ElementTree as ET

        groups = self.grouped()
        c = {"tests": len(groups), "failures": 0, "skipped": 0}
        suite = ET.Element("testsuite", name="mcpkit check", hostname=self.target)
        for (rule_id, revision), items in groups.items():
            case = ET.SubElement(
                suite, "testcase", classname=f"mcpkit.check.{rule_id.split('.', 1)[0]}",
                name=f"{rule_id} [{revision}]" if revision else rule_id,
            )
            fails = [f for f in items if f.status == "fail"]
            if fails:
                c["failures"] += 1
                rule = self.rules.get(rule_id)
                text = "\n".join(f.message for f in fails)
                if rule is not None:
                    text += f"\nrequirements: {', '.join(rule.requirements)}\nfix: {rule.fix}"
                failure = ET.SubElement(case, "failure", type=fails[0].severity, message=fails[0].message)
                failure.text = text
            elif all(f.status == "skip" for f in items):
                c["skipped"] += 1
                ET.SubElement(case, "skipped", message=items[0].message)
        suite.set("tests", str(c["tests"]))
        suite.set("failures", str(c["failures"]))
        suite.set("errors", "0")
        suite.set("skipped", str(c["skipped"]))
        suite.set("time", f"{self.duration:.3f}")
        root = ET.Element("testsuites", name="mcpkit check")
        root.append(suite)
        ET.indent(root)
        ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
