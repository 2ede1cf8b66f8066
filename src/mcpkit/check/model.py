"""What a check produces: rules, findings and the report (the exit-code contract, JSON)."""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Rule", "Finding", "Report", "SEVERITIES", "STATUSES", "KEYWORDS", "FRAMEWORKS", "severity_of",
    "EXIT_CLEAN", "EXIT_FINDINGS", "EXIT_INFRASTRUCTURE",
]

SEVERITIES = ("error", "warning", "info")
STATUSES = ("pass", "fail", "skip")
#: the spec's keyword -> the severity of a failure: MUST -> error, SHOULD -> warning, MAY or
#: advice (no normative keyword) -> info. A "MUST NOT" is a MUST, a "SHOULD NOT" a SHOULD.
KEYWORDS = {"MUST": "error", "SHOULD": "warning", "MAY": "info", "advice": "info"}
#: where a rule's per-framework fixes are written (docs/rules.md shows them in this order)
FRAMEWORKS = {"mcpkit": "mcpkit", "sdk": "official Python SDK", "fastmcp": "FastMCP", "ts": "TypeScript SDK"}

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
#: the checker could not do its job: nothing was judged, or not all of it
EXIT_INFRASTRUCTURE = 2


def severity_of(keyword: str) -> str:
    return KEYWORDS[keyword]


@dataclass(frozen=True)
class Rule:
    """One rule: ``check(ctx)`` returns its findings (none means it passed).

    ``keyword`` is the spec's word for what the rule checks; it sets the severity. Where a
    revision words it differently, ``keywords`` maps that revision to its keyword (RS-08 is a
    SHOULD up to 2025-11-25 and a MUST in 2026-07-28)."""

    id: str
    keyword: str
    #: the ids of spec/requirements.md it checks
    requirements: tuple[str, ...]
    #: what it checks, one line
    title: str
    #: how to fix a failure, one line (any framework)
    fix: str
    check: Callable[[Any], Awaitable[list[Finding]]]
    #: the spec's words, quoted, and the page they come from
    quote: str = ""
    source: str = ""
    #: the revisions it applies to; empty: every one
    revisions: tuple[str, ...] = ()
    #: revision -> keyword, where it differs from ``keyword``
    keywords: dict[str, str] = field(default_factory=dict)
    #: framework (a key of FRAMEWORKS) -> how to fix it there
    fixes: dict[str, str] = field(default_factory=dict)
    #: "connection": run on each revision's connection; "server": once per run
    scope: str = "connection"
    #: the transports it applies to ("stdio", "http", "sse", "memory"); empty: every one
    transports: tuple[str, ...] = ()
    #: False for rules that only run when asked for (--call-tools, --conformance)
    default: bool = True
    #: rules with a higher order run later on a connection (stdout cleanliness runs last)
    order: int = 0
    #: a server of tests/check/fixtures/ that fails this rule: its name (without .py), then the
    #: options of ``mcpkit check`` the failure needs ("wrong_error_codes --call-tools"); how
    #: docs/rules.md says to reproduce a failure. "" when no fixture does
    example: str = ""
    #: how to see the fault: what the rule sends or reads, and what a failing server does
    reproduce: str = ""

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def severity(self) -> str:
        """The severity of a failure (the strictest over the revisions it applies to)."""
        levels = [severity_of(self.keyword), *(severity_of(k) for k in self.keywords.values())]
        return min(levels, key=SEVERITIES.index)

    def keyword_at(self, revision: str | None) -> str:
        return self.keywords.get(revision or "", self.keyword)

    def severity_at(self, revision: str | None) -> str:
        return severity_of(self.keyword_at(revision))

    def applies_to(self, revision: str | None) -> bool:
        return revision is None or not self.revisions or revision in self.revisions


_VOLATILE = re.compile(r"[0-9a-f]{8,}|\d+(\.\d+)? s\b")


@dataclass
class Finding:
    rule: str
    severity: str
    status: str
    message: str
    revision: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    #: a failure listed in the --baseline file: reported, but it does not fail the run
    baselined: bool = False
    #: seconds the rule took on this connection
    duration: float = 0.0

    @property
    def fingerprint(self) -> str:
        """What a baseline matches on: the rule, the revision and the message with its random
        parts (probe names, timings) masked."""
        return f"{self.rule}|{self.revision or ''}|{_VOLATILE.sub('#', self.message)}"

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
        if self.baselined:
            out["baselined"] = True
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
    #: failures at or above this severity fail the run (exit code 1)
    fail_on: str = "error"
    #: why the checker could not do its job (nothing judged): exit code 2
    error: str | None = None
    #: why the run stopped before every rule ran (--deadline): the findings so far are reported
    incomplete: str | None = None
    #: the tools actually called, {"tool", "revision", "why"}
    tools_called: list[dict[str, Any]] = field(default_factory=list)
    #: what the run could not do and the reader should know (one line each)
    notes: list[str] = field(default_factory=list)

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

    def blocking(self) -> list[Finding]:
        """The failures that fail the run: at or above ``fail_on`` and not in the baseline."""
        limit = SEVERITIES.index(self.fail_on)
        return [f for f in self.failed() if not f.baselined and SEVERITIES.index(f.severity) <= limit]

    @property
    def exit_code(self) -> int:
        """0 clean, 1 findings at or above ``fail_on``, 2 the checker could not do its job."""
        if self.error is not None:
            return EXIT_INFRASTRUCTURE
        if self.blocking():
            return EXIT_FINDINGS
        return EXIT_INFRASTRUCTURE if self.incomplete is not None else EXIT_CLEAN

    def counts(self) -> dict[str, int]:
        out = {"pass": 0, "fail": 0, "skip": 0, "errors": 0, "warnings": 0, "infos": 0, "baselined": 0}
        for f in self.findings:
            out[f.status] += 1
            if f.status == "fail":
                out["baselined"] += f.baselined
                out[{"error": "errors", "warning": "warnings", "info": "infos"}[f.severity]] += 1
        return out

    def apply_baseline(self, known: set[str]) -> None:
        for f in self.failed():
            f.baselined = f.fingerprint in known

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "transport": self.transport,
            "server": self.server_info,
            "negotiated": self.negotiated,
            "revisions": self.revisions,
            "summary": self.counts(),
            "fail_on": self.fail_on,
            "exit_code": self.exit_code,
            "error": self.error,
            "incomplete": self.incomplete,
            "notes": self.notes,
            "duration": round(self.duration, 3),
            "tools_called": self.tools_called,
            "findings": [f.to_dict() for f in self.findings],
            "rules": {
                rid: {
                    "severity": r.severity,
                    "keyword": r.keyword,
                    "keywords": r.keywords,
                    "requirements": list(r.requirements),
                    "revisions": list(r.revisions),
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
        """JUnit XML (see :mod:`mcpkit.check.formats`)."""
        from .formats import write_junit

        write_junit(self, path)
