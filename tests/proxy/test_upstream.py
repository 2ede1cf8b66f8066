"""``Server.proxy`` and upstreams reached over stdio and HTTP: mirrored, kept in step, hidden while
down and back after, and several upstreams side by side."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.client import Client
from mcpkit.proxy import Upstream, upstreams_of

aio = pytest.mark.asyncio
SERVE = [sys.executable, "-m", "mcpkit", "serve"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_http(port: int) -> subprocess.Popen[bytes]:
    """``mcpkit serve --http 127.0.0.1:PORT``, once it listens."""
    proc = subprocess.Popen([*SERVE, "--http", f"127.0.0.1:{port}"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mcpkit serve exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("mcpkit serve did not listen in time")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)


async def until(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


def close_all(server: Server) -> None:
    for upstream in upstreams_of(server):
        upstream.close()


@aio
async def test_proxy_of_a_stdio_server_mirrors_it_under_its_own_name() -> None:
    proxy = Server.proxy(SERVE)
    try:
        assert proxy.name == "mcpkit-reference"
        async with Client(proxy) as client:
            names = {t["name"] for t in await client.list_tools()}
            assert {"add", "echo", "countdown", "test_sampling"} <= names
            result = await client.call_tool("add", {"a": 2, "b": 3})
            assert result["structuredContent"] == {"result": 5}
            progress: list[tuple[Any, ...]] = []
            done = await client.call_tool("countdown", {"seconds": 2}, progress=lambda *p: progress.append(p))
            assert done["content"][0]["text"] == "Lift-off"
            assert [p[0] for p in progress] == [0, 1]
            prompts = {p["name"] for p in await client.list_prompts()}
            assert "test_simple_prompt" in prompts
            assert (await client.read_resource("test://static-text"))["contents"][0]["text"]
    finally:
        close_all(proxy)


@aio
async def test_an_upstream_that_dies_is_hidden_and_comes_back() -> None:
    port = free_port()
    upstream_proc = start_http(port)
    proxy = Server.proxy(f"http://127.0.0.1:{port}/mcp", probe_interval=0.2, prefix="ref")
    upstream = upstreams_of(proxy)[0]
    try:
        async with Client(proxy) as client:
            assert "ref_add" in {t["name"] for t in await client.list_tools()}
            assert (await client.call_tool("ref_add", {"a": 1, "b": 1}))["structuredContent"] == {"result": 2}
            assert await client.list_prompts()

            client.notifications.clear()
            stop(upstream_proc)
            # the bridge notices, hides the tools and says so (list_changed)
            await until(lambda: not upstream.up and any(
                n["method"] == "notifications/tools/list_changed" for n in client.notifications))
            assert await client.list_tools() == []  # hidden while down...
            refused = await client.call_tool("ref_add", {"a": 1, "b": 1})  # ...and refused by name
            assert refused.get("isError") is True and "retry" in refused["content"][0]["text"].lower()
            assert await client.list_prompts() == [] and await client.list_resources() == []

            upstream_proc = start_http(port)
            await until(lambda: upstream.up)
            assert "ref_add" in {t["name"] for t in await client.list_tools()}
            assert (await client.call_tool("ref_add", {"a": 2, "b": 2}))["structuredContent"] == {"result": 4}
            assert await client.list_prompts()
    finally:
        close_all(proxy)
        stop(upstream_proc)


@aio
async def test_a_session_opened_while_every_upstream_is_down_gets_the_tools_when_one_comes_back() -> None:
    # an aggregate whose upstreams were all down when its client connected declared no tools,
    # prompts or resources, and that session was held to it: tools/list answered -32601 for ever,
    # though the upstream came back (mcpkit proxy started by a host before its upstream was up)
    port = free_port()
    aggregate = Server("aggregate")
    upstream = aggregate.mount(f"http://127.0.0.1:{port}/mcp", prefix="ref", probe_interval=0.2)
    upstream_proc = None
    try:
        assert not upstream.up
        async with Client(aggregate) as client:
            assert {"tools", "resources", "prompts"} <= set(client.server_capabilities)
            assert await client.list_tools() == []
            upstream_proc = start_http(port)
            await until(lambda: upstream.up)
            assert "ref_add" in {t["name"] for t in await client.list_tools()}
            assert (await client.call_tool("ref_add", {"a": 2, "b": 2}))["structuredContent"] == {"result": 4}
    finally:
        close_all(aggregate)
        if upstream_proc is not None:
            stop(upstream_proc)


@aio
async def test_a_killed_stdio_upstream_is_started_again() -> None:
    proxy = Server.proxy(SERVE, probe_interval=0.2)
    upstream = upstreams_of(proxy)[0]
    try:
        first = upstream._client.transport.proc.pid  # type: ignore[union-attr]
        os.kill(first, signal.SIGKILL)
        await until(lambda: upstream.up and upstream._client is not None
                    and upstream._client.transport.proc.pid != first)
        async with Client(proxy) as client:
            assert (await client.call_tool("echo", {"text": "again"}))["content"][0]["text"] == "again"
    finally:
        close_all(proxy)


@aio
async def test_one_failing_upstream_does_not_take_the_others_down() -> None:
    from tests.proxy.test_compose import weather

    aggregate = Server("aggregate")
    good = aggregate.mount(weather(), prefix="weather")
    bad = aggregate.mount([sys.executable, "-c", "import sys; sys.exit(3)"], prefix="broken", probe_interval=0.2)
    try:
        assert good.up and not bad.up
        assert "broken" in (bad.last_error or "") and "exited" in (bad.last_error or "")
        async with Client(aggregate) as client:
            assert [t["name"] for t in await client.list_tools()] == ["weather_forecast"]
            result = await client.call_tool("weather_forecast", {"city": "Oslo"})
            assert result["content"][0]["text"] == "sunny in Oslo"
    finally:
        close_all(aggregate)


@aio
async def test_two_upstreams_are_aggregated_under_their_prefixes() -> None:
    from tests.proxy.test_compose import weather

    aggregate = Server("aggregate")
    aggregate.mount(weather(), prefix="weather")
    aggregate.mount(SERVE, prefix="ref")
    try:
        async with Client(aggregate) as client:
            names = {t["name"] for t in await client.list_tools()}
            assert {"weather_forecast", "ref_add", "ref_echo"} <= names
            uris = {r["uri"] for r in await client.list_resources()}
            assert {"weather://weather/current", "test://ref/static-text"} <= uris
            read = await client.read_resource("test://ref/static-text")
            assert read["contents"][0]["uri"] == "test://ref/static-text"
            assert (await client.call_tool("ref_echo", {"text": "x"}))["content"][0]["text"] == "x"
    finally:
        close_all(aggregate)


def test_a_given_client_is_used_as_is_and_not_reconnected() -> None:
    from tests.proxy.test_compose import weather

    parent = Server("parent")
    upstream = parent.mount(Client(weather()), prefix="w")
    try:
        assert isinstance(upstream, Upstream) and upstream.up and not upstream.reconnects
        assert "w_forecast" in parent.tools
    finally:
        upstream.close()
    assert "w_forecast" not in parent.tools


SAMPLER = '''
import asyncio
from mcpkit import Context, Server

server = Server("sampler")


@server.tool
async def later_sample(delay: float, ctx: Context) -> str:
    """Waits, then asks its client to sample."""
    await asyncio.sleep(delay)
    await ctx.info("a log line of the sampling call")
    try:
        answer = await ctx.sample("what only the first client may see", max_tokens=5)
    except Exception as exc:
        return f"refused: {exc}"
    return "sampled: " + answer["content"]["text"]


@server.tool
async def hold(seconds: float) -> str:
    """Stays in flight for a while."""
    await asyncio.sleep(seconds)
    return "held"
'''


@aio
async def test_a_stdio_upstreams_sampling_is_never_guessed_across_clients(tmp_path: Any) -> None:
    """Over stdio nothing says which downstream call an upstream's request is for: with one
    client's calls in flight it goes to that client; with several clients' it is refused, and
    the log line of the call reaches neither client, rather than another client's."""
    script = tmp_path / "sampler.py"
    script.write_text(SAMPLER)
    proxy = Server.proxy([*SERVE, str(script)])
    asked: dict[str, list[Any]] = {"a": [], "b": []}
    logs: dict[str, list[Any]] = {"a": [], "b": []}

    def client(who: str) -> Client:
        async def sample(params: dict[str, Any]) -> dict[str, Any]:
            asked[who].append(params)
            return {"role": "assistant", "content": {"type": "text", "text": f"hi {who}"}, "model": "m"}

        return Client(proxy, sampling_handler=sample, on_log=lambda entry: logs[who].append(entry["data"]))

    try:
        async with client("a") as a, client("b") as b:
            await a.set_log_level("info")
            await b.set_log_level("info")
            # one client: its own call, or its newest one, is the one asked
            alone = await a.call_tool("later_sample", {"delay": 0})
            assert alone["content"][0]["text"] == "sampled: hi a" and len(asked["a"]) == 1
            logs["a"].clear()
            # a's call samples while b's call through the same upstream is newer
            first = asyncio.ensure_future(a.call_tool("later_sample", {"delay": 1.0}))
            await asyncio.sleep(0.3)
            second = asyncio.ensure_future(b.call_tool("hold", {"seconds": 2.5}))
            result, held = await asyncio.gather(first, second)
            text = result["content"][0]["text"]
            assert text.startswith("refused:") and "several clients" in text, text
            assert held["content"][0]["text"] == "held"
            assert asked == {"a": [asked["a"][0]], "b": []}  # b was never shown a's question
            assert logs["b"] == [] and logs["a"] == []
    finally:
        close_all(proxy)


@aio
async def test_a_template_an_upstream_lists_among_its_resources_is_mirrored_as_a_template() -> None:
    from pathlib import Path

    parent = Server("parent")
    parent.mount([sys.executable, str(Path(__file__).parent / "servers" / "bracedresource.py")], prefix="old")
    try:
        async with Client(parent) as client:
            assert [r["uri"] for r in await client.list_resources()] == ["log://old/console/latest"]
            templates = await client.list_resource_templates()
            assert [(t["uriTemplate"], t["name"]) for t in templates] == [("log://old/console/{count}", "console log")]
            read = await client.read_resource("log://old/console/20")
            assert read["contents"][0]["text"] == "lines of log://console/20"
    finally:
        close_all(parent)
