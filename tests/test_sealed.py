"""Sealed requestState (MR-06, MR-07): encrypted, authenticated, expiring, bound, portable."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit import _json
from mcpkit.protocol.sealed import MAX_TOKEN_LENGTH, Sealer, StateError, digest

KEY = bytes(range(32))
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
BIND = "tools/call:" + digest({"name": "book", "arguments": {"city": "Oslo"}}) + ":alice"
SECRET = "my-credit-card-4111111111111111-and-passport-X1234567"
PAYLOAD = {"step": 2, "answers": {"card": SECRET}, "list": [1, 2.5, None, True, "é"]}
MESSAGES = {
    "requestState is malformed",
    "requestState integrity check failed",
    "requestState expired",
    "requestState belongs to another request",
}


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64(token: str) -> bytes:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


def rejected(sealer: Sealer, token: object, bind: str = BIND) -> str:
    with pytest.raises(StateError) as info:
        sealer.open(token, bind=bind)  # type: ignore[arg-type]
    assert str(info.value) in MESSAGES
    return str(info.value)


#: A token to tamper with. It is sealed at Clock()'s fixed instant (in January 1970), so in real
#: time it is expired however early or late a test runs; a test that needs a token to open seals
#: its own. (Sealed with the real clock, it opened only for 600 s after this module was imported
#: at collection, so a test using it ran fine alone and failed late in a full run.)
TOKEN = Sealer(KEY, clock=Clock()).seal(PAYLOAD, bind=BIND)


@pytest.mark.req("MR-06")
def test_round_trip_and_token_layout() -> None:
    sealer = Sealer(KEY, ttl=60, clock=Clock())
    token = sealer.seal(PAYLOAD, bind=BIND)
    assert sealer.open(token, bind=BIND) == PAYLOAD
    assert "=" not in token and set(token) <= set(ALPHABET)
    raw = unb64(token)
    assert raw[0] == 1
    plain_len = len(_json.dumps({"aud": BIND, "exp": 1_000_060.0, "p": PAYLOAD}))
    # version + nonce + ciphertext (no compression: exactly the plaintext's length) + tag
    assert len(raw) == 1 + 16 + plain_len + 32


@pytest.mark.req("MR-06")
def test_construction_is_the_documented_one() -> None:
    """Recompute the tag and decrypt with the construction from the module docstring."""
    clock = Clock(1234.5)
    token = Sealer(KEY, ttl=60, clock=clock).seal({"a": 1}, bind="b")
    raw = unb64(token)
    version, nonce, ct, tag = raw[:1], raw[1:17], raw[17:-32], raw[-32:]
    prk = hmac.new(b"mcpkit/requestState", KEY, hashlib.sha256).digest()  # HKDF-Extract
    enc = hmac.new(prk, b"v1/enc\x01", hashlib.sha256).digest()  # HKDF-Expand, one block
    mac = hmac.new(prk, b"v1/mac\x01", hashlib.sha256).digest()
    assert hmac.new(mac, version + nonce + ct, hashlib.sha256).digest() == tag
    blocks = range(len(ct) // 32 + 1)
    stream = b"".join(hmac.new(enc, nonce + i.to_bytes(8, "big"), hashlib.sha256).digest() for i in blocks)
    plain = bytes(c ^ k for c, k in zip(ct, stream))
    assert _json.loads(plain) == {"aud": "b", "exp": 1294.5, "p": {"a": 1}}


@pytest.mark.req("MR-06")
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_bit_flip_of_the_decoded_token_fails_integrity(data: st.DataObject) -> None:
    raw = bytearray(unb64(TOKEN))
    bit = data.draw(st.integers(0, len(raw) * 8 - 1))
    raw[bit // 8] ^= 1 << (bit % 8)
    assert rejected(Sealer(KEY), b64(bytes(raw))) == "requestState integrity check failed"


@pytest.mark.req("MR-06")
def test_every_single_bit_flip_of_the_first_and_last_bytes_fails_integrity() -> None:
    raw = unb64(TOKEN)
    for index in (0, 1, 16, 17, len(raw) - 33, len(raw) - 1):
        for bit in range(8):
            flipped = bytearray(raw)
            flipped[index] ^= 1 << bit
            assert rejected(Sealer(KEY), b64(bytes(flipped))) == "requestState integrity check failed"


@pytest.mark.req("MR-06")
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_bit_flip_of_the_token_text_is_rejected(data: st.DataObject) -> None:
    text = bytearray(TOKEN.encode())
    bit = data.draw(st.integers(0, len(text) * 8 - 1))
    text[bit // 8] ^= 1 << (bit % 8)
    rejected(Sealer(KEY), text.decode("latin-1"))


@pytest.mark.req("MR-06")
def test_non_canonical_last_character_is_rejected() -> None:
    """Unused low bits of the final base64 character must not yield a second valid spelling."""
    sealer = Sealer(KEY, clock=Clock())
    for size in range(3):  # raw lengths 3n, 3n+1, 3n+2: 0, 4 and 2 spare bits
        token = sealer.seal({"x": "y" * size}, bind=BIND)
        twins = [token[:-1] + c for c in ALPHABET if c != token[-1] and unb64(token[:-1] + c) == unb64(token)]
        assert len(twins) == {0: 0, 2: 15, 3: 3}[len(token) % 4]
        for twin in twins:
            assert rejected(sealer, twin) == "requestState is malformed"
        assert sealer.open(token, bind=BIND) == {"x": "y" * size}


@pytest.mark.req("MR-06")
@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("", "requestState is malformed"),
        ("A", "requestState is malformed"),
        ("not base64 at all!", "requestState is malformed"),
        ("abc+def/", "requestState is malformed"),  # standard alphabet
        (TOKEN + "=", "requestState is malformed"),
        (" " + TOKEN, "requestState is malformed"),
        (TOKEN + "\n", "requestState is malformed"),
        (b64(b"\x01" + b"\x00" * 48), "requestState is malformed"),  # too short for a ciphertext
        (b64(b"\x01" + b"\x00" * 80), "requestState integrity check failed"),
        ("A" * (MAX_TOKEN_LENGTH + 4), "requestState is malformed"),
        ("é" * 100, "requestState is malformed"),
        (None, "requestState is malformed"),
        (12, "requestState is malformed"),
        (TOKEN.encode(), "requestState is malformed"),
    ],
    # TOKEN is sealed afresh at import (a random nonce): ids from the values would differ between
    # the processes of a parallel run (pytest-xdist), which must collect the same tests
    ids=lambda value: f"{type(value).__name__}-of-{len(value)}" if isinstance(value, (str, bytes)) and len(value) > 24
    and not str(value).startswith("requestState") else None,
)
def test_garbage_is_rejected(token: object, expected: str) -> None:
    assert rejected(Sealer(KEY), token) == expected


@pytest.mark.req("MR-06")
def test_truncation_and_extension_are_rejected() -> None:
    sealer = Sealer(KEY)
    raw = unb64(TOKEN)
    for cut in range(1, len(raw)):
        rejected(sealer, b64(raw[:cut]))
    for extra in (b"\x00", b"\x00" * 32, raw[-32:]):
        assert rejected(sealer, b64(raw + extra)) == "requestState integrity check failed"
    for cut in range(1, len(TOKEN)):
        rejected(sealer, TOKEN[:cut])
    # ciphertext swapped from another token under the same key
    other = unb64(sealer.seal({"step": 3}, bind=BIND))
    assert rejected(sealer, b64(raw[:17] + other[17:])) == "requestState integrity check failed"


@pytest.mark.req("MR-07")
def test_expiry_uses_the_clock_and_the_ttl() -> None:
    clock = Clock()
    sealer = Sealer(KEY, ttl=30, clock=clock)
    token = sealer.seal(PAYLOAD, bind=BIND)
    short = sealer.seal(PAYLOAD, bind=BIND, ttl=5)
    clock.now += 5
    assert sealer.open(short, bind=BIND) == PAYLOAD  # valid through exp inclusive
    clock.now += 0.001
    assert rejected(sealer, short) == "requestState expired"
    clock.now += 24.99
    assert sealer.open(token, bind=BIND) == PAYLOAD
    clock.now += 0.01
    assert rejected(sealer, token) == "requestState expired"
    # another process with the same key and a later clock agrees
    assert rejected(Sealer(KEY.hex(), clock=Clock(clock.now)), token) == "requestState expired"


@pytest.mark.req("MR-07")
def test_default_ttl_is_ten_minutes() -> None:
    clock = Clock()
    sealer = Sealer(KEY, clock=clock)
    token = sealer.seal({}, bind=BIND)
    clock.now += 600
    assert sealer.open(token, bind=BIND) == {}
    clock.now += 1
    assert rejected(sealer, token) == "requestState expired"


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), float("nan"), True, "60"])
def test_bad_ttl_is_refused(ttl: object) -> None:
    with pytest.raises(ValueError, match="ttl"):
        Sealer(KEY, ttl=ttl)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ttl"):
        Sealer(KEY).seal({}, bind=BIND, ttl=ttl)  # type: ignore[arg-type]


@pytest.mark.req("MR-07")
@pytest.mark.parametrize(
    "bind",
    [
        BIND.replace("alice", "mallory"),  # another principal
        "prompts/get:" + BIND.split(":", 1)[1],  # another method
        "tools/call:" + digest({"name": "book", "arguments": {"city": "Rome"}}) + ":alice",  # other params
        "",
        BIND + " ",
        BIND.upper(),
    ],
)
def test_wrong_bind_is_rejected(bind: str) -> None:
    assert rejected(Sealer(KEY), TOKEN, bind) == "requestState belongs to another request"


@pytest.mark.req("MR-07")
def test_bind_is_checked_even_when_expired_and_non_ascii_binds_work() -> None:
    clock = Clock()
    sealer = Sealer(KEY, ttl=1, clock=clock)
    token = sealer.seal({"k": 1}, bind="ünï:ç😀")
    assert sealer.open(token, bind="ünï:ç😀") == {"k": 1}
    assert rejected(sealer, token, "unï:ç😀") == "requestState belongs to another request"
    clock.now += 2
    assert rejected(sealer, token, "other") == "requestState belongs to another request"
    assert rejected(sealer, token, "ünï:ç😀") == "requestState expired"


@pytest.mark.req("MR-06")
def test_wrong_key_fails_integrity() -> None:
    other = bytes(reversed(KEY))
    assert rejected(Sealer(other), TOKEN) == "requestState integrity check failed"
    # plain HMAC would zero-pad the key, making these equal; HKDF-Extract keeps them apart
    assert rejected(Sealer(KEY + b"\x00"), TOKEN) == "requestState integrity check failed"
    assert rejected(Sealer(KEY[:16]), TOKEN) == "requestState integrity check failed"


@pytest.mark.req("MR-06")
def test_same_key_in_any_form_interoperates() -> None:
    forms = [KEY, bytearray(KEY), KEY.hex(), KEY.hex().upper(), f"  {KEY.hex()}\n"]
    forms += [b64(KEY), b64(KEY) + "=", base64.b64encode(KEY).decode()]  # padded, standard alphabet
    sealers = [Sealer(form) for form in forms]
    for a in sealers:
        token = a.seal(PAYLOAD, bind=BIND)
        for b in sealers:
            assert b.open(token, bind=BIND) == PAYLOAD


@pytest.mark.parametrize(
    "key",
    [b"", b"x" * 15, "", "00" * 15, b64(b"k" * 15), "not a key!", "abc", "ab cd" * 10, "A" * 41],
)
def test_short_or_unparsable_keys_are_refused(key: bytes | str) -> None:
    with pytest.raises(ValueError) as info:
        Sealer(key)
    assert str(info.value) in {
        "state key must have at least 16 bytes",
        "state key must be raw bytes, hex, or urlsafe base64",
    }


def test_non_bytes_key_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        Sealer(12345678901234567890)  # type: ignore[arg-type]


def test_sixteen_byte_key_is_enough_and_repr_hides_the_key() -> None:
    sealer = Sealer(b"k" * 16)
    assert sealer.open(sealer.seal({"a": 1}, bind="x"), bind="x") == {"a": 1}
    assert "k" * 16 not in repr(sealer) and KEY.hex() not in repr(Sealer(KEY)) and "6b6b" not in repr(sealer)


@pytest.mark.req("MR-06")
def test_the_ciphertext_hides_the_plaintext() -> None:
    sealer = Sealer(KEY)
    for _ in range(20):
        token = sealer.seal(PAYLOAD, bind=BIND)
        raw = unb64(token)
        for needle in (SECRET.encode(), BIND.encode(), b'"aud"', b'"card"', b"answers"):
            for start in range(len(needle) - 7):
                chunk = needle[start : start + 8]
                assert chunk not in raw and chunk.decode() not in token


@pytest.mark.req("MR-06")
def test_a_zero_payload_does_not_reveal_the_keystream_pattern() -> None:
    """A long run of one byte encrypts to noise: the XOR really uses a keystream, not a fixed pad."""
    raw = unb64(Sealer(KEY).seal({"z": "a" * 4000}, bind=BIND))
    ct = raw[17:-32]
    assert len(set(ct[:2048])) > 200  # ~252 distinct values expected from 2 KiB of noise
    assert ct[:64] not in ct[64:]  # no repeating 32-byte block


@pytest.mark.req("MR-06")
def test_two_seals_of_the_same_payload_differ() -> None:
    clock = Clock()
    sealer = Sealer(KEY, clock=clock)
    tokens = {sealer.seal(PAYLOAD, bind=BIND) for _ in range(50)}
    assert len(tokens) == 50
    nonces = {unb64(t)[1:17] for t in tokens}
    assert len(nonces) == 50
    # same plaintext (same clock) under different nonces: the ciphertexts share no prefix
    cts = [unb64(t)[17:-32] for t in tokens]
    assert len({ct[:8] for ct in cts}) == 50


def test_from_env_with_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPKIT_STATE_KEY", KEY.hex())
    assert not Sealer.from_env().ephemeral
    token = Sealer(KEY).seal(PAYLOAD, bind=BIND)  # sealed now: it opens for the next 600 s
    assert Sealer.from_env().open(token, bind=BIND) == PAYLOAD
    assert Sealer().open(token, bind=BIND) == PAYLOAD  # key=None reads the variable too
    monkeypatch.setenv("OTHER_KEY", b64(KEY))
    clock = Clock()
    sealer = Sealer.from_env("OTHER_KEY", ttl=1, clock=clock)
    token = sealer.seal({"a": 1}, bind="x")
    clock.now += 2
    assert rejected(sealer, token, "x") == "requestState expired"
    monkeypatch.setenv("MCPKIT_STATE_KEY", "short")
    with pytest.raises(ValueError):
        Sealer.from_env()
    with pytest.raises(ValueError):
        Sealer()


def test_from_env_without_the_variable_uses_a_random_process_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCPKIT_STATE_KEY", raising=False)
    a, b, c = Sealer.from_env(), Sealer.from_env(), Sealer()
    assert a.ephemeral and b.ephemeral and c.ephemeral
    token = a.seal({"a": 1}, bind="x")
    assert a.open(token, bind="x") == {"a": 1}
    assert rejected(b, token, "x") == "requestState integrity check failed"
    assert rejected(c, token, "x") == "requestState integrity check failed"
    monkeypatch.setenv("MCPKIT_STATE_KEY", "")  # empty counts as unset
    assert Sealer.from_env().ephemeral


def test_seal_refuses_non_dict_payloads_and_non_str_binds() -> None:
    sealer = Sealer(KEY)
    for bad in ([1], "x", None, 3):
        with pytest.raises(TypeError):
            sealer.seal(bad, bind=BIND)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        sealer.seal({}, bind=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        sealer.seal({"x": object()}, bind=BIND)
    assert rejected(sealer, TOKEN, None) == "requestState belongs to another request"  # type: ignore[arg-type]


def test_seal_refuses_to_produce_a_token_open_would_refuse() -> None:
    sealer = Sealer(KEY)
    with pytest.raises(ValueError, match="exceeds"):
        sealer.seal({"big": "x" * MAX_TOKEN_LENGTH}, bind=BIND)
    near = sealer.seal({"big": "x" * 40_000}, bind=BIND)
    assert sealer.open(near, bind=BIND) == {"big": "x" * 40_000}


def test_errors_never_echo_the_token_or_the_key() -> None:
    sealer = Sealer(KEY)
    raw = bytearray(unb64(TOKEN))
    raw[-1] ^= 1
    for token in (b64(bytes(raw)), TOKEN[:-3], "garbage" + SECRET):
        with pytest.raises(StateError) as info:
            sealer.open(token, bind=BIND)
        text = str(info.value) + repr(info.value)
        assert SECRET not in text and KEY.hex() not in text and token not in text
        assert info.value.__cause__ is None


def test_digest_is_short_stable_and_canonical() -> None:
    a = digest({"b": [1, {"y": 2, "x": 1}], "a": "é"})
    assert a == digest({"a": "é", "b": [1, {"x": 1, "y": 2}]})
    assert a == hashlib.sha256('{"a":"é","b":[1,{"x":1,"y":2}]}'.encode()).hexdigest()[:32]
    assert len(a) == 32 and int(a, 16) >= 0
    assert digest({"a": 1}) != digest({"a": "1"}) != digest([1])
    assert digest(None) == hashlib.sha256(b"null").hexdigest()[:32]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@pytest.mark.req("MR-06")
@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=10), json_values, max_size=6), st.text(max_size=40))
def test_any_json_dict_round_trips(payload: dict, bind: str) -> None:
    sealer = Sealer(KEY)
    token = sealer.seal(payload, bind=bind)
    assert Sealer(b64(KEY)).open(token, bind=bind) == payload
    assert rejected(sealer, token, bind + "x") == "requestState belongs to another request"
