"""docs/rules.md is generated from the rules (`mcpkit check --list-rules --format markdown`)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from mcpkit.check import all_rules
from mcpkit.check.cli import main
from mcpkit.check.formats import reproduce, rules_markdown
from tests.check.helpers import FIXTURES, http_fixture

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "rules.md"


def test_docs_rules_md_is_up_to_date() -> None:
    assert DOC.read_text(encoding="utf-8") == rules_markdown(), (
        "docs/rules.md is stale: run `mcpkit check --list-rules --format markdown > docs/rules.md`"
    )


def test_every_rule_has_its_section_with_quote_and_fixes() -> None:
    text = rules_markdown()
    for rule in all_rules().values():
        section = text.split(f"\n## {rule.id}\n", 1)[1].split("\n## ", 1)[0]
        assert f"> {rule.quote}" in section
        for label in ("mcpkit", "official Python SDK", "FastMCP", "TypeScript SDK"):
            assert f"- {label}: " in section, (rule.id, label)


def _section(rule_id: str) -> str:
    return rules_markdown().split(f"\n## {rule_id}\n", 1)[1].split("\n## ", 1)[0]


def test_docs_rules_md_documents_exactly_the_registered_rules() -> None:
    """Every registered rule has its row and its section, with its requirement ids, its severity
    and how to reproduce it; nothing is documented that is not registered."""
    text = DOC.read_text(encoding="utf-8")
    rules = all_rules()
    rows = set(re.findall(r"^\| \[`([a-z0-9.-]+)`\]", text, re.M))
    sections = set(re.findall(r"^## ([a-z0-9.-]+)$", text, re.M))
    assert rows == sections == set(rules)
    for rule in rules.values():
        section = _section(rule.id)
        assert f"- **Requirements:** {', '.join(rule.requirements)}." in section
        assert f"a failure is {'an' if rule.severity_at(None) == 'error' else 'a'} {rule.severity_at(None)}" in section
        assert f"\n**Reproduce:** {reproduce(rule)}\n" in section
        assert f"--rule {rule.id}" in reproduce(rule)
        if rule.example:
            assert (FIXTURES / f"{rule.example.split()[0]}.py").is_file(), rule.id


def _examples() -> dict[str, list[str]]:
    """The fixture and options of each documented reproduction -> the rules it reproduces."""
    out: dict[str, list[str]] = {}
    for rule in sorted(all_rules().values(), key=lambda r: r.id):
        if rule.example:
            out.setdefault(rule.example, []).append(rule.id)
    return out


@pytest.mark.parametrize("example", sorted(_examples()))
def test_each_documented_reproduction_fails_its_rules(example: str, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The command docs/rules.md gives, run as written (the fixture at its path, its options)."""
    rule_ids = _examples()[example]
    rules = [all_rules()[r] for r in rule_ids]
    text = reproduce(rules[0])
    commands = text.split("`")
    http = text.startswith("`python ")
    args = shlex.split(commands[3] if http else commands[1])[2:]  # after "mcpkit check"
    args += [f"--rule={r}" for r in rule_ids[1:]]
    hosts = [r.split(".", 1)[1] for r in rule_ids if r.startswith("hosts.")]
    if hosts:  # each host rule's command names its host: one run names them all
        args[args.index("--hosts") + 1] = ",".join(hosts)
    monkeypatch.chdir(ROOT)
    if http:
        with http_fixture(example.split()[0]) as url:
            code = main([url, *args[1:], "--format", "json"])
    else:
        code = main([*args, "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    failed = [f for f in report["findings"] if f["status"] == "fail"]
    assert {f["rule"] for f in failed} == set(rule_ids), report["findings"]
    assert code == (1 if any(f["severity"] == "error" for f in failed) else 0)
