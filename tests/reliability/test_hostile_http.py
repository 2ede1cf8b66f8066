"""Hostile input over Streamable HTTP: one ``mcpkit serve --http`` for the whole module.

Garbage arrives two ways: over raw sockets (malformed HTTP, odd headers, bodies that lie about
their length) and through an ordinary client (httpx) with random bodies. Each gets its status:
uvicorn itself answers malformed HTTP with 400 "Invalid HTTP request received." and closes the
connection (its documented behaviour); the MCP app answers what reaches it with 4xx and a
JSON-RPC error body without a stack trace (HL-05). After every input a new client can still
initialize and call a tool, and at the end the server is still running and its stderr holds no
Traceback.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.hostile import (
    Expect,
    deep_nesting,
    huge_numbers,
    invalid_utf8,
    is_error,
    nested,
    oracle,
    random_json,
    verdict,
    wrong_shapes,
)
from tests.reliability.support import (
    BOTH,
    REVISION,
    STEP,
    HttpClient,
    HttpServer,
    MiB,
    Raw,
    assert_healthy,
    assert_jsonrpc,
    has_traceback,
    http_request,
    raw_exchange,
    serving,
    sse_messages,
    tool_call,
)

pytestmark = pytest.mark.reliability

HTTP_LIMIT = 4 * MiB  # McpHttpApp's default max_body_bytes
UVICORN_400 = b"Invalid HTTP request received."
NOISE = bytes(b for b in range(255, -1, -1) if b not in b"\r\n")
PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


@pytest.fixture(scope="module")
def served() -> Iterator[HttpServer]:
    with serving() as server:
        yield server


@pytest.fixture(scope="module")
def session(served: HttpServer) -> Iterator[HttpClient]:
    """One initialized session whose id the hostile requests carry."""
    with HttpClient(served.url) as client:
        client.initialize()
        yield client


def head(served: HttpServer, session: HttpClient | None = None, *extra: str) -> list[str]:
    """The header lines of a good POST (with the session's id when given)."""
    lines = [f"Host: 127.0.0.1:{served.port}", "Content-Type: application/json", f"Accept: {BOTH}", "Connection: close"]
    if session is not None:
        lines += [f"Mcp-Session-Id: {session.session_id}", f"MCP-Protocol-Version: {REVISION}"]
    return lines + list(extra)


def json_errors(body: bytes) -> list[dict[str, Any]]:
    """An HTTP error body: JSON-RPC errors (one, or a refused batch's list), no stack trace."""
    text = body.decode("utf-8", "replace")
    assert not has_traceback(text) and 'File "' not in text, text
    value = json.loads(body)
    messages = value if isinstance(value, list) else [value]
    assert messages, text
    for message in messages:
        assert_jsonrpc(message)
        assert "error" in message, message
    return messages


def json_error(body: bytes) -> dict[str, Any]:
    """An HTTP error body holding one JSON-RPC error."""
    [message] = json_errors(body)
    return message


def dechunk(body: bytes) -> bytes:
    """A chunked body without its framing."""
    out = []
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out.append(rest[:size])
        body = rest[size + 2:]
    return b"".join(out)


def raw_body(raw: Raw) -> bytes:
    return dechunk(raw.body) if b"transfer-encoding: chunked" in raw.data.split(b"\r\n\r\n")[0].lower() else raw.body


# ============================================================================ malformed HTTP: uvicorn's 400


def _malformed(port: int) -> list[tuple[str, bytes]]:
    good = [f"Host: 127.0.0.1:{port}", "Content-Type: application/json", f"Accept: {BOTH}"]
    req = http_request
    return [
        ("Content-Length not a number", req(port, "POST", good + ["Content-Length: abc"], PING, content_length=False)),
        ("Content-Length negative", req(port, "POST", good + ["Content-Length: -5"], PING, content_length=False)),
        ("Content-Length twice, different",
         req(port, "POST", good + ["Content-Length: 5", f"Content-Length: {len(PING)}"], PING, content_length=False)),
        ("Content-Length of 23 digits", req(port, "POST", good + ["Content-Length: 99999999999999999999999"], PING,
                                            content_length=False)),
        ("Transfer-Encoding gzip", req(port, "POST", good + ["Transfer-Encoding: gzip"], PING, content_length=False)),
        ("chunked garbage", req(port, "POST", good + ["Transfer-Encoding: chunked"], b"zz\r\nhello\r\n0\r\n\r\n",
                                content_length=False)),
        ("a header without a colon", req(port, "POST", good + ["NoColonHere"], PING)),
        ("NUL in a header", req(port, "POST", good + ["X-Nul: a\x00b"], PING)),
        ("space before the colon", req(port, "POST", good + ["X-Space : a"], PING)),
        ("no Host in HTTP/1.1", req(port, "POST", good[1:], PING)),
        ("Host twice", req(port, "POST", good + ["Host: evil.example"], PING)),
        ("a method that is no token", req(port, "P@ST", good, PING)),
        ("a TLS ClientHello", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(256)) * 2),
        ("binary noise ending in a blank line", NOISE * 8 + b"\r\n\r\n"),
    ]


