"""A hostile stdio client that fills the server's hands: blocking calls up to the thread cap, then
ping and cancellations behind them; and request ids reused while still in flight, across eras."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import mcpkit_command
from tests.reliability.support import REVISION
from tests.test_stdio import ServerProcess

pytestmark = pytest.mark.reliability

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    proc = ServerProcess(mcpkit_command("serve"))
    try:
        proc.initialize(REVISION)
        yield proc
    finally:
        proc.kill()


def sleep(seconds: float, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "sleep", "arguments": {"seconds": seconds}}
    if meta is not None:
        params["_meta"] = meta
    return params


@pytest.mark.req("PG-01", "CN-01")
def test_ping_and_cancellation_are_served_while_every_handler_thread_blocks(server):
    slow = [server.request("tools/call", sleep(1.5)) for _ in range(12)]  # 8 threads' worth, and more
    ping = server.request("ping")
    server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": slow[-1]}})
    first = server.recv(timeout=30)
    # answered before any of the blocking calls: nothing waited for a free thread
    assert first == {"jsonrpc": "2.0", "id": ping, "result": {}}, first
    answers = [server.recv(timeout=30) for _ in range(11)]
    assert sorted(a["id"] for a in answers) == sorted(slow[:-1])
    assert all(a["result"]["content"][0]["text"] == "Slept 1.5 s" for a in answers), answers
    server.ping()  # and nothing came for the cancelled one: the next line answers this ping
    assert server.finish() == 0


@pytest.mark.req("BP-04")
def test_a_modern_request_reusing_an_in_flight_id_is_refused_and_the_first_still_answered(server):
    server.request("tools/call", sleep(1, META), rid=5)
    server.request("ping", {"_meta": META}, rid=5)
    refused = server.recv()
    assert refused["id"] == 5 and refused["error"]["code"] == -32600, refused
    first = server.recv(timeout=15)
    assert first["id"] == 5 and first["result"]["content"][0]["text"] == "Slept 1 s", first
    # across eras: a handshake-era call in flight, a 2026-07-28 request with its id
    server.request("tools/call", sleep(1), rid=6)
    server.request("tools/list", {"_meta": META}, rid=6)
    refused = server.recv()
    assert refused["id"] == 6 and refused["error"]["code"] == -32600, refused
    first = server.recv(timeout=15)
    assert first["id"] == 6 and first["result"]["content"][0]["text"] == "Slept 1 s", first
    assert server.finish() == 0
