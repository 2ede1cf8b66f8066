"""Serving on each event loop users run: asyncio, and uvloop (``mcpkit[fast]``, ``uvicorn[standard]``).

A hand-off between a handler and the loop must ask the running loop which thread it is on, never
read asyncio's private ``_thread_id``: uvloop's loop has none, so a session took its own loop
thread for another thread and waited on the loop from the loop itself. The first server request
(sampling, elicitation) then wedged the whole HTTP server for good."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.server.session import ServerSession, on_loop_thread
from tests.conftest import component_missing
from tests.test_http import start_server, stop_server

SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m", "stopReason": "endTurn"}
ELICITED = {"action": "accept", "content": {"username": "u", "email": "u@example.com"}}


def _new_loop(kind: str) -> Callable[[], asyncio.AbstractEventLoop]:
    if kind == "uvloop":
        try:
            import uvloop
        except ImportError:
            component_missing("uvloop is not installed: pip install -e '.[dev]' installs it")
        return uvloop.new_event_loop
    return asyncio.new_event_loop


@pytest.fixture(params=["asyncio", "uvloop"])
def running_loop(request: pytest.FixtureRequest) -> Iterator[asyncio.AbstractEventLoop]:
    loop = _new_loop(request.param)()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_a_session_knows_the_thread_of_its_loop_on_every_loop(running_loop: asyncio.AbstractEventLoop) -> None:
    session = ServerSession(Server("loops"), lambda messages: None, running_loop)

    async def asked_on_the_loop() -> tuple[bool, bool]:
        return session._on_loop_thread(), on_loop_thread(running_loop)

    assert asyncio.run_coroutine_threadsafe(asked_on_the_loop(), running_loop).result(5) == (True, True)
    assert not session._on_loop_thread() and not on_loop_thread(running_loop)  # this thread runs no loop
    other = asyncio.new_event_loop()
    try:  # a thread running another loop is not this loop's thread either
        assert other.run_until_complete(asked_on_the_loop()) == (False, False)
    finally:
        other.close()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_server_requests_over_http_answer_and_the_server_serves_on(loop: str) -> None:
    from mcpkit.client import Client

    _new_loop(loop)
    proc, port = start_server("--loop", loop)

    async def session() -> list[Any]:
        async with Client(f"http://127.0.0.1:{port}/mcp", sampling_handler=lambda p: SAMPLED,
                          elicitation_handler=lambda p: ELICITED) as client:
            sampled = await asyncio.wait_for(client.call_tool("test_sampling", {"prompt": "?"}), 15)
            elicited = await asyncio.wait_for(client.call_tool("test_elicitation", {"message": "who"}), 15)
            pong = await asyncio.wait_for(client.ping(), 15)
            return [sampled["content"][0]["text"], elicited["content"][0]["text"][:28], pong]

    try:
        assert asyncio.run(session()) == ["LLM response: Paris", "User response: <action: acce", {}]
    finally:
        stderr = stop_server(proc)
    assert "Traceback" not in stderr, stderr


def test_a_loop_that_is_not_installed_or_not_known_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpkit._extras import MissingExtra
    from mcpkit.switches import SwitchError
    from mcpkit.transports.serve import event_loop

    monkeypatch.setenv("MCPKIT_LOOP", "trio")
    with pytest.raises(SwitchError, match=r"^MCPKIT_LOOP='trio' is not an event loop: use auto, asyncio or uvloop$"):
        event_loop()
    assert event_loop("asyncio") == "asyncio"  # the option wins over the variable
    monkeypatch.delenv("MCPKIT_LOOP")
    assert event_loop() == "auto"
    monkeypatch.setitem(__import__("sys").modules, "uvloop", None)  # as if not installed
    with pytest.raises(MissingExtra, match=r"--loop uvloop needs uvloop.*pip install 'mcpkit\[fast\]'"):
        event_loop("uvloop")


def test_the_command_refuses_a_bad_loop_before_serving_in_one_line(tmp_path) -> None:
    import os
    import subprocess
    import sys

    for argv, env, said in (
        (["serve", "--http", "127.0.0.1:0"], {"MCPKIT_LOOP": "trio"}, "MCPKIT_LOOP='trio' is not an event loop"),
        (["serve", "--loop", "uvloop"], {}, "--loop applies to HTTP only; add --http HOST:PORT or drop --loop"),
    ):
        done = subprocess.run([sys.executable, "-m", "mcpkit", *argv], capture_output=True, text=True, timeout=60,
                              env={**os.environ, **env}, stdin=subprocess.DEVNULL, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and said in done.stderr, done.stderr


@pytest.mark.asyncio
async def test_a_handler_logging_in_a_loop_lets_the_loop_serve_others(wire) -> None:
    """``await ctx.info(...)`` gives the loop a turn: a handler logging in a tight loop starved
    every other request (a ping waited for the whole loop), and a shutdown could not cancel it."""
    from mcpkit import Context
    from tests.harness import connect

    server = Server("loops")

    @server.tool
    async def chatter(n: int, ctx: Context) -> str:
        for i in range(n):
            await ctx.info(f"line {i}")
            await ctx.report_progress(i, n)
        return "done"

    async with connect(server, wire) as h:
        chat = asyncio.ensure_future(h.request("tools/call", {"name": "chatter", "arguments": {"n": 2000}}))
        for _ in range(3):
            await asyncio.sleep(0)
        assert await h.request("ping") == {}
        assert not chat.done()  # answered while the chatter still ran
        assert (await chat)["content"] == [{"type": "text", "text": "done"}]
