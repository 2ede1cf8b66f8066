"""Fuzzing ``mcpkit serve`` over stdio: one long-running process gets random frames.

After every example the process must still be alive and answer a ``ping`` within a few seconds,
and every line it wrote must be a JSON-RPC object that the 2025-11-25 schema accepts.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_stdio import ServerProcess
from tests.conftest import mcpkit_command
from tests.wire import validate_server_message

REVISION = "2025-11-25"
PING_TIMEOUT = 5.0

# --------------------------------------------------------------------------- strategies

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
    | st.sampled_from(["2.0", "ping", "tools/call", "initialize", "notifications/cancelled", ""])
)
_KEYS = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "name", "arguments", "_meta", "uri"]) | st.text(max_size=8)
json_values = st.recursive(
    _scalars, lambda c: st.lists(c, max_size=5) | st.dictionaries(_KEYS, c, max_size=5), max_leaves=25
)

# Valid requests to mutate. Only tools that return at once: no sleeping, no requests to the client.
TEMPLATES: list[dict[str, Any]] = [
    {"method": "ping"},
    {"method": "tools/list", "params": {}},
    {"method": "tools/list", "params": {"cursor": "abc"}},
    {"method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}},
    {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}},
    {"method": "tools/call", "params": {"name": "test_simple_text", "arguments": {}}},
    {"method": "tools/call", "params": {"name": "test_error_handling", "arguments": {}}},
    {"method": "tools/call", "params": {"name": "json_schema_2020_12_tool", "arguments": {"name": "n", "address": {"city": "c"}}}},
    {"method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}, "_meta": {"progressToken": "p"}}},
    {"method": "resources/list"},
    {"method": "resources/templates/list"},
    {"method": "resources/read", "params": {"uri": "test://static-text"}},
    {"method": "resources/read", "params": {"uri": "test://template/7/data"}},
    {"method": "resources/subscribe", "params": {"uri": "test://watched-resource"}},
    {"method": "resources/unsubscribe", "params": {"uri": "test://watched-resource"}},
    {"method": "prompts/list"},
    {"method": "prompts/get", "params": {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}}},
    {"method": "completion/complete", "params": {"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "pa"}}},
    {"method": "logging/setLevel", "params": {"level": "warning"}},
    {"method": "notifications/cancelled", "params": {"requestId": 1}},
    {"method": "notifications/roots/list_changed"},
]
# tools/call names a mutation may pick (any other name is an unknown tool)
SAFE_TOOLS = ["add", "echo", "test_simple_text", "test_error_handling", "json_schema_2020_12_tool", "nope"]

_ids = itertools.count(1_000_000)


@st.composite
def mutated_requests(draw: Any) -> bytes:
    template = json.loads(json.dumps(draw(st.sampled_from(TEMPLATES))))
    message: dict[str, Any] = {"jsonrpc": "2.0", **template}
    if not template["method"].startswith("notifications/"):
        message["id"] = next(_ids) if draw(st.booleans()) else f"f-{next(_ids)}"
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["drop", "replace", "add", "param", "arg", "tool"]))
        if kind == "drop" and message:
            message.pop(draw(st.sampled_from(sorted(message))))
        elif kind == "replace" and message:
            message[draw(st.sampled_from(sorted(message)))] = draw(json_values)
        elif kind == "add":
            message[draw(_KEYS)] = draw(json_values)
        elif kind == "param":
            params = message.get("params")
            if isinstance(params, dict):
                params[draw(_KEYS)] = draw(json_values)
        elif kind == "arg":
            params = message.get("params")
            if isinstance(params, dict) and isinstance(params.get("arguments"), dict):
                arguments = params["arguments"]
                key = draw(st.sampled_from(sorted(arguments) or ["x"]) | st.text(max_size=5))
                arguments[key] = draw(json_values)
        elif kind == "tool":
            params = message.get("params")
            if isinstance(params, dict) and "name" in params and message.get("method") == "tools/call":
                params["name"] = draw(st.sampled_from(SAFE_TOOLS))
    # keep tools/call on tools that answer at once (a mutation may have renamed the method)
    params = message.get("params")
    if isinstance(params, dict) and message.get("method") == "tools/call" and params.get("name") not in SAFE_TOOLS:
        params["name"] = "nope"
    return json.dumps(message).encode()


def _nested(depth: int, opening: bytes, closing: bytes, inner: bytes = b"1") -> bytes:
    return opening * depth + inner + closing * depth


special_frames = st.one_of(
    st.integers(1, 12_000).map(lambda n: _nested(n, b"[", b"]")),
    st.integers(1, 5_000).map(lambda n: _nested(n, b'{"a":', b"}")),
    st.sampled_from(
        [
            b'{"jsonrpc":"2.0","id":1' + b"0" * 400 + b',"method":"ping"}',
            b'{"jsonrpc":"2.0","id":184467440737095516160,"method":"ping"}',
            b'{"jsonrpc":"2.0","id":-1e999,"method":"ping"}',
            b'{"jsonrpc":"2.0","id":1e308,"method":"ping"}',
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":1e999,"b":1}}}',
            b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add","arguments":{"a":9223372036854775807,"b":1}}}',
            b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add","arguments":{"a":' + b"9" * 500 + b',"b":1}}}',
            b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"\\ud800"}}}',
            b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"\xff"}}}',
            b'{"jsonrpc":"2.0","id":6,"method":"ping","params":{"_meta":{"progressToken":"\xc3\x28"}}}',
            b'{"jsonrpc":"2.0","id":7,"method":"ping"}\x00',
            b'\xef\xbb\xbf{"jsonrpc":"2.0","id":8,"method":"ping"}',
            b'{"jsonrpc":"2.0","id":9,"method":"ping","id":10}',
            b"\r",
            b"\x00\x00\x00",
        ]
    ),
    st.integers(1, 1_000_000).map(
        lambda n: json.dumps(
            {"jsonrpc": "2.0", "id": next(_ids), "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x" * n}}}
        ).encode()
    ),
    st.integers(1, 200_000).map(lambda n: b'{"jsonrpc":"2.0","id":1,"method":"' + b"m" * n + b'"}'),
)

frames = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v).encode()),
    mutated_requests(),
    mutated_requests(),
    special_frames,
    st.lists(mutated_requests(), min_size=1, max_size=4).map(lambda fs: b"[" + b",".join(fs) + b"]"),
    st.lists(mutated_requests(), min_size=2, max_size=5).map(lambda fs: b"\n".join(fs)),
)


# --------------------------------------------------------------------------- the test


def _requests_in(frame: bytes) -> dict[Any, str]:
    """id -> method of the well-formed requests in a frame, to validate their answers by type."""
    methods: dict[Any, str] = {}
    for line in frame.split(b"\n"):
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):  # deep nesting is for the server, not for this helper
            continue
        for m in value if isinstance(value, list) else [value]:
            if isinstance(m, dict) and isinstance(m.get("method"), str) and type(m.get("id")) in (str, int):
                methods[m["id"]] = m["method"]
    return methods


@pytest.mark.req("ST-04", "ST-01", "ST-02", "BP-02", "BP-06", "BP-07", "PG-01")
def test_random_frames_never_crash_or_hang_the_server():
    # Run WITHOUT the tap: mutated requests legitimately get errors that echo a readable id of a
    # request whose "method" was mutated away, and the tap's checker (which pairs answers only
    # with requests that have a string method) would report them. Every line is validated here
    # against the 2025-11-25 schema instead, paired with the request it answers when there is one.
    server = ServerProcess(mcpkit_command("serve"))
    try:
        server.initialize(REVISION)
        ping_ids = itertools.count(1)

        @settings(
            max_examples=200,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
        )
        @given(frames)
        def one_frame(frame: bytes) -> None:
            methods = _requests_in(frame)
            server.write(frame + b"\n")
            rid = f"fuzz-ping-{next(ping_ids)}"
            server.request("ping", rid=rid)
            others: list[Any] = []
            try:
                answer = server.answer(rid, timeout=PING_TIMEOUT, others=others)
            except AssertionError:
                raise AssertionError(
                    f"no ping answer within {PING_TIMEOUT} s after {frame[:300]!r}; alive: {server.proc.poll() is None}"
                ) from None
            assert answer == {"jsonrpc": "2.0", "id": rid, "result": {}}
            assert server.proc.poll() is None
            for message in others:
                assert isinstance(message, dict), f"not a JSON object: {message!r} after {frame[:300]!r}"
                method = methods.get(message.get("id")) if "method" not in message else None
                validate_server_message(message, REVISION, method)

        one_frame()
        assert server.finish() == 0
        for line in server.raw_lines:
            assert isinstance(json.loads(line), dict)
        assert "Traceback" not in server.stderr()
    finally:
        server.kill()
