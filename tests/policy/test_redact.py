"""Secret redaction: key matching, credential shapes in text, deep walks, logging."""

from __future__ import annotations

import base64
import io
import logging
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mcpkit.policy.redact import (
    DEFAULT_MASK,
    DEFAULT_PATTERNS,
    RedactingFilter,
    Redactor,
    default_redactor,
    install_log_redaction,
)

R = Redactor()
GHP = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"  # 36 characters after the prefix


# -- keys -------------------------------------------------------------------------------------

SECRET_KEYS = [
    "token", "Token", "TOKEN", "github_token", "GITHUB_TOKEN", "access_token", "refreshToken",
    "id-token", "x_auth_token", "secret", "client_secret", "clientSecret", "password", "dbPassword",
    "DB_PASSWORD", "passwd", "passphrase", "api_key", "apiKey", "X-Api-Key", "x.api.key", "API KEY",
    "apikey", "authorization", "Authorization", "Proxy-Authorization", "cookie", "Set-Cookie",
    "set_cookie", "cookies", "private_key", "privateKey", "secret_key", "aws_secret_access_key",
    "credential", "credentials", "session_id", "Mcp-Session-Id", "secrets", "signing_key", "tokens",
]
PLAIN_KEYS = [
    "max_tokens", "maxTokens", "token_count", "tokenizer", "total_tokens", "token_type",
    "author", "authority", "auth_url", "authorization_url", "cookie_policy", "password_hint",
    "passwordless", "secretary", "keywords", "key", "monkey", "session", "path", "name", "id",
    "credential_type", "apikey_id", "",
]


@pytest.mark.req("LG-05", "TL-11")
@pytest.mark.parametrize("key", SECRET_KEYS)
def test_secret_keys_match(key: str) -> None:
    assert R.is_secret_key(key) is True
    assert R.redact({key: "v"}) == {key: DEFAULT_MASK}


@pytest.mark.req("LG-05")
@pytest.mark.parametrize("key", PLAIN_KEYS)
def test_plain_keys_do_not_match(key: str) -> None:
    assert R.is_secret_key(key) is False
    value = {key: 12}
    assert R.redact(value) is value


def test_extra_and_replaced_keys() -> None:
    r = Redactor(extra_keys=("pin",))
    assert r.is_secret_key("card_pin") and r.is_secret_key("token")
    only = Redactor(keys=("pin",))
    assert only.is_secret_key("PIN") and not only.is_secret_key("password")
    assert only.redact_text("pin=1234 password=x") == "pin=[REDACTED] password=x"


# -- text -------------------------------------------------------------------------------------

