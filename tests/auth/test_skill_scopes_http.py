"""A skill hidden by its scopes over authenticated Streamable HTTP (SEP-2640 on mcpkit's scopes):
invisible on every route, with no 403 challenge that would name the scope of a file and so say
that it exists; a token with the scope sees and reads it."""

from __future__ import annotations

import pytest

from mcpkit import Server
from mcpkit.auth.tokens import AccessToken
from tests.auth.test_http_auth import Tokens, as_user, auth_for
from tests.test_skills import PDF_FILES, md

READER = AccessToken("reader", client_id="cli", scopes=frozenset({"mcp", "skills:read"}))
OTHER = AccessToken("other", client_id="cli", scopes=frozenset({"mcp"}))
FILE = "skill://pdf-processing/references/FORMS.md"


def skills_server() -> Server:
    server = Server("skills")
    server.add_skill("pdf-processing", PDF_FILES, scopes=["skills:read"])
    server.add_skill("open", {"SKILL.md": md("open")})
    return server


@pytest.mark.asyncio
async def test_a_hidden_skill_reads_as_absent_over_authenticated_http(clients):
    auth = auth_for(Tokens(reader=READER, other=OTHER), scopes_supported=["mcp", "skills:read"])
    app = clients.app(skills_server(), auth=auth)
    other = as_user(clients.asgi(app), "other")
    await other.initialize()
    listed = await other.result("skills/list", {})
    assert [s["uri"] for s in listed["skills"]] == ["skill://open/SKILL.md"]
    assert {r["uri"] for r in (await other.result("resources/list", {}))["resources"]} == {"skill://open/SKILL.md"}
    for method, params in (("resources/read", {"uri": FILE}), ("resources/subscribe", {"uri": FILE}),
                           ("skills/get", {"uri": "skill://pdf-processing/SKILL.md"}),
                           ("resources/directory/read", {"uri": "skill://pdf-processing"})):
        answer = await other.call(method, params)  # an HTTP 200 with a JSON-RPC error, never a 403
        assert answer["error"]["code"] in (-32002, -32602), (method, answer)
        assert "scope" not in answer["error"]["message"], (method, answer)
    reader = as_user(clients.asgi(app), "reader")
    await reader.initialize()
    assert len((await reader.result("skills/list", {}))["skills"]) == 2
    assert (await reader.result("resources/read", {"uri": FILE}))["contents"][0]["text"] == "# Forms\n"