MALFORMED_NAMES = [name for name, _ in _malformed(0)]


@pytest.mark.req("HL-05")
@pytest.mark.parametrize("name", MALFORMED_NAMES)
def test_malformed_http_gets_400_from_uvicorn_and_the_server_goes_on(served, name):
    data = dict(_malformed(served.port))[name]
    raw = raw_exchange(served.port, data)
    assert raw.status == 400, raw
    assert raw.body.endswith(UVICORN_400) or UVICORN_400 in raw.body, raw
    assert_healthy(served.url)


@pytest.mark.req("HL-05")
def test_a_header_line_of_a_mebibyte_is_refused(served, session):
    # h11 (uvicorn's parser) stops buffering an unfinished head at 16 KiB: 400, then it closes
    # while the client may still be sending, which can surface as a reset instead of the 400
    data = http_request(served.port, "POST", head(served, session, "X-Long: " + "a" * MiB), PING)
    raw = raw_exchange(served.port, data)
    assert raw.status == 400 or (raw.status is None and raw.ended == "reset"), raw
    assert_healthy(served.url)


# ============================================================================ odd but well-formed HTTP: served


def chunked(*pieces: bytes) -> bytes:
    """A chunked body of these pieces, with its last chunk."""
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


ODD: list[tuple[str, list[str], bytes, bool]] = [  # name, extra header lines, body, with Content-Length
    ("1000 headers", [f"X-H{i}: v" for i in range(1000)], PING, True),
    ("a 12 KiB header value", ["X-Big: " + "b" * 12 * 1024], PING, True),
    ("a header with bytes beyond ASCII", ["X-Latin: \xff\xfe\xe9"], PING, True),
    ("an unknown header twice", ["X-Twice: 1", "X-Twice: 2"], PING, True),
    ("a folded header", ["X-Fold: a", " b"], PING, True),
    ("Expect: 100-continue", ["Expect: 100-continue"], PING, True),
    ("a chunked body", ["Transfer-Encoding: chunked"], chunked(PING[:10], PING[10:]), False),
]


@pytest.mark.req("HL-06", "HL-07")
@pytest.mark.parametrize(("extra", "body", "length"), [pytest.param(*case[1:], id=case[0]) for case in ODD])
def test_odd_but_wellformed_requests_are_served(served, session, extra, body, length):
    data = http_request(served.port, "POST", head(served, session, *extra), body, content_length=length)
    raw = raw_exchange(served.port, data)
    assert raw.final_status() == 200, raw
    assert [m for m in sse_messages(raw_body(raw)) if "id" in m] == [{"jsonrpc": "2.0", "id": 1, "result": {}}], raw
    assert_healthy(served.url)


# ============================================================================ bodies that lie about their length


@pytest.mark.req("HL-05")
def test_a_body_longer_than_its_content_length(served, session):
    # the first 10 bytes are the body (not JSON: 400 -32700); the rest is never read as a request
    data = http_request(served.port, "POST", head(served, session, "Content-Length: 10"), PING, content_length=False)
    raw = raw_exchange(served.port, data)
    assert raw.status == 400, raw
    assert is_error(json_error(raw_body(raw)), -32700)
    assert_healthy(served.url)


@pytest.mark.req("HL-05")
@pytest.mark.parametrize("how", ["Content-Length", "chunked"])
def test_a_body_shorter_than_announced_gets_no_answer_and_no_hang(served, session, how):
    # the client sends less than it announced, then closes its side: nothing complete arrived, so
    # the connection just ends (and the server must not wait for the rest forever)
    if how == "Content-Length":
        data = http_request(served.port, "POST", head(served, session, f"Content-Length: {len(PING) + 100}"), PING,
                            content_length=False)
    else:
        data = http_request(served.port, "POST", head(served, session, "Transfer-Encoding: chunked"),
                            b"ffffffff\r\n" + PING, content_length=False)
    raw = raw_exchange(served.port, data)
    assert raw.status is None, raw
    assert_healthy(served.url)


