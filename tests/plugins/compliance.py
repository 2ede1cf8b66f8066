"""The ``req`` marker: which requirements of ``spec/requirements.md`` a test covers.

Usage in a test module::

    @pytest.mark.req("BP-05", "BP-06")
    def test_responses_echo_the_request_id(): ...

At collection every ``req`` marker is checked against the ids of ``spec/requirements.md``. A
marker naming an id that is not in the checklist (or a ``req`` marker without ids) turns the
collection of that module into an error that names the test and the id, so pytest exits
non-zero.

The checklist is found relative to this file (``<repo>/spec/requirements.md``), never relative to
the working directory, so the plugin works with any ``--rootdir`` and from any cwd.

This module also holds the checklist parser that ``tools/compliance.py`` uses to write
``docs/compliance.md``, so that the plugin and the generator agree on what an id is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pytest

__all__ = [
    "MARKER",
    "REPO_ROOT",
    "REQUIREMENTS_PATH",
    "Checklist",
    "ChecklistError",
    "Requirement",
    "Section",
    "check_items",
    "load_checklist",
    "marker_ids",
    "parse_checklist",
]

MARKER = "req"
REPO_ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS_PATH = REPO_ROOT / "spec" / "requirements.md"

_ITEM = re.compile(r"^- \*\*(?P<id>[A-Z]+-\d+)\*\*\s*(?P<rest>.*)$")
_H2 = re.compile(r"^## (?P<num>\d+)\.\s+(?P<title>.+?)\s*$")
_H3 = re.compile(r"^### (?P<num>\d+\.\d+)\s+(?P<title>.+?)\s*$")
_OTHER_HEADING = re.compile(r"^#{1,6}\s")
# RFC 2119 / RFC 8174 keywords, longest first so that "MUST NOT" wins over "MUST".
_KEYWORD = re.compile(
    r"(?<![A-Za-z])(MUST NOT|MUST|SHALL NOT|SHALL|SHOULD NOT|SHOULD|REQUIRED|RECOMMENDED|"
    r"NOT RECOMMENDED|MAY|OPTIONAL)(?![A-Za-z])"
)
# The "src ... · rev ..." tail of an item (or a sentence "rev ...").
_REV = re.compile(r"(?:·|^|\.)\s*rev\s+(?P<rev>.+?)(?:\.\s|\.$|$)")
# A revision named in a parenthesis of an item's head or of a section heading.
_REV_TOKEN = re.compile(r"^(?:all|L|M|\d{4}-\d{2}-\d{2}\S*(?: (?:only|era|tasks|policy))?)$")
_PAREN = re.compile(r"\(([^()]*)\)")
# Where the paraphrase ends: the " src …" / " rev …" tail after a sentence.
_SRC_TAIL = re.compile(r"(?:(?<=[.)*`'\"])\s+(?:src|rev)\s|\s+·\s*rev\s).*$")


@dataclass(frozen=True, slots=True)
class Section:
    """A numbered heading: ``## 6. Utilities`` (number "6") or ``### 6.2 Cancellation`` ("6.2")."""

    number: str
    title: str

    @property
    def depth(self) -> int:
        return self.number.count(".") + 2

    @property
    def chapter(self) -> str:
        return self.number.split(".", 1)[0]

    @property
    def heading(self) -> str:
        return f"{self.number}. {self.title}" if self.depth == 2 else f"{self.number} {self.title}"


@dataclass(frozen=True, slots=True)
class Requirement:
    id: str
    #: "MUST", "MUST NOT", "SHOULD / MAY", ...; for items without a keyword a tag such as
    #: "derived", "info" or "-".
    level: str
    #: the item's text (without the id), whitespace collapsed, sub-bullets included.
    text: str
    #: the paraphrase without its level prefix and without the ``src``/``rev`` tail.
    summary: str
    #: the ``rev …`` tail ("all", "L", "2025-06-18+", ...), or "" when the item has none.
    revisions: str
    #: the innermost numbered section the item is in ("6.2"; "1" for items directly under ``## 1.``).
    section: str
    #: 1-based line number of the item in requirements.md.
    line: int


@dataclass(slots=True)
class Checklist:
    sections: list[Section] = field(default_factory=list)
    requirements: list[Requirement] = field(default_factory=list)

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(r.id for r in self.requirements)

    def by_id(self) -> dict[str, Requirement]:
        return {r.id: r for r in self.requirements}

    def section(self, number: str) -> Section:
        for s in self.sections:
            if s.number == number:
                return s
        raise KeyError(number)


class ChecklistError(ValueError):
    pass


