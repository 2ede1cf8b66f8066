"""The server the scale-out tests run in two processes on one Redis (MCPKIT_STORE)."""

from __future__ import annotations

import asyncio

from mcpkit import Context, Server

server = Server("scaleout", "1.0.0")


@server.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(rate_limit="3/min")
def scarce() -> str:
    """A tool anybody may call three times a minute, whichever process answers."""
    return "ok"


@server.tool(rate_limit="3/h")
def rationed() -> str:
    """A tool anybody may call three times an hour: a budget that does not refill during a test."""
    return "ok"


@server.tool
async def count(steps: int, ctx: Context) -> str:
    """Reports progress once per step."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
        await asyncio.sleep(0.05)
    return f"counted {steps}"


@server.resource("note://shared", mime_type="text/plain")
def note() -> str:
    return "a shared note"


@server.resource("note://other", mime_type="text/plain")
def other_note() -> str:
    return "another shared note"


@server.tool
def touch(uri: str) -> str:
    """Announce that a resource changed (its subscribers hear it, on any process)."""
    server.notify_resource_updated(uri)
    return f"touched {uri}"


@server.tool(task="optional")
async def job(seconds: float) -> str:
    """A job that can run as a task (tasks extension)."""
    await asyncio.sleep(seconds)
    return f"done after {seconds} s"


@server.tool(task="required")
def job_sync(seconds: float, ctx: Context) -> str:
    """A sync job, run as a task on a worker thread; it stops early when its task ends."""
    ctx.cancelled.wait(seconds)
    return f"done after {seconds} s"


@server.tool(task="required", task_after_input=True)
async def job_after_input(seconds: float, ctx: Context) -> str:
    """A job that becomes a task when it says so (ctx.start_task)."""
    await ctx.start_task()
    await asyncio.sleep(seconds)
    return f"done after {seconds} s"


@server.tool(task="required", rate_limit="1000/min")
async def job_limited(seconds: float) -> str:
    """A job under a rate limit: its whole pipeline runs as the task."""
    await asyncio.sleep(seconds)
    return f"done after {seconds} s"


@server.tool
def whoami() -> int:
    """The id of the process that answered: which backend a balancer chose."""
    import os

    return os.getpid()


@server.tool
def grow(name: str) -> str:
    """Add a tool, a resource and a resource template in one batch of changes: every process's
    clients hear one list_changed per list."""
    with server.batch_changes():
        server.add_tool(f"grown_{name}", lambda: name, input_schema={"type": "object"})
        server.add_resource(f"grown://{name}", lambda: name, name=name)
        server.resource_template(f"grown://{name}/{{part}}")(lambda part: part)
    return f"grew {name}"
