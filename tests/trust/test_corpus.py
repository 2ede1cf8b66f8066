"""The detectors against their labelled corpus (tests/trust/corpus, tools/redaction_corpus.py):
a regression in recall or a new false positive fails here. The figures are in docs/security.md."""

from __future__ import annotations

import pytest

from mcpkit.policy.detectors import ALL_KINDS, DEFAULT_KINDS, PII_KINDS
from tools import redaction_corpus

#: the floor of every kind's recall (measured: 1.0 for each at the time of writing)
RECALL_FLOOR = 0.95


@pytest.mark.parametrize("kinds", [DEFAULT_KINDS, PII_KINDS, ALL_KINDS], ids=["secrets", "pii", "all"])
def test_recall_per_kind_holds_its_floor(kinds: tuple[str, ...]) -> None:
    result = redaction_corpus.measure(kinds)
    assert set(result["recall"]) == set(kinds) - {"password-label"}  # every kind has positives (but the opt-in label)
    low = {kind: value for kind, value in result["recall"].items() if value < RECALL_FLOOR}
    assert not low, (low, result["missed"][:5])


def test_the_default_kinds_find_nothing_in_the_hard_negatives() -> None:
    result = redaction_corpus.measure(DEFAULT_KINDS)
    assert result["negatives"] > 500
    assert result["false_positives"] == []


def test_the_pii_kinds_find_only_the_one_known_false_positive() -> None:
    # ssh's user@host is shaped as an e-mail address: documented in docs/security.md
    found = [(row["value"], row["found"]) for row in redaction_corpus.measure(ALL_KINDS)["false_positives"]]
    assert found == [("ssh -i ~/.ssh/id_ed25519 deploy@host.example.com", [("email", "/")])]


def test_the_corpus_is_what_the_generator_writes() -> None:
    positives, negatives = redaction_corpus.generate()
    assert redaction_corpus.load("positives") == positives
    assert redaction_corpus.load("negatives") == negatives
