"""The policy chain on a live session: gates, contract, sandbox, limits, timeouts, nested calls.

Each test drives a real ServerSession (tests/harness.py) and checks what the client receives,
what the handler saw, and what the audit trail recorded.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mcpkit import Context, Server, ToolError
from mcpkit.policy import Gates, Outcome, Policy, RateLimiter, SandboxPath, SandboxUri
from mcpkit.policy.chain import CID_META_KEY, ERROR_META_KEY
from mcpkit.policy.limits import Limits
from mcpkit.policy.sandbox import Sandbox
from tests.harness import RpcError, connect

LATEST_HANDSHAKE = "2025-11-25"


class MemoryAudit:
    """An audit sink that keeps its lines (the AuditLog file format is tested in test_audit.py)."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def record(self, entry: dict[str, Any]) -> None:
        self.lines.append(dict(entry))


def make_server(tmp_path: Path | None = None, **policy: Any) -> tuple[Server, MemoryAudit, list[str]]:
    audit = MemoryAudit()
    policy.setdefault("gates", Gates())
    if tmp_path is not None:
        policy.setdefault("sandbox", Sandbox([tmp_path]))
    server = Server("t", policy=Policy(audit=audit, **policy))
    ran: list[str] = []

    @server.tool(read_only=True, open_world=False)
    def look(item: str) -> str:
        ran.append(f"look {item}")
        return f"saw {item}"

    @server.tool(destructive=False, open_world=False)
    def write(item: str) -> str:
        ran.append(f"write {item}")
        return f"wrote {item}"

    @server.tool(destructive=True, open_world=False)
    def wipe(item: str) -> str:
        ran.append(f"wipe {item}")
        return "wiped"

    @server.tool(read_only=True)  # open world by the TL-14 default
    def fetch(url: str) -> str:
        ran.append(f"fetch {url}")
        return "fetched"

    @server.tool(destructive=False, open_world=False)
    def batch(calls: list[dict[str, Any]], ctx: Context) -> list[Any]:
        return [ctx.call_tool(c["name"], c.get("arguments")) for c in calls]

    @server.tool(destructive=False, open_world=False)
    async def abatch(calls: list[dict[str, Any]], ctx: Context) -> list[Any]:
        return [await ctx.call_tool_async(c["name"], c.get("arguments")) for c in calls]

    return server, audit, ran


async def names(client: Any) -> list[str]:
    return [t["name"] for t in (await client.request("tools/list", {}))["tools"]]


