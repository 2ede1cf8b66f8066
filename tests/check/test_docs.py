"""docs/rules.md is generated from the rules (`mcpkit check --list-rules --format markdown`)."""

from __future__ import annotations

from pathlib import Path

from mcpkit.check import all_rules
from mcpkit.check.formats import rules_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "rules.md"


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
