"""User middleware: the examples of docs/middleware.md, run as written, and the interface's
promises: refusing, rewriting, ordering, arguments, sync and async, nested calls, manager
actions, and one audit line per call whatever a middleware does."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest

from mcpkit import CallContext, Context, McpError, Middleware, Server, ToolError
from mcpkit.policy import Gates, Policy
from tests.harness import RpcError, connect

LATEST = "2025-11-25"
DOC = Path(__file__).resolve().parent.parent / "docs" / "middleware.md"


def doc_examples() -> dict[str, Any]:
    """Every python block under "## Examples" in docs/middleware.md, executed."""
    text = DOC.read_text(encoding="utf-8")
    examples = text.split("## Examples", 1)[1].split("\n## ", 1)[0]
    namespace: dict[str, Any] = {}
    blocks = re.findall(r"```python\n(.*?)```", examples, re.S)
    assert len(blocks) == 3
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102 - the docs' own code
    return namespace


def make_server(*middleware: Any, policy: Any = None) -> tuple[Server, list[str]]:
    server = Server("mw", middleware=list(middleware), policy=policy)
    ran: list[str] = []

    @server.tool(read_only=True, open_world=False)
    def add(a: int, b: int) -> int:
        ran.append(f"add {a} {b}")
        return a + b

    @server.tool(read_only=True, open_world=False)
    async def slow_add(a: int, b: int) -> int:
        ran.append(f"slow_add {a} {b}")
        return a + b

    @server.tool(destructive=False, open_world=False)
    def note(text: str) -> str:
        ran.append(f"note {text}")
        return f"noted {text}"

    @server.tool(read_only=True, open_world=False)
    def batch(calls: list[dict[str, Any]], ctx: Context) -> list[Any]:
        return [ctx.call_tool(c["name"], c.get("arguments")) for c in calls]

    files = server.manager("files", description="Files.")
    files.action(note, name="note", destructive=False, open_world=False)

    @server.resource("memo://today")
    def today() -> str:
        return "sunny"

    return server, ran


def text_of(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


# ------------------------------------------------------------------------------- the doc's examples


@pytest.mark.asyncio
async def test_the_logging_example_sees_every_kind_and_outcome(wire, caplog):
    ns = doc_examples()
    logger = ns["LogCalls"]()
    server, _ = make_server(logger)
    caplog.set_level("INFO", logger="myserver.calls")
    async with connect(server, wire, LATEST) as c:
        assert (await c.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}))["structuredContent"] \
            == {"result": 3}
        assert (await c.request("tools/call", {"name": "slow_add", "arguments": {"a": 2, "b": 2}}))[
            "structuredContent"] == {"result": 4}
        await c.request("tools/list", {})
        await c.request("resources/read", {"uri": "memo://today"})
        bad = await c.request("tools/call", {"name": "add", "arguments": {"a": "x", "b": 2}})
        assert bad["isError"] is True
    assert logger.seen == [("tools/call", "add", "ok"), ("tools/call", "slow_add", "ok"), ("tools/list", None, "ok"),
                           ("resources/read", "memo://today", "ok"), ("tools/call", "add", "error")]
    assert any("tools/call add by anonymous: ok" in r.getMessage() for r in caplog.records)


@pytest.mark.asyncio
async def test_the_caching_example_answers_a_repeated_read_from_memory(wire):
    ns = doc_examples()
    server, ran = make_server(ns["CacheReads"](ttl=60))
    async with connect(server, wire, LATEST) as c:
        first = await c.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
        second = await c.request("tools/call", {"name": "add", "arguments": {"b": 2, "a": 1}})
        await c.request("tools/call", {"name": "note", "arguments": {"text": "x"}})
        await c.request("tools/call", {"name": "note", "arguments": {"text": "x"}})
    assert first == second
    assert ran == ["add 1 2", "note x", "note x"]  # the writer is never replayed


@pytest.mark.asyncio
async def test_the_tenant_filter_example_hides_and_refuses_other_tenants_tools(wire):
    ns = doc_examples()
    server, ran = make_server(ns["TenantTools"]({"acme": {"add", "batch"}, "globex": {"note"}}))
    async with connect(server, wire, LATEST) as c:
        c.session.principal = "acme"
        listed = [t["name"] for t in (await c.request("tools/list", {}))["tools"]]
        assert listed == ["add", "batch"]
        refused = await c.request("tools/call", {"name": "note", "arguments": {"text": "x"}})
        assert refused["isError"] is True and "not available to you" in text_of(refused)
        # nor through a batch tool it may call
        nested = await c.request("tools/call", {"name": "batch", "arguments": {"calls": [
            {"name": "note", "arguments": {"text": "y"}}]}})
        assert nested["structuredContent"]["result"][0]["isError"] is True
        assert (await c.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}))["structuredContent"] \
            == {"result": 2}
        c.session.principal = "globex"
        assert [t["name"] for t in (await c.request("tools/list", {}))["tools"]] == ["note"]
    assert ran == ["add 1 1"]


# ------------------------------------------------------------------------------- the interface


class Refuse(Middleware):
    def on_call_tool(self, ctx: CallContext, call_next: Any) -> Any:
        if ctx.name == "note":
            raise ToolError("Notes are closed today.", code="E_PERMISSION_DENIED")
        return call_next(ctx)

    def on_read_resource(self, ctx: CallContext, call_next: Any) -> Any:
        raise McpError(-32602, f"{ctx.name} is closed")


@pytest.mark.asyncio
async def test_a_middleware_refuses_with_a_tool_error_or_a_protocol_error(wire):
    server, ran = make_server(Refuse())
    async with connect(server, wire, LATEST) as c:
        refused = await c.request("tools/call", {"name": "note", "arguments": {"text": "x"}})
        assert refused["isError"] is True and text_of(refused) == "Notes are closed today."
        with pytest.raises(RpcError) as error:
            await c.request("resources/read", {"uri": "memo://today"})
        assert error.value.code == -32602 and "closed" in error.value.message
    assert ran == []


class Shout(Middleware):
    """Rewrites results: upper-cases the text of a tool result and of a resource."""

    async def on_call_tool(self, ctx: CallContext, call_next: Any) -> Any:
        result = await call_next(ctx)
        return {**result, "content": [{"type": "text", "text": text_of(result).upper()}]}

    def on_read_resource(self, ctx: CallContext, call_next: Any) -> Any:
        result = call_next(ctx)
        return {**result, "contents": [{**result["contents"][0], "text": result["contents"][0]["text"].upper()}]}


@pytest.mark.asyncio
async def test_a_middleware_rewrites_results_of_sync_and_async_handlers(wire):
    server, _ = make_server(Shout())
    async with connect(server, wire, LATEST) as c:
        assert text_of(await c.request("tools/call", {"name": "note", "arguments": {"text": "hi"}})) == "NOTED HI"
        assert text_of(await c.request("tools/call", {"name": "slow_add", "arguments": {"a": 1, "b": 1}})) == \
            '{"RESULT":2}'
        assert (await c.request("resources/read", {"uri": "memo://today"}))["contents"][0]["text"] == "SUNNY"


@pytest.mark.asyncio
async def test_a_sync_hook_sees_the_result_of_an_async_handler(wire):
    seen: list[Any] = []

    def record(ctx: CallContext, call_next: Any) -> Any:
        result = call_next(ctx)
        seen.append((ctx.name, result.get("structuredContent"), threading.current_thread().name))
        return result

    server, _ = make_server()
    server.add_middleware(record, hook="on_call_tool")
    async with connect(server, wire, LATEST) as c:
        await c.request("tools/call", {"name": "slow_add", "arguments": {"a": 2, "b": 3}})
    assert seen[0][:2] == ("slow_add", {"result": 5})


class Trace(Middleware):
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def on_request(self, ctx: CallContext, call_next: Any) -> Any:
        self.log.append(f"{self.name}>{ctx.method}")
        try:
            return call_next(ctx)
        finally:
            self.log.append(f"{self.name}<")

    def on_call_tool(self, ctx: CallContext, call_next: Any) -> Any:
        nested = f" nested from {ctx.parent is not None}" if ctx.nested else ""
        action = f" action {ctx.action}" if ctx.action else ""
        self.log.append(f"{self.name} tool {ctx.name}{action}{nested}")
        return call_next(ctx)


@pytest.mark.asyncio
async def test_middleware_runs_in_the_order_added_the_first_outermost(wire):
    log: list[str] = []
    server, _ = make_server(Trace("a", log))
    server.add_middleware(Trace("b", log))
    async with connect(server, wire, LATEST) as c:
        await c.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
    assert log == ["a>tools/call", "a tool add", "b>tools/call", "b tool add", "b<", "a<"]


@pytest.mark.asyncio
async def test_middleware_sees_nested_calls_and_manager_actions(wire):
    log: list[str] = []
    server, ran = make_server(Trace("m", log))
    async with connect(server, wire, LATEST) as c:
        await c.request("tools/call", {"name": "batch", "arguments": {"calls": [
            {"name": "add", "arguments": {"a": 1, "b": 1}}]}})
        await c.request("tools/call", {"name": "files", "arguments": {"action": "note", "text": "x"}})
    tools = [line for line in log if " tool " in line]
    assert tools == ["m tool batch", "m tool add nested from True", "m tool files action note"]
    assert ran == ["add 1 1", "note x"]


@pytest.mark.asyncio
async def test_a_middleware_changes_arguments_before_validation(wire):
    def double(ctx: CallContext, call_next: Any) -> Any:
        if ctx.name == "add":
            ctx.arguments = {k: v * 2 for k, v in ctx.arguments.items()}
        return call_next(ctx)

    server, _ = make_server()
    server.add_middleware(double, hook="on_call_tool")
    async with connect(server, wire, LATEST) as c:
        result = await c.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
        assert result["structuredContent"] == {"result": 6}
        server.remove_middleware(double)
        result = await c.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
        assert result["structuredContent"] == {"result": 3}


@pytest.mark.asyncio
async def test_a_sync_tool_calls_nested_tools_under_async_middleware(wire):
    async def passthrough(ctx: CallContext, call_next: Any) -> Any:
        return await call_next(ctx)

    server, ran = make_server()
    server.add_middleware(passthrough, hook="on_call_tool")
    async with connect(server, wire, LATEST) as c:
        result = await c.request("tools/call", {"name": "batch", "arguments": {"calls": [
            {"name": "add", "arguments": {"a": 1, "b": 1}}, {"name": "slow_add", "arguments": {"a": 2, "b": 2}}]}})
    inner = result["structuredContent"]["result"]
    assert [r["structuredContent"] for r in inner] == [{"result": 2}, {"result": 4}]


def test_sync_middleware_keeps_a_sync_tool_call_synchronous():
    """No async hook and a sync handler: the pipeline runs where sync handlers run (the
    stdio reader thread), with no event loop involved."""
    from mcpkit.server.pipes import build_pipe

    server, _ = make_server(Trace("t", []))
    assert build_pipe(server, "call_tool", server.tools["add"]).is_async is False
    assert build_pipe(server, "call_tool", server.tools["slow_add"]).is_async is True

    async def hook(ctx: CallContext, call_next: Any) -> Any:
        return await call_next(ctx)

    server.add_middleware(hook)
    assert build_pipe(server, "call_tool", server.tools["add"]).is_async is True


@pytest.mark.asyncio
async def test_whatever_a_middleware_does_each_call_leaves_one_audit_line(wire):
    class Audit:
        def __init__(self) -> None:
            self.lines: list[dict[str, Any]] = []

        def record(self, entry: dict[str, Any]) -> None:
            self.lines.append(dict(entry))

    def broken(ctx: CallContext, call_next: Any) -> Any:
        if ctx.name == "add":
            raise RuntimeError("a bug in the middleware")
        return call_next(ctx)

    audit = Audit()
    server, ran = make_server(Refuse(), policy=Policy(gates=Gates(), audit=audit))
    server.add_middleware(broken, hook="on_call_tool")
    async with connect(server, wire, LATEST) as c:
        refused = await c.request("tools/call", {"name": "note", "arguments": {"text": "x"}})
        crashed = await c.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})
        fine = await c.request("tools/call", {"name": "slow_add", "arguments": {"a": 1, "b": 1}})
    assert refused["isError"] is True and crashed["isError"] is True and "Internal error" in text_of(crashed)
    assert fine["structuredContent"] == {"result": 2}
    assert [(a["tool"], a["outcome"], a["code"]) for a in audit.lines] == [
        ("note", "denied", "E_PERMISSION_DENIED"), ("add", "denied", "E_INTERNAL"), ("slow_add", "ok", None)]
    assert ran == ["slow_add 1 1"]


def test_add_middleware_says_what_is_wrong():
    server = Server("mw")
    with pytest.raises(ValueError, match="unknown middleware hook 'on_call'"):
        server.add_middleware(lambda ctx, call_next: call_next(ctx), hook="on_call")
    with pytest.raises(TypeError, match="is not middleware"):
        server.add_middleware(object())
