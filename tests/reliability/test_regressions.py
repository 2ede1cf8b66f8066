"""Input-handling bugs this suite found, fixed since: each test pins the correct behaviour.

They share an HTTP server of their own (the probe, whose ``touch`` tool shows whether a request
ran), so that a regression which writes a Traceback shows up here and not in the stderr check of
the hostile-input module.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import mcpkit_command
from tests.reliability.support import (
    BOTH,
    PROBE,
    REVISION,
    STEP,
    HttpClient,
    HttpServer,
    assert_healthy,
    has_traceback,
    http_request,
    tool_call,
    wait_for,
)
from tests.test_stdio import ServerProcess

pytestmark = pytest.mark.reliability

HANG_GUARD = 5.0  # a request the batch bug left hanging fails after this


@pytest.fixture(scope="module")
def marker_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("regression-markers")


@pytest.fixture(scope="module")
def regress_server(marker_dir: Path) -> Iterator[HttpServer]:
    server = HttpServer(target=PROBE, env={"CANCEL_PROBE_DIR": str(marker_dir)})
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def batching(regress_server: HttpServer) -> Iterator[HttpClient]:
    """A session at 2025-03-26, the one revision with JSON-RPC batches (BP-13)."""
    with HttpClient(regress_server.url, version="2025-03-26") as client:
        client.http.timeout = httpx.Timeout(HANG_GUARD)
        client.initialize()
        yield client


def _batch_errors(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC errors a refused batch got: in a 4xx body, or in the batch answer."""
    found: list[dict[str, Any]] = []
    for item in HttpClient.messages(response):
        found.extend(m for m in (item if isinstance(item, list) else [item]) if "error" in m)
    return found


# ============================================================================ HTTP, 2025-03-26 batches


@pytest.mark.req("HL-05", "BP-03", "BP-13")
@pytest.mark.parametrize("rid", [[1], {"a": 1}], ids=["array", "object"])
def test_a_batch_request_with_an_unhashable_id_gets_an_invalid_request_error(regress_server, batching, rid):
    before = regress_server.stderr()
    response = batching.post(body=json.dumps([{"jsonrpc": "2.0", "id": rid, "method": "ping"}]).encode())
    assert response.status_code in (200, 400), response.status_code
    assert [e["error"]["code"] for e in _batch_errors(response)] == [-32600]
    assert not has_traceback(regress_server.stderr()[len(before):])


@pytest.mark.req("HL-05", "BP-03", "BP-06", "BP-13")
@pytest.mark.parametrize("rid", [1.5, None, True], ids=["float", "null", "true"])
def test_a_batch_request_with_an_invalid_id_is_answered_and_its_stream_ends(batching, rid):
    try:
        response = batching.post(body=json.dumps([{"jsonrpc": "2.0", "id": rid, "method": "ping"}]).encode())
    except httpx.ReadTimeout:
        raise AssertionError(f"no answer within {HANG_GUARD} s: the stream never ends") from None
    assert response.status_code in (200, 400), response.status_code
    assert [e["error"]["code"] for e in _batch_errors(response)] == [-32600]


@pytest.mark.req("HL-04", "HL-05", "BP-13")
@pytest.mark.parametrize("body", [b"[]", b"[1,2]"], ids=["empty", "numbers"])
def test_a_batch_without_any_message_is_refused(batching, body):
    response = batching.post(body=body)
    assert response.status_code != 202
    assert _batch_errors(response) and all(e["error"]["code"] == -32600 for e in _batch_errors(response))


# ============================================================================ HTTP: bodies cut short


@pytest.mark.req("HL-05")
@pytest.mark.parametrize("how", ["Content-Length", "chunked"])
def test_a_request_whose_body_was_cut_short_is_not_executed(regress_server, marker_dir, how):
    with HttpClient(regress_server.url) as client:
        client.initialize()
        tag = f"cut-{how}"
        body = json.dumps(tool_call(1, "touch", {"tag": tag})).encode()
        headers = [f"Host: 127.0.0.1:{regress_server.port}", "Content-Type: application/json", f"Accept: {BOTH}",
                   f"Mcp-Session-Id: {client.session_id}", f"MCP-Protocol-Version: {REVISION}"]
        if how == "Content-Length":
            data = http_request(regress_server.port, "POST", headers + [f"Content-Length: {len(body) + 100}"], body,
                                content_length=False)
        else:  # one complete chunk, and never the last chunk
            data = http_request(regress_server.port, "POST", headers + ["Transfer-Encoding: chunked"],
                                b"%x\r\n%s\r\n" % (len(body), body), content_length=False)
        with socket.create_connection(("127.0.0.1", regress_server.port), timeout=STEP) as sock:
            sock.sendall(data)
        assert_healthy(regress_server.url)  # a few round trips later, the cut request has been dealt with
        ran = wait_for(lambda: (marker_dir / f"{tag}.ran").exists(), timeout=1.0)
        assert not ran, "the truncated request was executed"
    assert_healthy(regress_server.url)


# ============================================================================ integers beyond 64 bits


@pytest.mark.req("BP-03", "BP-05")
def test_http_echoes_a_request_id_beyond_64_bits(regress_server):
    with HttpClient(regress_server.url) as client:
        client.initialize()
        response = client.post(body=b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}')
        assert response.status_code == 200, response.text
        assert HttpClient.messages(response)[-1] == {"jsonrpc": "2.0", "id": 2**64, "result": {}}


BIG = 2**70


def _exact_or_refused(answer: dict[str, Any]) -> None:
    if "error" in answer:  # refusing a number it cannot hold exactly is fine
        return
    result = answer["result"]
    assert result.get("isError") or result["structuredContent"] == {"result": BIG + 1}, result


@pytest.mark.req("BP-02")
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_an_integer_argument_beyond_64_bits_is_exact_or_refused(regress_server, transport):
    if transport == "http":
        with HttpClient(regress_server.url) as client:
            client.initialize()
            _exact_or_refused(client.call("tools/call", {"name": "add", "arguments": {"a": BIG, "b": 1}}))
        return
    server = ServerProcess(mcpkit_command("serve"))
    try:
        server.initialize()
        _exact_or_refused(server.call("tools/call", {"name": "add", "arguments": {"a": BIG, "b": 1}}))
    finally:
        server.kill()
