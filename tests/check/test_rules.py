"""The rule registry and the argument samples the rules send."""

from __future__ import annotations

import importlib
import re

import pytest

from mcpkit.check import all_rules
from mcpkit.check.model import FRAMEWORKS, KEYWORDS
from mcpkit.check.samples import invalid_arguments, sample_arguments, sample_value
from tests.plugins.compliance import load_checklist


def test_every_rule_is_well_formed_and_cites_known_requirements() -> None:
    known = load_checklist().ids
    rules = all_rules()
    assert len(rules) >= 20
    for rule_id, rule in rules.items():
        family, _, name = rule_id.partition(".")
        assert family and name and rule.id == rule_id
        assert rule.severity in ("error", "warning", "info")
        assert rule.requirements and set(rule.requirements) <= known, rule_id
        assert rule.title and rule.fix, rule_id
        assert rule.quote and rule.source, rule_id  # the spec's words, and where they are
        assert set(rule.fixes) == set(FRAMEWORKS), rule_id
        module = importlib.import_module(rule.check.__module__)
        assert module.__name__.startswith("mcpkit.check.rules."), rule_id


def test_the_severity_follows_the_spec_keyword() -> None:
    """MUST -> error, SHOULD -> warning, advice -> info; a keyword may differ by revision."""
    rules = all_rules()
    assert rules["stdio.exit-on-eof"].severity == "warning"  # ST-07 is a SHOULD
    assert rules["http.origin-guard"].severity == "error"  # HS-01/HS-02 are MUSTs
    assert rules["http.host-guard"].severity == "info"  # not in the spec
    assert rules["tools.name"].severity == "warning" and rules["tools.name"].revisions == ("2025-11-25", "2026-07-28")
    not_found = rules["resources.not-found-code"]
    assert not_found.severity_at("2025-11-25") == "warning" and not_found.severity_at("2026-07-28") == "error"
    for rule in rules.values():
        if rule.id.startswith(("errors.", "pagination.")) or "SHOULD" == rule.keyword:
            assert rule.severity_at(None) != "error" or rule.keywords, rule.id


def test_the_rules_the_issue_asks_for_exist() -> None:
    assert {
        "stdio.stdout-clean", "tools.name", "tools.description", "schema.input-valid", "schema.output-valid",
        "errors.unknown-tool", "errors.invalid-arguments", "resources.not-found-code", "pagination.cursor",
        "capabilities.backed", "lifecycle.handshake", "lifecycle.negotiation", "lifecycle.ping",
        "http.host-guard", "http.origin-guard", "http.session", "tools.read-only-output", "conformance.suite",
        "stdio.exit-on-eof", "stdio.framing", "capabilities.list-changed", "protocol.notification-unanswered",
        "http.notification-accepted", "http.protocol-version-header", "tools.input-validated",
    } <= set(all_rules())


def test_sample_arguments_follow_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 3},
            "x": {"type": "number", "exclusiveMinimum": 0.5},
            "mode": {"enum": ["fast", "slow"]},
            "fixed": {"const": 7},
            "level": {"type": "string", "default": "info"},
            "when": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string", "minLength": 8}, "minItems": 1},
            "maybe": {"anyOf": [{"type": "null"}, {"type": "boolean"}]},
            "item": {"$ref": "#/$defs/item"},
            "optional": {"type": "string"},
        },
        "required": ["n", "x", "mode", "fixed", "level", "when", "tags", "maybe", "item"],
        "$defs": {"item": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
    }
    assert sample_arguments(schema) == {
        "n": 3, "x": 1.5, "mode": "fast", "fixed": 7, "level": "info", "when": "2025-01-01T00:00:00Z",
        "tags": ["samplexx"], "maybe": False, "item": {"id": 0},
    }


@pytest.mark.parametrize(
    ("schema", "value"),
    [({"type": ["null", "integer"], "maximum": -2}, -2), ({"type": "string"}, "sample"), (True, "sample"),
     ({"properties": {"a": {"type": "boolean"}}, "required": ["a"]}, {"a": False})],
)
def test_sample_values(schema: object, value: object) -> None:
    assert sample_value(schema) == value


def test_invalid_arguments_leave_out_the_required_properties() -> None:
    assert invalid_arguments({"type": "object", "required": ["a", "b"]}) == (
        {}, "missing the required properties a, b",
    )
    assert invalid_arguments({"type": "object", "required": ["a"]}) == ({}, "missing the required property a")
    assert invalid_arguments({"type": "object"}) is None
    assert invalid_arguments({"type": "object", "required": "x"}) is None  # an ill-formed schema


#: RFC 2119 words -> the keyword of mcpkit.check.model.KEYWORDS they state
_WORDS = {"MUST NOT": "MUST", "MUST": "MUST", "SHALL NOT": "MUST", "SHALL": "MUST", "REQUIRED": "MUST",
          "SHOULD NOT": "SHOULD", "NOT RECOMMENDED": "SHOULD", "SHOULD": "SHOULD", "RECOMMENDED": "SHOULD",
          "MAY": "MAY", "OPTIONAL": "MAY"}
_WORD = re.compile(r"(?<![A-Za-z])(" + "|".join(_WORDS) + r")(?![A-Za-z])")
_STRENGTH = ("MAY", "SHOULD", "MUST")


def _stated(text: str) -> set[str]:
    return {_WORDS[word] for word in _WORD.findall(text)}


#: rules whose severity is not a spec keyword's, by design: the poisoning screen. The spec states
#: no keyword for what a definition may say (it tells clients to treat descriptions as untrusted),
#: so these take the confidence of mcpkit/proxy/scan.py, which `mcpkit proxy --scan` shares, and
#: docs/check.md says so. Listed exactly: a rule leaving or joining them fails this test.
OWN_SCREEN = {
    "security.invisible-characters", "security.model-instructions", "security.context-parameters",
    "security.suspicious-instructions", "security.secret-parameters", "security.long-description",
}


def test_every_rule_severity_follows_the_keyword_of_its_spec_text_and_requirements() -> None:
    """docs/rules.md's mapping, for every rule and each revision's keyword: MUST -> error, SHOULD ->
    warning, MAY or no normative keyword -> info. A rule's MUST, SHOULD or MAY is the spec's own
    word: its quote states it, and no requirement it cites is weaker (a lower-case "should", or
    host advice that is no spec text at all, is advice)."""
    checklist = load_checklist().by_id()
    wrong: list[str] = []
    for rule in all_rules().values():
        for revision, keyword in [("", rule.keyword), *rule.keywords.items()]:
            assert rule.severity_at(revision or None) == KEYWORDS[keyword]
            if keyword == "advice":
                continue
            if keyword not in _stated(rule.quote):
                wrong.append(f"{rule.id}: {keyword}, but its quote states {sorted(_stated(rule.quote)) or 'none'}")
            cited = set().union(*(_stated(checklist[r].level) for r in rule.requirements))
            if not cited or max(map(_STRENGTH.index, cited)) < _STRENGTH.index(keyword):
                wrong.append(f"{rule.id}: {keyword}, stricter than its requirements ({sorted(cited) or 'none'})")
    assert {line.split(":", 1)[0] for line in wrong} == OWN_SCREEN, wrong
