#!/usr/bin/env python3
"""Write docs/compliance.md: every requirement of spec/requirements.md, with the tests that cover it
or the reason none does.

    python tools/compliance.py           # (re)write docs/compliance.md
    python tools/compliance.py --check   # exit 1 if docs/compliance.md is stale or incomplete

Inputs:

* ``spec/requirements.md``: the checklist (parsed by ``tests/plugins/compliance.py``);
* the ``@pytest.mark.req("ID", ...)`` markers of the test suite, found by an in-process
  ``pytest --collect-only`` run (run this script as its own process, never from inside a test);
* ``spec/not-covered.toml``: the reason for each requirement no test covers (format in that file).

A requirement with neither a test nor a reason makes both modes exit 1 and names it: there is no
default reason. The output is deterministic (document order, sorted test ids, no timestamps).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import fnmatch
import io
import os
import re
import sys
import tomllib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT / "src", ROOT):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from tests.plugins.compliance import (  # noqa: E402
    Checklist,
    Requirement,
    load_checklist,
    marker_ids,
)

DOC = ROOT / "docs" / "compliance.md"
REASONS = ROOT / "spec" / "not-covered.toml"
#: Set while this script's pytest collection runs, to refuse a nested run.
GUARD_ENV = "MCPKIT_COMPLIANCE_COLLECTING"
SUMMARY_CHARS = 100

_ID = re.compile(r"^[A-Z]+-\d+$")
_RANGE = re.compile(r"^(?P<a>(?P<pa>[A-Z]+)-(?P<na>\d+))\.\.(?P<b>(?P<pb>[A-Z]+)-(?P<nb>\d+))$")
_GLOB = re.compile(r"^(?P<prefix>[A-Z]+-)[0-9*?\[\]!-]*$")


class CollectionFailed(RuntimeError):
    pass


# --------------------------------------------------------------------------- markers


class _Recorder:
    """pytest plugin object: records the req ids of every collected item."""

    def __init__(self) -> None:
        self.coverage: dict[str, set[str]] = {}

    def pytest_collection_finish(self, session) -> None:  # noqa: ANN001 (pytest hook)
        for item in session.items:
            nodeid = _base_nodeid(item.nodeid)
            for req_id in marker_ids(item):
                self.coverage.setdefault(req_id, set()).add(nodeid)


def _base_nodeid(nodeid: str) -> str:
    """``tests/x.py::test_y[a-b]`` → ``tests/x.py::test_y`` (parametrized cases are listed once)."""
    return re.sub(r"\[.*\]$", "", nodeid)


def collect_coverage(paths: Iterable[str] = ("tests",)) -> dict[str, list[str]]:
    """Requirement id → sorted node ids of the tests that carry it (pytest collection, in-process)."""
    if os.environ.get(GUARD_ENV) or os.environ.get("PYTEST_CURRENT_TEST"):
        raise RuntimeError(
            "tools/compliance.py collects the test suite with pytest; run it in a subprocess, "
            "not from inside a pytest run"
        )
    import pytest

    recorder = _Recorder()
    args = [
        "--collect-only",
        "-q",
        "-p",
        "tests.plugins.compliance",
        "-p",
        "no:cacheprovider",
        f"--rootdir={ROOT}",
        *paths,
    ]
    output = io.StringIO()
    cwd = os.getcwd()
    os.environ[GUARD_ENV] = "1"
    try:
        os.chdir(ROOT)
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            status = pytest.main(args, plugins=[recorder])
    finally:
        os.chdir(cwd)
        os.environ.pop(GUARD_ENV, None)
    if int(status) not in (0, 5):  # 5: no tests collected
        raise CollectionFailed(
            f"pytest collection failed (exit status {int(status)}):\n{output.getvalue()}"
        )
    return {req_id: sorted(nodeids) for req_id, nodeids in recorder.coverage.items()}


# --------------------------------------------------------------------------- reasons


@dataclass(frozen=True)
class ReasonRules:
    exact: dict[str, str]
    ranges: list[tuple[str, int, int, str, str]]  # prefix, lo, hi, key, reason
    globs: list[tuple[str, str, str]]  # pattern, key, reason

    def lookup(self, req_id: str) -> str | None:
        if req_id in self.exact:
            return self.exact[req_id]
        prefix, _, number = req_id.rpartition("-")
        for r_prefix, lo, hi, _key, reason in self.ranges:
            if r_prefix == prefix and lo <= int(number) <= hi:
                return reason
        for pattern, _key, reason in self.globs:  # longest pattern first
            if fnmatch.fnmatchcase(req_id, pattern):
                return reason
        return None


def load_reasons(path: Path, known: Iterable[str]) -> tuple[ReasonRules, list[str]]:
    """Parse not-covered.toml. Returns the rules and a list of problems (empty when valid)."""
    known = list(known)
    known_set = set(known)
    problems: list[str] = []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ReasonRules({}, [], []), [f"{_rel(path)} does not exist"]
    except tomllib.TOMLDecodeError as exc:
        return ReasonRules({}, [], []), [f"{_rel(path)}: invalid TOML: {exc}"]

    exact: dict[str, str] = {}
    ranges: list[tuple[str, int, int, str, str]] = []
    globs: list[tuple[str, str, str]] = []
    for key, reason in data.items():
        where = f"{_rel(path)}: {key!r}"
        if not isinstance(reason, str) or not reason.strip():
            problems.append(f"{where}: the reason must be a non-empty string")
            continue
        reason = " ".join(reason.split())
        if _ID.match(key):
            if key not in known_set:
                problems.append(f"{where}: no requirement has this id")
            exact[key] = reason
        elif m := _RANGE.match(key):
            if m["pa"] != m["pb"]:
                problems.append(f"{where}: a range must stay within one prefix")
            elif int(m["na"]) > int(m["nb"]):
                problems.append(f"{where}: the range is reversed")
            for end in (m["a"], m["b"]):
                if end not in known_set:
                    problems.append(f"{where}: no requirement has the id {end}")
            ranges.append((m["pa"], int(m["na"]), int(m["nb"]), key, reason))
        elif _GLOB.match(key):
            if not any(fnmatch.fnmatchcase(i, key) for i in known):
                problems.append(f"{where}: the pattern matches no requirement id")
            globs.append((key, key, reason))
        else:
            problems.append(
                f"{where}: not an id (BP-10), a range (MT-05..MT-10) or a glob over one prefix (HM-*); "
                "catch-all patterns are not allowed"
            )
    globs.sort(key=lambda g: (-len(g[0]), g[0]))
    return ReasonRules(exact, ranges, globs), problems


# --------------------------------------------------------------------------- report


@dataclass(frozen=True)
class Row:
    requirement: Requirement
    tests: tuple[str, ...]
    reason: str | None

    @property
    def status(self) -> str:
        if self.tests:
            return "covered"
        return "reason" if self.reason else "missing"


@dataclass(frozen=True)
class Report:
    checklist: Checklist
    rows: tuple[Row, ...]
    unknown_marker_ids: tuple[str, ...]
    superseded_reasons: tuple[str, ...]  # ids with tests *and* an exact-id reason

    @property
    def missing(self) -> list[str]:
        return [row.requirement.id for row in self.rows if row.status == "missing"]


def build_report(checklist: Checklist, coverage: Mapping[str, list[str]], rules: ReasonRules) -> Report:
    rows = []
    superseded = []
    for req in checklist.requirements:
        tests = tuple(sorted(coverage.get(req.id, ())))
        reason = rules.lookup(req.id)
        if tests and req.id in rules.exact:
            superseded.append(req.id)
        rows.append(Row(req, tests, None if tests else reason))
    unknown = tuple(sorted(set(coverage) - checklist.ids))
    return Report(checklist, tuple(rows), unknown, tuple(superseded))


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _short(text: str, limit: int = SUMMARY_CHARS) -> str:
    """The first ~*limit* characters of a paraphrase, with its Markdown kept balanced."""
    text = text.replace("**", "")
    text = re.sub(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])", r"\1", text)
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rfind(" ")]
    if cut.count("`") % 2:
        cut = cut[: cut.rfind("`")].rstrip()
    return cut.rstrip(" ,;:.(") + " …"


def render(report: Report) -> str:
    checklist = report.checklist
    chapters = [s for s in checklist.sections if s.depth == 2]
    rows_by_section: dict[str, list[Row]] = {}
    for row in report.rows:
        rows_by_section.setdefault(row.requirement.section, []).append(row)

    out: list[str] = []
    w = out.append
    w("# Specification compliance")
    w("")
    w("<!-- Generated by `python tools/compliance.py`; do not edit by hand. -->")
    w("")
    w(
        "Every requirement of the checklist [`spec/requirements.md`](../spec/requirements.md) (the MCP "
        "server-side MUST/SHOULD/MAY rules of every revision), with the tests that cover it "
        "(`@pytest.mark.req(\"ID\")`) or the reason no test does yet "
        "([`spec/not-covered.toml`](../spec/not-covered.toml)). "
        "`python tools/compliance.py --check` (run by the test suite) fails when this file is out of date "
        "or when a requirement has neither a test nor a reason."
    )
    w("")
    w("## Summary")
    w("")
    w("| Section | Requirements | Covered by tests | Not covered yet (reason given) | Neither |")
    w("|---|---:|---:|---:|---:|")
    totals: Counter[str] = Counter()
    for chapter in chapters:
        counts: Counter[str] = Counter()
        for row in report.rows:
            if row.requirement.section.split(".", 1)[0] == chapter.number:
                counts[row.status] += 1
        n = sum(counts.values())
        totals.update(counts)
        w(
            f"| {_cell(chapter.heading)} | {n} | {counts['covered']} | {counts['reason']} | {counts['missing']} |"
        )
    w(
        f"| **Total** | **{sum(totals.values())}** | **{totals['covered']}** | **{totals['reason']}** | "
        f"**{totals['missing']}** |"
    )
    w("")
    reasons = Counter(row.reason for row in report.rows if row.reason)
    if reasons:
        w("Requirements not covered yet, by reason:")
        w("")
        w("| Reason | Requirements |")
        w("|---|---:|")
        for reason, count in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
            w(f"| {_cell(reason)} | {count} |")
        w("")
    w(
        "Columns: **Level** is the keyword(s) of the item (RFC 2119), or its tag when it has none "
        "(*derived*, *shape*, *info*, …; `-` for none); **Revisions** is the item's `rev` note "
        "(`all`, `L` = 2024-11-05…2025-11-25, `M` = 2026-07-28, …); **Requirement** is the start of the "
        "checklist's paraphrase, which is authoritative."
    )

    for section in checklist.sections:
        w("")
        w(f"{'#' * section.depth} {section.heading}")
        rows = rows_by_section.get(section.number)
        if not rows:
            continue
        w("")
        w("| ID | Level | Requirement | Revisions | Covered by |")
        w("|---|---|---|---|---|")
        for row in rows:
            req = row.requirement
            if row.tests:
                status = "<br>".join(f"`{_cell(t)}`" for t in row.tests)
            elif row.reason:
                status = f"not covered: {_cell(row.reason)}"
            else:
                status = "**NO TEST AND NO REASON**"
            w(
                f"| {req.id} | {_cell(req.level)} | {_cell(_short(req.summary))} | "
                f"{_cell(req.revisions) or '-'} | {status} |"
            )
    w("")
    return "\n".join(out)


# --------------------------------------------------------------------------- main


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def _diff_summary(old: str, new: str, limit: int = 60) -> str:
    diff = list(
        difflib.unified_diff(
            old.splitlines(), new.splitlines(), "docs/compliance.md (committed)", "docs/compliance.md (generated)", lineterm="", n=0
        )
    )
    changed = sum(1 for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---")))
    shown = diff[:limit]
    if len(diff) > limit:
        shown.append(f"... ({len(diff) - limit} more diff lines)")
    return f"{changed} line(s) differ:\n" + "\n".join(shown)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if docs/compliance.md is stale or incomplete")
    args = parser.parse_args(argv)

    checklist = load_checklist()
    rules, problems = load_reasons(REASONS, (r.id for r in checklist.requirements))
    if problems:
        print("spec/not-covered.toml has problems:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 2
    try:
        coverage = collect_coverage()
    except CollectionFailed as exc:
        print(exc, file=sys.stderr)
        return 2
    report = build_report(checklist, coverage, rules)
    if report.unknown_marker_ids:  # the plugin makes collection fail first; kept as a backstop
        print(f"unknown requirement ids in markers: {', '.join(report.unknown_marker_ids)}", file=sys.stderr)
        return 2
    text = render(report)
    failed = False

    if args.check:
        current = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
        if current != text:
            failed = True
            what = "is missing" if not DOC.exists() else "is stale"
            print(f"docs/compliance.md {what}; run `python tools/compliance.py` and commit the result.", file=sys.stderr)
            print(_diff_summary(current, text), file=sys.stderr)
    else:
        DOC.parent.mkdir(parents=True, exist_ok=True)
        with open(DOC, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        print(f"wrote {_rel(DOC)}")

    if report.missing:
        failed = True
        print(
            f"{len(report.missing)} requirement(s) have neither a test (@pytest.mark.req) nor a reason in "
            f"spec/not-covered.toml:\n  " + "\n  ".join(_wrap_ids(report.missing)),
            file=sys.stderr,
        )
    if report.superseded_reasons:
        print(
            "note: these ids have tests now; their entries in spec/not-covered.toml can go: "
            + ", ".join(report.superseded_reasons),
            file=sys.stderr,
        )
    counts = Counter(row.status for row in report.rows)
    print(
        f"{len(report.rows)} requirements: {counts['covered']} covered by tests, "
        f"{counts['reason']} not covered yet (reason given), {counts['missing']} with neither."
    )
    if args.check and not failed:
        print("docs/compliance.md is up to date.")
    return 1 if failed else 0


def _wrap_ids(ids: list[str], per_line: int = 12) -> list[str]:
    return [", ".join(ids[i : i + per_line]) for i in range(0, len(ids), per_line)]


if __name__ == "__main__":
    sys.exit(main())
