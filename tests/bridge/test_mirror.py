"""server.mirror(bridge): the backend's tools and resources, kept in sync, one list_changed per change."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.bridge import RpcBridge, Tcp
from mcpkit.protocol.errors import E_NOT_CONNECTED
from tests.harness import RpcError, connect

from .backend import Backend

FAST = {"probe_interval": 0.2, "backoff_initial": 0.05, "backoff_max": 0.2}
CHANGED = "notifications/tools/list_changed"


def tool(name: str, props: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    schema = {"type": "object", "properties": props or {"x": {"type": "integer"}}, "required": list(props or {"x": 0}),
              "additionalProperties": False}
    return {"name": name, "description": f"{name} tool", "inputSchema": schema, **extra}


@pytest.fixture
def backend() -> Iterator[Backend]:
    peer = Backend().start()
    peer.tools = [tool("double"), tool("greet", {"who": {"type": "string"}})]
    peer.handlers["double"] = lambda a: {"content": [{"type": "text", "text": str(a["x"] * 2)}]}
    peer.handlers["greet"] = lambda a: f"hello {a['who']}"
    yield peer
    peer.stop()


def bridge_for(peer: Backend, **kw: Any) -> RpcBridge:
    return RpcBridge("editor", Tcp("127.0.0.1", peer.port), token="s3cret-token", **{**FAST, **kw})


def names(listing: dict[str, Any]) -> list[str]:
    return sorted(t["name"] for t in listing["tools"])


@pytest.mark.asyncio
async def test_the_first_tools_list_waits_for_the_first_sync(backend: Backend, wire: Any) -> None:
    server = Server("mirror")
    bridge = bridge_for(backend)
    mirror = server.mirror(bridge, first_sync_timeout=20)
    try:
        async with connect(server, wire) as h:
            pending = asyncio.ensure_future(h.request("tools/list", timeout=30))
            await asyncio.sleep(0.2)
            assert not pending.done()  # nothing to list yet: it waits rather than answer empty
            bridge.start()
            listing = await pending
            assert names(listing) == ["double", "greet"]
            assert mirror.synced.is_set()
            # the raw schema, exactly as published
            double = next(t for t in listing["tools"] if t["name"] == "double")
            assert double["inputSchema"] == backend.tools[0]["inputSchema"]
            result = await h.request("tools/call", {"name": "double", "arguments": {"x": 21}})
            assert result["content"] == [{"type": "text", "text": "42"}]
            result = await h.request("tools/call", {"name": "greet", "arguments": {"who": "ada"}})
            assert result["content"] == [{"type": "text", "text": "hello ada"}]
    finally:
        bridge.stop()


@pytest.mark.asyncio
async def test_without_a_backend_the_first_list_times_out_and_says_so_on_stderr(
        wire: Any, capsys: pytest.CaptureFixture[str]) -> None:
    server = Server("mirror")

    @server.tool
    def local() -> str:
        return "here"

    bridge = RpcBridge("Unity editor", Tcp("127.0.0.1", 9), **FAST)  # nothing listens on port 9
    server.mirror(bridge, first_sync_timeout=0.3)
    bridge.start()
    try:
        async with connect(server, wire) as h:
            listing = await h.request("tools/list")
            assert names(listing) == ["local"]
        err = capsys.readouterr().err
        assert "tools/list answered before the first sync with Unity editor" in err
    finally:
        bridge.stop()


@pytest.mark.req("TL-13", "JS-02")
@pytest.mark.asyncio
async def test_a_change_is_diffed_and_announced_once(backend: Backend, wire: Any) -> None:
    server = Server("mirror")
    bridge = bridge_for(backend)
    mirror = server.mirror(bridge)
    bridge.start()
    try:
        assert await bridge.wait_up(20)
        async with connect(server, wire) as h:
            assert names(await h.request("tools/list")) == ["double", "greet"]
            before = len(h.notifications_of(CHANGED))
            backend.tools = [
                tool("double", {"x": {"type": "integer"}, "times": {"type": "integer"}}),  # changed schema
                tool("spawn"),  # new
            ]  # greet removed
            backend.handlers["double"] = lambda a: a["x"] * a["times"]
            backend.notify("notifications/tools/list_changed")
            await h.eventually(lambda: mirror.tools == ["double", "spawn"])
            await h.wait_notification(CHANGED, before + 1)
            await asyncio.sleep(0.3)
            assert len(h.notifications_of(CHANGED)) == before + 1  # one, not one per tool
            listing = await h.request("tools/list")
            assert names(listing) == ["double", "spawn"]
            double = next(t for t in listing["tools"] if t["name"] == "double")
            assert set(double["inputSchema"]["properties"]) == {"x", "times"}
            result = await h.request("tools/call", {"name": "double", "arguments": {"x": 3, "times": 5}})
            assert result["content"][0]["text"] == "15"
            # the raw schema is enforced: the backend never sees a call it would not accept
            calls = sum(1 for m in backend.received if m.get("method") == "tools/call")
            bad = await h.request("tools/call", {"name": "double", "arguments": {"x": "three", "times": 5}})
            assert bad["isError"] is True
            assert sum(1 for m in backend.received if m.get("method") == "tools/call") == calls
            with pytest.raises(RpcError, match="Unknown tool"):
                await h.request("tools/call", {"name": "greet", "arguments": {"who": "x"}})
    finally:
        bridge.stop()


@pytest.mark.req("TL-13")
@pytest.mark.asyncio
async def test_a_client_that_connects_after_wait_up_gets_no_late_notification(
        backend: Backend, wire: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # The server hears of the bridge coming up on the bridge's thread, after whoever waited
    # subscribed; a slow thread (a loaded machine) must not let wait_up return first, or the
    # client below would get a list_changed for a change that happened before it connected.
    announce = Server._bridge_changed

    def slowly(self: Server, bridge: Any) -> None:
        threading.Event().wait(0.3)
        announce(self, bridge)

    monkeypatch.setattr(Server, "_bridge_changed", slowly)
    server = Server("mirror")
    bridge = bridge_for(backend)
    server.mirror(bridge)
    bridge.start()
    try:
        assert await bridge.wait_up(20)
        async with connect(server, wire) as h:
            assert names(await h.request("tools/list")) == ["double", "greet"]
            await asyncio.sleep(0.6)
            assert h.notifications_of(CHANGED) == []
    finally:
        bridge.stop()


@pytest.mark.asyncio
async def test_a_schema_version_bump_resyncs_without_a_notification(backend: Backend, wire: Any) -> None:
    server = Server("mirror")
    bridge = bridge_for(backend)
    mirror = server.mirror(bridge)
    bridge.start()
    try:
        assert await bridge.wait_up(20)
        async with connect(server, wire) as h:
            await h.request("tools/list")
            before = len(h.notifications_of(CHANGED))
            backend.tools = [*backend.tools, tool("build")]
            backend.schema_version = 2  # no notification: the probe notices
            await h.eventually(lambda: "build" in mirror.tools)
            await h.wait_notification(CHANGED, before + 1)
            assert bridge.schema_version == 2
            assert names(await h.request("tools/list")) == ["build", "double", "greet"]
    finally:
        bridge.stop()


@pytest.mark.req("TL-13")
@pytest.mark.asyncio
async def test_tools_hide_while_the_backend_is_away_and_return_with_one_notification(wire: Any) -> None:
    backend = Backend().start()
    port = backend.port
    backend.tools = [tool("double")]
    server = Server("mirror")
    bridge = RpcBridge("editor", Tcp("127.0.0.1", port), token="s3cret-token", **FAST)
    server.mirror(bridge)
    bridge.start()
    again = None
    try:
        assert await bridge.wait_up(20)
        async with connect(server, wire) as h:
            assert names(await h.request("tools/list")) == ["double"]
            n = len(h.notifications_of(CHANGED))
            backend.stop()
            await h.wait_notification(CHANGED, n + 1)
            assert names(await h.request("tools/list")) == []
            result = await h.request("tools/call", {"name": "double", "arguments": {"x": 1}})
            assert result["isError"] is True
            assert result["_meta"]["dev.mcpkit/error"]["code"] == E_NOT_CONNECTED
            again = Backend(port=port)
            again.tools = [tool("double")]  # published before it listens
            again.handlers["double"] = lambda a: a["x"] * 2
            again.start()
            await h.wait_notification(CHANGED, n + 2)
            assert names(await h.request("tools/list")) == ["double"]
            await asyncio.sleep(0.5)  # several probe rounds
            assert len(h.notifications_of(CHANGED)) == n + 2  # exactly one on return
            result = await h.request("tools/call", {"name": "double", "arguments": {"x": 4}})
            assert result["content"][0]["text"] == "8"
    finally:
        bridge.stop()
        if again is not None:
            again.stop()


@pytest.mark.asyncio
async def test_legacy_descriptors_are_adapted_and_resources_mirrored(backend: Backend, wire: Any) -> None:
    backend.tools = [{"name": "old_style", "params": {"n": {"type": "integer"}}},
                     {"name": "openai_style", "parameters": {"type": "object", "properties": {}}},
                     {"nameless": True}]
    # a URI with braces is no URI (RFC 3986): not a resource, but a template
    # (test_mirror_templates.py), the rest mirrored
    backend.resources = [{"uri": "unity://scene/active", "name": "active scene", "mimeType": "application/json"},
                         {"uri": "unity://scene/{name}", "name": "a template listed as a resource"}]
    backend.handlers["resources/read"] = lambda p: {"contents": [{"uri": p["uri"], "text": '{"name": "Main"}',
                                                                  "mimeType": "application/json"}]}
    server = Server("mirror")
    bridge = bridge_for(backend)
    server.mirror(bridge, prefix="unity_")
    bridge.start()
    try:
        assert await bridge.wait_up(20)
        async with connect(server, wire) as h:
            listing = await h.request("tools/list")
            assert names(listing) == ["unity_old_style", "unity_openai_style"]
            old = next(t for t in listing["tools"] if t["name"] == "unity_old_style")
            assert old["inputSchema"] == {"type": "object", "properties": {"n": {"type": "integer"}}}
            resources = await h.request("resources/list")
            assert [r["uri"] for r in resources["resources"]] == ["unity://scene/active"]
            read = await h.request("resources/read", {"uri": "unity://scene/active"})
            assert read["contents"][0]["text"] == '{"name": "Main"}'
    finally:
        bridge.stop()


@pytest.mark.req("CN-01")
@pytest.mark.asyncio
async def test_a_client_cancelling_a_mirrored_call_cancels_it_at_the_backend(backend: Backend, wire: Any) -> None:
    async def slow(arguments: dict[str, Any]) -> str:
        await asyncio.sleep(30)
        return "late"

    backend.tools = [tool("slow")]
    backend.handlers["slow"] = slow
    server = Server("mirror")
    bridge = bridge_for(backend)
    server.mirror(bridge)
    bridge.start()
    try:
        assert await bridge.wait_up(20)
        async with connect(server, wire) as h:
            rid, answer = h.send_request("tools/call", {"name": "slow", "arguments": {"x": 1}})
            await h.eventually(lambda: any(m.get("method") == "tools/call" for m in backend.received))
            backend_id = next(m["id"] for m in backend.received if m.get("method") == "tools/call")
            h.cancel(rid, "the user changed their mind")
            await h.eventually(lambda: backend_id in backend.cancelled)
            assert bridge.up  # a cancelled call is no link failure
            backend.handlers["slow"] = lambda a: "quick now"
            result = await h.request("tools/call", {"name": "slow", "arguments": {"x": 2}})
            assert result["content"][0]["text"] == "quick now"
            assert not answer.done()  # CN-01: no answer to the cancelled request
    finally:
        bridge.stop()


@pytest.mark.req("TL-13")
def test_batch_changes_sends_one_notification_per_kind() -> None:
    server = Server("batch")
    sent: list[str] = []

    class Session:
        def notify(self, method: str, params: Any = None) -> None:
            sent.append(method)

    server._sessions.add(Session())
    with server.batch_changes():
        for i in range(5):
            server.add_tool(f"t{i}", lambda a: "x", input_schema={"type": "object"})
        server.remove_tool("t0")
    assert sent == [CHANGED]
    with server.batch_changes(notify=False):
        server.remove_tool("t1")
    assert sent == [CHANGED]
    assert "t1" not in [t["name"] for t in server._items("tools", _latest())]


def test_nested_batches_announce_once_at_the_outer_end() -> None:
    server = Server("batch")
    sent: list[str] = []

    class Session:
        def notify(self, method: str, params: Any = None) -> None:
            sent.append(method)

    server._sessions.add(Session())
    with server.batch_changes():
        server.add_tool("a", lambda a: "x", input_schema={"type": "object"})
        with server.batch_changes():
            server.add_tool("b", lambda a: "x", input_schema={"type": "object"})
        assert sent == []
    assert sent == [CHANGED]


def test_a_list_built_while_the_registry_changed_is_not_cached() -> None:
    """A mirror registers tools from the bridge's thread while a client lists them: a list that
    saw only part of a change must not be served from the cache afterwards."""
    server = Server("race")
    server.add_tool("a", lambda a: "x", input_schema={"type": "object"})
    visible = server.tool_visible
    landed: list[str] = []

    def visible_while_another_thread_changes_things(tool: Any) -> bool:
        if not landed:
            landed.append("b")
            server.add_tool("b", lambda a: "x", input_schema={"type": "object"})  # lands mid-listing
        return visible(tool)

    server.tool_visible = visible_while_another_thread_changes_things  # type: ignore[method-assign]
    first = server._items("tools", _latest())
    assert [t["name"] for t in first] == ["a"]  # built before b existed
    assert [t["name"] for t in server._items("tools", _latest())] == ["a", "b"]  # not the stale list


def _latest() -> Any:
    from mcpkit.protocol.revisions import get

    return get("2025-11-25")


@contextlib.asynccontextmanager
async def mirrored(server: Server, backend: Backend) -> AsyncIterator[Any]:
    """``server`` mirroring ``backend`` through a started bridge, up; stopped after."""
    bridge = bridge_for(backend)
    mirror = server.mirror(bridge)
    bridge.start()
    try:
        assert await bridge.wait_up(20)
        yield mirror
    finally:
        bridge.stop()


async def resync_now(mirror: Any) -> bool:
    """One re-read on the bridge's loop, where every sync runs; its result."""
    future = asyncio.run_coroutine_threadsafe(mirror.resync(), mirror.bridge._ensure_loop())
    return await asyncio.wrap_future(future)