# ============================================================================ wrong requests: the app's 4xx


def _wrong(served: HttpServer, session: HttpClient) -> dict[str, tuple[str, dict[str, str], bytes, int]]:
    """name -> (method, headers, body, status)"""
    good = session.headers()
    without_session = {k: v for k, v in good.items() if k not in ("mcp-session-id", "mcp-protocol-version")}
    get = {k: v for k, v in good.items() if k != "content-type"} | {"accept": "text/event-stream"}
    return {
        "Content-Type text/plain": ("POST", good | {"content-type": "text/plain"}, PING, 415),
        "no Content-Type": ("POST", {k: v for k, v in good.items() if k != "content-type"}, PING, 415),
        "Accept text/html": ("POST", good | {"accept": "text/html"}, PING, 406),
        "GET without text/event-stream": ("GET", get | {"accept": "application/json"}, b"", 406),
        "a foreign Host": ("POST", good | {"host": "evil.example"}, PING, 403),
        "a foreign Host with our port": ("POST", good | {"host": f"evil.example:{served.port}"}, PING, 403),
        "a foreign Origin": ("POST", good | {"origin": "http://evil.example"}, PING, 403),
        "Origin null": ("POST", good | {"origin": "null"}, PING, 403),
        "no session": ("POST", without_session, PING, 400),
        "a bogus session": ("POST", good | {"mcp-session-id": "0" * 32}, PING, 404),
        "a session id beyond ASCII": ("POST", good | {"mcp-session-id": "\u00ff" * 8}, PING, 404),
        "GET with a bogus session": ("GET", get | {"mcp-session-id": "f" * 32}, b"", 404),
        "DELETE with a bogus session": ("DELETE", good | {"mcp-session-id": "e" * 32}, b"", 404),
        "DELETE without session": ("DELETE", without_session, b"", 400),
        "an unsupported MCP-Protocol-Version": ("POST", good | {"mcp-protocol-version": "1999-01-01"}, PING, 400),
        "PUT": ("PUT", good, PING, 405),
        "another path": ("POST", good, PING, 404),
        "a declared body over the limit": ("POST", good | {"content-length": str(HTTP_LIMIT + 1)}, b"", 413),
    }


WRONG_NAMES = [
    "Content-Type text/plain", "no Content-Type", "Accept text/html", "GET without text/event-stream", "a foreign Host",
    "a foreign Host with our port", "a foreign Origin", "Origin null", "no session", "a bogus session",
    "a session id beyond ASCII", "GET with a bogus session", "DELETE with a bogus session", "DELETE without session",
    "an unsupported MCP-Protocol-Version", "PUT", "another path", "a declared body over the limit",
]


@pytest.mark.req("HL-02", "HL-05", "HL-16", "HL-17", "HL-19", "HS-01", "HS-02")
@pytest.mark.parametrize("name", WRONG_NAMES)
def test_a_wrong_request_gets_its_status_over_a_raw_socket(served, session, name):
    method, headers, body, status = _wrong(served, session)[name]
    headers = {"host": f"127.0.0.1:{served.port}"} | headers | {"connection": "close"}
    target = "/elsewhere" if name == "another path" else "/mcp"
    lines = [f"{k}: {v}" for k, v in headers.items()]
    raw = raw_exchange(served.port, http_request(served.port, method, lines, body, target=target,
                                                 content_length="content-length" not in headers))
    assert raw.status == status, raw
    message = json_error(raw_body(raw))
    assert "id" not in message and message["error"]["code"] == -32600, message
    assert_healthy(served.url)


@pytest.mark.req("HL-02", "HL-05", "HL-16", "HL-17", "HS-01", "HS-02")
@pytest.mark.parametrize("name", [n for n in WRONG_NAMES if n not in ("a declared body over the limit",
                                                                      "a session id beyond ASCII")])
def test_a_wrong_request_gets_its_status_from_an_ordinary_client(served, session, name):
    method, headers, body, status = _wrong(served, session)[name]
    url = served.url.replace("/mcp", "/elsewhere") if name == "another path" else served.url
    with httpx.Client(timeout=STEP) as http:
        response = http.request(method, url, headers=headers, content=body)
    assert response.status_code == status, response.text
    message = json_error(response.content)
    assert "id" not in message and message["error"]["code"] == -32600, message
    assert_healthy(served.url)


