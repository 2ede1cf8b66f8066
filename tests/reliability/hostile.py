"""Hostile input for the reliability tests: what to send, and what each input deserves.

Each strategy draws ``(line, Expect)``: a frame (a stdio line, or an HTTP body) and the answer a
JSON-RPC server owes it, decided without asking the server: by construction, or for arbitrary
bytes with the standard library's JSON parser as the oracle.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from mcpkit.transports.stdio import DEFAULT_MAX_MESSAGE_BYTES
from tests.reliability.support import MiB

LIMIT = DEFAULT_MAX_MESSAGE_BYTES  # the longest stdio line read (16 MiB, src/mcpkit/transports/stdio.py)
NO_ID: Any = type("NoId", (), {"__repr__": lambda self: "NO_ID"})()

# ============================================================================ expectations


@dataclass(frozen=True)
class Expect:
    """What one input line deserves.

    kinds: ``nothing``; ``parse`` (-32700, no id); ``invalid`` (-32600, the id when readable);
    ``answer`` (a response with the id: a result or an error, ``check`` may say more); ``error``
    (an error with the id and ``code``); ``parse_or_answer`` (numbers beyond a double: the server
    may refuse the line as unparseable or read it); ``invalid_or_parse`` (JSON that is no message,
    holding such numbers); ``any`` (at most one response; an error without id is -32700 or -32600).
    """

    kind: str
    id: Any = NO_ID
    code: int | None = None
    check: Callable[[dict[str, Any]], bool] | None = None

    @property
    def count(self) -> int | None:
        """How many messages the line must cause (None: zero or one)."""
        return {"nothing": 0, "any": None}.get(self.kind, 1)


NOTHING = Expect("nothing")
PARSE = Expect("parse")
ANY = Expect("any")


def invalid(rid: Any = NO_ID) -> Expect:
    return Expect("invalid", rid)


def answer(rid: Any, check: Callable[[dict[str, Any]], bool] | None = None) -> Expect:
    return Expect("answer", rid, check=check)


def _same_id(message: dict[str, Any], rid: Any) -> bool:
    if rid is NO_ID:
        return "id" not in message
    return "id" in message and type(message["id"]) is type(rid) and message["id"] == rid


def is_error(message: dict[str, Any], code: int, rid: Any = NO_ID) -> bool:
    return "error" in message and message["error"].get("code") == code and _same_id(message, rid)


def verdict(expect: Expect, replies: list[dict[str, Any]]) -> bool:
    if expect.kind == "nothing":
        return replies == []
    if expect.kind == "any":
        if not replies:
            return True
        [only] = replies if len(replies) == 1 else [None]
        if only is None or "method" in only:
            return False
        return "id" in only or only["error"]["code"] in (-32700, -32600)
    if len(replies) != 1:
        return False
    [reply] = replies
    if "method" in reply:
        return False
    if expect.kind == "parse":
        return is_error(reply, -32700)
    if expect.kind == "invalid":
        return is_error(reply, -32600, expect.id)
    if expect.kind == "invalid_or_parse":
        return is_error(reply, -32700) or is_error(reply, -32600)
    if expect.kind == "error":
        return is_error(reply, expect.code, expect.id)  # type: ignore[arg-type]
    if expect.kind == "answer" or expect.kind == "parse_or_answer":
        if expect.kind == "parse_or_answer" and is_error(reply, -32700):
            return True
        return _same_id(reply, expect.id) and (expect.check is None or expect.check(reply))
    raise AssertionError(f"unknown expectation {expect.kind}")


# ============================================================================ an oracle for raw bytes


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _exotic(value: Any) -> bool:
    """Numbers beyond a double, lone surrogates: JSON a parser may legitimately refuse."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            return True
        if isinstance(v, int) and abs(v) > 1.7e308:
            return True
        if isinstance(v, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in v):
            return True
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def oracle(line: bytes) -> Expect:
    """What an arbitrary line deserves, decided with the standard library."""
    if not line or line.isspace():
        return NOTHING
    try:
        value = json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return PARSE
    if isinstance(value, dict):
        return ANY
    return Expect("invalid_or_parse") if _exotic(value) else invalid()



_ids = itertools.count(1)


def next_id(draw_str: bool = False) -> Any:
    n = next(_ids)
    return f"h-{n}" if draw_str else 1_000_000 + n


# ============================================================================ strategies


json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4), max_leaves=12
)
small_objects = st.dictionaries(st.text(max_size=5), json_values, max_size=3)
readable_ids = st.integers(-(2**62), 2**62) | st.text(max_size=12)
unreadable_ids = st.sampled_from([None, 1.5, -0.0, True, False, [], [1], {}, {"a": 1}])


