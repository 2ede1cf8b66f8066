"""Hostile URIs against resource templates: a single-segment variable (``{name}``) receives one
path segment, never a path (RFC 6570 level 1). ``%2F`` and ``%2e%2e`` used to decode into it,
so ``notes://%2e%2e%2fsecret`` reached a handler that joins ``name`` to a directory as
``../secret``."""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit import Server
from tests.harness import LATEST, RpcError, connect

pytestmark = pytest.mark.reliability

SMUGGLED = ["%2e%2e", "%2E%2E", "..", ".", "a%2Fb", "%2e%2e%2fsecret", "%2F", "a%5Cb", "..%5C..%5Cwin.ini"]


def notes_server(seen: list[Any]) -> Server:
    server = Server("hostile-templates", "1.0")

    @server.resource_template("notes://{name}")
    def note(name: str) -> str:
        seen.append(name)
        return f"note {name}"

    @server.resource_template("pages://{/section,page}")
    def page(section: str, page: str) -> str:
        seen.append((section, page))
        return "page"

    @server.resource_template("tree://{+path}")
    def tree(path: str) -> str:  # reserved expansion: a path, by the template's own choice
        seen.append(path)
        return f"tree {path}"

    return server


@pytest.mark.asyncio
@pytest.mark.req("RS-03")
@pytest.mark.parametrize("smuggled", SMUGGLED)
async def test_an_encoded_slash_or_dot_segment_never_reaches_a_single_segment_variable(wire, smuggled):
    seen: list[Any] = []
    async with connect(notes_server(seen), wire, LATEST) as client:
        for uri in (f"notes://{smuggled}", f"pages:///docs/{smuggled}"):
            with pytest.raises(RpcError) as info:
                await client.request("resources/read", {"uri": uri})
            assert info.value.code in (-32002, -32602), info.value  # not found: no template matches
        assert seen == []
        # ordinary names still work, and a {+path} variable still takes a path
        assert (await client.request("resources/read", {"uri": "notes://a.b-c"}))["contents"][0]["text"] == "note a.b-c"
        found = await client.request("resources/read", {"uri": "tree://a/b%2Fc"})
        assert found["contents"][0]["text"] == "tree a/b/c"
