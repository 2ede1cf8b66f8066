"""Redaction of the spellings a hostile review found unredacted (item 22): key variants (case,
separators, plurals, numeric suffixes, short words) and credentials on command lines; and the
ordinary words that must stay (spinner, passage, author)."""

from __future__ import annotations

import pytest

from mcpkit.policy.redact import DEFAULT_MASK, Redactor, default_redactor

R = default_redactor()

MISSED_KEYS = [
    "pwd", "PWD", "pass", "Pass", "passcode", "password2", "password_2", "Password-3", "password_confirmation",
    "passwordConfirmation", "password_confirm", "api_keys", "apiKeys", "API_KEYS", "apikeys", "tokens",
    "accessTokens", "refresh_tokens", "auth", "Auth", "x_auth", "bearer", "jwt", "JWT", "id_jwt", "otp", "OTP",
    "otp2", "pin", "PIN", "card_pin", "userPin", "pins", "ssh_key", "sshKey", "SSH-KEY",
    "ssh_keys", "db_pass", "mysql_pwd", "secret2", "client_secrets", "credentials_2",
    # payment cards and identity numbers
    "credit_card_number", "creditCardNumber", "card_number", "cardNumber", "cc_number", "ccNum", "card_no",
    "card_cvv", "cvv", "CVV2", "cvc", "card_security_code", "iban", "IBAN", "payee_iban", "ssn",
    "customer_ssn", "debit_card", "ccn",
]
ORDINARY_KEYS = [
    "spinner", "spin", "passage", "passages", "author", "authors", "authority", "oauth_url", "auth_url",
    "bypass", "compass", "pinned", "pinpoint", "issuer", "otpauth_url",
    "max_tokens", "total_tokens", "prompt_tokens", "token_count", "tokenizer", "password_hint", "passwordless",
    "keyboard", "pass_count", "pin_count", "topic", "options",
    "cardholder", "cardholder_name", "card_count", "card_type", "card_brand", "cards_total",
    "email_cc", "cc", "bcc", "camera_pan", "pan", "panel", "business", "class_name", "accessory",
]


@pytest.mark.req("LG-05", "TL-11")
@pytest.mark.parametrize("key", MISSED_KEYS)
def test_key_spellings_are_secret(key: str) -> None:
    assert R.is_secret_key(key) is True, key
    assert R.redact({"outer": {key: "hunter2hunter2"}}) == {"outer": {key: DEFAULT_MASK}}


@pytest.mark.req("LG-05")
@pytest.mark.parametrize("key", ORDINARY_KEYS)
def test_ordinary_keys_are_not(key: str) -> None:
    assert R.is_secret_key(key) is False, key
    value = {key: "kept"}
    assert R.redact(value) is value