TEXT_CASES = [
    ("Authorization: Bearer abc.def-ghi12345", "Authorization: Bearer [REDACTED]"),
    ("curl -H 'Authorization: bearer Zm9vYmFy123'", "curl -H 'Authorization: bearer [REDACTED]'"),
    ("Basic dXNlcjpwYXNz", "Basic [REDACTED]"),
    ("the bearer authentication scheme", "the bearer authentication scheme"),
    ("basic information", "basic information"),
    ("Basic abcdefgh12", "Basic abcdefgh12"),  # not base64 of user:password
    ("https://bob:hunter2@example.com/x", "https://bob:[REDACTED]@example.com/x"),
    ("redis://:pw0@cache:6379/0", "redis://:[REDACTED]@cache:6379/0"),
    ("https://example.com:8443/path?q=1", "https://example.com:8443/path?q=1"),
    ("password=hunter2 user=bob", "password=[REDACTED] user=bob"),
    ("dbPassword: s3cr3t, next", "dbPassword: [REDACTED], next"),
    ("GITHUB_TOKEN = abc123", "GITHUB_TOKEN = [REDACTED]"),
    ('{"password": "correct horse", "max_tokens": 5}', '{"password": "[REDACTED]", "max_tokens": 5}'),
    ("{'api_key': 'a b c'}", "{'api_key': '[REDACTED]'}"),
    ("X-Api-Key: abcd1234", "X-Api-Key: [REDACTED]"),
    ("/cb?code=1&access_token=zzz&x=1", "/cb?code=1&access_token=[REDACTED]&x=1"),
    ("Authorization: Token abc123", "Authorization: Token [REDACTED]"),
    ("max_tokens=100 token_count: 5 tokenizer=gpt2", "max_tokens=100 token_count: 5 tokenizer=gpt2"),
    ("key AKIAIOSFODNN7EXAMPLE here", "key [REDACTED] here"),
    ("ASIAABCDEFGHIJKLMNOP", "[REDACTED]"),
    ("AKIAIOSFODNN7EXAMPLEX", "AKIAIOSFODNN7EXAMPLEX"),  # 17 characters: not a key id
    (f"push with {GHP}.", "push with [REDACTED]."),
    ("github_pat_" + "A" * 22 + "_" + "b" * 59, "[REDACTED]"),
    ("xoxb-1234567890-abcdefghij", "[REDACTED]"),
    ("sk_live_" + "a1" * 12, "[REDACTED]"),
    ("rk_test_" + "a1" * 12, "[REDACTED]"),
    ("sk-proj-" + "x1" * 20, "[REDACTED]"),
    ("sk-ant-api03-" + "Ab1_" * 10, "[REDACTED]"),
    ("task-manager is not a key", "task-manager is not a key"),
    ("AIza" + "B" * 35, "[REDACTED]"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl ok", "jwt [REDACTED] ok"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----\nafter", "[REDACTED]\nafter"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nx\n-----END PGP PRIVATE KEY BLOCK-----", "[REDACTED]"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\ntruncated b3BlbnNzaC1rZXk", "[REDACTED]"),
    ("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", None),
    ("", None),
    ("plain words, nothing to hide: 12:30 = noon", None),
]


@pytest.mark.req("LG-05", "TL-11")
@pytest.mark.parametrize(("text", "expected"), TEXT_CASES)
def test_redact_text(text: str, expected: str | None) -> None:
    out = R.redact_text(text)
    if expected is None:
        assert out is text
    else:
        assert out == expected
    assert R.redact_text(out) is out  # idempotent, and the fast path on redacted text


def test_custom_mask_and_patterns() -> None:
    r = Redactor(mask="***", extra_patterns=[r"ID-(?P<secret>\d{6})", re.compile(r"zz+", re.IGNORECASE)])
    assert r.redact_text("ID-123456 password=x ZZZ") == "ID-*** password=*** ***"
    only = Redactor(keys=(), patterns=[r"cat"])
    assert only.redact_text(f"cat password=x {GHP}") == f"[REDACTED] password=x {GHP}"
    none = Redactor(keys=(), patterns=())
    text = f"password=x {GHP}"
    assert none.redact_text(text) is text and none.redact({"password": 1}) == {"password": 1}
    with pytest.raises(ValueError, match="mask"):
        Redactor(mask="")


def test_short_text_is_still_scanned_when_a_match_fits() -> None:
    assert Redactor(keys=("pin",)).redact_text("pin=1") == "pin=[REDACTED]"
    assert Redactor(keys=(), patterns=["ab"]).redact_text("ab") == "[REDACTED]"
    assert R.redact_text("://:p@") == "://:[REDACTED]@"


def test_default_patterns_stand_alone() -> None:
    # The exported sources are usable on their own (e.g. to extend a custom list).
    assert len(DEFAULT_PATTERNS) >= 9
    r = Redactor(keys=(), patterns=DEFAULT_PATTERNS)
    assert r.redact_text(f"a {GHP} b AKIAIOSFODNN7EXAMPLE") == "a [REDACTED] b [REDACTED]"
    assert r.redact_text("password=x") == "password=x"


# -- data -------------------------------------------------------------------------------------