def dumps(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


def request(rid: Any, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


# -- random bytes, and random JSON


random_lines = st.binary(max_size=300).map(lambda b: b.replace(b"\n", b" ")).map(lambda b: (b, oracle(b)))
random_json = json_values.map(lambda v: dumps(v)).map(lambda b: (b, oracle(b)))


# -- invalid UTF-8 inside an otherwise good request


BAD_UTF8 = [  # a stray byte, a bad sequence, an encoded surrogate, an overlong form, a cut sequence, 5 bytes
    b"\xff", b"\xfe\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe2\x82", b"\xf8\x88\x80\x80\x80", b"\x80",
]


@st.composite
def invalid_utf8(draw: Any) -> tuple[bytes, Expect]:
    bad = draw(st.sampled_from(BAD_UTF8))
    where = draw(st.sampled_from(["param", "method", "id", "key"]))
    rid = next_id()
    if where == "param":
        line = b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"s":"a' % rid + bad + b'b"}}'
    elif where == "method":
        line = b'{"jsonrpc":"2.0","id":%d,"method":"pi' % rid + bad + b'ng"}'
    elif where == "id":
        line = b'{"jsonrpc":"2.0","id":"' + bad + b'","method":"ping"}'
    else:
        line = b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"' % rid + bad + b'":1}}'
    return line, PARSE


# -- deep nesting


def nested(depth: int, style: str) -> bytes:
    if style == "array":
        return b"[" * depth + b"1" + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


@st.composite
def deep_nesting(draw: Any) -> tuple[bytes, Expect]:
    shallow = draw(st.booleans())
    depth = draw(st.integers(1, 500)) if shallow else draw(st.integers(2000, 12000))
    style = draw(st.sampled_from(["array", "object"]))
    if draw(st.booleans()):  # bare: JSON that is no message, or too deep to read
        return nested(depth, style), (invalid() if shallow else PARSE)
    rid = next_id()
    line = b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"deep":' % rid + nested(depth, style) + b"}}"
    return line, (answer(rid, lambda m: m.get("result") == {}) if shallow else PARSE)


# -- huge numbers

NUMBERS = [
    "1e400", "-1e400", "1" + "0" * 400, str(2**4000), "-" + str(2**4000),  # beyond a double
    "-0", "0", "-0.0", "1.5", "1e5", "1e-400", "1e300", "-1e300",
    "9223372036854775807", "9223372036854775808", "-9223372036854775809", "18446744073709551616",
    "123456789012345678901234567890",
]


def _beyond_double(token: str) -> bool:
    try:
        value = json.loads(token)
    except ValueError:  # more digits than Python converts
        return True
    return isinstance(value, float) and value in (float("inf"), float("-inf")) or (
        isinstance(value, int) and abs(value) > 1.7e308
    )