@pytest.mark.req("HL-02")
def test_a_post_without_accept_is_served_as_accepting_anything(served, session):
    # RFC 9110 12.5.1: no Accept means any media type; the spec gives no status for it (HL-02),
    # and the app chooses to serve (the official SDKs answer 406 instead)
    headers = {k: v for k, v in session.headers().items() if k != "accept"}
    with httpx.Client(timeout=STEP) as http:
        response = http.post(session.url, headers=headers, content=PING)
    assert response.status_code == 200
    assert HttpClient.messages(response)[-1] == {"jsonrpc": "2.0", "id": 1, "result": {}}


# ============================================================================ bodies: exact answers


def _body(size: int, rid: int = 9) -> bytes:
    base = b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"pad":""}}' % rid
    body = base.replace(b'"pad":""', b'"pad":"' + b"p" * (size - len(base)) + b'"')
    assert len(body) == size
    return body


BODIES: list[tuple[str, Any, int, Any]] = [
    # name, body (or what makes it), status, the error code (no id) or the answer's id
    ("invalid UTF-8", b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":"\xff"}}', 400, -32700),
    ("an empty body", b"", 400, -32700),
    ("arrays 10,000 deep", nested(10_000, "array"), 400, -32700),
    ("params 10,000 deep", b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":' + nested(10_000, "object") + b"}}",
     400, -32700),
    ("1e400", b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":1e400}}', 400, -32700),
    ("2**4000 as the id", b'{"jsonrpc":"2.0","id":' + str(2**4000).encode() + b',"method":"ping"}', 400, -32700),
    ("a number", b"42", 400, -32600),
    ("a batch (2025-11-25)", b'[{"jsonrpc":"2.0","id":4,"method":"ping"}]', 400, -32600),
    ("an empty batch (2025-11-25)", b"[]", 400, -32600),
    ("-0 as the id", b'{"jsonrpc":"2.0","id":-0,"method":"ping"}', 200, ("id", 0)),
    ("a 3 MiB echo", lambda: json.dumps(tool_call(5, "echo", {"text": "e" * 3 * MiB})).encode(), 200, ("id", 5)),
    ("a body of exactly the limit", lambda: _body(HTTP_LIMIT), 200, ("id", 9)),
    ("a body one byte over the limit", lambda: _body(HTTP_LIMIT + 1), 413, -32600),
]


@pytest.mark.req("HL-05", "HL-06", "BP-02", "BP-06", "BP-13")
@pytest.mark.parametrize(("body", "status", "outcome"), [pytest.param(b, s, o, id=n) for n, b, s, o in BODIES])
def test_a_hostile_body_gets_its_answer(served, session, body, status, outcome):
    body = body() if callable(body) else body
    response = session.post(body=body)
    assert response.status_code == status, response.text[:300]
    if isinstance(outcome, tuple):
        answers = [m for m in HttpClient.messages(response) if "method" not in m]
        assert len(answers) == 1 and answers[0]["id"] == outcome[1] and "result" in answers[0], answers
    else:
        message = json_error(response.content)
        assert is_error(message, outcome), message
        if status == 413:
            assert message["error"]["data"] == {"limit": HTTP_LIMIT}
    assert_healthy(served.url)