@pytest.mark.asyncio
async def test_a_mirror_never_replaces_nor_removes_what_the_server_or_another_mirror_registered(
        backend: Backend, wire: Any, caplog: Any) -> None:
    server = Server("mirror")

    @server.resource("unity://scene/active", name="local scene")
    def local_scene() -> str:
        return "local"

    @server.resource("unity://docs/{page}", name="local docs")
    def local_docs(page: str) -> str:
        return f"local {page}"

    @server.tool(read_only=True, open_world=False)
    def greet(who: str) -> str:
        return f"local hello {who}"

    other = Backend().start()  # a second editor, mirrored first, that lists the same names
    other.tools = [tool("double")]
    other.resources = [{"uri": "unity://shared", "name": "other's"}]
    other.handlers["resources/read"] = lambda p: {"contents": [{"uri": p["uri"], "text": "other"}]}
    backend.resources = [{"uri": "unity://scene/active", "name": "hijack"},
                         {"uri": "unity://docs/intro", "name": "hijack a template's"},
                         {"uri": "unity://shared", "name": "hijack the other mirror's"},
                         {"uri": "unity://editor/log", "name": "the editor's own"}]
    backend.handlers["resources/read"] = lambda p: {"contents": [{"uri": p["uri"], "text": "hijacked"}]}
    first = bridge_for(other)
    server.mirror(first)
    first.start()
    bridge = bridge_for(backend)
    mirror = server.mirror(bridge)
    try:
        assert await first.wait_up(20)
        bridge.start()
        assert await bridge.wait_up(20)
        async with connect(server, wire) as h:
            async def text(uri: str) -> str:
                return (await h.request("resources/read", {"uri": uri}))["contents"][0]["text"]

            assert mirror.tools == []  # greet is the server's, double the other mirror's
            assert await text("unity://scene/active") == "local"
            assert await text("unity://docs/intro") == "local intro"
            assert await text("unity://shared") == "other"
            assert await text("unity://editor/log") == "hijacked"  # a URI nobody else serves
            call = await h.request("tools/call", {"name": "greet", "arguments": {"who": "x"}})
            assert call["content"][0]["text"] == "local hello x"
            # the editor drops them all: what it never owned stays
            backend.tools, backend.resources = [], []
            assert await resync_now(mirror)
            listed = sorted(r["uri"] for r in (await h.request("resources/list"))["resources"])
            assert listed == ["unity://scene/active", "unity://shared"]
            assert sorted(t["name"] for t in (await h.request("tools/list"))["tools"]) == ["double", "greet"]
            assert await text("unity://scene/active") == "local"
            assert await text("unity://shared") == "other"
        warned = " ".join(r.getMessage() for r in caplog.records)
        assert "'unity://scene/active' is also served locally" in warned
        assert "'unity://docs/intro' is also served locally" in warned
    finally:
        bridge.stop()
        first.stop()
        other.stop()


