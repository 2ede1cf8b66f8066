"""Resource reads and prompt gets leave one audit line each, like tool calls: what a model was
shown, to whom, and how it ended (policy/reads.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Context, Server
from mcpkit.auth.tokens import AccessToken
from mcpkit.policy import AuditLog, Policy, Sandbox, SandboxPath
from mcpkit.server.scopes import ScopeStep
from tests.harness import RpcError, connect
from tests.policy.test_chain import MemoryAudit
from tests.test_http import clients, jsonrpc  # noqa: F401 - clients is a fixture


def make(audit: Any, tmp_path: Path) -> Server:
    server = Server("reads", policy=Policy(audit=audit, sandbox=Sandbox([tmp_path])))

    @server.resource("notes://index")
    def index() -> str:
        return "a, b"

    @server.resource_template("notes://{year}/{name}")
    async def note(year: str, name: str) -> str:
        if name == "broken":
            raise RuntimeError("disk on fire")
        return f"{year}/{name}"

    @server.resource_template("files://{path}")
    def file(path: SandboxPath) -> str:
        return path.read_text()

    @server.resource("vault://keys", scopes=["admin"])
    def keys() -> str:
        return "k"

    @server.prompt()
    def review(code: str, ctx: Context) -> str:
        return f"Review {code}"

    return server


class _Auth:
    def missing(self, access: Any, required: Any) -> list[str]:
        return sorted(set(required) - set(access.scopes))


def _lines(audit: MemoryAudit) -> list[tuple[Any, ...]]:
    return [(line.get("resource") or line.get("prompt"), line["outcome"], line["code"], line["principal"])
            for line in audit.lines]


@pytest.mark.asyncio
async def test_each_read_and_prompt_leaves_one_line_however_it_ends(wire, tmp_path):
    (tmp_path / "readme.txt").write_text("hello")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("not yours")
    (tmp_path / "link").symlink_to(outside)
    audit = MemoryAudit()
    server = make(audit, tmp_path)
    server._install_step("scopes", ScopeStep(_Auth()))
    async with connect(server, wire) as c:
        c.session.principal = "mallory"
        c.session.access_token = AccessToken("mallory", client_id="cli", scopes=frozenset({"mcp"}))
        assert (await c.request("resources/read", {"uri": "notes://index"}))["contents"][0]["text"] == "a, b"
        assert (await c.request("resources/read", {"uri": "notes://2026/q3"}))["contents"][0]["text"] == "2026/q3"
        assert (await c.request("resources/read", {"uri": "files://readme.txt"}))["contents"][0]["text"] == "hello"
        await c.request("prompts/get", {"name": "review", "arguments": {"code": "x = 1"}})
        for uri in ("notes://2026/broken", "files://..%2F..%2Fetc%2Fpasswd", "vault://keys", "files://link",
                    "nowhere://x"):
            with pytest.raises(RpcError):
                await c.request("resources/read", {"uri": uri})
        with pytest.raises(RpcError):
            await c.request("prompts/get", {"name": "no-such-prompt", "arguments": {"token": "x"}})
        await c.request("resources/read", {"uri": "notes://" + "x" * 100_000 + "/y"})
        # a secret cut in two where a long URI is cut: masked whole, not its first characters
        await c.request("resources/read", {"uri": "notes://2026/" + "x" * 227 + "password=supersecretvalue" + "y" * 99})
    assert _lines(audit)[:10] == [
        ("notes://index", "ok", None, "mallory"),
        ("notes://2026/q3", "ok", None, "mallory"),
        ("files://readme.txt", "ok", None, "mallory"),
        ("review", "ok", None, "mallory"),
        ("notes://2026/broken", "error", -32603, "mallory"),
        ("files://..%2F..%2Fetc%2Fpasswd", "denied", -32002, "mallory"),  # matches no template (13.21)
        ("vault://keys", "denied", -32602, "mallory"),  # the scope step refused it
        ("files://link", "denied", -32602, "mallory"),  # a symlink out of the root: refused binding it
        ("nowhere://x", "denied", -32002, "mallory"),  # nothing registered: refused, still recorded
        ("no-such-prompt", "denied", -32602, "mallory"),
    ]
    assert audit.lines[1]["arguments"] == {"year": "2026", "name": "q3"}
    assert audit.lines[3]["arguments"] == {"code": "x = 1"}
    huge = audit.lines[10]["resource"]
    assert len(huge) < 400 and huge.endswith("[100010 characters]"), huge
    cut = audit.lines[11]["resource"]
    assert "supers" not in cut and cut.endswith("[364 characters]"), cut
    assert len({line["correlationId"] for line in audit.lines}) == len(audit.lines)


@pytest.mark.asyncio
async def test_the_lines_are_written_redacted_to_the_audit_file(wire, tmp_path):
    path = tmp_path / "audit.log"
    with AuditLog(str(path)) as log:
        server = make(log, tmp_path)
        async with connect(server, wire) as c:
            await c.request("prompts/get", {"name": "review",
                                            "arguments": {"code": "password=hunter2 token ghp_" + "a" * 36}})
            await c.request("resources/read", {"uri": "notes://2026/q3"})
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(line.get("prompt"), line.get("resource"), line["outcome"]) for line in lines] == [
        ("review", None, "ok"), (None, "notes://2026/q3", "ok")]
    assert "hunter2" not in path.read_text() and "ghp_" + "a" * 36 not in path.read_text()
    assert lines[0]["principal"] == "anonymous" and lines[0]["time"]


@pytest.mark.asyncio
async def test_without_an_audit_log_reads_take_the_plain_path(wire, tmp_path):
    server = Server("plain", policy=Policy())

    @server.resource("notes://index")
    def index() -> str:
        return "a"

    async with connect(server, wire) as c:
        await c.request("resources/read", {"uri": "notes://index"})
    assert all(pipe.plain for (kind, _), pipe in server._pipes.items() if kind == "read_resource")


@pytest.mark.asyncio
@pytest.mark.parametrize("version", ["2024-11-05", "2025-11-25", "2026-07-28"])
async def test_reads_are_audited_in_every_era(wire, tmp_path, version):
    """The step is the pipeline's, so the sessionless era (each request carrying its revision in
    _meta) and the oldest handshake revision leave the same lines."""
    audit = MemoryAudit()
    server = make(audit, tmp_path)
    modern = version == "2026-07-28"
    meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": version,
                      "io.modelcontextprotocol/clientCapabilities": {}}} if modern else {}
    async with connect(server, wire, None if modern else version) as c:
        await c.request("resources/read", {"uri": "notes://2026/q3", **meta})
        await c.request("prompts/get", {"name": "review", "arguments": {"code": "x"}, **meta})
        with pytest.raises(RpcError):
            await c.request("resources/read", {"uri": "nowhere://x", **meta})
    assert [(line.get("resource") or line.get("prompt"), line["outcome"]) for line in audit.lines] == [
        ("notes://2026/q3", "ok"), ("review", "ok"), ("nowhere://x", "denied")]


@pytest.mark.asyncio
async def test_reads_over_authenticated_http_name_the_tokens_subject(clients, tmp_path):
    from tests.auth.test_http_auth import Tokens, as_user, auth_for

    audit = MemoryAudit()
    server = make(audit, tmp_path)
    user = AccessToken("mallory", client_id="cli", scopes=frozenset({"mcp"}))
    client = as_user(clients.asgi(clients.app(server, auth=auth_for(Tokens(user=user)))), "user")
    await client.initialize()
    assert (await client.result("resources/read", {"uri": "notes://index"}))["contents"][0]["text"] == "a, b"
    refused = await client.post(jsonrpc("resources/read", {"uri": "vault://keys"}, 7))
    assert refused.status == 403  # named in the body: refused before anything runs, no read
    assert [(line["resource"], line["outcome"], line["principal"]) for line in audit.lines][:1] == [
        ("notes://index", "ok", "mallory")]