@pytest.mark.req("HL-05")
def test_a_chunked_body_over_the_limit_gets_413(served, session):
    def chunks() -> Iterator[bytes]:
        piece = b" " * (256 * 1024)
        for _ in range(HTTP_LIMIT // len(piece) + 4):  # 1 MiB over the limit, no Content-Length
            yield piece

    response = session.http.post(session.url, content=chunks(), headers=session.headers())
    assert response.status_code == 413, response.text[:300]
    assert json_error(response.content)["error"]["data"] == {"limit": HTTP_LIMIT}
    assert_healthy(served.url)


# ============================================================================ random bodies through httpx


def _http_expectation(body: bytes, expect: Expect) -> Expect:
    if len(body) > HTTP_LIMIT:
        return Expect("too large")
    if not body or body.isspace():
        return Expect("parse")  # a blank stdio line is skipped; an empty body is no JSON
    return expect


def check_http_answer(body: bytes, expect: Expect, response: httpx.Response) -> None:
    status = response.status_code
    shown = f"{expect.kind} (id {expect.id!r}) expected for {body[:200]!r}; got {status} {response.text[:300]!r}"
    if expect.kind == "too large":
        assert status == 413, shown
        return
    if expect.kind == "nothing":  # a notification or a stray response: accepted (HL-04)
        assert status == 202 and response.content == b"", shown
        return
    if status in (400, 404):  # HL-05: an error status with a JSON-RPC error body
        errors = json_errors(response.content)
        if response.content.lstrip().startswith(b"["):  # a refused batch: an error per bad element
            assert body.lstrip().startswith(b"[") and all(e["error"]["code"] == -32600 for e in errors), shown
            return
        [message] = errors
        if expect.kind == "any":
            assert message["error"]["code"] in (-32600, -32700) or "id" in message, shown
            return
        assert expect.kind in ("parse", "invalid", "invalid_or_parse", "parse_or_answer"), shown
        assert verdict(expect, [message]), shown
        return
    if expect.kind == "any":
        assert status in (200, 202), shown
        return
    assert status == 200, shown
    answers = [m for m in HttpClient.messages(response) if "method" not in m]
    for message in answers:
        assert_jsonrpc(message)
    assert expect.kind in ("answer", "error", "parse_or_answer"), shown
    assert verdict(expect, answers), shown


random_bodies = st.one_of(
    st.binary(max_size=300).map(lambda b: (b, oracle(b) if b.strip() else Expect("parse"))),
    random_json, invalid_utf8(), deep_nesting(), huge_numbers(), wrong_shapes(), wrong_shapes(),
)


@pytest.mark.req("HL-04", "HL-05", "HL-06", "BP-01", "BP-02", "BP-03", "BP-06", "BP-09")
def test_random_bodies_never_crash_or_hang_the_server(served, session):
    @settings(max_examples=250, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
    @given(random_bodies)
    def one_body(case: tuple[bytes, Expect]) -> None:
        body, expect = case
        response = session.post(body=body)
        check_http_answer(body, _http_expectation(body, expect), response)
        assert_healthy(served.url)

    one_body()


# ============================================================================ random requests over raw sockets


@st.composite
def mangled(draw: Any, template: bytes) -> bytes:
    data = bytearray(template)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["insert", "delete", "replace", "truncate", "crlf", "duplicate"]))
        at = draw(st.integers(0, len(data)))
        if op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=40))
        elif op == "delete":
            del data[at:at + draw(st.integers(1, 30))]
        elif op == "replace" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif op == "truncate":
            del data[at:]
        elif op == "crlf":
            data[at:at] = draw(st.sampled_from([b"\r\n", b"\r\n\r\n", b"\n", b"\r", b":", b" "]))
        elif op == "duplicate":
            lines = bytes(data).split(b"\r\n")
            if len(lines) > 2:
                i = draw(st.integers(1, len(lines) - 2))
                lines.insert(i, lines[i])
                data = bytearray(b"\r\n".join(lines))
    return bytes(data)


@pytest.mark.req("HL-05")
def test_mangled_requests_over_raw_sockets_never_crash_or_hang_the_server(served, session):
    template = http_request(served.port, "POST", head(served, session), PING)

    @settings(max_examples=150, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(mangled(template))
    def one_request(data: bytes) -> None:
        raw = raw_exchange(served.port, data)
        status = raw.final_status()
        # no answer (the request never completed), or a status below 500: never a server error
        assert status is None or 100 <= status < 500, raw
        assert_healthy(served.url)

    one_request()


# ============================================================================ a client that drops a stream


@pytest.mark.req("HL-10")
def test_a_client_dropping_a_countdown_stream_leaves_the_server_serving(served, session):
    message = json.dumps(tool_call(77, "countdown", {"seconds": 2}, token="drop")).encode()
    sock = socket.create_connection(("127.0.0.1", served.port), timeout=STEP)
    try:
        sock.sendall(http_request(served.port, "POST", head(served, session)[:3]
                                  + [f"Mcp-Session-Id: {session.session_id}", f"MCP-Protocol-Version: {REVISION}"],
                                  message))
        seen = b""
        while b"notifications/progress" not in seen:
            chunk = sock.recv(4096)
            assert chunk, seen
            seen += chunk
    finally:
        sock.close()  # dropped after the first progress event, mid-call
    assert_healthy(served.url)
    assert session.tool("add", {"a": 20, "b": 22})["structuredContent"] == {"result": 42}


@pytest.mark.req("HL-05", "HS-02")
def test_after_all_that_the_server_still_runs_without_a_traceback(served):
    # runs last in this module: the same process took every input above
    assert served.alive()
    assert_healthy(served.url)
    assert not has_traceback(served.stderr()), served.stderr()[-3000:]
