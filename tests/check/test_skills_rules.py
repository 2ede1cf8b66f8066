"""The skills.* rules of ``mcpkit check`` (SEP-2640) on fixture servers without mcpkit, each
breaking one rule, and on mcpkit's own reference server, which keeps them all."""

from __future__ import annotations

import pytest

from mcpkit.check import run_checks
from tests.check.helpers import by_rule, fixture
from tests.conftest import mcpkit_command

SKILL_RULES = ("skills.capability", "skills.names", "skills.frontmatter", "skills.digests", "skills.limits")
LEGACY = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]


def _failed(report) -> set[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return {(f.rule, f.severity) for f in report.failed()}


@pytest.mark.asyncio
@pytest.mark.parametrize(("name", "expected", "says"), [
    ("skills_base", set(), None),
    ("skills_wrong_digest", {("skills.digests", "error")},
     "skill://pdf-processing/references/FORMS.md: the served bytes' digest is sha256:"),
    ("skills_frontmatter_differs", {("skills.frontmatter", "error")},
     "skill://pdf-processing/SKILL.md: the entry's frontmatter differs from the file's in description"),
    ("skills_bad_name", {("skills.names", "error")}, "'PDF_Processing': a skill name has only lowercase letters"),
    ("skills_no_resources", {("skills.capability", "error"), ("skills.limits", "warning")},
     "declares the skills extension but not the resources capability"),
])
async def test_a_skills_fixture_fails_exactly_the_rules_of_its_fault(name, expected, says):
    report = await run_checks(fixture(name), progress=False, rules=set(SKILL_RULES))
    assert _failed(report) == expected, [f.to_dict() for f in report.failed()]
    for rule_id in SKILL_RULES:  # judged on every revision, never skipped: the extension is declared
        statuses = by_rule(report, rule_id)
        assert set(statuses) == set(LEGACY) and "skip" not in statuses.values(), (rule_id, statuses)
    if says is not None:
        assert any(says in f.message for f in report.failed()), [f.message for f in report.failed()]


@pytest.mark.asyncio
async def test_the_rules_skip_a_server_without_the_extension():
    report = await run_checks(fixture("good"), progress=False, rules=set(SKILL_RULES))
    for rule_id in SKILL_RULES:
        assert set(by_rule(report, rule_id).values()) == {"skip"}, rule_id


@pytest.mark.asyncio
async def test_the_reference_server_keeps_every_skills_rule_on_every_revision():
    # PYTHONPATH passed on: the server is this checkout's wherever mcpkit is installed from
    report = await run_checks(mcpkit_command("serve"), progress=False, rules=set(SKILL_RULES),
                              inherit_env=["PYTHONPATH"])
    assert report.failed() == []
    for rule_id in SKILL_RULES:
        assert set(by_rule(report, rule_id).values()) == {"pass"}, rule_id
    assert set(by_rule(report, "skills.digests")) == {*LEGACY, "2026-07-28"}