def _head(text: str) -> str:
    """The item's text up to the first '.' or ':' that ends a phrase outside parentheses."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch in ".:" and depth == 0 and (i + 1 == len(text) or text[i + 1] == " "):
            return text[:i]
    return text


def _keywords(text: str) -> list[str]:
    seen: list[str] = []
    for m in _KEYWORD.finditer(text):
        if m.group(1) not in seen:
            seen.append(m.group(1))
    return seen


def _level(head: str, text: str) -> str:
    lowered = head.strip().lower()
    for kw in ("must not", "must", "should not", "should", "may"):
        if lowered == kw:  # e.g. "should." (lower-case in the checklist)
            return kw.upper()
    words = _keywords(head)
    if words:
        return " / ".join(words)
    inner = head.strip()
    if inner.startswith("(") and inner.endswith(")"):
        inner = inner[1:-1]
    for tag in ("derived", "non-normative", "info", "not supported", "shape", "summary", "principle"):
        if tag in inner.lower():
            return tag
    words = _keywords(text)
    if words:
        return " / ".join(words)
    return "-"


def _summary(text: str, head: str) -> str:
    body = text
    if _keywords(head) or head.strip().startswith("(") or head.strip().lower() in {"should"}:
        body = text[len(head) :].lstrip(".: ")
    body = _SRC_TAIL.sub("", body).strip()
    return body or text


def _paren_revisions(text: str) -> str:
    """Revisions named in the parentheses of *text*: "(Δ, M)" gives "M"."""
    found: list[str] = []
    for paren in _PAREN.findall(text):
        for token in re.split(r"[,;]", paren):
            token = token.strip()
            if token == "all revisions":
                token = "all"
            if _REV_TOKEN.match(token) and token not in found:
                found.append(token)
    return ", ".join(found)


def _revisions(text: str, head: str, section_title: str) -> str:
    """The item's ``rev …`` tail; else the revisions named in its head, else in its section."""
    matches = list(_REV.finditer(text))
    if matches:
        return matches[-1].group("rev").strip().rstrip(".")
    return _paren_revisions(head) or _paren_revisions(section_title)


def _make(item_id: str, lines: list[str], section: Section, line: int) -> Requirement:
    text = " ".join(part.strip() for part in lines if part.strip())
    text = re.sub(r"\s+", " ", text).strip()
    head = _head(text)
    return Requirement(
        id=item_id,
        level=_level(head, text),
        text=text,
        summary=_summary(text, head),
        revisions=_revisions(text, head, section.title),
        section=section.number,
        line=line,
    )


def parse_checklist(source: str) -> Checklist:
    """Parse the text of ``spec/requirements.md``."""
    checklist = Checklist()
    current: Section | None = None
    pending: tuple[str, list[str], Section, int] | None = None
    seen: dict[str, int] = {}

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            checklist.requirements.append(_make(*pending))
            pending = None

    for lineno, raw in enumerate(source.splitlines(), start=1):
        line = raw.rstrip()
        if m := _H2.match(line):
            flush()
            current = Section(m.group("num"), m.group("title"))
            checklist.sections.append(current)
            continue
        if m := _H3.match(line):
            flush()
            current = Section(m.group("num"), m.group("title"))
            checklist.sections.append(current)
            continue
        if _OTHER_HEADING.match(line):
            flush()
            current = None
            continue
        if m := _ITEM.match(line):
            flush()
            item_id = m.group("id")
            if item_id in seen:
                raise ChecklistError(
                    f"requirement {item_id} is defined twice (lines {seen[item_id]} and {lineno})"
                )
            if current is None:
                raise ChecklistError(f"requirement {item_id} (line {lineno}) is outside a numbered section")
            seen[item_id] = lineno
            pending = (item_id, [m.group("rest")], current, lineno)
            continue
        if pending is not None:
            if not line.strip() or not raw.startswith((" ", "\t")):
                flush()
            else:
                pending[1].append(line)
    flush()
    # Keep only the sections that hold requirements (or whose subsections do).
    used = {r.section for r in checklist.requirements}
    used |= {s.split(".", 1)[0] for s in used}
    checklist.sections = [s for s in checklist.sections if s.number in used]
    return checklist


@lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int) -> Checklist:
    return parse_checklist(Path(path).read_text(encoding="utf-8"))


def load_checklist(path: Path = REQUIREMENTS_PATH) -> Checklist:
    return _load(str(path), path.stat().st_mtime_ns)


def marker_ids(item: pytest.Item) -> list[str]:
    """The requirement ids of every ``req`` marker on *item* (function, class, module, param)."""
    ids: list[str] = []
    for mark in item.iter_markers(name=MARKER):
        for arg in mark.args:
            if arg not in ids:
                ids.append(arg)
    return ids


def _marker_problems(item: pytest.Item, known: frozenset[str]) -> Iterator[str]:
    for mark in item.iter_markers(name=MARKER):
        if mark.kwargs:
            yield f"{item.nodeid}: @pytest.mark.req takes requirement ids only, got keywords {sorted(mark.kwargs)}"
        if not mark.args:
            yield f"{item.nodeid}: @pytest.mark.req() names no requirement id"
        for arg in mark.args:
            if not isinstance(arg, str):
                yield f"{item.nodeid}: requirement id {arg!r} is not a string"
            elif arg not in known:
                yield (
                    f"{item.nodeid}: unknown requirement id {arg!r} in @pytest.mark.req "
                    f"(not in {_display(REQUIREMENTS_PATH)})"
                )


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:  # pragma: no cover
        return str(path)


def check_items(items: Iterable[pytest.Item]) -> list[str]:
    known = load_checklist().ids
    problems: list[str] = []
    for item in items:
        problems.extend(_marker_problems(item, known))
    return problems


# --------------------------------------------------------------------------- pytest hooks


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "req(*ids): the requirement ids of the spec checklist (spec/requirements.md) a test covers",
    )


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """Turn a collector's report into a collection error when one of its tests has a bad id."""
    report = yield
    if report.passed and report.result:
        problems = check_items(node for node in report.result if isinstance(node, pytest.Item))
        if problems:
            report.outcome = "failed"
            report.longrepr = "\n".join(problems)
    return report


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    # A backstop for markers added after collection (``item.add_marker`` in another plugin's
    # pytest_collection_modifyitems): the per-collector check above cannot see those.
    problems = check_items(items)
    if problems:
        raise pytest.UsageError("invalid requirement markers:\n" + "\n".join(problems))
