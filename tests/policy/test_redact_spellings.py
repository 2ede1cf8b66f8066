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
]
ORDINARY_KEYS = [
    "spinner", "spin", "passage", "passages", "author", "authors", "authority", "oauth_url", "auth_url",
    "bypass", "compass", "pinned", "pinpoint", "issuer", "otpauth_url",
    "max_tokens", "total_tokens", "prompt_tokens", "token_count", "tokenizer", "password_hint", "passwordless",
    "keyboard", "pass_count", "pin_count", "topic", "options",
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
]
ORDINARY_TEXT = [
    "the spinner spins: 3 times", "spin=3 and spinner=fast", "a passage: from the book", "author: Jane Austen",
    "bypass=1 compass: north", "max_tokens=100 total_tokens: 5", "ls -la",
    "the tests pass quickly", "mysql --port=3306 -u root", "docker run -p 8080:80 image", "pinned: yes",
    "deploy --passwordless --force", "oauth=enabled", "x-auth=1",
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
                                  "sshpass -p" * 90_000, "pin: " * 200_000])
def test_hostile_text_is_scanned_in_linear_time(text: str) -> None:
    """A hang guard (not a timing assertion): a megabyte built from the new shapes' triggers is
    redacted without a quadratic scan (each scan for mysql's -p stops at the next mysql)."""
    assert len(R.redact_text(text)) >= len(text) // 2