@pytest.mark.req("LG-05", "TL-11")
def test_redact_deep_walk_copies_only_what_changes() -> None:
    shared = {"path": "/tmp/a", "n": [1, 2, 3]}
    data = {
        "query": "select 1",
        "credentials": {"user": "bob", "pass": "x"},
        "headers": [("Accept", "text/plain"), ("Cookie", "a=b")],
        "nested": [{"github_token": 5}, {"ok": None}, f"token {GHP}"],
        "shared": shared,
        "obj": object,
    }
    snapshot = repr(data)
    out = R.redact(data)
    assert out == {
        "query": "select 1",
        "credentials": DEFAULT_MASK,
        "headers": [("Accept", "text/plain"), ("Cookie", "a=b")],  # a tuple's items are not keys
        "nested": [{"github_token": DEFAULT_MASK}, {"ok": None}, "token [REDACTED]"],
        "shared": shared,
        "obj": object,
    }
    assert repr(data) == snapshot  # input untouched
    assert out["shared"] is shared and out["headers"] is data["headers"]
    assert out["nested"][1] is data["nested"][1]
    assert R.redact(out) is out


def test_redact_tuples_and_non_json() -> None:
    value = ("x", f"{GHP}", 3)
    assert R.redact(value) == ("x", "[REDACTED]", 3)
    assert isinstance(R.redact(value), tuple)
    marker = object()
    assert R.redact(marker) is marker
    assert R.redact({1: GHP, "password": None}) == {1: "[REDACTED]", "password": DEFAULT_MASK}


def test_clean_payload_is_returned_as_is() -> None:
    args = {"path": "/home/u/project/src/main.py", "limit": 10, "opts": {"recursive": True, "glob": "*.py"},
            "query": "SELECT name FROM users WHERE id = 5", "tags": ["a", "b"], "ratio": 0.5}
    assert R.redact(args) is args


def test_deep_nesting_is_masked_not_crashing() -> None:
    deep: Any = "x"
    for _ in range(2000):
        deep = [deep]
    out = R.redact(deep)
    inner = out
    for _ in range(100):
        inner = inner[0]
    assert inner == DEFAULT_MASK


def test_a_dict_of_known_plain_keys_and_numbers_is_skipped_but_nothing_else_is() -> None:
    r = Redactor()
    plain = {"a": 1, "b": 2.5, "c": None, "d": True}
    assert r.redact(plain) is plain and r.redact(plain) is plain  # the second time on the fast path
    # a known plain key beside a secret one, or beside a value that is text or a container
    assert r.redact({"a": 1, "pin": 1234}) == {"a": 1, "pin": DEFAULT_MASK}
    assert r.redact({"a": "Bearer abcdefgh12345678"}) == {"a": f"Bearer {DEFAULT_MASK}"}
    assert r.redact({"a": {"password": 5}}) == {"a": {"password": DEFAULT_MASK}}
    assert r.redact({"a": [7, "token=abc"]}) == {"a": [7, f"token={DEFAULT_MASK}"]}
    assert r.redact({"b": 2, 3: 4}) == {"b": 2, 3: 4}  # a key that is not text is never a known one


def test_key_cache_is_bounded() -> None:
    r = Redactor()
    for i in range(10_000):
        r.is_secret_key(f"k{i}")
    assert len(r._cache) <= 4096 and len(r._plain_keys) <= 4096
    assert r.is_secret_key("my_token") and not r.is_secret_key("k1")


def test_default_redactor_is_shared() -> None:
    assert default_redactor() is default_redactor()


# -- properties -------------------------------------------------------------------------------

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_B64URL = _ALNUM + "-_"


def _s(alphabet: str, lo: int, hi: int | None = None) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=lo, max_size=hi if hi is not None else lo)


_DIGIT = st.sampled_from("0123456789")