async def call(client: Any, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    result: dict[str, Any] = await client.request("tools/call", params)
    return result


def error_of(result: dict[str, Any]) -> dict[str, Any]:
    if "structuredContent" in result and isinstance(result["structuredContent"], dict) \
            and "error" in result["structuredContent"]:
        return result["structuredContent"]["error"]
    return result["_meta"][ERROR_META_KEY]


# ---------------------------------------------------------------------------------------------- gates


@pytest.mark.req("TL-11", "TL-14")
@pytest.mark.asyncio
async def test_default_gates_hide_destructive_and_open_world_tools_and_refuse_them_by_name(wire):
    server, audit, ran = make_server()
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        assert await names(c) == ["look", "write", "batch", "abatch"]
        for name, args in (("wipe", {"item": "x"}), ("fetch", {"url": "https://example.com"})):
            result = await call(c, name, args)
            assert result["isError"] is True
            assert error_of(result)["code"] == "E_PERMISSION_DENIED"
        assert ran == []  # refused before the handler ran
    assert [(a["tool"], a["outcome"], a["code"]) for a in audit.lines] == [
        ("wipe", "denied", "E_PERMISSION_DENIED"), ("fetch", "denied", "E_PERMISSION_DENIED")]


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_read_only_mode_keeps_only_declared_readers(wire):
    server, _, ran = make_server(gates=Gates.from_env({"MCPKIT_READ_ONLY": "1", "MCPKIT_ALLOW_OPEN_WORLD": "1"}))
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        assert await names(c) == ["look", "fetch"]
        result = await call(c, "write", {"item": "x"})
        assert result["isError"] is True
        assert "read-only mode" in result["content"][0]["text"]
        assert (await call(c, "look", {"item": "a"}))["content"][0]["text"] == "saw a"
        assert ran == ["look a"]


@pytest.mark.req("TL-11")
def test_environment_switches_are_parsed_strictly():
    assert Gates.from_env({"MCPKIT_ALLOW_DESTRUCTIVE": "yes"}) == Gates(allow_destructive=True)
    assert Gates.from_env({}) == Gates()
    with pytest.raises(ValueError, match="MCPKIT_READ_ONLY='maybe' is not a boolean"):
        Gates.from_env({"MCPKIT_READ_ONLY": "maybe"})


@pytest.mark.req("TL-11")
@pytest.mark.parametrize("tool", ["batch", "abatch"])
@pytest.mark.asyncio
async def test_a_batch_tool_cannot_reach_a_gated_tool(wire, tool):
    server, audit, ran = make_server()
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        result = await call(c, tool, {"calls": [{"name": "wipe", "arguments": {"item": "x"}},
                                                {"name": "look", "arguments": {"item": "y"}},
                                                {"name": "nope", "arguments": {}},
                                                {"name": ["look"], "arguments": {"item": "z"}}]})
    assert ran == ["look y"]
    inner = result["structuredContent"]["result"] if "structuredContent" in result else None
    assert inner is not None
    assert inner[0]["isError"] is True and inner[0]["_meta"][ERROR_META_KEY]["code"] == "E_PERMISSION_DENIED"
    assert inner[1]["content"] == [{"type": "text", "text": "saw y"}]
    assert inner[2]["_meta"][ERROR_META_KEY]["code"] == "E_NOT_FOUND"
    # a name passed on from the batch's caller that is no string names no tool: refused alike
    assert inner[3]["_meta"][ERROR_META_KEY]["code"] == "E_NOT_FOUND", inner[3]
    outer = audit.lines[-1]
    assert outer["tool"] == tool and outer["outcome"] == "ok"
    nested = audit.lines[:-1]
    assert [(a["tool"], a["outcome"]) for a in nested] == [("wipe", "denied"), ("look", "ok"), ("nope", "denied"),
                                                           ("['look']", "denied")]
    assert {a["parentCorrelationId"] for a in nested} == {outer["correlationId"]}
    assert len({a["correlationId"] for a in audit.lines}) == 5


# ---------------------------------------------------------------------------------------------- contract


@pytest.mark.req("TL-07", "TL-10")
@pytest.mark.asyncio
async def test_contract_envelope_matches_the_advertised_output_schema(wire):
    server, audit, _ = make_server(contract=True)

    @server.tool(read_only=True, open_world=False)
    def count(n: int) -> Outcome[list[int]]:
        if n < 0:
            raise ToolError("n must be >= 0", code="E_SCHEMA_VALIDATION", details={"n": n},
                            suggested_fix="Pass 0 or more.")
        return Outcome(list(range(n)), f"{n} numbers")

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        tools = {t["name"]: t for t in (await c.request("tools/list", {}))["tools"]}
        schema = tools["count"]["outputSchema"]
        assert schema["properties"]["result"]["anyOf"][0] == {"type": "array", "items": {"type": "integer"}}
        ok = await call(c, "count", {"n": 3})
        bad = await call(c, "count", {"n": -1})
    env = ok["structuredContent"]
    jsonschema.validate(env, schema)
    assert env["ok"] is True and env["result"] == [0, 1, 2] and env["summary"] == "3 numbers"
    assert env["error"] is None
    assert env["meta"]["tool"] == "count" and env["meta"]["action"] is None
    assert env["meta"]["correlationId"] == ok["_meta"][CID_META_KEY]
    # the text content is the envelope itself: a host that reads only content loses nothing
    (text,) = ok["content"]
    assert text["type"] == "text" and json.loads(text["text"]) == env
    assert "isError" not in ok
    benv = bad["structuredContent"]
    jsonschema.validate(benv, schema)
    assert bad["isError"] is True and benv["ok"] is False and benv["result"] is None
    assert benv["error"] == {"code": "E_SCHEMA_VALIDATION", "message": "n must be >= 0", "details": {"n": -1},
                             "retryable": False, "suggestedFix": "Pass 0 or more."}
    assert audit.lines[-1]["code"] == "E_SCHEMA_VALIDATION"


@pytest.mark.req("TL-10")
@pytest.mark.asyncio
async def test_contract_masks_internal_errors_and_names_the_correlation_id(wire, caplog):
    server, audit, _ = make_server(contract=True)

    @server.tool(read_only=True, open_world=False)
    def broken() -> str:
        raise RuntimeError("db password is hunter2")

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        with caplog.at_level(logging.ERROR, logger="mcpkit"):
            result = await call(c, "broken")
    env = result["structuredContent"]
    cid = result["_meta"][CID_META_KEY]
    assert env["error"]["code"] == "E_INTERNAL"
    assert "hunter2" not in str(result)
    assert cid in env["error"]["message"]
    assert any(cid in r.getMessage() for r in caplog.records)
    assert audit.lines[-1]["correlationId"] == cid and audit.lines[-1]["outcome"] == "error"


@pytest.mark.req("TL-07", "TL-08")
@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
@pytest.mark.asyncio
async def test_revisions_without_structured_content_get_the_envelope_as_text(wire, version):
    server, _, _ = make_server(contract=True)
    async with connect(server, wire, version) as c:
        result = await call(c, "look", {"item": "a"})
    assert "structuredContent" not in result
    import json

    env = json.loads(result["content"][-1]["text"])
    assert env["ok"] is True and env["result"] == "saw a"


# ---------------------------------------------------------------------------------------------- validation


@pytest.mark.req("TL-10")
@pytest.mark.asyncio
async def test_invalid_arguments_follow_the_revision_and_are_audited(wire):
    server, audit, ran = make_server()
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        result = await call(c, "look", {"item": 5})
        assert result["isError"] is True and error_of(result)["code"] == "E_SCHEMA_VALIDATION"
    async with connect(server, wire, "2025-06-18") as c:
        with pytest.raises(RpcError) as err:
            await call(c, "look", {"item": 5})
        assert err.value.code == -32602
    assert ran == []
    assert [(a["outcome"], a["code"]) for a in audit.lines] == [("denied", "E_SCHEMA_VALIDATION")] * 2


# ---------------------------------------------------------------------------------------------- rate limits


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_ten_thousand_calls_against_a_limit_of_100_a_minute(wire):
    clock = FakeClock()
    server, audit, ran = make_server(rate_limiter=RateLimiter("100/min", clock=clock))
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        futures = [c.send_request("tools/call", {"name": "look", "arguments": {"item": str(i)}})[1]
                   for i in range(10_000)]
        results = await asyncio.gather(*futures)
        ok = [r for r in results if not r.get("isError")]
        refused = [r for r in results if r.get("isError")]
        assert len(ok) == 100 and len(refused) == 9_900
        assert {error_of(r)["code"] for r in refused} == {"E_RATE_LIMITED"}
        assert {error_of(r)["details"]["retryAfterMs"] for r in refused} == {600}
        assert all(error_of(r)["retryable"] is True for r in refused)
        assert len(ran) == 100
        clock.now += 0.6  # one token back
        assert not (await call(c, "look", {"item": "late"})).get("isError")
        assert (await call(c, "look", {"item": "later"}))["isError"] is True
    assert sum(1 for a in audit.lines if a["code"] == "E_RATE_LIMITED") == 9_901


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_per_tool_rates_and_principals_have_their_own_buckets(wire):
    clock = FakeClock()
    who = {"name": "alice"}
    server, _, _ = make_server(rate_limiter=RateLimiter("100/min", clock=clock),
                               principal=lambda session, req: who["name"])

    @server.tool(read_only=True, open_world=False, rate_limit="2/min")
    def scarce() -> str:
        return "ok"

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        outcomes = [bool((await call(c, "scarce")).get("isError")) for _ in range(3)]
        assert outcomes == [False, False, True]
        assert not (await call(c, "look", {"item": "a"})).get("isError")  # another tool, another bucket
        who["name"] = "bob"
        assert not (await call(c, "scarce")).get("isError")  # another principal, another bucket


# ---------------------------------------------------------------------------------------------- sandbox


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_sandbox_paths_refuse_escapes_before_the_handler_runs(wire, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "inside.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("TOPSECRET")
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    os.symlink(tmp_path, root / "up")
    server, audit, _ = make_server(sandbox=Sandbox([root]))
    seen: list[Path] = []

    @server.tool(read_only=True, open_world=False)
    def cat(path: SandboxPath = Path(".")) -> str:
        seen.append(path)
        return path.read_text() if path.is_file() else ",".join(sorted(p.name for p in path.iterdir()))

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        assert (await call(c, "cat", {"path": "inside.txt"}))["content"][0]["text"] == "inside"
        for escape in ("../secret.txt", "link.txt", "up/secret.txt", str(tmp_path / "secret.txt"),
                       "a/../../secret.txt"):
            result = await call(c, "cat", {"path": escape})
            assert result["isError"] is True, escape
            assert error_of(result)["code"] == "E_PERMISSION_DENIED"
            assert "TOPSECRET" not in str(result) and str(root) not in str(result["content"])
        # the default "." is the sandbox root, never the server's working directory
        listing = (await call(c, "cat"))["content"][0]["text"]
        assert listing == "inside.txt,link.txt,up"
    assert seen == [root / "inside.txt", root]
    assert sum(a["code"] == "E_PERMISSION_DENIED" for a in audit.lines) == 5


@pytest.mark.asyncio
async def test_a_sandbox_path_without_a_sandbox_is_refused(wire):
    server = Server("plain")

    @server.tool
    def cat(path: SandboxPath) -> str:
        return "ran"

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        result = await call(c, "cat", {"path": "x"})
    assert result["isError"] is True and "no sandbox" in result["content"][0]["text"]


# ---------------------------------------------------------------------------------------------- limits


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_argument_and_result_sizes_and_control_sequences(wire):
    server, _, _ = make_server(limits=Limits(max_argument_bytes=1_000, max_result_bytes=2_000, timeout=None))

    @server.tool(read_only=True, open_world=False)
    def echo(text: str) -> str:
        return text

    @server.tool(read_only=True, open_world=False)
    def big() -> str:
        return "x" * 10_000

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        too_big = await call(c, "echo", {"text": "y" * 2_000})
        assert error_of(too_big)["code"] == "E_SCHEMA_VALIDATION"
        assert error_of(too_big)["details"]["limit"] == 1_000
        cut = await call(c, "big")
        assert len(cut["content"][0]["text"]) < 2_000
        assert "truncated" in cut["content"][-1]["text"]
        clean = await call(c, "echo", {"text": "\x1b[31mred\x1b[0m \x1b]0;pwned\x07ok\u202e"})
        assert clean["content"][0]["text"] == "red ok"


# ---------------------------------------------------------------------------------------------- timeouts


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_an_async_tool_past_its_timeout_is_cancelled_and_answered(wire):
    server, audit, _ = make_server()
    cancelled = threading.Event()

    @server.tool(read_only=True, open_world=False, timeout=0.2)
    async def hang() -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        result = await call(c, "hang")
        assert error_of(result)["code"] == "E_TIMEOUT" and error_of(result)["retryable"] is True
        assert cancelled.is_set()
        assert (await call(c, "look", {"item": "after"}))["content"][0]["text"] == "saw after"
    assert audit.lines[0]["code"] == "E_TIMEOUT"


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_a_sync_tool_past_its_timeout_is_answered_and_told_to_stop(wire):
    server, audit, _ = make_server()
    stopped = threading.Event()

    @server.tool(read_only=True, open_world=False, timeout=0.2)
    def hang(ctx: Context) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if ctx.cancelled.wait(0.01):
                stopped.set()
                return "stopped"
        return "never"

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        started = time.monotonic()
        result = await call(c, "hang")
        assert time.monotonic() - started < 10
        assert error_of(result)["code"] == "E_TIMEOUT"
        assert stopped.wait(5)
        await c.settle()
        assert (await call(c, "look", {"item": "after"}))["content"][0]["text"] == "saw after"
        answers = [m for m in c.received if m.get("id") is not None and "result" in m]
        assert len(answers) == len({m["id"] for m in answers})  # the late return was dropped
    assert [a["code"] for a in audit.lines if a["tool"] == "hang"] == ["E_TIMEOUT"]


# ---------------------------------------------------------------------------------------------- correlation ids


@pytest.mark.asyncio
async def test_every_call_gets_a_fresh_correlation_id_in_meta_logs_and_audit(wire, caplog):
    server, audit, _ = make_server()
    user_log = logging.getLogger("mcpkit.test.user")

    @server.tool(read_only=True, open_world=False)
    def chatty() -> str:
        user_log.warning("working on it")
        return "done"

    from mcpkit.policy.chain import CorrelationFilter

    flt = CorrelationFilter()
    caplog.handler.addFilter(flt)
    try:
        async with connect(server, wire, LATEST_HANDSHAKE) as c:
            first = await call(c, "chatty")
            second = await call(c, "chatty")
    finally:
        caplog.handler.removeFilter(flt)
    cids = [first["_meta"][CID_META_KEY], second["_meta"][CID_META_KEY]]
    assert cids[0] != cids[1]
    assert [a["correlationId"] for a in audit.lines] == cids
    lines = [r.getMessage() for r in caplog.records if r.name == "mcpkit.test.user"]
    assert lines == [f"working on it [correlation id {cids[0]}]", f"working on it [correlation id {cids[1]}]"]


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_sandbox_uris_allow_only_the_configured_schemes(wire, tmp_path):
    (tmp_path / "a.txt").write_text("a")
    server, _, _ = make_server(sandbox=Sandbox([tmp_path], schemes=("file", "https")))

    @server.tool(read_only=True, open_world=False)
    def open_uri(uri: SandboxUri) -> str:
        return f"got {uri}"

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        ok = await call(c, "open_uri", {"uri": (tmp_path / "a.txt").as_uri()})
        web = await call(c, "open_uri", {"uri": "https://example.com/x"})
        outside = await call(c, "open_uri", {"uri": "file:///etc/passwd"})
        script = await call(c, "open_uri", {"uri": "javascript:alert(1)"})
    assert ok["content"][0]["text"] == f"got {(tmp_path / 'a.txt').as_uri()}"
    assert web["content"][0]["text"] == "got https://example.com/x"
    for refused in (outside, script):
        assert refused["isError"] is True and error_of(refused)["code"] == "E_PERMISSION_DENIED"


# ---------------------------------------------------------------------------------------------- the envelope's own JSON


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
@pytest.mark.parametrize("dirty", ["\x7f", "\x85", "\u202e", "\x1b[31m", "\x08", "é\x7f", "é\x85"])
async def test_a_contract_result_is_sanitized_whatever_control_it_holds(wire, dirty):
    # The envelope this call built is checked on its JSON text alone; every kind of control
    # (raw DEL, raw C1, bidi, escaped C0, next to non-ASCII text) must still be found.
    server, _, _ = make_server(contract=True, limits=Limits(timeout=None))

    @server.tool(read_only=True, open_world=False)
    def shout(text: str) -> str:
        return f"a{text}b"

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        out = await call(c, "shout", {"text": dirty})
    result = out["structuredContent"]["result"]
    assert result in ("ab", "aéb"), result
    assert json.loads(out["content"][0]["text"])["result"] == result


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
@pytest.mark.parametrize("unit", ["😀", '"', "\\"])
async def test_a_contract_result_over_the_size_limit_is_cut_whatever_its_characters(wire, unit):
    # Each of these characters takes more than one byte in the JSON than in the text (4 bytes
    # of UTF-8; an escaped quote or backslash twice over): a size taken from the text's length
    # would let the result through.
    cap = 2_000
    server, _, _ = make_server(contract=True, limits=Limits(max_result_bytes=cap, timeout=None))

    @server.tool(read_only=True, open_world=False)
    def many(n: int) -> str:
        return unit * n

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        fits = await call(c, "many", {"n": 20})
        assert fits["structuredContent"]["result"] == unit * 20
        big = await call(c, "many", {"n": 400})
    body = {k: v for k, v in big.items() if k != "_meta"}  # the correlation id is named after the cut
    assert len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()) <= cap


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
async def test_middleware_that_changes_the_envelope_in_place_is_still_sanitized_and_capped(wire):
    # The envelope's own JSON text vouches for the result only while nothing else touched it:
    # a middleware that edits the envelope in place gets the whole result checked.
    from mcpkit import Middleware

    server, _, _ = make_server(contract=True, limits=Limits(max_result_bytes=4_000, timeout=None))

    @server.tool(read_only=True, open_world=False)
    def status(s: str = "") -> dict:
        return {"s": "fine"}

    class Rewrite(Middleware):
        def on_call_tool(self, ctx, call_next):
            result = call_next(ctx)
            result["structuredContent"]["result"]["s"] = ctx.arguments.get("s", "")
            return result

    server.add_middleware(Rewrite())
    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        dirty = await call(c, "status", {"s": "\x1b[31mred\x1b]0;title\x07"})
        big = await call(c, "status", {"s": "y" * 20_000})
    assert dirty["structuredContent"]["result"]["s"] == "red"
    assert big.get("isError") is True and "too large" in big["content"][0]["text"]


class _Changing:
    """An object whose JSON changes each time it is asked (a live status, a log buffer)."""

    def __init__(self) -> None:
        self.asked = 0

    def __json__(self) -> str:
        self.asked += 1
        return "clean" if self.asked == 1 else "\x1b[31mEVIL\x1b]0;pwn\x07"


@pytest.mark.req("TL-11")
@pytest.mark.asyncio
@pytest.mark.parametrize("contract", [True, False])
async def test_an_object_serialized_at_send_time_is_checked_as_sent(wire, contract):
    from mcpkit.server.content import ToolResult

    server, _, _ = make_server(contract=contract, limits=Limits(timeout=None))

    @server.tool(read_only=True, open_world=False)
    def live() -> Any:
        return ToolResult(content=[], structured={"status": _Changing()})

    @server.tool(read_only=True, open_world=False)
    def live_dict() -> dict:
        return {"status": _Changing()}

    def strings(value: Any) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, dict):
            return [s for k, v in value.items() for s in (*strings(k), *strings(v))]
        if isinstance(value, list):
            return [s for v in value for s in strings(v)]
        return []

    async with connect(server, wire, LATEST_HANDSHAKE) as c:
        out = await call(c, "live")
        assert not any("\x1b" in s or "\x07" in s for s in strings(out)), out
        assert "error" in json.dumps(await call(c, "live_dict"))  # not JSON for its result schema: refused
