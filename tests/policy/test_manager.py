"""Manager tools: one tool, several actions, one generated and enforced schema."""

from __future__ import annotations

import jsonschema
import pytest

from mcpkit import Context, Server
from mcpkit.policy import Gates, Policy
from tests.harness import connect
from tests.policy.test_chain import LATEST_HANDSHAKE, MemoryAudit, call, error_of


def make(gates: Gates | None = None, contract: bool = True,
         schema: str = "flat") -> tuple[Server, MemoryAudit, list[str]]:
    audit = MemoryAudit()
    server = Server("m", policy=Policy(gates=gates or Gates(), contract=contract, audit=audit))
    ran: list[str] = []
    notes = server.manager("notes", description="Keep notes.", schema=schema)

    @notes.action(read_only=True, open_world=False)
    def get(key: str) -> str:
        """Read a note."""
        ran.append(f"get {key}")
        return f"note {key}"

    @notes.action(destructive=False, open_world=False)
    def put(key: str, text: str, ctx: Context) -> dict[str, str]:
        """Write a note."""
        ran.append(f"put {key} {ctx.correlation_id is not None}")
        return {"key": key, "text": text}

    @notes.action(destructive=True, open_world=False)
    async def drop(key: str) -> None:
        """Delete a note."""
        ran.append(f"drop {key}")

    return server, audit, ran


@pytest.mark.req("TL-05", "TL-14")
@pytest.mark.asyncio
async def test_the_oneof_form_has_an_action_enum_and_one_closed_branch_per_action(wire):
    server, _, _ = make(Gates(allow_destructive=True), schema="oneOf")
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        (tool,) = (await c.request("tools/list", {}))["tools"]
    schema = tool["inputSchema"]
    assert schema["type"] == "object" and schema["required"] == ["action"]
    assert schema["properties"]["action"]["enum"] == ["get", "put", "drop"]
    assert schema["properties"]["action"]["description"] == (
        "What to do: get: Read a note; put: Write a note; drop: Delete a note.")
    branches = schema["oneOf"]
    assert [b["properties"]["action"] for b in branches] == [{"const": "get"}, {"const": "put"}, {"const": "drop"}]
    assert all(b["additionalProperties"] is False for b in branches)
    assert branches[1]["required"] == ["action", "key", "text"]
    assert "ctx" not in branches[1]["properties"]
    # the tool's hints summarise its actions: one destroys, none reaches outside
    assert tool["annotations"] == {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False,
                                   "openWorldHint": False}
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_actions_are_validated_dispatched_and_named_in_the_envelope(wire):
    server, audit, ran = make()
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        got = await call(c, "notes", {"action": "get", "key": "a"})
        put = await call(c, "notes", {"action": "put", "key": "b", "text": "t"})
        extra = await call(c, "notes", {"action": "get", "key": "a", "text": "nope"})
        missing = await call(c, "notes", {"action": "put", "key": "b"})
        unknown = await call(c, "notes", {"action": "zap"})
        absent = await call(c, "notes", {})
        listed = await call(c, "notes", {"action": ["get"], "key": "a"})  # no string: selects nothing
        shaped = await call(c, "notes", {"action": {"get": 1}, "key": "a"})
    assert got["structuredContent"]["result"] == "note a"
    assert got["structuredContent"]["meta"]["action"] == "get"
    assert put["structuredContent"]["result"] == {"key": "b", "text": "t"}
    assert put["structuredContent"]["meta"]["action"] == "put"
    assert ran == ["get a", "put b True"]
    for bad in (extra, missing, unknown, absent, listed, shaped):
        assert bad["isError"] is True and error_of(bad)["code"] == "E_SCHEMA_VALIDATION"
    # the message names the action and the field, not one error per branch
    assert "action 'get' does not take 'text' (it is a parameter of 'put')" in error_of(extra)["message"]
    assert "action 'put' requires 'text'" in error_of(missing)["message"]
    assert "'zap' is not one of ['get', 'put']" in error_of(unknown)["message"]
    assert [a["action"] for a in audit.lines] == ["get", "put", "get", "put", None, None, None, None]


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_a_gated_action_is_left_out_of_the_schema_and_refused_by_name(wire):
    server, audit, ran = make(Gates(read_only=True))
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        (tool,) = (await c.request("tools/list", {}))["tools"]
        assert tool["inputSchema"]["properties"]["action"]["enum"] == ["get"]
        assert tool["annotations"]["readOnlyHint"] is True
        for action in ("put", "drop"):
            result = await call(c, "notes", {"action": action, "key": "k", "text": "t"})
            assert error_of(result)["code"] == "E_PERMISSION_DENIED"
            assert result["structuredContent"]["meta"]["action"] == action
    assert ran == []
    assert [(a["action"], a["outcome"]) for a in audit.lines] == [("put", "denied"), ("drop", "denied")]


@pytest.mark.asyncio
async def test_a_manager_whose_actions_are_all_gated_is_hidden(wire):
    audit = MemoryAudit()
    server = Server("m", policy=Policy(gates=Gates(read_only=True), audit=audit))
    admin = server.manager("admin")

    @admin.action(destructive=True, open_world=False)
    def reset() -> str:
        return "reset"

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        assert (await c.request("tools/list", {}))["tools"] == []
        result = await call(c, "admin", {"action": "reset"})
    assert error_of(result)["code"] == "E_PERMISSION_DENIED"


def test_action_definitions_are_checked():
    server = Server("m")
    tool = server.manager("t")
    with pytest.raises(ValueError, match="clash"):
        @tool.action
        def bad(action: str) -> None: ...
    tool.action(lambda: None, name="one")
    with pytest.raises(ValueError, match="already has an action 'one'"):
        tool.action(lambda: None, name="one")


@pytest.mark.asyncio
async def test_a_manager_works_without_any_policy(wire):
    server = Server("plain")
    calc = server.manager("calc")

    @calc.action
    def add(a: int, b: int) -> int:
        return a + b

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        result = await call(c, "calc", {"action": "add", "a": 2, "b": 3})
    assert result["content"] == [{"type": "text", "text": "5"}]
