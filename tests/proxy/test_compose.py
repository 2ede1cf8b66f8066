"""Composition: ``Server.include`` (a static copy) and ``Server.mount`` (live, through the child's
own pipeline), with names every host accepts."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from mcpkit import Context, Server
from mcpkit.auth.tokens import AccessToken
from mcpkit.client import Client, RpcError
from mcpkit.policy import Gates, Policy
from mcpkit.policy.config import INHERIT
from mcpkit.proxy import upstreams_of
from mcpkit.server.compose import Names

aio = pytest.mark.asyncio


def weather() -> Server:
    child = Server("weather")

    @child.tool(read_only=True, open_world=False)
    def forecast(city: str) -> str:
        """The forecast for a city."""
        return f"sunny in {city}"

    @child.resource("weather://current", mime_type="text/plain")
    def current() -> str:
        return "20 C"

    def cities(value: str) -> list[str]:
        return [c for c in ("Bern", "Berlin", "Oslo") if c.startswith(value)]

    @child.resource_template("weather://city/{name}", completions={"name": cities})
    def city(name: str) -> str:
        return f"weather in {name}"

    @child.prompt(completions={"city": cities})
    def ask(city: str) -> str:
        """Ask about a city."""
        return f"How is the weather in {city}?"

    return child


@pytest.fixture
def parent() -> Any:
    server = Server("parent")
    yield server
    for upstream in upstreams_of(server):
        upstream.close()


async def until(predicate: Any, timeout: float = 10.0) -> None:
    """Wait (bounded) for something that happens on another loop."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


# ------------------------------------------------------------------------------------- names


@pytest.mark.parametrize("uri", ["weather://current", "file:///tmp/a b", "urn:isbn:123", "weather://city/{name}",
                                 "https://example.com/x?y=1"])
def test_prefixed_uris_keep_their_scheme_and_map_back(uri: str) -> None:
    names = Names("wx")
    prefixed = names.uri(uri)
    assert prefixed.split(":", 1)[0] == uri.split(":", 1)[0]
    assert prefixed != uri and names.uri_back(prefixed) == uri
    assert names.uri_back(uri) is None or Names("wx").uri(names.uri_back(uri)) == uri
    assert Names("wx", prefix_uris=False).uri(uri) == uri


def test_tool_names_take_a_separator_hosts_accept() -> None:
    names = Names("weather")
    assert names.name("forecast") == "weather_forecast"
    assert names.name_back("weather_forecast") == "forecast" and names.name_back("forecast") is None
    assert Names("weather", separator="-").name("forecast") == "weather-forecast"
    with pytest.raises(ValueError):
        Names("bad prefix")
    with pytest.raises(ValueError):
        Names("a/b")


# ------------------------------------------------------------------------------------- include


@aio
async def test_include_copies_every_item_under_prefixed_names() -> None:
    child = weather()
    parent = Server("parent")
    parent.include(child, prefix="weather")
    async with Client(parent) as client:
        assert [t["name"] for t in await client.list_tools()] == ["weather_forecast"]
        result = await client.call_tool("weather_forecast", {"city": "Oslo"})
        assert result["content"] == [{"type": "text", "text": "sunny in Oslo"}]
        read = await client.read_resource("weather://weather/current")
        assert read["contents"] == [{"uri": "weather://weather/current", "mimeType": "text/plain", "text": "20 C"}]
        read = await client.read_resource("weather://weather/city/Rome")
        assert read["contents"][0]["text"] == "weather in Rome"
        got = await client.get_prompt("weather_ask", {"city": "Bern"})
        assert got["messages"][0]["content"]["text"] == "How is the weather in Bern?"
        done = await client.complete("weather_ask", "city", "Be")
        assert done["completion"]["values"] == ["Bern", "Berlin"]
        done = await client.complete("weather://weather/city/{name}", "name", "O")
        assert done["completion"]["values"] == ["Oslo"]
    # a static copy: what the child does later does not show
    child.add_tool("later", lambda a: "x", input_schema={"type": "object"})
    assert "weather_later" not in parent.tools


