"""The one detector set (policy/detectors.py) as the proxy's redaction in transit uses it: kinds
chosen by name or group, a marker naming the kind, what was masked reported, PII opt-in with
its checksums, code and placeholders spared; and the audit trail's redactor left as it was."""

from __future__ import annotations

import pytest

from mcpkit.policy.detectors import ALL_KINDS, DEFAULT_KINDS, PII_KINDS, expand_kinds, luhn
from mcpkit.policy.redact import DEFAULT_MASK, Redactor, default_redactor

MARKER = "[redacted:{kind}]"
AWS = "AKIAQX4ZT7NRW2LBJ5HM"


def transit(*kinds: str) -> Redactor:
    return Redactor(kinds=expand_kinds(kinds or ("all",)), marker=MARKER)


def test_kinds_and_groups_expand_in_one_order_and_an_unknown_name_says_the_known_ones() -> None:
    assert expand_kinds(["secrets"]) == DEFAULT_KINDS
    assert expand_kinds(["pii", "secrets"]) == tuple(k for k in ALL_KINDS if k != "password-label")
    assert expand_kinds(["email", "jwt"]) == ("jwt", "email")
    assert set(PII_KINDS).isdisjoint(DEFAULT_KINDS) and "payment-card" in DEFAULT_KINDS
    with pytest.raises(ValueError, match="unknown kind 'passport'; the kinds are private-key, .*and the groups secrets"):
        expand_kinds(["passport"])


def test_scan_text_masks_with_the_kind_and_says_what_it_masked() -> None:
    text = f"key {AWS}, db https://app:Tr0ub4dor-3@db.example.com, mail alice@example.com"
    out, kinds = transit().scan_text(text)
    assert out == ("key [redacted:aws-access-key], db https://app:[redacted:url-password]@db.example.com, "
                   "mail [redacted:email]")
    assert sorted(kinds) == ["aws-access-key", "email", "url-password"]  # (in the order kinds are scanned)
    assert transit().scan_text(out) == (out, [])  # idempotent: a marker is not a secret
    clean = "nothing to see here, version 1.2.3 on 2026-11-27"
    got, none = transit().scan_text(clean)
    assert got is clean and none == []


def test_only_the_kinds_asked_for_are_looked_for() -> None:
    text = f"{AWS} alice@example.com"
    assert transit("aws-access-key").scan_text(text)[1] == ["aws-access-key"]
    assert transit("email").scan_text(text)[1] == ["email"]
    assert transit("secrets").scan_text(text) == ("[redacted:aws-access-key] alice@example.com", ["aws-access-key"])


@pytest.mark.parametrize(("text", "kind"), [
    ("IBAN DE89 3704 0044 0532 0130 00 please", "iban"),
    ("IBAN GB82WEST12345698765432 please", "iban"),
    ("SSN 123-45-6789 on file", "us-ssn"),
    ("call +44 20 7946 0958 today", "phone"),
    ("call (415) 555-0199 today", "phone"),
    ("card 4111-1111-1111-1111 ok", "payment-card"),
    ("Karte 4111 1111 1111 1111 für Müller", "payment-card"),
])
def test_pii_and_cards_are_found_with_their_checks(text: str, kind: str) -> None:
    assert transit().scan_text(text)[1] == [kind]


@pytest.mark.parametrize("text", [
    "IBAN DE88 3704 0044 0532 0130 00 please",  # mod-97 fails
    "IBAN DE89 3704 0044 0532 0130 please",  # Germany's length is 22
    "SSN 000-45-6789, 666-45-6789, 912-45-6789, 123-00-6789, 123-45-0000",  # never issued
    "card 4111 1111 1111 1112 ok",  # Luhn fails
    "call 12345 or +1 23 today",  # too few digits for a phone number
    "git clone git@github.com:example/repo.git",  # scp syntax, not an address
])
def test_what_fails_a_check_is_left_alone(text: str) -> None:
    assert transit().scan_text(text) == (text, [])


def test_luhn() -> None:
    assert luhn("4111111111111111") and not luhn("4111111111111112")


@pytest.mark.parametrize("text", [
    "password = getpass.getpass()", "token = os.environ['GITHUB_TOKEN']", "if password == confirm:",
    "api_key = settings.API_KEY", "DB_PASSWORD=${DB_PASSWORD:?set it}", "password=<your password>",
    "password=%s", "token=None",
])
def test_in_transit_an_assigned_value_that_is_code_or_a_placeholder_is_spared(text: str) -> None:
    assert transit().scan_text(text) == (text, [])


def test_a_bearer_credential_under_a_label_is_reported_as_http_auth() -> None:
    assert transit().scan_text("Authorization: Bearer Zq81vXpL0aB7cD2eF3gH4iJ5kL6mN7oP")[1] == ["http-auth"]
    assert transit().scan_text("password=Tr0ub4dor-3x")[1] == ["password-assignment"]
    assert transit("secrets").scan_text("password: Tr0ub4dor-3x")[1] == []  # password-label is opt-in
    assert transit("password-label").scan_text("password: Tr0ub4dor-3x")[1] == ["password-label"]


def test_the_audit_redactor_keeps_its_set_and_mask() -> None:
    # no PII (an audit line names its principal, often an e-mail address), both assignment forms
    text = f"{AWS} alice@example.com password: x1 SSN 123-45-6789"
    assert default_redactor().redact_text(text) == f"{DEFAULT_MASK} alice@example.com password: {DEFAULT_MASK} SSN 123-45-6789"
    assert sorted(Redactor().scan_text(text)[1]) == ["aws-access-key", "password-label"]


def test_a_mailto_or_sip_uri_is_an_address_not_a_password() -> None:
    for text in ("write to mailto:alice@example.com", "MAILTO:bob@example.com", "call sip:carol@example.com"):
        assert default_redactor().redact_text(text) == text
        assert transit("secrets").scan_text(text) == (text, [])
    assert default_redactor().redact_text("scp deploy:pw12@host.example.com:/x") == \
        f"scp deploy:{DEFAULT_MASK}@host.example.com:/x"