def _with_digit(body: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(body, _DIGIT).map("".join)


# (text containing the secret, the secret that must not survive)
SECRETS: dict[str, st.SearchStrategy[tuple[str, str]]] = {
    "bearer": st.tuples(st.sampled_from(["Bearer", "bearer", "BEARER"]), _with_digit(_s(_ALNUM + "-._~+/", 15, 40)))
    .map(lambda t: (f"{t[0]} {t[1]}", t[1])),
    "basic": st.tuples(_s(_ALNUM, 4, 12), _s(_ALNUM, 8, 20))
    .map(lambda t: base64.b64encode(f"{t[0]}:{t[1]}".encode()).decode())
    .map(lambda b: (f"Basic {b}", b)),
    "pem": _s(_ALNUM + "+/", 40, 120).map(
        lambda b: ("-----BEGIN EC PRIVATE KEY-----\n" + "\n".join(textwrap.wrap(b, 64))
                   + "\n-----END EC PRIVATE KEY-----", b[:40])
    ),
    "jwt": st.tuples(_s(_B64URL, 10, 30), _s(_B64URL, 10, 30), _s(_B64URL, 16, 43))
    .map(lambda t: f"eyJ{t[0]}.eyJ{t[1]}.{t[2]}").map(lambda j: (j, j)),
    "aws": st.tuples(st.sampled_from(["AKIA", "ASIA"]), _s("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16))
    .map("".join).map(lambda k: (k, k)),
    "github": st.one_of(
        st.tuples(st.sampled_from(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]), _s(_ALNUM, 36)).map("".join),
        st.tuples(st.just("github_pat_"), _s(_ALNUM, 22), st.just("_"), _s(_ALNUM, 59)).map("".join),
    ).map(lambda k: (k, k)),
    "slack": st.tuples(st.sampled_from("abposr"), _s("0123456789", 10, 13), _s(_ALNUM, 16, 24))
    .map(lambda t: f"xox{t[0]}-{t[1]}-{t[2]}").map(lambda k: (k, k)),
    "sk": st.tuples(st.sampled_from(["sk_live_", "rk_live_", "sk_test_", "sk-", "sk-proj-", "sk-ant-api03-"]),
                    _s(_ALNUM, 24, 48)).map("".join).map(lambda k: (k, k)),
    "google": _s(_B64URL, 35).map(lambda k: "AIza" + k).map(lambda k: (k, k)),
    "assignment": st.tuples(
        st.sampled_from(["password", "api_key", "token", "client_secret", "GITHUB_TOKEN", "X-Api-Key", "dbPassword"]),
        st.sampled_from(["=", ": ", " = ", ":"]),
        st.sampled_from(["", '"', "'"]),
        _with_digit(_s(_ALNUM + "!#$%*+-./?@^_|~", 12, 30)),
    ).map(lambda t: (f"{t[0]}{t[1]}{t[2]}{t[3]}{t[2]}", t[3])),
    "url": st.tuples(st.sampled_from(["https", "postgres", "redis", "amqp"]), _s(_ALNUM, 0, 8),
                     _with_digit(_s(_ALNUM + "!$%*+-._~", 12, 30)))
    .map(lambda t: (f"{t[0]}://{t[1]}:{t[2]}@db.example.com/x", t[2])),
}

_SEP = st.sampled_from([" ", "\n", "\t", "  "])
_NOISE = st.text(max_size=40)


@pytest.mark.req("LG-05", "TL-11")
@pytest.mark.parametrize("shape", sorted(SECRETS))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_property_no_secret_survives(shape: str, data: st.DataObject) -> None:
    text, secret = data.draw(SECRETS[shape])
    before, after = data.draw(_NOISE), data.draw(_NOISE)
    assume(secret not in before and secret not in after)
    doc = before + data.draw(_SEP) + text + data.draw(_SEP) + after
    out = R.redact_text(doc)
    assert secret not in out
    assert DEFAULT_MASK in out
    assert R.redact_text(out) == out
    # the same secret inside data, under a plain key
    assert secret not in repr(R.redact({"note": doc, "items": [doc]}))


_JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=30))
_KEYS = st.one_of(st.text(max_size=12), st.sampled_from(SECRET_KEYS + PLAIN_KEYS))


def _json_values(strings: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), strings)
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)),
        max_leaves=20,
    )


_SECRET_TEXT = st.one_of(*SECRETS.values()).map(lambda t: t[0])
_MIXED_STRINGS = st.one_of(st.text(max_size=30), _SECRET_TEXT,
                           st.tuples(st.text(max_size=10), _SEP, _SECRET_TEXT).map("".join))


@pytest.mark.req("LG-05")
@settings(max_examples=200, deadline=None)
@given(_json_values(_MIXED_STRINGS))
def test_property_idempotent(value: Any) -> None:
    once = R.redact(value)
    twice = R.redact(once)
    assert twice == once
    assert twice is once