def test_include_refuses_a_clash_and_changes_nothing() -> None:
    parent = Server("parent")

    @parent.prompt(name="weather_ask")
    def own() -> str:
        return "mine"

    with pytest.raises(ValueError, match="weather_ask"):
        parent.include(weather(), prefix="weather")
    assert parent.tools == {} and parent._resources == {}


@aio
async def test_include_keeps_a_tools_own_policy() -> None:
    child = Server("child")

    @child.tool(rate_limit="1/min")
    def once() -> str:
        return "ok"

    parent = Server("parent")
    parent.include(child, prefix="c")
    async with Client(parent) as client:
        assert (await client.call_tool("c_once"))["content"][0]["text"] == "ok"
        refused = await client.call_tool("c_once")
        assert refused.get("isError") is True


class _Audit:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def record(self, entry: dict[str, Any]) -> None:
        self.lines.append(dict(entry))


def _nesting_child(ran: list[str]) -> Server:
    """A child whose ``batch`` (sync) and ``abatch`` (async) tools call others by name: a
    destructive ``reset`` and a read-only ``status``."""
    child = Server("child")

    @child.tool(destructive=True, open_world=False)
    def reset() -> str:
        ran.append("reset")
        return "reset"

    @child.tool(read_only=True, open_world=False)
    def status() -> str:
        return "fine"

    @child.tool(read_only=True, open_world=False)
    def batch(calls: list[dict[str, Any]], ctx: Context) -> list[Any]:
        return [ctx.call_tool(c["name"], c.get("arguments")) for c in calls]

    @child.tool(read_only=True, open_world=False)
    async def abatch(calls: list[dict[str, Any]], ctx: Context) -> list[Any]:
        return [await ctx.call_tool_async(c["name"], c.get("arguments")) for c in calls]

    return child


@aio
@pytest.mark.parametrize("meta", ["batch", "abatch", "ops"])
async def test_an_included_tools_nested_calls_reach_the_prefixed_copies(meta: str) -> None:
    """ctx.call_tool("status") in a tool copied under prefix "c" is the parent's nested call of
    c_status (the child's names do not exist in the parent), through the parent's pipeline:
    its read-only gate refuses c_reset by name, and its audit has the nested lines. A prompt's
    or a resource's handler calling a tool is resolved the same way."""
    ran: list[str] = []
    child = _nesting_child(ran)

    ops = child.manager("ops")

    @ops.action(read_only=True, open_world=False)
    def run(calls: list[dict[str, Any]], ctx: Context) -> list[Any]:
        return [ctx.call_tool(c["name"], c.get("arguments")) for c in calls]

    @child.prompt()
    def report(ctx: Context) -> str:
        return ctx.call_tool("status")["content"][0]["text"]

    @child.resource("status://now")
    def now(ctx: Context) -> str:
        return ctx.call_tool("status")["content"][0]["text"]

    audit = _Audit()
    parent = Server("parent", policy=Policy(gates=Gates(read_only=True), audit=audit))
    parent.include(child, prefix="c")
    calls = [{"name": "reset"}, {"name": "status"}]
    async with Client(parent) as client:
        if meta == "ops":  # a manager's action (no outputSchema: its list comes as JSON text)
            result = await client.call_tool("c_ops", {"action": "run", "calls": calls})
            inner = json.loads(result["content"][0]["text"])
        else:
            result = await client.call_tool(f"c_{meta}", {"calls": calls})
            inner = result["structuredContent"]["result"]
        assert inner[0]["isError"] is True and "read-only" in inner[0]["content"][0]["text"], inner
        assert inner[1]["content"][0]["text"] == "fine", inner
        assert ran == []
        outer = next(line for line in audit.lines if line["tool"] == f"c_{meta}")
        assert [(line["tool"], line["outcome"], line.get("parentCorrelationId")) for line in audit.lines] == [
            ("c_reset", "denied", outer["correlationId"]), ("c_status", "ok", outer["correlationId"]),
            (f"c_{meta}", "ok", None)]
        prompt = await client.get_prompt("c_report")
        assert prompt["messages"][0]["content"]["text"] == "fine"
        read = await client.read_resource("status://c/now")
        assert read["contents"][0]["text"] == "fine"


# ------------------------------------------------------------------------------------- mount