FREE_TEXT = [
    ("curl -u alice:s3cr3t https://api.example.com", "curl -u alice:[REDACTED] https://api.example.com"),
    ("curl --user alice:s3cr3t -X POST", "curl --user alice:[REDACTED] -X POST"),
    ("curl --user=alice:s3cr3t", "curl --user=alice:[REDACTED]"),
    ("mysql -h db -u root -pSECRET123 shop", "mysql -h db -u root -p[REDACTED] shop"),
    ("mysqldump -uroot -phunter2 --all-databases", "mysqldump -uroot -p[REDACTED] --all-databases"),
    ("mysql -P3306 -u root -p shop", "mysql -P3306 -u root -p shop"),  # -p alone prompts: nothing to hide
    ("deploy --password hunter2 --force", "deploy --password [REDACTED] --force"),
    ("deploy --password=hunter2", "deploy --password=[REDACTED]"),
    ("gh auth login --token ghx_notashape1234", "gh auth login --token [REDACTED]"),
    ("tool --api-key 'abc123xyz' run", "tool --api-key '[REDACTED]' run"),
    ("sshpass -p 'hunter2' ssh host", "sshpass -p '[REDACTED]' ssh host"),
    ("pwd=hunter2 user=bob", "pwd=[REDACTED] user=bob"),
    ("login pass: hunter2", "login pass: [REDACTED]"),
    ("pin=1234", "pin=[REDACTED]"),
    ("otp: 123456", "otp: [REDACTED]"),
    ("jwt=abc.def.ghi", "jwt=[REDACTED]"),
    ("auth=abcdef&x=1", "auth=[REDACTED]&x=1"),
    ("?tokens=abc&x=1", "?tokens=[REDACTED]&x=1"),
    ("passcode: 0000", "passcode: [REDACTED]"),
    ('{"ssh_key": "AAAAB3Nza"}', '{"ssh_key": "[REDACTED]"}'),
    ('{"api_keys": "k1"}', '{"api_keys": "[REDACTED]"}'),
    # without a space or quoted, without a scheme; payment cards (a network's prefix and length,
    # and a valid Luhn digit)
    ("curl -uadmin:hunter2 https://x", "curl -uadmin:[REDACTED] https://x"),
    ('curl -u "admin:pass word" https://x', 'curl -u "admin:[REDACTED]" https://x'),
    ("scp bob:s3cret@files.example.com:/x .", "scp bob:[REDACTED]@files.example.com:/x ."),
    ("push to admin:hunter2@10.0.0.5 now", "push to admin:[REDACTED]@10.0.0.5 now"),
    ("card 4111 1111 1111 1111, exp 12/29", "card 4[REDACTED], exp 12/29"),
    ("pay with 4111-1111-1111-1111", "pay with 4[REDACTED]"),
    ("mc 5105105105105100 amex 378282246310005.", "mc 5[REDACTED] amex 3[REDACTED]."),
    ('{"pan": "4012888888881881"}', '{"pan": "4[REDACTED]"}'),
]
ORDINARY_TEXT = [
    "the spinner spins: 3 times", "spin=3 and spinner=fast", "a passage: from the book", "author: Jane Austen",
    "bypass=1 compass: north", "max_tokens=100 total_tokens: 5", "ls -la",
    "the tests pass quickly", "mysql --port=3306 -u root", "docker run -p 8080:80 image", "pinned: yes",
    "deploy --passwordless --force", "oauth=enabled", "x-auth=1",
    # numbers that are no card, addresses that carry no password
    "order 4111111111111112",  # Luhn fails
    "order 1234567890123456",  # no network starts with 1
    "at 1732700000000 ms", "call +1 555 123 4567", "tel 2125551212", "build 20261127150000",
    "id 9999999999999999", "Contact: alice@example.com", "mail alice@example.com", "see 10:30@cafe",
    "sha 3f786850e387550fdab836ed7e6dc881de23001b",
]


@pytest.mark.req("LG-05", "TL-11")
@pytest.mark.parametrize(("text", "expected"), FREE_TEXT)
def test_credentials_in_free_text(text: str, expected: str) -> None:
    assert R.redact_text(text) == expected
    assert R.redact_text(expected) == expected  # idempotent


@pytest.mark.req("LG-05")
@pytest.mark.parametrize("text", ORDINARY_TEXT)
def test_ordinary_text_is_kept(text: str) -> None:
    assert R.redact_text(text) is text


def test_whole_words_come_with_the_default_keys_only() -> None:
    assert Redactor(keys=("password",)).redact_text("pin=1234") == "pin=1234"
    assert Redactor(keys=("password",), whole_words=("pin",)).redact_text("pin=1234 spin=3") == \
        "pin=[REDACTED] spin=3"
    assert not Redactor(keys=(), patterns=()).is_secret_key("pwd")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("text", ["mysql " * 160_000, "-u " * 300_000, "--password " * 90_000, "m" * 1_000_000,
                                  "sshpass -p" * 90_000, "pin: " * 200_000, "4 " * 400_000, "4" * 1_000_000,
                                  "a:" * 400_000, "a:" + "b" * 1_000_000])
def test_hostile_text_is_scanned_in_linear_time(text: str) -> None:
    """A hang guard (not a timing assertion): a megabyte built from the new shapes' triggers is
    redacted without a quadratic scan (each scan for mysql's -p stops at the next mysql)."""
    assert len(R.redact_text(text)) >= len(text) // 2


def test_an_audit_line_masks_a_card_and_a_command_line_password(tmp_path) -> None:
    import json

    from mcpkit.policy.audit import AuditLog

    log = AuditLog(tmp_path / "audit.jsonl")
    log.record({"tool": "pay", "arguments": {"credit_card_number": "4111111111111111", "note": "card 5105105105105100",
                                             "cmd": "curl -uadmin:hunter2 https://x", "cardholder": "Ada"}})
    log.close()
    line = (tmp_path / "audit.jsonl").read_text()
    assert "4111111111111111" not in line and "105105105100" not in line and "hunter2" not in line
    assert json.loads(line)["arguments"]["cardholder"] == "Ada"

