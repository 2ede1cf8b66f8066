"""mcpkit._json: exact integers beyond 64 bits without a second decode of every message."""

from __future__ import annotations

import json

import pytest

from mcpkit import _json


@pytest.mark.req("BP-03")
@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, 2**70, 10**40])
def test_huge_integers_nested_anywhere_stay_exact(value):
    data = json.dumps({"a": [{"b": {"c": [1, value]}}], "s": "x" * 100}).encode()
    decoded = _json.loads(data)
    assert decoded["a"][0]["b"]["c"][1] == value
    assert type(decoded["a"][0]["b"]["c"][1]) is int


def test_nineteen_digits_inside_a_string_change_nothing():
    text = "1234567890" * 1000
    data = json.dumps({"text": text, "n": 12345678901234567}).encode()
    assert _json.loads(data) == {"text": text, "n": 12345678901234567}


def test_a_19_digit_integer_that_fits_stays_the_orjson_value():
    assert _json.loads(b'{"n":1234567890123456789}') == {"n": 1234567890123456789}
    assert _json.loads(b'{"n":-9223372036854775808}') == {"n": -(2**63)}


def test_huge_floats_stay_floats():
    decoded = _json.loads(b'{"f":1e300,"g":12345678901234567890.5}')
    assert decoded == {"f": 1e300, "g": 12345678901234567890.5}
    assert type(decoded["f"]) is float and type(decoded["g"]) is float


def test_str_bytearray_and_memoryview_inputs():
    raw = b'{"id":18446744073709551616}'
    for data in (raw, raw.decode(), bytearray(raw), memoryview(raw)):
        assert _json.loads(data) == {"id": 2**64}


def test_a_huge_integer_under_nesting_too_deep_for_the_stdlib_keeps_orjson_value():
    data = b'{"id":18446744073709551616,"x":' + b"[" * 1000 + b"]" * 1000 + b"}"
    decoded = _json.loads(data)  # no RecursionError escapes
    assert decoded["id"] in (2**64, float(2**64))
