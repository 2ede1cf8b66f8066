"""The tool contract's legacy shape (``contract="legacy"``): the v1 envelope plus the seed
servers' top-level ``details``, ``logs``, ``warnings``, ``errors`` and ``files``, filled through
ctx, advertised in the outputSchema and validated against it."""

from __future__ import annotations

import json

import jsonschema
import pytest

from mcpkit import Context, Server, ToolError
from mcpkit.policy import Gates, Policy
from tests.harness import connect
from tests.policy.test_chain import LATEST_HANDSHAKE, call

V1 = ["ok", "summary", "result", "error", "meta"]
LEGACY_FIELDS = ["details", "logs", "warnings", "errors", "files"]


def export_server(contract: object, policy: Policy | None = None) -> Server:
    server = Server("designs", policy=policy)

    @server.tool(read_only=True, open_world=False, contract=contract)
    async def export(design: str, ctx: Context) -> dict[str, str]:
        """Export a design."""
        await ctx.info("rendering 2 pages")
        await ctx.warning("font Inter missing: used Arial")
        if design == "gone":
            raise ToolError("no such design", code="E_NOT_FOUND", details={"design": design})
        ctx.add_file("/exports/launch.pdf")
        ctx.add_details(pages=2)
        return {"url": "https://cdn.example/launch.pdf"}

    return server


@pytest.mark.asyncio
@pytest.mark.req("TL-07")
@pytest.mark.parametrize("policy", [None, Policy(gates=Gates())], ids=["tool-only", "policied"])
async def test_the_same_tool_in_both_shapes_matches_its_advertised_schema(wire, policy):
    results = {}
    for shape in (True, "legacy"):
        async with connect(export_server(shape, policy), wire, LATEST_HANDSHAKE) as c:
            (tool,) = (await c.request("tools/list", {}))["tools"]
            ok = await call(c, "export", {"design": "launch"})
            failed = await call(c, "export", {"design": "gone"})
        for result in (ok, failed):
            jsonschema.validate(result["structuredContent"], tool["outputSchema"])
            assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
        results[shape] = tool, ok["structuredContent"], failed
    v1_tool, v1, _ = results[True]
    assert v1_tool["outputSchema"]["required"] == V1 and not set(LEGACY_FIELDS) & set(v1)
    tool, legacy, failed = results["legacy"]
    assert tool["outputSchema"]["required"] == [*V1, *LEGACY_FIELDS]
    assert {k: legacy[k] for k in V1 if k != "meta"} == {k: v1[k] for k in V1 if k != "meta"}
    assert {k: legacy[k] for k in LEGACY_FIELDS} == {
        "details": {"pages": 2}, "logs": ["rendering 2 pages"], "warnings": ["font Inter missing: used Arial"],
        "errors": [], "files": ["/exports/launch.pdf"]}
    env = failed["structuredContent"]
    assert failed["isError"] is True and env["ok"] is False and env["error"]["code"] == "E_NOT_FOUND"
    assert {k: env[k] for k in LEGACY_FIELDS} == {
        "details": {"design": "gone"}, "logs": ["rendering 2 pages"], "warnings": ["font Inter missing: used Arial"],
        "errors": ["no such design"], "files": []}


@pytest.mark.asyncio
async def test_a_policy_wide_legacy_contract_and_a_refused_call(wire):
    server = Server("s", policy=Policy(gates=Gates(read_only=True), contract="legacy"))

    @server.tool(destructive=True, open_world=False)
    def wipe() -> str:
        return "wiped"

    @server.tool(read_only=True, open_world=False)
    def look() -> int:
        return 3

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        (listed,) = (await c.request("tools/list", {}))["tools"]
        looked = await call(c, "look", {})
        refused = await call(c, "wipe", {})
    jsonschema.validate(looked["structuredContent"], listed["outputSchema"])
    assert looked["structuredContent"]["result"] == 3 and looked["structuredContent"]["logs"] == []
    env = refused["structuredContent"]  # refused before it ran: still the whole legacy shape
    assert env["ok"] is False and env["errors"] == [env["error"]["message"]] and env["files"] == []


@pytest.mark.asyncio
async def test_legacy_logs_are_redacted_as_the_log_messages_are(wire):
    server = Server("s", policy=Policy(gates=Gates(), redact_logs=True, contract="legacy"))
    token = "ghp_" + "B" * 36

    @server.tool(read_only=True, open_world=False)
    async def connect_repo(ctx: Context) -> str:
        await ctx.info(f"using token {token}")
        return "ok"

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        result = await call(c, "connect_repo", {})
    assert result["structuredContent"]["logs"] == ["using token [REDACTED]"]
    assert token not in result["content"][0]["text"]


def test_an_unknown_shape_is_refused():
    with pytest.raises(ValueError, match="legacy"):
        Policy(contract="v2")
    server = Server("s")
    with pytest.raises(ValueError, match="legacy"):
        server.tool(lambda: 1, name="x", contract="v2")
