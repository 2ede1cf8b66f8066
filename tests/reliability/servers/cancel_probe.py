"""A probe server for the reliability tests: tools whose start and end can be seen from outside.

Serve it with ``mcpkit serve tests/reliability/servers/cancel_probe.py`` (stdio) or with
``--http 127.0.0.1:PORT``. Markers go to the directory named by the environment variable
``CANCEL_PROBE_DIR`` (no markers when it is unset):

* ``hold(tag, seconds)`` (async) writes ``<tag>.started`` when it starts, reports progress every
  0.1 s, and writes ``<tag>.finally`` from its ``finally`` block, holding ``cancelled`` when the
  task was cancelled and ``completed`` when it ran to its end.
* ``add(a, b)`` (sync) answers at once, as the reference server's ``add`` does.
* ``touch(tag)`` (sync) writes ``<tag>.ran``: whether a request was executed at all.
* ``block(seconds, tag="")`` (sync) blocks a worker thread (with a tag: ``<tag>.started`` first).
* ``blob(size)`` (sync) answers ``size`` characters: a small request, a large answer.
* ``chatter(count, size)`` (async) sends ``count`` log messages of ``size`` characters on the request.
* ``flood(count)`` (sync) sends ``count`` notifications/resources/updated for ``probe://feed`` to
  the sessions subscribed to it.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Annotated

from mcpkit import Context, Server

server = Server("cancel-probe", "1.0")
FEED = "probe://feed"


def _mark(tag: str, suffix: str, text: str) -> None:
    directory = os.environ.get("CANCEL_PROBE_DIR")
    if not directory:
        return
    path = os.path.join(directory, f"{tag}.{suffix}")
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)  # a reader never sees a half-written marker


@server.tool
async def hold(
    tag: Annotated[str, "Names the marker files"],
    seconds: Annotated[float, "How long to run"],
    ctx: Context,
) -> str:
    """Runs for a while with progress; its finally block leaves a marker saying how it ended."""
    outcome = "failed"
    _mark(tag, "started", "")
    try:
        steps = max(1, int(seconds * 10))
        for n in range(steps):
            await ctx.report_progress(n, steps, f"step {n}")
            await asyncio.sleep(0.1)
        outcome = "completed"
        return f"held {tag}"
    except asyncio.CancelledError:
        outcome = "cancelled"
        raise
    finally:
        _mark(tag, "finally", outcome)


@server.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool
def touch(tag: Annotated[str, "Names the marker file"]) -> str:
    """Leaves a marker: proof that the request was executed."""
    _mark(tag, "ran", "")
    return f"touched {tag}"


@server.tool
def block(seconds: Annotated[float, "How long to block (at most 60 s)"],
          tag: Annotated[str, "Names the marker written when it starts"] = "") -> str:
    """Blocks its thread (a sync tool)."""
    if tag:
        _mark(tag, "started", "")
    time.sleep(max(0.0, min(seconds, 60.0)))
    return f"blocked {seconds} s"


@server.tool
def blob(size: Annotated[int, "Characters in the answer"]) -> str:
    """A large answer to a small request."""
    return "b" * size


@server.tool
async def chatter(count: Annotated[int, "How many log messages"], size: Annotated[int, "Characters in each"],
                  ctx: Context) -> int:
    """Sends many log messages (warning level) related to this request."""
    filler = "x" * size
    for n in range(count):
        await ctx.warning({"n": n, "filler": filler})
        if n % 100 == 99:
            await asyncio.sleep(0)
    return count


@server.tool
def flood(count: Annotated[int, "How many notifications"]) -> int:
    """Sends notifications/resources/updated for probe://feed, count times."""
    for _ in range(count):
        server.notify_resource_updated(FEED)
    return count


@server.resource(FEED, name="feed", description="Changes whenever flood is called", mime_type="text/plain")
def feed() -> str:
    return "feed"