@settings(max_examples=200, deadline=None)
@given(_json_values(st.text(max_size=30)))
def test_property_unchanged_means_same_object(value: Any) -> None:
    snapshot = repr(value)
    out = R.redact(value)
    assert repr(value) == snapshot
    if out == value:
        assert out is value


@settings(max_examples=200, deadline=None)
@given(_json_values(st.text(alphabet="acdfhijklmnopqtuvwyz0123456789 /.,", max_size=30)))
def test_property_clean_data_is_the_same_object(value: Any) -> None:
    # No secret key (those are in _KEYS) and text that cannot form a credential: nothing allocated.
    assume(not _has_secret_key(value))
    assert R.redact(value) is value


def _has_secret_key(value: Any) -> bool:
    if isinstance(value, dict):
        return any(R.is_secret_key(k) or _has_secret_key(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_secret_key(v) for v in value)
    return False


# -- logging ----------------------------------------------------------------------------------


@pytest.fixture
def root_stream() -> Iterator[io.StringIO]:
    """A handler on the root logger writing to a buffer; filters removed afterwards."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    touched = [logging.getLogger("mcpkit"), logging.getLogger("redact-test")]
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        for logger in (*touched, *root.handlers, logging.lastResort):
            for f in [f for f in logger.filters if isinstance(f, RedactingFilter)]:
                logger.removeFilter(f)


@pytest.mark.req("LG-05")
def test_child_logger_through_root_handler(root_stream: io.StringIO) -> None:
    flt = install_log_redaction()
    assert install_log_redaction("mcpkit") is flt  # idempotent
    mcpkit_logger = logging.getLogger("mcpkit")
    assert sum(isinstance(f, RedactingFilter) for f in mcpkit_logger.filters) == 1
    for handler in logging.getLogger().handlers:
        assert sum(isinstance(f, RedactingFilter) for f in handler.filters) == 1
    logging.getLogger("mcpkit.something").error("token=%s", GHP)
    logging.getLogger("mcpkit.other").warning("calling %s with %r", "tool", {"password": "hunter2"})
    out = root_stream.getvalue()
    assert GHP not in out and "hunter2" not in out
    assert out.splitlines() == [
        "mcpkit.something ERROR token=[REDACTED]",
        "mcpkit.other WARNING calling tool with {'password': '[REDACTED]'}",
    ]


@pytest.mark.req("LG-05")
def test_exception_text_is_redacted(root_stream: io.StringIO) -> None:
    install_log_redaction("redact-test")
    log = logging.getLogger("redact-test")
    try:
        raise RuntimeError(f"connect failed for https://bob:hunter2@db/x with {GHP}")
    except RuntimeError:
        log.exception("call failed: Bearer %s", "abcdef123456")
    out = root_stream.getvalue()
    assert "hunter2" not in out and GHP not in out and "abcdef123456" not in out
    assert "call failed: Bearer [REDACTED]" in out
    assert "Traceback (most recent call last)" in out
    assert "RuntimeError: connect failed for https://bob:[REDACTED]@db/x with [REDACTED]" in out


def test_filter_rewrites_record() -> None:
    flt = RedactingFilter()
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "a %s b", (GHP,), None, sinfo=f"stack {GHP}")
    assert flt.filter(record) is True
    assert (record.msg, record.args, record.stack_info) == ("a [REDACTED] b", None, "stack [REDACTED]")
    clean = logging.LogRecord("x", logging.INFO, __file__, 1, "all %s", ("good",), None)
    flt.filter(clean)
    assert clean.getMessage() == "all good"
    broken = logging.LogRecord("x", logging.INFO, __file__, 1, "%d", ("nan",), None)
    assert flt.filter(broken) is True  # left for logging's own error report
    assert broken.args == ("nan",)


@pytest.mark.req("LG-05", "ST-02")
def test_stderr_of_a_process_carries_no_secret() -> None:
    code = textwrap.dedent(f"""
        import logging
        from mcpkit.policy.redact import install_log_redaction
        install_log_redaction()  # no handler yet: logging.lastResort prints
        logging.getLogger("mcpkit.early").warning("early {GHP}")
        logging.basicConfig(level=logging.INFO)
        install_log_redaction()
        logging.getLogger("mcpkit.server").info("auth header: Bearer %s", "{GHP}")
        try:
            {{}}["{GHP}"]
        except KeyError:
            logging.getLogger("mcpkit.x").exception("lookup")
        """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert proc.stdout == ""
    assert GHP not in proc.stderr
    assert proc.stderr.startswith("early [REDACTED]\n")
    assert "INFO:mcpkit.server:auth header: Bearer [REDACTED]" in proc.stderr
    assert "KeyError: '[REDACTED]'" in proc.stderr


@pytest.mark.req("LG-05")
def test_a_policy_that_turns_redaction_on_while_serving_redacts_from_then_on(root_stream: io.StringIO) -> None:
    """Logs were guarded once, when the first session started: a policy assigned later (a
    stdio server's only session is already running) with redact_logs=True never redacted."""
    import json

    from mcpkit import Server
    from mcpkit.policy import Policy
    from mcpkit.server.session import ServerSession

    for first in (None, Policy()):  # no policy yet, or one without redaction
        server = Server("t", policy=first)

        @server.tool(read_only=True, open_world=False)
        def connect(dsn: str) -> str:
            logging.getLogger("mcpkit.app").warning("connecting with %s", dsn)
            return "ok"

        session = ServerSession(server, lambda batch: None, inline_sync=True)
        session.feed(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}))
        session.feed('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        server.policy = Policy(redact_logs=True)  # while serving
        session.feed(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                 "params": {"name": "connect", "arguments": {"dsn": f"token={GHP}"}}}))
        session.flush()
        session.close()
        out = root_stream.getvalue()
        assert "connecting with token=" in out, first
        assert GHP not in out, first


