"""JSON-RPC framing (``mcpkit.protocol.jsonrpc``), sans-IO: bytes and dicts in, typed messages out."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.protocol import jsonrpc
from mcpkit.protocol.errors import INVALID_REQUEST, PARSE_ERROR, McpError
from mcpkit.protocol.jsonrpc import (
    NO_ID,
    ErrorResponse,
    Invalid,
    Notification,
    Request,
    Response,
    classify,
    parse,
)

MESSAGE_TYPES = (Request, Notification, Response, ErrorResponse, Invalid)


def _one(data: bytes | str):
    messages, is_batch = parse(data)
    assert is_batch is False
    assert len(messages) == 1
    return messages[0]


def _invalid(data: bytes | str) -> Invalid:
    msg = _one(data)
    assert type(msg) is Invalid, msg
    assert msg.error.code == INVALID_REQUEST
    return msg


# --------------------------------------------------------------------------- well-formed messages


@pytest.mark.req("BP-01", "BP-03")
def test_request_with_params():
    msg = _one(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add"}}')
    assert type(msg) is Request
    assert (msg.id, msg.method, msg.params) == (1, "tools/call", {"name": "add"})


@pytest.mark.req("BP-01")
def test_request_without_params_and_str_input():
    msg = _one('{"jsonrpc":"2.0","id":"a","method":"ping"}')
    assert type(msg) is Request
    assert (msg.id, msg.method, msg.params) == ("a", "ping", None)


@pytest.mark.req("BP-03", "BP-09")
def test_a_method_without_id_is_a_notification_not_an_error():
    msg = _one(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert type(msg) is Notification
    assert (msg.method, msg.params) == ("notifications/initialized", None)
    msg = _one(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}')
    assert type(msg) is Notification and msg.params == {"requestId": 3}


@pytest.mark.req("BP-05")
def test_result_response():
    msg = _one(b'{"jsonrpc":"2.0","id":4,"result":{"roots":[]}}')
    assert type(msg) is Response
    assert (msg.id, msg.result) == (4, {"roots": []})


@pytest.mark.req("BP-06")
def test_error_response():
    msg = _one(b'{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"no"}}')
    assert type(msg) is ErrorResponse
    assert (msg.id, msg.error) == ("x", {"code": -1, "message": "no"})
    # an error response whose id could not be read (the peer's parse error) keeps id None
    msg = _one(b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"bad"}}')
    assert type(msg) is ErrorResponse and msg.id is None
    msg = _one(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}')
    assert type(msg) is ErrorResponse and msg.id is None


@pytest.mark.req("BP-03", "BP-05")
@pytest.mark.parametrize(
    "raw,expected",
    [
        (b'"abc"', "abc"),
        (b'""', ""),
        (b'"1"', "1"),
        (b"0", 0),
        (b"-7", -7),
        (b"9223372036854775807", 9223372036854775807),
        (b'"\\u00e9\\ud83d\\ude00"', "\u00e9\U0001f600"),
    ],
)
def test_string_and_integer_ids_keep_their_type(raw, expected):
    msg = _one(b'{"jsonrpc":"2.0","id":' + raw + b',"method":"ping"}')
    assert type(msg) is Request
    assert msg.id == expected and type(msg.id) is type(expected)
    reply = json.loads(json.dumps(jsonrpc.response(msg.id, {})))
    assert reply["id"] == expected and type(reply["id"]) is type(expected)


# --------------------------------------------------------------------------- parse errors


@pytest.mark.req("BP-02", "ST-04")
@pytest.mark.parametrize(
    "data",
    [
        b"",
        b" ",
        b"not json",
        b"{",
        b'{"jsonrpc":"2.0","id":1,"method":"ping"',
        b'{"jsonrpc":"2.0","id":1,"method":"ping"}}',
        b"{'jsonrpc':'2.0'}",
        b'{"jsonrpc":"2.0","id":1,"method":"ping",}',
        b"NaN",
        b'{"id":Infinity}',
        b"1e400",
        b"[" * 10_000 + b"]" * 10_000,
        b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
    ],
    ids=repr,
)
def test_invalid_json_is_a_parse_error(data):
    with pytest.raises(McpError) as info:
        parse(data)
    assert info.value.code == PARSE_ERROR
    assert info.value.message == "Parse error: the message is not valid UTF-8 JSON."
    assert isinstance(info.value.data["detail"], str)


@pytest.mark.req("BP-02")
@pytest.mark.parametrize(
    "data",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"\xff"}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xc3"}}',
        b'"\xed\xa0\x80"',  # an encoded UTF-16 surrogate is not UTF-8
        b'"\xc0\xaf"',  # overlong encoding
        b"\xfe\xff",
    ],
    ids=repr,
)
def test_invalid_utf8_is_a_parse_error(data):
    with pytest.raises(McpError) as info:
        parse(data)
    assert info.value.code == PARSE_ERROR


@pytest.mark.req("BP-02")
def test_a_lone_surrogate_in_a_str_frame_is_a_parse_error():
    with pytest.raises(McpError) as info:
        parse('{"jsonrpc":"2.0","id":1,"method":"\ud800"}')
    assert info.value.code == PARSE_ERROR


# --------------------------------------------------------------------------- invalid requests


@pytest.mark.req("BP-01")
@pytest.mark.parametrize("data", [b"1", b'"ping"', b"null", b"true", b"2.5"])
def test_a_message_that_is_not_an_object_is_invalid(data):
    msg = _invalid(data)
    assert msg.id is NO_ID
    assert msg.error.message == "A JSON-RPC message must be a JSON object."


@pytest.mark.req("BP-01", "BP-06")
@pytest.mark.parametrize(
    "data,expected_id",
    [
        (b'{"id":1,"method":"ping"}', 1),
        (b'{"jsonrpc":"1.0","id":"a","method":"ping"}', "a"),
        (b'{"jsonrpc":2.0,"id":2,"method":"ping"}', 2),
        (b'{"jsonrpc":"2.0 ","id":3,"method":"ping"}', 3),
        (b'{"jsonrpc":null,"method":"ping"}', NO_ID),
        (b'{"jsonrpc":"1.0","id":null,"method":"ping"}', NO_ID),
    ],
)
def test_wrong_or_missing_jsonrpc_is_invalid_and_keeps_a_readable_id(data, expected_id):
    msg = _invalid(data)
    assert msg.id == expected_id if expected_id is not NO_ID else msg.id is NO_ID
    assert msg.error.message == 'The "jsonrpc" member must be exactly "2.0".'


@pytest.mark.req("BP-03", "BP-06")
@pytest.mark.parametrize("raw", [b"null", b"1.5", b"1.0", b"true", b"false", b"{}", b'{"a":1}', b"[1]", b"[]", b"1e3"])
def test_request_ids_that_are_not_string_or_integer_are_invalid_without_id(raw):
    msg = _invalid(b'{"jsonrpc":"2.0","id":' + raw + b',"method":"ping"}')
    assert msg.id is NO_ID
    assert msg.error.message.startswith('A request "id" must be a string or an integer')
    assert msg.error.data == {"id": json.loads(raw)}
    # and the error is written without any id (not "id": null)
    assert "id" not in jsonrpc.error(msg.id, msg.error.to_error())


@pytest.mark.req("BP-01", "BP-06")
@pytest.mark.parametrize("raw", [b"[]", b"[1]", b'"x"', b"1", b"true"])
def test_params_must_be_an_object(raw):
    msg = _invalid(b'{"jsonrpc":"2.0","id":9,"method":"ping","params":' + raw + b"}")
    assert msg.id == 9
    assert msg.error.message == 'The "params" member must be a JSON object when present.'
    # in a notification too (it becomes an error without id)
    msg = _invalid(b'{"jsonrpc":"2.0","method":"notifications/x","params":' + raw + b"}")
    assert msg.id is NO_ID


@pytest.mark.req("BP-01")
@pytest.mark.parametrize("raw", [b'""', b"5", b"null", b"[]", b'{"m":1}', b"true"])
def test_method_must_be_a_non_empty_string(raw):
    msg = _invalid(b'{"jsonrpc":"2.0","id":"r","method":' + raw + b"}")
    assert msg.id == "r"
    assert msg.error.message == 'The "method" member must be a non-empty string.'


@pytest.mark.req("BP-13")
def test_an_empty_batch_is_one_invalid_request():
    messages, is_batch = parse(b"[]")
    assert is_batch is False
    assert len(messages) == 1 and type(messages[0]) is Invalid
    assert messages[0].id is NO_ID and messages[0].error.code == INVALID_REQUEST
    assert messages[0].error.message == "An empty batch is not a valid request."


@pytest.mark.req("BP-13")
def test_a_batch_classifies_every_member():
    messages, is_batch = parse(
        b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"n"},1,'
        b'{"jsonrpc":"2.0","id":2,"result":{}}]'
    )
    assert is_batch is True
    assert [type(m) for m in messages] == [Request, Notification, Invalid, Response]


@pytest.mark.req("BP-07")
def test_a_message_with_both_result_and_error_is_invalid():
    msg = _invalid(b'{"jsonrpc":"2.0","id":5,"result":{},"error":{"code":1,"message":"x"}}')
    assert msg.id == 5
    assert msg.error.message == 'A message needs a "method", or exactly one of "result" and "error".'


@pytest.mark.req("BP-01")
def test_a_message_with_neither_method_result_nor_error_is_invalid():
    msg = _invalid(b'{"jsonrpc":"2.0","id":6}')
    assert msg.id == 6
    msg = _invalid(b'{"jsonrpc":"2.0"}')
    assert msg.id is NO_ID


@pytest.mark.req("BP-05")
@pytest.mark.parametrize(
    "data",
    [
        b'{"jsonrpc":"2.0","id":1,"result":[]}',
        b'{"jsonrpc":"2.0","id":1,"result":null}',
        b'{"jsonrpc":"2.0","id":1,"result":"ok"}',
        b'{"jsonrpc":"2.0","result":{}}',
        b'{"jsonrpc":"2.0","id":null,"result":{}}',
        b'{"jsonrpc":"2.0","id":1.5,"result":{}}',
    ],
)
def test_a_result_needs_a_valid_id_and_an_object(data):
    msg = _invalid(data)
    assert msg.error.message == "A result response needs a valid id and an object result."


@pytest.mark.req("BP-06")
@pytest.mark.parametrize(
    "error",
    [b"null", b'"boom"', b"[]", b"{}", b'{"code":"1","message":"x"}', b'{"code":1.5}', b'{"code":true}'],
)
def test_an_error_response_needs_an_integer_code(error):
    msg = _invalid(b'{"jsonrpc":"2.0","id":3,"error":' + error + b"}")
    assert msg.id == 3
    assert msg.error.message == 'An error response needs an "error" object with an integer code.'


# --------------------------------------------------------------------------- builders


@pytest.mark.req("BP-05", "BP-06", "BP-09")
def test_builders():
    assert jsonrpc.response(1, {}) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert jsonrpc.error("a", {"code": -1, "message": "m"}) == {
        "jsonrpc": "2.0", "id": "a", "error": {"code": -1, "message": "m"}
    }
    # BP-06: an unreadable id is omitted, never null
    assert jsonrpc.error(NO_ID, {"code": -32700, "message": "m"}) == {"jsonrpc": "2.0", "error": {"code": -32700, "message": "m"}}
    assert jsonrpc.error(None, {"code": -32700, "message": "m"}) == {"jsonrpc": "2.0", "error": {"code": -32700, "message": "m"}}
    # 0 and "" are real ids
    assert jsonrpc.error(0, {"code": 1, "message": "m"})["id"] == 0
    assert jsonrpc.error("", {"code": 1, "message": "m"})["id"] == ""
    assert jsonrpc.notification("n") == {"jsonrpc": "2.0", "method": "n"}
    assert jsonrpc.notification("n", {"a": 1}) == {"jsonrpc": "2.0", "method": "n", "params": {"a": 1}}
    assert jsonrpc.request(2, "ping") == {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    assert jsonrpc.request(2, "m", {}) == {"jsonrpc": "2.0", "id": 2, "method": "m", "params": {}}
    assert repr(NO_ID) == "NO_ID"


def test_mcp_error_to_error():
    assert McpError(-32602, "Bad.").to_error() == {"code": -32602, "message": "Bad."}
    assert McpError(-32602, "Bad.", {"x": 1}).to_error() == {"code": -32602, "message": "Bad.", "data": {"x": 1}}
    assert McpError(-32602, "Bad.", 0).to_error()["data"] == 0


# --------------------------------------------------------------------------- properties

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30,
)

# objects that look like JSON-RPC messages, so the interesting branches are reached often
message_like = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2.0, None]),
        "id": st.one_of(st.integers(-5, 5), st.sampled_from(["", "a"]), st.none(), st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.just({})),
        "method": st.one_of(st.sampled_from(["ping", "tools/call", ""]), st.integers(), st.none()),
        "params": st.one_of(st.none(), st.just({}), st.just([]), st.dictionaries(st.text(max_size=3), json_values, max_size=2)),
        "result": st.one_of(st.just({}), st.none(), st.just([])),
        "error": st.one_of(st.just({"code": 1, "message": "m"}), st.just({}), st.none()),
    },
)


@pytest.mark.req("BP-02", "ST-04")
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_parse_or_raise_only_a_parse_error(data):
    try:
        messages, is_batch = parse(data)
    except McpError as exc:
        assert exc.code == PARSE_ERROR
        return
    assert messages and all(type(m) in MESSAGE_TYPES for m in messages)
    assert is_batch in (True, False)


@pytest.mark.req("BP-01")
@settings(max_examples=300, deadline=None)
@given(st.one_of(json_values, message_like))
def test_any_json_value_classifies_to_one_message(value):
    msg = classify(value)
    assert type(msg) in MESSAGE_TYPES
    if type(msg) is Request:
        assert type(value) is dict and value["jsonrpc"] == "2.0"
        assert type(msg.id) in (str, int) and msg.id == value["id"]
        assert type(msg.method) is str and msg.method
        assert msg.params is None or type(msg.params) is dict
    if type(msg) is Notification:
        assert "id" not in value
    if type(msg) is Invalid:
        assert msg.error.code == INVALID_REQUEST
        assert msg.id is NO_ID or type(msg.id) in (str, int)


@pytest.mark.req("BP-01")
@settings(max_examples=200, deadline=None)
@given(st.one_of(json_values, message_like, st.lists(message_like, max_size=4)))
def test_any_serialized_json_value_parses_without_error(value):
    messages, is_batch = parse(json.dumps(value).encode())
    assert is_batch == (type(value) is list and bool(value))
    assert len(messages) == (len(value) if is_batch else 1)
    assert all(type(m) in MESSAGE_TYPES for m in messages)


@pytest.mark.req("BP-03", "BP-05")
@settings(max_examples=200, deadline=None)
@given(st.one_of(st.integers(-(2**63), 2**63 - 1), st.text()), st.text(min_size=1, max_size=30))
def test_valid_requests_keep_id_and_method(rid, method):
    msg = _one(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method}).encode())
    assert type(msg) is Request
    assert msg.id == rid and type(msg.id) is type(rid)
    assert msg.method == method


@pytest.mark.req("BP-03")
@pytest.mark.parametrize("rid", [2**64, -(2**63) - 1, 10**20, 10**40])
def test_integer_ids_beyond_64_bits_are_still_integers(rid):
    # RequestId is "integer" in every schema, without a bound; orjson reads such numbers as floats
    msg = _one(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % rid)
    assert type(msg) is Request
    assert msg.id == rid and type(msg.id) is int
    assert jsonrpc.response(msg.id, {})["id"] == rid


@pytest.mark.req("BP-03")
def test_a_float_id_beyond_64_bits_is_still_refused():
    msg = _invalid(b'{"jsonrpc":"2.0","id":1e20,"method":"ping"}')
    assert msg.id is NO_ID


def _deep_frame(rid: bytes, depth: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + rid + b',"method":"ping","params":{"x":' + b"[" * depth + b"]" * depth + b"}}"


@pytest.mark.req("ST-04", "BP-03")
@pytest.mark.parametrize("rid", [b"1e20", b"18446744073709551616"])
@pytest.mark.parametrize("depth", [1000, 1020])
def test_a_huge_id_with_deep_nesting_parses_or_is_a_parse_error(rid, depth):
    try:
        messages, _ = parse(_deep_frame(rid, depth))
    except McpError as exc:
        assert exc.code == PARSE_ERROR
    else:
        assert len(messages) == 1 and type(messages[0]) in MESSAGE_TYPES


@pytest.mark.req("BP-03", "BP-13")
def test_integer_ids_beyond_64_bits_inside_a_batch():
    messages, is_batch = parse(b'[{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}]')
    assert is_batch
    assert type(messages[0]) is Request and messages[0].id == 2**64
