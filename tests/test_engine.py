"""The sans-IO protocol engine (``mcpkit.protocol.engine.Engine``): frames in, events and messages out.

No subprocess and no asyncio: a test plays the client by feeding frames (bytes or dicts) and
reads what the engine queued in its outbox. Every message the engine emits in these tests is also
recorded with ``wire.record`` and validated against the negotiated revision's official schema.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpkit.protocol.engine import (
    CancelRequested,
    Engine,
    NotificationReceived,
    RequestReceived,
    ResponseReceived,
    SessionStarted,
)
from mcpkit.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, McpError
from mcpkit.protocol.revisions import HANDSHAKE_VERSIONS, REVISIONS, Revision
from tests.wire import PRE_NEGOTIATION_REVISION

ALL = HANDSHAKE_VERSIONS
NOT_BATCHING = tuple(v for v in ALL if v != "2025-03-26")
CALL_RESULT = {"content": [{"type": "text", "text": "ok"}]}


def describe(rev: Revision, params: dict[str, Any]) -> dict[str, Any]:
    return {
        "protocolVersion": rev.version,
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "engine-test", "version": "1.0"},
    }


def init_params(version: Any = "2025-11-25", **extra: Any) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": {"roots": {}},
        "clientInfo": {"name": "test-client", "version": "0.1"},
        **extra,
    }


def req(rid: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def note(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def call(rid: Any, token: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "t", "arguments": {}}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return req(rid, "tools/call", params)


class Client:
    """Plays the client against one Engine; remembers request methods to validate the answers."""

    def __init__(self, wire: Any) -> None:
        self.engine = Engine(describe=describe)
        self.wire = wire
        self.methods: dict[Any, str] = {}

    def send(self, message: Any) -> list[Any]:
        for m in message if isinstance(message, list) else [message]:
            if isinstance(m, dict) and isinstance(m.get("method"), str) and type(m.get("id")) in (str, int):
                self.methods.setdefault(m["id"], m["method"])  # a refused duplicate keeps the first
        return self.engine.receive(json.dumps(message).encode())

    def send_raw(self, data: bytes | str) -> list[Any]:
        return self.engine.receive(data)

    def take(self) -> list[Any]:
        """Decode (and record for schema validation) everything the engine queued."""
        out = []
        revision = self.engine.revision.version if self.engine.revision else PRE_NEGOTIATION_REVISION
        for item in self.engine.take_outbox():
            assert b"\n" not in item.payload  # ST-01
            message = json.loads(item.payload)
            method = None
            if isinstance(message, dict) and "method" not in message:
                rid = message.get("id")
                method = self.methods.pop(rid, None) if type(rid) in (str, int) else None
            self.wire.record(message, revision, method)
            out.append(message)
        return out

    def take_one(self) -> Any:
        out = self.take()
        assert len(out) == 1, out
        return out[0]

    def initialize(self, version: str = "2025-11-25", rid: Any = "init") -> Any:
        events = self.send(req(rid, "initialize", init_params(version)))
        assert [type(e) for e in events] == [SessionStarted]
        answer = self.take_one()
        assert answer["result"]["protocolVersion"] == version
        self.send(note("notifications/initialized"))
        assert self.take() == []
        return events[0]


@pytest.fixture
def client(wire: Any) -> Client:
    return Client(wire)


@pytest.fixture
def ready(client: Client) -> Client:
    client.initialize()
    return client


def _error(message: Any, code: int, rid: Any = "absent") -> dict[str, Any]:
    assert set(message) <= {"jsonrpc", "id", "error"}
    assert message["jsonrpc"] == "2.0"
    assert message["error"]["code"] == code
    assert isinstance(message["error"]["message"], str) and message["error"]["message"]
    if rid == "absent":
        assert "id" not in message
    else:
        assert message["id"] == rid and type(message["id"]) is type(rid)
    return message["error"]


# --------------------------------------------------------------------------- framing errors


@pytest.mark.req("BP-02", "BP-06", "ST-04")
@pytest.mark.parametrize("data", [b"{", b"not json", b"\xff\xfe", b'{"jsonrpc":"2.0","id":1,"method":"\xc3"}', b""])
def test_unparseable_frames_get_a_parse_error_without_id(client, data):
    assert client.send_raw(data) == []
    err = _error(client.take_one(), PARSE_ERROR)
    assert err["message"] == "Parse error: the message is not valid UTF-8 JSON."
    # nothing changed: the engine still answers a ping and accepts initialize
    client.send(req(1, "ping"))
    assert client.take_one() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    client.initialize()


@pytest.mark.req("BP-02", "ST-04")
def test_parse_errors_after_initialization_too(ready):
    ready.send_raw(b'{"jsonrpc":"2.0","id":5,"method":"tools/list"')
    _error(ready.take_one(), PARSE_ERROR)
    assert ready.engine.in_flight_count == 0


@pytest.mark.req("BP-01", "BP-03", "BP-06")
@pytest.mark.parametrize(
    "message,rid",
    [
        (7, "absent"),
        ("ping", "absent"),
        (None, "absent"),
        ({"id": 1, "method": "ping"}, 1),
        ({"jsonrpc": "1.0", "id": "x", "method": "ping"}, "x"),
        ({"jsonrpc": "2.0", "id": None, "method": "ping"}, "absent"),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, "absent"),
        ({"jsonrpc": "2.0", "id": True, "method": "ping"}, "absent"),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, "absent"),
        ({"jsonrpc": "2.0", "id": [1], "method": "ping"}, "absent"),
        ({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": [1, 2]}, 2),
        ({"jsonrpc": "2.0", "id": 3, "method": "ping", "params": "x"}, 3),
        ({"jsonrpc": "2.0", "id": 4, "method": 4}, 4),
        ({"jsonrpc": "2.0", "id": 5, "method": ""}, 5),
        ({"jsonrpc": "2.0", "id": 6}, 6),
        ({"jsonrpc": "2.0", "id": 8, "result": {}, "error": {"code": 1, "message": "m"}}, 8),
    ],
)
@pytest.mark.parametrize("initialized", [False, True], ids=["before-init", "after-init"])
def test_invalid_requests_get_minus_32600(client, message, rid, initialized):
    if initialized:
        client.initialize()
    assert client.send(message) == []
    _error(client.take_one(), INVALID_REQUEST, rid)
    assert client.engine.in_flight_count == 0


@pytest.mark.req("BP-13")
def test_an_empty_batch_is_an_invalid_request(ready):
    assert ready.send([]) == []
    err = _error(ready.take_one(), INVALID_REQUEST)
    assert err["message"] == "An empty batch is not a valid request."


# --------------------------------------------------------------------------- ids


@pytest.mark.req("BP-03", "BP-05", "BP-06")
@pytest.mark.parametrize("rid", ["abc", "", "7", 0, 7, -3, 2**63 - 1])
def test_ids_are_echoed_with_their_type(ready, rid):
    events = ready.send(call(rid))
    assert [(type(e), e.id, e.method) for e in events] == [(RequestReceived, rid, "tools/call")]
    assert ready.engine.respond(rid, CALL_RESULT) is True
    answer = ready.take_one()
    assert answer == {"jsonrpc": "2.0", "id": rid, "result": CALL_RESULT}
    assert type(answer["id"]) is type(rid)
    # an error answer echoes it the same way
    ready.send(call(rid))
    assert ready.engine.respond_error(rid, McpError(INVALID_PARAMS, "Bad arguments.")) is True
    assert _error(ready.take_one(), INVALID_PARAMS, rid) == {"code": INVALID_PARAMS, "message": "Bad arguments."}


@pytest.mark.req("BP-03")
def test_string_and_integer_ids_are_distinct(ready):
    ready.send(call(1))
    ready.send(call("1"))
    assert ready.engine.in_flight_count == 2
    assert ready.take() == []
    ready.engine.respond("1", CALL_RESULT)
    assert ready.take_one()["id"] == "1"
    ready.engine.respond(1, CALL_RESULT)
    assert ready.take_one()["id"] == 1


# --------------------------------------------------------------------------- notifications


@pytest.mark.req("BP-09")
@pytest.mark.parametrize("initialized", [False, True], ids=["before-init", "after-init"])
def test_notifications_are_never_answered(client, initialized):
    if initialized:
        client.initialize()
    for n in [
        note("notifications/unknown"),
        note("notifications/unknown", {"x": 1}),
        note("some/method"),
        note("notifications/initialized"),
        note("notifications/cancelled"),
        note("notifications/cancelled", {"requestId": 99}),
        note("notifications/roots/list_changed"),
        note("ping"),
        note("initialize", init_params()),
        note("tools/call", {"name": "t"}),
    ]:
        client.send(n)
    assert client.take() == []
    assert client.engine.in_flight_count == 0


@pytest.mark.req("BP-09", "LC-01")
def test_notifications_become_events_only_after_initialize(client):
    assert client.send(note("notifications/roots/list_changed")) == []
    client.initialize()
    events = client.send(note("notifications/roots/list_changed", {"k": 1}))
    assert [(type(e), e.method, e.params) for e in events] == [
        (NotificationReceived, "notifications/roots/list_changed", {"k": 1})
    ]


@pytest.mark.req("LC-01")
def test_initialized_notification_counts_only_after_initialize(client):
    client.send(note("notifications/initialized"))
    assert client.engine.initialized is False
    client.send(req(1, "initialize", init_params()))
    client.take()
    assert client.engine.initialized is False
    client.send(note("notifications/initialized"))
    assert client.engine.initialized is True
    assert client.take() == []


# --------------------------------------------------------------------------- before initialize


@pytest.mark.req("LC-01", "LC-04", "PG-01")
@pytest.mark.parametrize("method", ["tools/list", "tools/call", "resources/read", "prompts/get", "logging/setLevel", "x/y"])
def test_requests_before_initialize_are_refused(client, method):
    assert client.send(req(3, method, {})) == []
    err = _error(client.take_one(), INVALID_REQUEST, 3)
    assert err["message"] == (
        f"Received {method!r} before initialization: send 'initialize' first (only 'ping' is allowed before it)."
    )
    assert client.engine.in_flight_count == 0
    assert client.engine.revision is None


@pytest.mark.req("LC-04", "PG-01")
def test_ping_is_answered_before_and_after_initialize(client):
    assert client.send(req("p1", "ping")) == []
    assert client.take_one() == {"jsonrpc": "2.0", "id": "p1", "result": {}}
    client.initialize()
    assert client.send(req("p2", "ping", {})) == []
    assert client.take_one() == {"jsonrpc": "2.0", "id": "p2", "result": {}}
    assert client.engine.in_flight_count == 0


def test_no_notification_but_logging_goes_out_before_initialize(client):
    assert client.engine.notify("notifications/tools/list_changed") is False
    assert client.take() == []
    assert client.engine.notify("notifications/message", {"level": "info", "data": "hello"}) is True
    assert client.take_one()["method"] == "notifications/message"


# --------------------------------------------------------------------------- initialize


@pytest.mark.req("LC-01", "LC-02")
@pytest.mark.parametrize("version", ALL)
def test_initialize_echoes_each_supported_version(client, version):
    events = client.send(req(1, "initialize", init_params(version)))
    assert len(events) == 1 and type(events[0]) is SessionStarted
    started = events[0]
    assert started.revision is REVISIONS[version]
    assert started.client_info == {"name": "test-client", "version": "0.1"}
    assert started.client_capabilities == {"roots": {}}
    answer = client.take_one()
    assert answer == {"jsonrpc": "2.0", "id": 1, "result": describe(REVISIONS[version], {})}
    assert client.engine.revision is REVISIONS[version]
    assert client.engine.client_info == {"name": "test-client", "version": "0.1"}


@pytest.mark.req("LC-02", "LC-11")
@pytest.mark.parametrize("version", ["2099-12-31", "2024-10-07", "2026-07-28", "", "1.0"])
def test_initialize_with_an_unknown_version_gets_our_latest(client, version):
    events = client.send(req(1, "initialize", init_params(version)))
    assert events[0].revision.version == "2025-11-25"
    assert client.take_one()["result"]["protocolVersion"] == "2025-11-25"


@pytest.mark.req("LC-02")
@pytest.mark.parametrize("version", [None, 20241105, 1.5, True, ["2025-06-18"], {"v": "2025-06-18"}, "missing"])
def test_initialize_with_a_non_string_version_is_invalid_params(client, version):
    params = init_params(version)
    if version == "missing":
        del params["protocolVersion"]
    assert client.send(req(1, "initialize", params)) == []
    err = _error(client.take_one(), INVALID_PARAMS, 1)
    assert err["message"] == "initialize needs a string protocolVersion."
    assert err["data"] == {"supported": list(ALL), "requested": None if version == "missing" else version}
    assert client.engine.revision is None
    # the client may try again
    client.initialize("2025-06-18", rid=2)


@pytest.mark.req("LC-02")
def test_initialize_without_params(client):
    assert client.send(req(1, "initialize")) == []
    err = _error(client.take_one(), INVALID_PARAMS, 1)
    assert err["data"] == {"supported": list(ALL), "requested": None}


@pytest.mark.req("LC-01")
def test_initialize_tolerates_odd_client_info_and_capabilities(client):
    events = client.send(req(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": [1], "clientInfo": "x"}))
    assert events[0].client_capabilities == {} and events[0].client_info == {}
    assert client.take_one()["result"]["protocolVersion"] == "2025-06-18"


@pytest.mark.req("LC-01")
def test_a_second_initialize_is_refused(ready):
    assert ready.send(req(9, "initialize", init_params("2024-11-05"))) == []
    err = _error(ready.take_one(), INVALID_REQUEST, 9)
    assert err["message"] == "The session is already initialized."
    assert ready.engine.revision.version == "2025-11-25"


# --------------------------------------------------------------------------- in-flight ids


@pytest.mark.req("BP-04", "BP-06")
@pytest.mark.parametrize("second", ["tools/call", "ping", "initialize"])
def test_a_duplicate_in_flight_id_is_refused_and_the_first_stays_answerable(ready, second):
    ready.send(call(7))
    assert ready.send(req(7, second, init_params() if second == "initialize" else {"name": "t"})) == []
    err = _error(ready.take_one(), INVALID_REQUEST, 7)
    assert err["message"] == "This request id is already used by a request still in flight (BP-04)."
    assert ready.engine.is_in_flight(7) and ready.engine.in_flight_count == 1
    assert ready.engine.respond(7, CALL_RESULT) is True
    assert ready.take_one() == {"jsonrpc": "2.0", "id": 7, "result": CALL_RESULT}
    # once answered, the id is free again (only in-flight duplicates are refused)
    assert [type(e) for e in ready.send(call(7))] == [RequestReceived]


def test_respond_to_an_unknown_request_does_nothing(ready):
    assert ready.engine.respond(123, {}) is False
    assert ready.engine.respond_error(123, McpError(INTERNAL_ERROR, "x")) is False
    ready.send(call(1))
    assert ready.engine.respond(1, CALL_RESULT) is True
    assert ready.engine.respond(1, CALL_RESULT) is False  # never answered twice
    assert len(ready.take()) == 1


# --------------------------------------------------------------------------- cancellation


@pytest.mark.req("CN-01")
@pytest.mark.parametrize("rid", [5, "five"])
def test_a_cancelled_request_is_never_answered(ready, rid):
    ready.send(call(rid, token="tok"))
    events = ready.send(note("notifications/cancelled", {"requestId": rid, "reason": "user gave up"}))
    assert len(events) == 1 and type(events[0]) is CancelRequested
    assert (events[0].request_id, events[0].reason) == (rid, "user gave up")
    assert not ready.engine.is_in_flight(rid)
    assert ready.engine.respond(rid, CALL_RESULT) is False
    assert ready.engine.respond_error(rid, McpError(INTERNAL_ERROR, "x")) is False
    assert ready.engine.progress(rid, 1) is False
    assert ready.engine.notify("notifications/message", {"level": "info", "data": "x"}, related=rid) is False
    assert ready.take() == []


@pytest.mark.req("CN-01")
def test_a_cancel_reason_that_is_not_a_string_is_dropped(ready):
    ready.send(call(1))
    events = ready.send(note("notifications/cancelled", {"requestId": 1, "reason": 42}))
    assert events[0].reason is None


@pytest.mark.req("CN-01", "BP-09")
@pytest.mark.parametrize(
    "params",
    [
        None,
        {},
        {"requestId": 999},
        {"requestId": "1"},
        {"requestId": 1.0},
        {"requestId": True},
        {"requestId": [1]},
        {"requestId": None},
        {"reason": "no id"},
    ],
)
def test_unknown_or_malformed_cancellations_are_ignored(ready, params):
    ready.send(call(1))
    assert ready.send(note("notifications/cancelled", params)) == []
    assert ready.take() == []
    assert ready.engine.is_in_flight(1)
    assert ready.engine.respond(1, CALL_RESULT) is True
    assert ready.take_one()["id"] == 1


@pytest.mark.req("CN-01")
def test_a_cancel_after_the_response_is_ignored(ready):
    ready.send(call(1))
    ready.engine.respond(1, CALL_RESULT)
    assert len(ready.take()) == 1
    assert ready.send(note("notifications/cancelled", {"requestId": 1})) == []
    assert ready.take() == []


@pytest.mark.req("CN-01", "LC-08")
def test_cancelling_initialize_or_ping_has_no_effect(client):
    client.send(req(1, "initialize", init_params()))
    assert client.send(note("notifications/cancelled", {"requestId": 1})) == []
    assert client.take_one()["result"]["protocolVersion"] == "2025-11-25"
    client.send(req(2, "ping"))
    assert client.send(note("notifications/cancelled", {"requestId": 2})) == []
    assert client.take_one() == {"jsonrpc": "2.0", "id": 2, "result": {}}


# --------------------------------------------------------------------------- progress


@pytest.mark.req("PR-01", "PR-02")
@pytest.mark.parametrize("token", ["tok-1", "", 0, 17])
def test_progress_echoes_the_token_with_its_type(ready, token):
    ready.send(call(1, token=token))
    assert ready.engine.progress_token(1) == token
    assert ready.engine.progress(1, 0.5, 2) is True
    message = ready.take_one()
    assert message == {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": token, "progress": 0.5, "total": 2},
    }
    assert type(message["params"]["progressToken"]) is type(token)


@pytest.mark.req("PR-01")
@pytest.mark.parametrize("meta", [None, {}, {"progressToken": None}, {"progressToken": 1.5}, {"progressToken": True},
                                  {"progressToken": {"a": 1}}, {"progressToken": [1]}, "notadict"])
def test_no_progress_without_a_valid_token(ready, meta):
    params: dict[str, Any] = {"name": "t"}
    if meta is not None:
        params["_meta"] = meta
    ready.send(req(1, "tools/call", params))
    assert ready.engine.progress_token(1) is None
    assert ready.engine.progress(1, 1, 10, "step") is False
    assert ready.take() == []


@pytest.mark.req("PR-03")
def test_progress_must_strictly_increase(ready):
    ready.send(call(1, token="t"))
    assert ready.engine.progress(1, 1) is True
    assert ready.engine.progress(1, 1.5) is True  # floats are fine, total may be absent
    with pytest.raises(ValueError, match="PR-03"):
        ready.engine.progress(1, 1.5)
    with pytest.raises(ValueError, match="PR-03"):
        ready.engine.progress(1, 0)
    assert ready.engine.progress(1, 2, 2) is True
    values = [m["params"]["progress"] for m in ready.take()]
    assert values == [1, 1.5, 2]
    # a negative start is allowed, as long as it increases
    ready.send(call(2, token="u"))
    assert ready.engine.progress(2, -1) is True
    assert ready.engine.progress(2, 0) is True


@pytest.mark.req("PR-02", "PR-04")
def test_progress_and_related_notifications_stop_after_the_response(ready):
    ready.send(call(1, token="t"))
    assert ready.engine.progress(1, 1) is True
    assert ready.engine.notify("notifications/message", {"level": "info", "data": "x"}, related=1) is True
    ready.engine.respond(1, CALL_RESULT)
    assert ready.engine.progress(1, 2) is False
    assert ready.engine.progress_token(1) is None
    assert ready.engine.notify("notifications/message", {"level": "info", "data": "y"}, related=1) is False
    out = ready.take()
    assert [m.get("method", "response") for m in out] == ["notifications/progress", "notifications/message", "response"]


@pytest.mark.req("PR-01")
@pytest.mark.parametrize("version", ALL)
def test_progress_message_only_where_the_revision_has_it(client, version):
    client.initialize(version)
    client.send(call(1, token=5))
    client.engine.progress(1, 1, None, "halfway")
    params = client.take_one()["params"]
    if REVISIONS[version].progress_message:
        assert params == {"progressToken": 5, "progress": 1, "message": "halfway"}
    else:
        assert params == {"progressToken": 5, "progress": 1}
    assert (version != "2024-11-05") == REVISIONS[version].progress_message


# --------------------------------------------------------------------------- batches


@pytest.mark.req("BP-13", "LC-07")
def test_batches_are_refused_before_initialize(client):
    batch = [req(1, "initialize", init_params("2025-03-26")), req(2, "ping")]
    assert client.send(batch) == []
    err = _error(client.take_one(), INVALID_REQUEST)
    assert err["message"] == (
        "JSON-RPC batches are not accepted before initialization; batching exists only in protocol 2025-03-26."
    )
    assert client.engine.revision is None


@pytest.mark.req("BP-13")
@pytest.mark.parametrize("version", NOT_BATCHING)
def test_batches_are_refused_outside_2025_03_26(client, version):
    client.initialize(version)
    assert client.send([call(1), req(2, "ping"), note("notifications/x")]) == []
    err = _error(client.take_one(), INVALID_REQUEST)
    assert err["message"] == (
        f"JSON-RPC batches are not accepted under protocol {version}; batching exists only in protocol 2025-03-26."
    )
    assert client.engine.in_flight_count == 0


@pytest.fixture
def batching(client: Client) -> Client:
    client.initialize("2025-03-26")
    return client


@pytest.mark.req("BP-13", "BP-09")
def test_a_batch_is_answered_as_one_array_once_every_member_is_answered(batching):
    events = batching.send([call(1), req(2, "ping"), note("notifications/x", {"a": 1}), call("three")])
    assert [(type(e).__name__, getattr(e, "id", None)) for e in events] == [
        ("RequestReceived", 1),
        ("NotificationReceived", None),
        ("RequestReceived", "three"),
    ]
    assert batching.take() == []  # the ping's answer waits for the rest of its batch
    batching.engine.respond("three", CALL_RESULT)
    assert batching.take() == []
    batching.engine.respond_error(1, McpError(INVALID_PARAMS, "Nope."))
    out = batching.take_one()
    assert isinstance(out, list)
    assert sorted(json.dumps(m, sort_keys=True) for m in out) == sorted(
        json.dumps(m, sort_keys=True)
        for m in [
            {"jsonrpc": "2.0", "id": 2, "result": {}},
            {"jsonrpc": "2.0", "id": "three", "result": CALL_RESULT},
            {"jsonrpc": "2.0", "id": 1, "error": {"code": INVALID_PARAMS, "message": "Nope."}},
        ]
    )


@pytest.mark.req("BP-13", "BP-09")
def test_a_batch_of_notifications_gets_no_answer(batching):
    events = batching.send([note("notifications/a"), note("notifications/b")])
    assert len(events) == 2
    assert batching.take() == []


@pytest.mark.req("BP-13", "LC-07")
def test_initialize_inside_a_batch_is_refused(batching):
    batching.send([req(1, "initialize", init_params("2025-03-26")), req(2, "ping")])
    out = batching.take_one()
    assert isinstance(out, list) and len(out) == 2
    by_id = {m["id"]: m for m in out}
    assert by_id[1]["error"] == {"code": INVALID_REQUEST, "message": "initialize must not be part of a batch."}
    assert by_id[2] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert batching.engine.revision.version == "2025-03-26"


@pytest.mark.req("BP-13", "BP-06")
def test_invalid_members_of_a_batch_are_answered_in_the_array(batching):
    batching.send([1, {"jsonrpc": "2.0", "id": None, "method": "ping"}, req(3, "ping"), {"jsonrpc": "2.0", "id": 4}])
    out = batching.take_one()
    assert len(out) == 4
    assert [m.get("id", "none") for m in out] == ["none", "none", 3, 4]
    assert [m["error"]["code"] for m in out if "error" in m] == [INVALID_REQUEST] * 3


@pytest.mark.req("BP-13", "CN-01")
def test_a_cancelled_batch_member_is_left_out(batching):
    batching.send([call(1), call(2), req(3, "ping")])
    batching.send(note("notifications/cancelled", {"requestId": 1}))
    assert batching.take() == []
    batching.engine.respond(2, CALL_RESULT)
    out = batching.take_one()
    assert sorted(m["id"] for m in out) == [2, 3]
    # a batch whose only request is cancelled produces nothing at all
    batching.send([call(10)])
    batching.send(note("notifications/cancelled", {"requestId": 10}))
    assert batching.engine.respond(10, CALL_RESULT) is False
    assert batching.take() == []


@pytest.mark.req("BP-13", "BP-04")
def test_a_duplicate_id_inside_a_batch(batching):
    batching.send([call(1), call(1)])
    assert batching.take() == []
    batching.engine.respond(1, CALL_RESULT)
    out = batching.take_one()
    assert len(out) == 2
    assert sorted("error" in m for m in out) == [False, True]


@pytest.mark.req("BP-13")
def test_a_batch_of_responses_to_server_requests(batching):
    a = batching.engine.send_request("ping")
    b = batching.engine.send_request("roots/list")
    batching.take()
    events = batching.send(
        [{"jsonrpc": "2.0", "id": a, "result": {}}, {"jsonrpc": "2.0", "id": b, "error": {"code": -1, "message": "no"}}]
    )
    assert [(type(e), e.id, e.result, e.error) for e in events] == [
        (ResponseReceived, a, {}, None),
        (ResponseReceived, b, None, {"code": -1, "message": "no"}),
    ]
    assert batching.take() == []


@pytest.mark.req("BP-13")
def test_receive_message_accepts_decoded_values(batching):
    events = batching.engine.receive_message(call(1))
    assert [type(e) for e in events] == [RequestReceived]
    events = batching.engine.receive_message([call(2), req(3, "ping")])
    assert [e.id for e in events] == [2]
    batching.engine.receive_message({"jsonrpc": "2.0", "id": 9})
    batching.engine.respond(1, CALL_RESULT)
    batching.engine.respond(2, CALL_RESULT)
    out = batching.take()
    assert out[0]["error"]["code"] == INVALID_REQUEST and out[0]["id"] == 9
    assert out[1] == {"jsonrpc": "2.0", "id": 1, "result": CALL_RESULT}
    assert sorted(m["id"] for m in out[2]) == [2, 3]


# --------------------------------------------------------------------------- server -> client requests


@pytest.mark.req("BP-04", "BP-03")
def test_server_request_ids_increase_and_responses_are_matched(ready):
    ids = [ready.engine.send_request("ping"), ready.engine.send_request("roots/list"), ready.engine.send_request("ping", {})]
    assert ids == sorted(ids) and len(set(ids)) == 3 and all(type(i) is int for i in ids)
    sent = ready.take()
    assert [(m["id"], m["method"]) for m in sent] == [(ids[0], "ping"), (ids[1], "roots/list"), (ids[2], "ping")]
    assert "params" not in sent[0] and sent[2]["params"] == {}
    events = ready.send({"jsonrpc": "2.0", "id": ids[1], "result": {"roots": []}})
    assert [(type(e), e.id, e.result, e.error) for e in events] == [(ResponseReceived, ids[1], {"roots": []}, None)]
    # a second answer to the same request is ignored
    assert ready.send({"jsonrpc": "2.0", "id": ids[1], "result": {"roots": []}}) == []
    events = ready.send({"jsonrpc": "2.0", "id": ids[0], "error": {"code": -32601, "message": "no ping"}})
    assert [(e.id, e.error) for e in events] == [(ids[0], {"code": -32601, "message": "no ping"})]
    assert ready.take() == []


@pytest.mark.req("CN-02")
@pytest.mark.parametrize(
    "answer",
    [
        {"jsonrpc": "2.0", "id": 999, "result": {}},
        {"jsonrpc": "2.0", "id": "1", "result": {}},
        {"jsonrpc": "2.0", "id": 999, "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "2.0", "error": {"code": -32700, "message": "x"}},
    ],
)
def test_unknown_responses_are_ignored(ready, answer):
    rid = ready.engine.send_request("ping")
    assert rid == 1
    ready.take()
    assert ready.send(answer) == []
    assert ready.take() == []
    # the real answer still matches
    assert [type(e) for e in ready.send({"jsonrpc": "2.0", "id": rid, "result": {}})] == [ResponseReceived]


@pytest.mark.req("LC-10", "CN-02")
def test_abandon_request_tells_the_client_and_ignores_the_late_answer(ready):
    rid = ready.engine.send_request("roots/list")
    ready.take()
    ready.engine.abandon_request(rid, "no longer needed")
    assert ready.take_one() == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": rid, "reason": "no longer needed"},
    }
    assert ready.send({"jsonrpc": "2.0", "id": rid, "result": {"roots": []}}) == []
    ready.engine.abandon_request(rid)  # already abandoned: nothing
    ready.engine.abandon_request(12345)  # never sent: nothing
    assert ready.take() == []
    rid2 = ready.engine.send_request("ping")
    assert rid2 > rid  # never reused
    ready.take()
    ready.engine.abandon_request(rid2)
    assert ready.take_one()["params"] == {"requestId": rid2}


@pytest.mark.req("BP-06")
def test_reject_queues_an_error_without_id(client):
    client.engine.reject(McpError(INVALID_REQUEST, "Message too large.", {"limit": 10}))
    assert client.take_one() == {
        "jsonrpc": "2.0",
        "error": {"code": INVALID_REQUEST, "message": "Message too large.", "data": {"limit": 10}},
    }


# --------------------------------------------------------------------------- properties


def _answers(payloads: list[bytes]) -> tuple[Counter, list[Any]]:
    counts: Counter = Counter()
    messages: list[Any] = []
    for payload in payloads:
        value = json.loads(payload)
        for m in value if isinstance(value, list) else [value]:
            messages.append(m)
            if isinstance(m, dict) and "method" not in m and "id" in m:
                counts[json.dumps(m["id"])] += 1
    return counts, messages


_junk_json = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "x"]), c, max_size=4),
    max_leaves=12,
)

_METHODS = ["tools/call", "ping", "initialize", "tools/list", "unknown/x"]

_action = st.one_of(
    st.tuples(st.just("bytes"), st.binary(max_size=40)),
    st.tuples(st.just("junk"), _junk_json),
    st.tuples(st.just("request"), st.sampled_from(_METHODS), st.sampled_from(ALL + ("2099-01-01",)), st.booleans()),
    st.tuples(st.just("dup"), st.integers(0, 50), st.sampled_from(_METHODS)),
    st.tuples(st.just("notify"), st.sampled_from(["notifications/initialized", "notifications/x", "ping"])),
    st.tuples(st.just("cancel"), st.integers(0, 50)),
    st.tuples(st.just("respond"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("progress"), st.integers(0, 50)),
    st.tuples(st.just("server_request"), st.sampled_from(["ping", "roots/list"])),
    st.tuples(st.just("client_answer"), st.integers(0, 10)),
    st.tuples(st.just("batch"), st.lists(st.tuples(st.sampled_from(_METHODS + ["notification"]), st.booleans()), max_size=4)),
)


@pytest.mark.req("BP-05", "BP-09", "CN-01", "ST-04")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.none(), st.sampled_from(ALL)), st.lists(_action, max_size=40))
def test_random_frame_sequences_never_raise_and_every_request_is_answered_once(version, actions):
    engine = Engine(describe=describe)
    if version is not None:
        engine.receive(json.dumps(req("init", "initialize", init_params(version))).encode())
        assert engine.revision.version == version
        engine.take_outbox()
    payloads: list[bytes] = []
    sent: Counter = Counter()  # request frames per id (our ids only)
    cancelled: Counter = Counter()
    our_ids: list[Any] = []
    pending: list[Any] = []  # ids of RequestReceived events not yet responded to
    last_progress: dict[Any, float] = {}
    out_ids: list[int] = []
    counter = 0

    def key(rid: Any) -> str:
        return json.dumps(rid)

    def fresh() -> Any:
        nonlocal counter
        counter += 1
        return f"r-{counter}" if counter % 2 else 1000 + counter

    def request(rid: Any, method: str, version: str = "2025-11-25", token: bool = False) -> dict[str, Any]:
        params: dict[str, Any] = init_params(version) if method == "initialize" else {"name": "t"}
        if token:
            params["_meta"] = {"progressToken": f"t-{rid}"}
        return req(rid, method, params)

    def feed(data: bytes, count_requests: list[Any]) -> None:
        events = engine.receive(data)
        for rid in count_requests:
            sent[key(rid)] += 1
        for e in events:
            assert type(e) in (RequestReceived, NotificationReceived, CancelRequested, ResponseReceived, SessionStarted)
            if type(e) is RequestReceived:
                pending.append(e.id)
            elif type(e) is CancelRequested:
                cancelled[key(e.request_id)] += 1
        payloads.extend(o.payload for o in engine.take_outbox())

    for action in actions:
        kind = action[0]
        if kind == "bytes":
            feed(action[1], [])
        elif kind == "junk":
            feed(json.dumps(action[1]).encode(), [])
        elif kind == "request":
            rid = fresh()
            our_ids.append(rid)
            feed(json.dumps(request(rid, action[1], action[2], action[3])).encode(), [rid])
        elif kind == "dup" and our_ids:
            rid = our_ids[action[1] % len(our_ids)]
            feed(json.dumps(request(rid, action[2])).encode(), [rid])
        elif kind == "notify":
            feed(json.dumps(note(action[1])).encode(), [])
        elif kind == "cancel":
            target = our_ids[action[1] % len(our_ids)] if our_ids and action[1] < 40 else "nobody"
            feed(json.dumps(note("notifications/cancelled", {"requestId": target})).encode(), [])
        elif kind == "respond" and pending:
            rid = pending.pop(action[1] % len(pending))
            if action[2]:
                engine.respond(rid, CALL_RESULT)
            else:
                engine.respond_error(rid, McpError(INVALID_PARAMS, "No."))
            payloads.extend(o.payload for o in engine.take_outbox())
        elif kind == "progress" and pending:
            rid = pending[action[1] % len(pending)]
            value = last_progress.get(key(rid), 0) + 1
            if engine.progress(rid, value):
                last_progress[key(rid)] = value
            payloads.extend(o.payload for o in engine.take_outbox())
        elif kind == "server_request":
            if engine.revision is not None:
                out_ids.append(engine.send_request(action[1]))
                payloads.extend(o.payload for o in engine.take_outbox())
        elif kind == "client_answer" and out_ids:
            rid = out_ids[action[1] % len(out_ids)]
            feed(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {}}).encode(), [])
        elif kind == "batch":
            members, counted = [], []
            for method, _ in action[1]:
                if method == "notification":
                    members.append(note("notifications/x"))
                else:
                    rid = fresh()
                    our_ids.append(rid)
                    members.append(request(rid, method))
                    counted.append(rid)
            refused = engine.revision is None or not engine.revision.batching
            feed(json.dumps(members).encode(), [] if refused else counted)

    for rid in pending:
        engine.respond(rid, CALL_RESULT)
    payloads.extend(o.payload for o in engine.take_outbox())

    assert engine.in_flight_count == 0
    counts, messages = _answers(payloads)
    for rid in our_ids:
        k = key(rid)
        assert counts[k] == sent[k] - cancelled[k], (rid, counts[k], sent[k], cancelled[k])
    for m in messages:
        assert isinstance(m, dict) and m.get("jsonrpc") == "2.0"
        assert not ("result" in m and "error" in m)
        if "error" in m:
            assert type(m["error"]["code"]) is int and m["error"]["message"]
            assert "id" not in m or type(m["id"]) in (str, int)
    server_ids = [m["id"] for m in messages if "method" in m and "id" in m]
    assert server_ids == sorted(set(server_ids))  # server->client ids increase, never repeat
    batches = [p for p in payloads if p.startswith(b"[")]
    if batches:
        assert engine.revision is not None and engine.revision.batching