@pytest.mark.req("LG-05")
def test_a_handler_configured_after_redaction_was_installed_prints_no_secret() -> None:
    """A filter on the handlers present at install time left one added later (an application
    that sets up its logging after the server started) printing mcpkit's child loggers'
    records unredacted."""
    code = textwrap.dedent(f"""
        import logging, sys
        from mcpkit.policy.redact import install_log_redaction
        install_log_redaction()
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
        logging.getLogger().addHandler(handler)
        logging.getLogger("mcpkit.policy").warning("calling %s with %r", "tool", {{"password": "hunter2"}})
        try:
            {{}}["{GHP}"]
        except KeyError:
            logging.getLogger("mcpkit.server").exception("lookup")
        logging.getLogger("mcpkitten").warning("not ours: %s", "left alone")
        """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert proc.stdout == ""
    assert "hunter2" not in proc.stderr and GHP not in proc.stderr, proc.stderr
    assert "mcpkit.policy calling tool with {'password': '[REDACTED]'}" in proc.stderr
    assert "KeyError: '[REDACTED]'" in proc.stderr
    assert "mcpkitten not ours: left alone" in proc.stderr


@pytest.mark.req("LG-05")
def test_records_redacted_as_made_keep_the_live_exception_for_error_trackers(root_stream: io.StringIO) -> None:
    """A handler that takes the exception as an object (an error tracker) still gets it; what
    formatters print, the message and the traceback text, is redacted."""
    install_log_redaction()
    seen: list[tuple[Any, str, str | None]] = []

    class Keep(logging.Handler):  # what it was given when its turn came
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.exc_info, record.getMessage(), record.exc_text))

    keep = Keep()
    logger = logging.getLogger("mcpkit.tracked")
    logger.addHandler(keep)  # added after the install: no filter of its own
    try:
        try:
            raise RuntimeError(f"failed with {GHP}")
        except RuntimeError:
            logger.exception("calling with token=%s", GHP)
    finally:
        logger.removeHandler(keep)
    [(exc_info, message, exc_text)] = seen
    assert exc_info is not None and exc_info[0] is RuntimeError
    assert message == "calling with token=[REDACTED]"
    assert "RuntimeError: failed with [REDACTED]" in (exc_text or "") and GHP not in (exc_text or "")
    assert GHP not in root_stream.getvalue()
