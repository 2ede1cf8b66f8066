"""The official ``mcp`` Python client (2.3.0, a dev dependency) against the reference server's
skills (SEP-2640). The SDK has no skill helpers: it parses the extension in
``capabilities.extensions``, reads the skill files as the resources they are, and sends
skills/list and skills/get as generic requests; the files it reads match the entries' digests."""

from __future__ import annotations

import base64
import hashlib
import os
import sys
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from pydantic import TypeAdapter

pytestmark = [pytest.mark.interop, pytest.mark.anyio]

ANY = TypeAdapter(dict[str, Any])
#: the SDK's generic request, with its params kept as given (``types.Request`` alone keeps only _meta)
Generic = types.Request[dict[str, Any] | None, str]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_official_client_reads_skills_as_extension_and_resources() -> None:
    env = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcpkit", "serve"], env=env or None)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.capabilities.extensions == {"io.modelcontextprotocol/skills": {"directoryRead": True}}
        listed = await session.send_request(Generic(method="skills/list", params=None), ANY)
        entries = {e["uri"]: e for e in listed["skills"]}
        assert set(entries) == {"skill://pdf-processing/SKILL.md", "skill://acme/billing/refunds/SKILL.md"}
        got = await session.send_request(
            Generic(method="skills/get", params={"uri": "skill://acme/billing/refunds/SKILL.md"}), ANY)
        assert got["skill"] == entries["skill://acme/billing/refunds/SKILL.md"]
        resources = {str(r.uri): r for r in (await session.list_resources()).resources}
        manifest = resources["skill://pdf-processing/SKILL.md"]
        assert (manifest.name, manifest.mime_type) == ("pdf-processing", "text/markdown")
        for entry in entries.values():
            for item in entry["resources"]:
                [content] = (await session.read_resource(item["uri"])).contents
                data = content.text.encode() if hasattr(content, "text") else base64.b64decode(content.blob)
                assert (len(data), "sha256:" + hashlib.sha256(data).hexdigest()) == (item["size"], item["digest"])