@pytest.mark.asyncio
async def test_a_name_the_server_takes_back_is_not_removed_by_the_mirror(backend: Backend, wire: Any) -> None:
    server = Server("mirror")
    async with mirrored(server, backend) as mirror:
        assert mirror.tools == ["double", "greet"]

        def local(arguments: dict[str, Any]) -> str:
            return "mine"

        server.add_tool("greet", local, input_schema={"type": "object"}, replace=True)  # the server's own now
        backend.tools = [tool("double")]
        assert await resync_now(mirror)
        assert mirror.tools == ["double"]
        async with connect(server, wire) as h:
            call = await h.request("tools/call", {"name": "greet", "arguments": {}})
            assert call["content"][0]["text"] == "mine"


@pytest.mark.asyncio
async def test_a_burst_of_list_changed_costs_a_few_re_reads_not_one_each(backend: Backend, wire: Any) -> None:
    server = Server("mirror")
    async with mirrored(server, backend) as mirror:
        def lists() -> int:
            return sum(1 for m in backend.received if m.get("method") == "tools/list")

        seen = asyncio.Event()
        loop = asyncio.get_running_loop()
        mirror.bridge.on_notification(
            lambda method, params: loop.call_soon_threadsafe(seen.set) if method == "ping/marker" else None)
        before = lists()
        backend.tools = [tool("double"), tool("spawn")]
        for _ in range(3000):
            backend.notify("notifications/tools/list_changed")
        backend.notify("ping/marker")  # sent after the burst: once it is seen, the burst was read
        await asyncio.wait_for(seen.wait(), 30)
        # the last change is applied: the re-read after the burst saw it
        async with connect(server, wire) as h:
            await h.eventually(lambda: mirror.tools == ["double", "spawn"])
        # one more re-read waits (the sync lock is fair) behind every one the burst started
        assert await resync_now(mirror)
        burst = lists() - before - 1
        assert 1 <= burst <= 50, burst  # one in flight plus one pending per gap, not 3,000
