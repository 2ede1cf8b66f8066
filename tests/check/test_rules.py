"""The rule registry and the argument samples the rules send."""

from __future__ import annotations

import importlib

import pytest

from mcpkit.check import all_rules
from mcpkit.check.model import FRAMEWORKS
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