@st.composite
def huge_numbers(draw: Any) -> tuple[bytes, Expect]:
    token = draw(st.sampled_from(NUMBERS))
    where = draw(st.sampled_from(["id", "param", "argument"]))
    overflow = _beyond_double(token)
    if where == "id":
        line = b'{"jsonrpc":"2.0","id":' + token.encode() + b',"method":"ping"}'
        if overflow:
            return line, Expect("parse_or_answer", json.loads(token) if len(token) < 4000 else NO_ID)
        value = json.loads(token)
        if isinstance(value, int):  # an integer id of any size is echoed exactly (BP-03, BP-05)
            return line, answer(value, lambda m: m.get("result") == {})
        return line, invalid()  # a float id (1.5, -0.0, 1e5) is no id
    rid = next_id()
    if where == "param":
        line = b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"n":' % rid + token.encode() + b"}}"
        return line, (Expect("parse_or_answer", rid) if overflow else answer(rid, lambda m: m.get("result") == {}))
    other = draw(st.integers(-1000, 1000))
    line = (b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"add","arguments":{"a":' % rid
            + token.encode() + b',"b":%d}}}' % other)
    value = None if overflow else json.loads(token)

    def exact_sum(message: dict[str, Any]) -> bool:
        if isinstance(value, int) and abs(value) < 2**53:
            return message.get("result", {}).get("structuredContent") == {"result": value + other}
        return True  # a float, or an integer a double cannot hold: any well-formed answer

    return line, (Expect("parse_or_answer", rid) if overflow else answer(rid, exact_sum))


# -- huge strings (several MB)


@st.composite
def huge_strings(draw: Any) -> tuple[bytes, Expect]:
    size = draw(st.sampled_from([1 * MiB, 3 * MiB, 6 * MiB]))
    char = draw(st.sampled_from(["x", "\u00e9", "\u2603", "\U0001f600", '"', "\\", "\n", "\u0000"]))
    text = char * (size // len(char.encode()))
    where = draw(st.sampled_from(["echo", "id", "method"]))
    if where == "echo":
        rid: Any = next_id()
        line = dumps(request(rid, "tools/call", {"name": "echo", "arguments": {"text": text}}))
        expect = answer(rid, lambda m: m.get("result", {}).get("content") == [{"type": "text", "text": text}])
    elif where == "id":  # a string id of megabytes is still an id
        line, expect = dumps(request(text, "ping")), answer(text, lambda m: m.get("result") == {})
    else:
        rid = next_id()
        line, expect = dumps(request(rid, "m" + text)), Expect("error", rid, code=-32601)
    # escapes (\", \\, \u0000) can push a line past the limit: then it is refused whole
    return line, (invalid() if len(line) > LIMIT else expect)


# -- valid JSON, wrong JSON-RPC shapes


@st.composite
def wrong_shapes(draw: Any) -> tuple[bytes, Expect]:
    shape = draw(st.sampled_from(
        ["jsonrpc", "no-jsonrpc", "method", "params", "id", "both", "neither", "result", "error",
         "stray-result", "stray-error", "notification", "unknown-method", "extra"]
    ))
    rid = draw(readable_ids)
    if shape in ("jsonrpc", "no-jsonrpc"):
        message = request(rid, "ping")
        if shape == "jsonrpc":
            message["jsonrpc"] = draw(st.sampled_from([None, "1.0", "2", 2.0, "", [], {}, "2.0 "]))
        else:
            del message["jsonrpc"]
        return dumps(message), invalid(rid)
    if shape == "method":
        return dumps(request(rid, draw(st.sampled_from([7, "", [], {}, True, 1.5])))), invalid(rid)  # type: ignore[arg-type]
    if shape == "params":
        return dumps(request(rid, "ping", draw(st.sampled_from([[], [1], 5, "x", True, 0.5])))), invalid(rid)
    if shape == "id":
        return dumps(request(draw(unreadable_ids), "ping")), invalid()
    if shape == "both":
        return dumps({"jsonrpc": "2.0", "id": rid, "result": {}, "error": {"code": 1, "message": "m"}}), invalid(rid)
    if shape == "neither":
        return dumps({"jsonrpc": "2.0", "id": rid}), invalid(rid)
    if shape == "result":
        result = draw(st.sampled_from([5, "x", [], None, True]))
        return dumps({"jsonrpc": "2.0", "id": rid, "result": result}), invalid(rid)
    if shape == "error":
        bad = draw(st.sampled_from([5, "x", [], {}, {"code": "1", "message": "m"}, {"code": 1.5}]))
        return dumps({"jsonrpc": "2.0", "id": rid, "error": bad}), invalid(rid)
    if shape == "stray-result":  # a response to nothing this server asked: ignored
        return dumps({"jsonrpc": "2.0", "id": f"stray-{next_id()}", "result": draw(small_objects)}), NOTHING
    if shape == "stray-error":
        code = draw(st.integers(-(2**63), 2**63 - 1))
        return dumps({"jsonrpc": "2.0", "id": f"stray-{next_id()}", "error": {"code": code, "message": "m"}}), NOTHING
    if shape == "notification":  # whatever its method, a notification is never answered (BP-09)
        method = draw(st.sampled_from(["ping", "initialize", "tools/call"]) | st.text(min_size=1, max_size=20))
        params = draw(st.none() | small_objects)
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        return dumps(message), NOTHING
    if shape == "unknown-method":
        rid = next_id(draw(st.booleans()))
        return dumps(request(rid, f"no/such/{draw(st.text(max_size=10))}")), Expect("error", rid, code=-32601)
    message = request(rid, "ping")  # "extra": members JSON-RPC does not define are ignored
    extra = st.dictionaries(st.sampled_from(["extra", "x", "_meta", "result?"]), json_values, min_size=1, max_size=2)
    message.update(draw(extra))
    return dumps(message), answer(rid, lambda m: m.get("result") == {})


# -- batches, which 2025-11-25 does not allow (BP-13)


@st.composite
def batches(draw: Any) -> tuple[bytes, Expect]:
    items = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            rid = next_id(draw(st.booleans()))
            items.append(draw(st.sampled_from([
                request(rid, "ping"),
                request(rid, "tools/list"),
                request(rid, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}),
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
            ])))
        else:
            items.append(draw(json_values))
    # one error without id for the whole line; none of its requests runs, so none is answered
    return dumps(items), invalid()


hostile_lines = st.one_of(
    random_lines, random_json, invalid_utf8(), deep_nesting(), huge_numbers(), huge_strings(),
    wrong_shapes(), wrong_shapes(), batches(),
)