@aio
async def test_mount_lists_and_forwards_tools_resources_templates_prompts_and_completions(parent: Server) -> None:
    upstream = parent.mount(weather(), prefix="weather")
    assert upstream.up
    async with Client(parent) as client:
        tools = await client.list_tools()
        assert [t["name"] for t in tools] == ["weather_forecast"]
        assert tools[0]["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
        assert tools[0]["inputSchema"]["required"] == ["city"]
        result = await client.call_tool("weather_forecast", {"city": "Oslo"})
        assert result["content"] == [{"type": "text", "text": "sunny in Oslo"}]
        # the child's schema is enforced here as advertised
        bad = await client.call_tool("weather_forecast", {"town": "Oslo"})
        assert bad.get("isError") is True and "city" in bad["content"][0]["text"]
        assert [r["uri"] for r in await client.list_resources()] == ["weather://weather/current"]
        templates = await client.list_resource_templates()
        assert [t["uriTemplate"] for t in templates] == ["weather://weather/city/{name}"]
        read = await client.read_resource("weather://weather/city/Rome")
        assert read["contents"] == [{"uri": "weather://weather/city/Rome", "text": "weather in Rome"}]
        with pytest.raises(RpcError) as missing:
            await client.read_resource("weather://nowhere")
        assert missing.value.code == -32002
        got = await client.get_prompt("weather_ask", {"city": "Bern"})
        assert got["messages"][0]["content"]["text"] == "How is the weather in Bern?"
        assert (await client.complete("weather_ask", "city", "Be"))["completion"]["values"] == ["Bern", "Berlin"]
        done = await client.complete("weather://weather/city/{name}", "name", "O")
        assert done["completion"]["values"] == ["Oslo"]


def test_mounting_a_second_child_under_a_prefix_already_mounted_is_refused(parent: Server) -> None:
    # it used to connect the second child and mirror none of its items, with one warning per
    # item saying "(use a prefix)" although a prefix was given
    parent.mount(weather(), prefix="weather")
    with pytest.raises(ValueError, match="prefix 'weather' is already mounted .*choose another prefix"):
        parent.mount(weather(), prefix="weather")
    assert len(upstreams_of(parent)) == 1
    parent.mount(weather(), prefix="weather", separator="-")  # other names: no clash
    assert len(upstreams_of(parent)) == 2


def test_a_prefix_that_makes_invalid_tool_names_is_refused_naming_the_prefix() -> None:
    with pytest.raises(ValueError, match=r"^prefix 'bad prefix!' would make invalid tool names"):
        Names("bad prefix!")


@aio
async def test_a_mounted_child_changing_at_run_time_reaches_the_parents_clients(parent: Server) -> None:
    child = weather()
    parent.mount(child, prefix="weather")
    async with Client(parent) as client:
        await client.list_tools()
        child.add_tool("alerts", lambda a: "none", input_schema={"type": "object"}, description="Alerts.")
        await until(lambda: any(n["method"] == "notifications/tools/list_changed" for n in client.notifications)
                    and "weather_alerts" in parent.tools)
        assert "weather_alerts" in [t["name"] for t in await client.list_tools()]
        assert (await client.call_tool("weather_alerts"))["content"][0]["text"] == "none"

        client.notifications.clear()
        child.remove_tool("forecast")
        child.remove_prompt("ask")
        await until(lambda: "weather_forecast" not in parent.tools and "weather_ask" not in parent._prompts)
        await until(lambda: {n["method"] for n in client.notifications} >= {
            "notifications/tools/list_changed", "notifications/prompts/list_changed"})
        assert [t["name"] for t in await client.list_tools()] == ["weather_alerts"]
        with pytest.raises(RpcError):
            await client.get_prompt("weather_ask", {"city": "Bern"})


@aio
async def test_mount_keeps_the_childs_own_policy(parent: Server, tmp_path: Any) -> None:
    from mcpkit.policy import AuditLog

    audit = tmp_path / "child-audit.log"
    child = Server("child", policy=Policy(gates=Gates(read_only=True), audit=AuditLog(audit)))

    @child.tool(read_only=True, open_world=False)
    def look() -> str:
        return "seen"

    @child.tool(destructive=True)
    def wipe() -> str:
        return "wiped"

    parent.mount(child, prefix="c")
    async with Client(parent) as client:
        assert [t["name"] for t in await client.list_tools()] == ["c_look"]  # the child's gates hid wipe
        with pytest.raises(RpcError):
            await client.call_tool("c_wipe")
        assert (await client.call_tool("c_look"))["content"][0]["text"] == "seen"
    child.policy.audit.flush()
    assert '"tool":"look"' in audit.read_text()


@aio
async def test_mount_relays_progress_logs_sampling_elicitation_and_roots(parent: Server) -> None:
    child = Server("child")

    @child.tool
    async def interview(ctx: Context) -> str:
        await ctx.report_progress(1, 3, "asking")
        await ctx.info("about to ask")
        sampled = await ctx.sample("Say hi", max_tokens=10)
        await ctx.report_progress(2, 3)
        answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        roots = await ctx.roots()
        return f"{sampled['content']['text']} / {answer['content']['name']} / {roots['roots'][0]['uri']}"

    parent.mount(child, prefix="c")
    asked: list[dict[str, Any]] = []

    async def sample(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}

    async def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"name": "Zoe"}}

    progress: list[tuple[Any, ...]] = []
    logs: list[dict[str, Any]] = []
    async with Client(parent, sampling_handler=sample, elicitation_handler=elicit,
                      roots=[{"uri": "file:///work", "name": "work"}], on_log=logs.append) as client:
        await client.set_log_level("info")
        result = await client.call_tool("c_interview", progress=lambda *p: progress.append(p))
    assert result["content"][0]["text"] == "hi / Zoe / file:///work"
    assert asked[0]["messages"][0]["content"]["text"] == "Say hi" and asked[1]["message"] == "Your name?"
    assert progress == [(1, 3, "asking"), (2, 3, None)]
    assert [entry["data"] for entry in logs] == ["about to ask"]


