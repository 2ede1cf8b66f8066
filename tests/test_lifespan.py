"""Server(lifespan=...): set up before the first request, torn down after the last, once however
many transports serve the server; its value is ctx.lifespan_context (server/lifespan.py)."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, Context, Server


def tracked() -> tuple[Server, list[str]]:
    events: list[str] = []

    @asynccontextmanager
    async def lifespan(server: Server):
        events.append(f"enter {server.name}")
        yield {"db": "connected"}
        events.append("exit")

    server = Server("tracked", lifespan=lifespan)

    @server.tool
    def sync_db(ctx: Context) -> str:
        return ctx.lifespan_context["db"]

    @server.tool
    async def async_db(ctx: Context) -> str:
        return ctx.lifespan_context["db"]

    return server, events


def text(result: dict[str, Any]) -> str:
    return result["content"][0]["text"]


@pytest.mark.asyncio
async def test_in_memory_clients_share_one_setup_and_the_last_to_close_tears_it_down():
    server, events = tracked()
    assert events == []  # nothing runs at construction
    async with Client(server) as first:
        assert events == ["enter tracked"]
        assert text(await first.call_tool("sync_db")) == "connected"
        assert text(await first.call_tool("async_db")) == "connected"
        async with Client(server) as second:
            assert text(await second.call_tool("sync_db")) == "connected"
        assert events == ["enter tracked"]  # the first still holds it
    assert events == ["enter tracked", "exit"]
    assert server.lifespan.state is None
    async with Client(server) as again:  # a later connection sets up anew
        assert text(await again.call_tool("async_db")) == "connected"
    assert events == ["enter tracked", "exit", "enter tracked", "exit"]


@pytest.mark.asyncio
async def test_without_a_lifespan_the_context_has_none():
    server = Server("plain")

    @server.tool
    def state(ctx: Context) -> str:
        return repr(ctx.lifespan_context)

    async with Client(server) as client:
        assert text(await client.call_tool("state")) == "None"


@pytest.mark.asyncio
async def test_a_failing_setup_fails_the_connection_and_the_next_one_tries_again():
    attempts: list[int] = []

    @asynccontextmanager
    async def lifespan(server: Server):
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("database unreachable")
        yield "up"

    server = Server("flaky", lifespan=lifespan)

    @server.tool
    def state(ctx: Context) -> str:
        return ctx.lifespan_context

    with pytest.raises(ConnectionError, match="database unreachable"):
        async with Client(server):
            pass
    async with Client(server) as client:
        assert text(await client.call_tool("state")) == "up"
    assert len(attempts) == 2


@pytest.mark.asyncio
async def test_a_lifespan_that_is_no_async_context_manager_is_named_with_the_fix():
    async def lifespan(server: Server):  # the decorator forgotten
        yield {}

    server = Server("undecorated", lifespan=lifespan)
    with pytest.raises(TypeError) as err:
        async with Client(server):
            pass
    assert str(err.value).endswith("returned async_generator, not an async context manager: decorate it with "
                                   "contextlib.asynccontextmanager and yield once")
    with pytest.raises(TypeError, match=r"^lifespan= takes a function of the server returning an async context "
                                        r"manager \(an @asynccontextmanager function\), not dict$"):
        Server("wrong", lifespan={})


async def asgi_lifespan(app: Any) -> list[dict[str, Any]]:
    """Drive ``app`` through an ASGI lifespan, startup then shutdown, as uvicorn does."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    sent: list[dict[str, Any]] = []
    await inbox.put({"type": "lifespan.startup"})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "lifespan.startup.complete":
            await inbox.put({"type": "lifespan.shutdown"})

    await asyncio.wait_for(app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send), 10)
    return sent


@pytest.mark.asyncio
async def test_the_http_app_sets_up_at_asgi_startup_and_tears_down_at_shutdown():
    server, events = tracked()
    sent = await asgi_lifespan(server.http_app())
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert events == ["enter tracked", "exit"]

    @asynccontextmanager
    async def broken(server: Server):
        raise ConnectionError("database unreachable")
        yield

    sent = await asgi_lifespan(Server("broken", lifespan=broken).http_app())
    assert sent == [{"type": "lifespan.startup.failed", "message": "lifespan setup failed: database unreachable"}]


@pytest.mark.asyncio
async def test_stdio_sets_up_before_serving_and_tears_down_after_the_client_leaves(tmp_path: Path):
    log = tmp_path / "events.txt"
    script = tmp_path / "server.py"
    script.write_text(textwrap.dedent(f"""
        from contextlib import asynccontextmanager
        from mcpkit import Server

        @asynccontextmanager
        async def lifespan(server):
            with open({str(log)!r}, "a") as f:
                f.write("enter\\n")
            yield {{"db": "connected"}}
            with open({str(log)!r}, "a") as f:
                f.write("exit\\n")

        async def async_db(arguments, ctx):  # run on the loop; the sync one on the reader thread
            return ctx.lifespan_context["db"]

        server = Server("stdio", lifespan=lifespan)
        server.add_tool("sync_db", lambda arguments, ctx: ctx.lifespan_context["db"], input_schema={{"type": "object"}})
        server.add_tool("async_db", async_db, input_schema={{"type": "object"}})
        server.run()
    """))
    async with Client([sys.executable, str(script)], inherit_env=["PYTHONPATH"]) as client:
        assert log.read_text() == "enter\n"
        assert text(await client.call_tool("sync_db")) == "connected"
        assert text(await client.call_tool("async_db")) == "connected"
    assert client.returncode == 0
    assert log.read_text() == "enter\nexit\n"
