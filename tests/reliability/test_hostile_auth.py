"""One principal against another's session over Streamable HTTP with auth.

Mallory holds a valid token of her own and has seen Alice's Mcp-Session-Id and event ids.
Whatever she sends with them (POST, GET with or without Last-Event-ID, DELETE), Alice's session
does not exist for her; a Last-Event-ID of Alice's stream, or one crafted from its pattern with
Mallory's own session id, replays nothing; and Alice's session goes on.
"""

from __future__ import annotations

import pytest

from tests.reliability.test_hostile_transport import LATEST, call, mcp_headers, open_session, rpc, small_server

pytestmark = pytest.mark.reliability

ALICE = [("authorization", "Bearer tok-alice-0123456789abcdef")]
ALICE_AGAIN = [("authorization", "Bearer tok-alice2-0123456789abcdef")]
MALLORY = [("authorization", "Bearer tok-mallory-0123456789abcdef")]


def _get(session: str, last: str | None = None) -> list[tuple[str, str]]:
    out = [("accept", "text/event-stream"), ("mcp-session-id", session), ("mcp-protocol-version", LATEST)]
    return out + ([("last-event-id", last)] if last is not None else [])


@pytest.mark.req("SEC-03", "HL-14")
@pytest.mark.asyncio
async def test_another_principal_gets_nothing_of_a_session_or_its_streams():
    from mcpkit.auth import StaticTokens
    from mcpkit.auth.resource import ResourceServer

    tokens = StaticTokens.from_lines("tok-alice-0123456789abcdef alice; tok-alice2-0123456789abcdef alice; "
                                     "tok-mallory-0123456789abcdef mallory")
    app = small_server().http_app(auth=ResourceServer(tokens, resource="http://127.0.0.1:8000/mcp"))
    try:
        alice, mallory = await open_session(app, headers=ALICE), await open_session(app, headers=MALLORY)
        answer = await call(app, body=rpc("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}, 5),
                            headers=ALICE + mcp_headers(alice))
        ids = [line[4:] for line in answer.body.decode().split("\n") if line.startswith("id: ")]
        assert ids and all(i.startswith(alice + ".") for i in ids), answer.body
        # Alice's session does not exist for Mallory, whatever the method
        assert (await call(app, body=rpc("ping", rid=9), headers=MALLORY + mcp_headers(alice))).status == 404
        assert (await call(app, "GET", headers=MALLORY + _get(alice))).status == 404
        assert (await call(app, "GET", headers=MALLORY + _get(alice, ids[0]))).status == 404
        assert (await call(app, "DELETE", headers=MALLORY + _get(alice)[1:])).status == 404
        # on her own session, Alice's event ids (and ids made from them) replay nothing
        for last in (*ids, ids[0].replace(alice, mallory, 1)):
            replayed = await call(app, "GET", headers=MALLORY + _get(mallory, last))
            assert replayed.status == 404 and b"result" not in replayed.body, (last, replayed.body)
        # Alice (with either of her tokens) still has her session
        assert (await call(app, body=rpc("ping", rid=9), headers=ALICE_AGAIN + mcp_headers(alice))).status == 200
        assert (await call(app, body=rpc("ping", rid=9), headers=ALICE + mcp_headers(alice))).status == 200
    finally:
        app.close_all()