@aio
async def test_the_relay_speaks_the_2026_07_28_era_to_a_modern_client(parent: Server) -> None:
    child = Server("child")

    @child.tool
    async def greet(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"Hello, {answer['content']['name']}!"

    parent.mount(child)
    rounds: list[dict[str, Any]] = []

    async def elicit(params: dict[str, Any]) -> dict[str, Any]:
        rounds.append(params)
        return {"action": "accept", "content": {"name": "Zoe"}}

    async with Client(parent, protocol_version="2026-07-28", elicitation_handler=elicit) as client:
        first = await client.request("tools/call", {"name": "greet", "arguments": {}}, fulfil_inputs=False)
        assert first["resultType"] == "input_required"  # MR-01: no request to the client, an input instead
        assert [r["method"] for r in first["inputRequests"].values()] == ["elicitation/create"]
        result = await client.call_tool("greet")
    assert result["content"] == [{"type": "text", "text": "Hello, Zoe!"}]
    assert len(rounds) == 1


@aio
async def test_cancelling_a_call_cancels_it_in_the_child(parent: Server) -> None:
    child = Server("child")
    started = asyncio.Event()
    stopped: list[str] = []
    loop = asyncio.get_running_loop()

    @child.tool
    async def wait_forever() -> str:
        loop.call_soon_threadsafe(started.set)
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            stopped.append("cancelled")
            raise
        return "never"

    parent.mount(child, prefix="c")
    async with Client(parent) as client:
        call = asyncio.ensure_future(client.call_tool("c_wait_forever"))
        await asyncio.wait_for(started.wait(), 10)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await until(lambda: stopped == ["cancelled"])


@aio
async def test_mounted_tools_go_through_the_parents_gates_with_a_tool_policy(parent: Server) -> None:
    child = Server("child")

    @child.tool
    def status() -> str:  # declares nothing: assumed to write (TL-14)
        return "ok"

    @child.tool(read_only=True, open_world=False)
    def drop() -> str:  # claims to be read-only: a hint, not a fact
        return "dropped"

    parent.policy = Policy(gates=Gates(read_only=True))
    parent.mount(child, prefix="c", tool_policy={"tools": {
        "status": {"read_only": True, "open_world": False},
        "c_dr*": {"read_only": False, "destructive": True, "scopes": ["admin"]},
    }})
    async with Client(parent) as client:
        tools = await client.list_tools()
        assert [t["name"] for t in tools] == ["c_status"]
        assert tools[0]["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
        assert (await client.call_tool("c_status"))["content"][0]["text"] == "ok"
        refused = await client.call_tool("c_drop")
        assert refused.get("isError") is True and "read-only" in refused["content"][0]["text"]
    assert parent.tools["c_drop"].scopes == ("admin",)


@aio
@pytest.mark.parametrize("rules", [
    {"drop": {"destructive": True}},  # the upstream's readOnlyHint must not outlive "destructive"
    {"*": {"read_only": True}, "drop": {"destructive": True}},  # nor an earlier glob's read_only
])
async def test_a_tool_policy_saying_destructive_beats_a_read_only_claim(parent: Server, rules: Any) -> None:
    child = Server("child")
    ran: list[str] = []

    @child.tool(read_only=True, open_world=False)
    def drop() -> str:  # claims to be read-only
        ran.append("drop")
        return "dropped"

    parent.policy = Policy(gates=Gates(read_only=True))
    parent.mount(child, prefix="c", tool_policy={"tools": rules})
    assert parent.tools["c_drop"].annotations["readOnlyHint"] is False
    async with Client(parent) as client:
        assert await client.list_tools() == []
        refused = await client.call_tool("c_drop")
        assert refused.get("isError") is True and "read-only" in refused["content"][0]["text"]
    parent.policy = Policy(gates=Gates())  # destructive tools not allowed: refused as destructive
    async with Client(parent) as client:
        refused = await client.call_tool("c_drop")
        assert refused.get("isError") is True and "destructive" in refused["content"][0]["text"]
    assert ran == []


@aio
async def test_a_tool_policy_rule_naming_a_listed_tool_applies_to_that_tool_only(parent: Server) -> None:
    """With prefix "files", [tools.files_read] is the listed files_read (the upstream's read);
    it must not also reach the upstream's own files_read (listed files_files_read). A name or
    glob that no listed name matches is read as the upstream's name."""
    child = Server("child")

    @child.tool(read_only=True, open_world=False)
    def read() -> str:
        return "read"

    @child.tool(name="files_read", read_only=True, open_world=False)
    def files_read() -> str:
        return "files_read"

    @child.tool(read_only=True, open_world=False)
    def write() -> str:
        return "write"

    @child.tool(read_only=True, open_world=False)
    def stat() -> str:
        return "stat"

    parent.mount(child, prefix="files", tool_policy={"tools": {
        "files_read": {"read_only": False, "destructive": True, "scopes": ["files:admin"]},
        "files_r*": {"rate_limit": "5/min"},
        "write": {"read_only": False, "destructive": True},
        "st*": {"hidden": True},
    }})
    tools = parent.tools
    assert sorted(tools) == ["files_files_read", "files_read", "files_write"]
    assert tools["files_read"].scopes == ("files:admin",)
    assert tools["files_read"].annotations["destructiveHint"] is True
    assert tools["files_read"].options.rate_limit is not INHERIT
    assert tools["files_files_read"].scopes == ()
    assert tools["files_files_read"].annotations == {"readOnlyHint": True, "openWorldHint": False}
    assert tools["files_files_read"].options.rate_limit is INHERIT
    assert tools["files_write"].annotations["destructiveHint"] is True


@aio
@pytest.mark.parametrize("meta", ["batch", "abatch"])
async def test_a_mounted_tools_nested_calls_take_the_parents_pipeline(parent: Server, meta: str) -> None:
    """ctx.call_tool inside a mounted child is the parent's nested call of the parent's name:
    the parent's read-only gate refuses the child's destructive tool, its tool policy's hidden
    tools do not exist, and its audit log has the nested lines."""
    ran: list[str] = []
    child = _nesting_child(ran)

    @child.tool(read_only=True, open_world=False)
    def secret() -> str:
        ran.append("secret")
        return "s3cr3t"

    audit = _Audit()
    parent.policy = Policy(gates=Gates(read_only=True), audit=audit)
    parent.mount(child, prefix="c", tool_policy={"tools": {"secret": {"hidden": True}}})
    async with Client(parent) as client:
        result = await client.call_tool(f"c_{meta}", {"calls": [{"name": "reset"}, {"name": "secret"},
                                                                 {"name": "status"}]})
    inner = result["structuredContent"]["result"]
    assert inner[0]["isError"] is True and "read-only" in inner[0]["content"][0]["text"]
    assert inner[1]["isError"] is True and "Unknown tool" in inner[1]["content"][0]["text"]
    assert inner[2]["content"][0]["text"] == "fine"
    assert ran == []
    outer = next(line for line in audit.lines if line["tool"] == f"c_{meta}")
    assert [(line["tool"], line["outcome"], line.get("parentCorrelationId")) for line in audit.lines] == [
        ("c_reset", "denied", outer["correlationId"]), ("c_secret", "denied", outer["correlationId"]),
        ("c_status", "ok", outer["correlationId"]), (f"c_{meta}", "ok", None)]


@aio
async def test_a_mounted_childs_audit_and_rate_limits_name_the_parents_caller(parent: Server) -> None:
    """The child is driven by one in-memory client for every caller of the parent: its own
    audit lines and per-caller rate limits must still be the real caller's, not one
    "anonymous" for all (a second caller would be refused on the first one's bucket)."""
    audit = _Audit()
    child = Server("child", policy=Policy(audit=audit))

    @child.tool(read_only=True, open_world=False, rate_limit="1/min")
    def once() -> str:
        return "ok"

    parent.mount(child, prefix="c")
    for who in ("alice", "bob"):
        async with Client(parent) as client:
            client.transport.session.principal = who  # type: ignore[attr-defined]
            assert (await client.call_tool("c_once"))["content"][0]["text"] == "ok", who
            refused = await client.call_tool("c_once")  # the caller's own bucket is spent
            assert refused.get("isError") is True, who
    assert [(line["tool"], line["principal"], line["outcome"]) for line in audit.lines] == [
        ("once", "alice", "ok"), ("once", "alice", "denied"), ("once", "bob", "ok"), ("once", "bob", "denied")]


@aio
async def test_a_roots_change_reaches_the_mounted_child(parent: Server) -> None:
    child = Server("child")
    heard: list[str] = []
    mine: list[str] = []
    child.on_notification("notifications/roots/list_changed")(lambda params: heard.append("child"))
    parent.on_notification("notifications/roots/list_changed")(lambda params: mine.append("parent"))
    parent.mount(child, prefix="c")
    async with Client(parent, roots=[{"uri": "file:///a"}]) as client:
        await client.roots_changed()
        await until(lambda: heard == ["child"])
    assert mine == ["parent"]  # the parent's own handler still runs


@aio
async def test_a_subscription_to_a_mounted_resource_reaches_the_child_and_its_updates_come_back(
        parent: Server) -> None:
    child = weather()
    parent.mount(child, prefix="weather")
    async with Client(parent) as client:
        await client.subscribe("weather://weather/current")
        await until(lambda: any("weather://current" in s.subscriptions for s in child._sessions))
        child.notify_resource_updated("weather://current")
        await until(lambda: any(n["method"] == "notifications/resources/updated" for n in client.notifications))
    updated = [n for n in client.notifications if n["method"] == "notifications/resources/updated"]
    assert updated[0]["params"] == {"uri": "weather://weather/current"}


@aio
async def test_concurrent_calls_each_ask_their_own_client(parent: Server) -> None:
    """The older call asks while a newer one is in flight: its own client must answer."""
    child = Server("child")
    arrived: list[int] = []
    asked: list[int] = []

    async def wait_for(condition: Any) -> None:
        for _ in range(1000):
            if condition():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the calls did not overlap")

    @child.tool
    async def whoami(ctx: Context) -> str:
        me = len(arrived)
        arrived.append(me)
        await wait_for(lambda: len(arrived) == 2)
        if me == 0:
            await wait_for(lambda: asked == [1])  # the newer call asks first ...
        answer = await ctx.elicit("Who?", {"type": "object", "properties": {"name": {"type": "string"}}})
        asked.append(me)
        if me == 1:
            await wait_for(lambda: asked == [1, 0])  # ... and stays in flight while the older one asks
        return answer["content"]["name"]

    parent.mount(child, prefix="c")

    def answering(name: str) -> Any:
        async def elicit(params: dict[str, Any]) -> dict[str, Any]:
            return {"action": "accept", "content": {"name": name}}

        return elicit

    async with Client(parent, elicitation_handler=answering("ann")) as ann, \
            Client(parent, elicitation_handler=answering("bob")) as bob:
        older = asyncio.ensure_future(ann.call_tool("c_whoami"))
        await wait_for(lambda: len(arrived) == 1)
        newer = asyncio.ensure_future(bob.call_tool("c_whoami"))
        results = await asyncio.gather(older, newer)
    assert [r["content"][0]["text"] for r in results] == ["ann", "bob"]


def test_a_list_built_across_a_change_is_not_cached() -> None:
    """Mounts change a server's registry from their own thread: a tools/list being built while
    that happens must not be kept as the answer for the next one."""
    from mcpkit.protocol.revisions import get
    from mcpkit.server.tools import Tool

    server = Server("racy")

    class ChangesWhileListed(Tool):
        __slots__ = ()

        def describe(self) -> dict[str, Any]:
            if "late" not in server.tools:  # what another thread does in the middle of a listing
                server.add_tool("late", lambda a: "x", input_schema={"type": "object"})
            return super().describe()

    server._register_tool(ChangesWhileListed("first", lambda a: "x", input_schema={"type": "object"}), False)
    rev = get("2025-11-25")
    server.list_page("tools", rev, None)
    assert [t["name"] for t in server.list_page("tools", rev, None)["tools"]] == ["first", "late"]


@aio
async def test_flatten_schemas_lists_a_root_oneof_flat_and_still_enforces_it(parent: Server) -> None:
    import warnings

    child = Server("scenes")
    schema = {"type": "object", "oneOf": [
        {"properties": {"op": {"const": "add"}, "node": {"type": "string"}}, "required": ["op", "node"],
         "additionalProperties": False},
        {"properties": {"op": {"const": "delete"}, "path": {"type": "string"}}, "required": ["op", "path"],
         "additionalProperties": False},
    ]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the child's own registration warns about the root oneOf
        child.add_tool("edit", lambda args: f"did {args['op']}", input_schema=schema, read_only=True,
                       open_world=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # flattened: nothing left for the proxy to warn about
        parent.mount(child, prefix="s", flatten_schemas=True)
    async with Client(parent) as client:
        [tool] = await client.list_tools()
        listed = tool["inputSchema"]
        assert not {"oneOf", "anyOf", "allOf"} & set(listed)
        assert set(listed["properties"]) == {"op", "node", "path"}
        ok = await client.call_tool("s_edit", {"op": "add", "node": "Player"})
        assert ok["content"] == [{"type": "text", "text": "did add"}]
        mixed = await client.call_tool("s_edit", {"op": "add", "path": "/root"})  # no branch takes it
        assert mixed.get("isError") is True


@aio
@pytest.mark.parametrize("how", ["mount", "include"])
async def test_a_mounted_childs_tools_see_the_parents_caller_as_their_principal(parent: Server, how: str) -> None:
    """A child tool that keys its data by ``ctx.principal`` must see the parent's caller: one
    in-memory client drives the mounted child for every caller, and with no principal there
    every caller would read and write everyone's notes. Concurrent callers, sync and async."""
    child = Server("child")
    notes: dict[Any, list[str]] = {}
    entered = threading.Barrier(2, timeout=10)

    @child.tool()
    def note(text: str, ctx: Context) -> list[str]:
        mine = notes.setdefault(ctx.principal, [])
        mine.append(text)
        entered.wait()  # both callers inside at once: neither may see the other's principal
        assert ctx.principal == ctx.access_token.subject
        return list(mine)

    @child.tool()
    async def whoami(ctx: Context) -> str:
        return str(ctx.principal)

    seen_by_middleware: list[tuple[Any, Any]] = []

    def record(cc: Any, call_next: Any) -> Any:  # the child's middleware sees that caller too
        token = cc.access_token
        seen_by_middleware.append((cc.principal, token.subject if token is not None else None))
        return call_next(cc)

    child.add_middleware(record, hook="on_call_tool")
    getattr(parent, how)(child, prefix="c")

    async def as_caller(who: str) -> tuple[Any, Any]:
        async with Client(parent) as client:
            session = client.transport.session  # type: ignore[attr-defined]
            session.principal = who
            session.access_token = AccessToken(who, client_id="cli", scopes=frozenset())
            written = await client.call_tool("c_note", {"text": f"{who}'s secret"})
            return written["structuredContent"]["result"], (await client.call_tool("c_whoami"))["content"][0]["text"]

    (alice, alice_is), (bob, bob_is) = await asyncio.gather(as_caller("alice"), as_caller("bob"))
    assert (alice, alice_is) == (["alice's secret"], "alice")
    assert (bob, bob_is) == (["bob's secret"], "bob")
    async with Client(parent) as client:  # no principal on the parent's side: none in the child
        assert (await client.call_tool("c_whoami"))["content"][0]["text"] == "None"
    if how == "mount":  # an include runs the child's tools in the parent's own session
        assert sorted(seen_by_middleware, key=str) == [("alice", "alice")] * 2 + [("bob", "bob")] * 2 + [(None, None)]


@aio
@pytest.mark.req("TL-13")
async def test_an_include_into_a_served_parent_is_one_list_changed_per_list(wire: Any) -> None:
    # an include is one change: its clients re-list once per list, not once per copied item
    from tests.harness import connect

    child = weather()
    child.add_tool("second", lambda a: "x", input_schema={"type": "object"})
    parent = Server("parent", advertise=("tools", "resources", "prompts"))
    async with connect(parent, wire) as h:
        parent.include(child, prefix="weather")
        await h.wait_for(lambda: len(h.notifications) >= 3)
        await h.settle()
        assert sorted(n["method"] for n in h.notifications) == [
            "notifications/prompts/list_changed", "notifications/resources/list_changed",
            "notifications/tools/list_changed"]
        tools = (await h.request("tools/list"))["tools"]
        assert sorted(t["name"] for t in tools) == ["weather_forecast", "weather_second"]


@aio
@pytest.mark.parametrize("how", ["mount", "include"])
async def test_a_childs_completer_that_declares_a_context_sees_the_parents_caller(parent: Server, how: str) -> None:
    """A child's completer that offers each caller its own values (by ``ctx.principal``) must see
    the parent's caller: a mount forwards the completion with that caller's context, an include
    runs the completer in the parent's session. Sync and async, concurrent callers."""
    child = Server("child")

    def topics(value: str, ctx: Context) -> list[str]:
        return [f"{ctx.principal}/{value}"]

    async def names(value: str, context: dict[str, str], ctx: Context) -> list[str]:
        await asyncio.sleep(0)
        return [f"{ctx.principal}/{context.get('kind', '')}/{value}"]

    @child.prompt(completions={"topic": topics})
    def notes(topic: str) -> str:
        return topic

    @child.resource_template("notes://{kind}/{name}", completions={"name": names})
    def note(kind: str, name: str) -> str:
        return name

    getattr(parent, how)(child, prefix="c")

    async def as_caller(who: str | None) -> list[Any]:
        async with Client(parent) as client:
            if who is not None:
                session = client.transport.session  # type: ignore[attr-defined]
                session.principal = who
                session.access_token = AccessToken(who, client_id="cli", scopes=frozenset())
            prompt = await client.complete("c_notes", "topic", "x")
            template = await client.request("completion/complete", {
                "ref": {"type": "ref/resource", "uri": "notes://c/{kind}/{name}"},
                "argument": {"name": "name", "value": "y"}, "context": {"arguments": {"kind": "todo"}}})
            return [prompt["completion"]["values"], template["completion"]["values"]]

    alice, bob = await asyncio.gather(as_caller("alice"), as_caller("bob"))
    assert alice == [["alice/x"], ["alice/todo/y"]]
    assert bob == [["bob/x"], ["bob/todo/y"]]
    assert await as_caller(None) == [["None/x"], ["None/todo/y"]]
