"""A task whose process dies does not say ``working`` for ever: two ``mcpkit serve --http``
processes on one Redis, tasks started on A (one per route that creates tasks), and A killed
(SIGKILL: its lease expires, B fails them) or stopped (SIGTERM: A settles them itself)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.scaleout.test_two_processes import MODERN, modern, post_modern, processes

#: a tool per route that creates a task: the plain path (async, and sync on a worker), a task
#: started by the handler itself (task_after_input), and a pipeline run as the task (rate limit)
JOBS = ("job", "job_sync", "job_after_input", "job_limited")
#: the default lease is 5 s: a killed process's tasks must read failed well within this
DEADLINE = 15.0


@pytest.fixture
def two(redis_url: str) -> Iterator[list[Any]]:
    """Two processes of app.py on one Redis (the default lease), for one test: it stops one."""
    with processes(redis_url) as started:
        yield started


async def start_jobs(clients: Any, port: int) -> dict[str, str]:
    client = clients.tcp(port)
    client.revision = MODERN
    tasks = {}
    for rid, name in enumerate(JOBS, 1):
        created = await post_modern(client, modern("tools/call", {"name": name, "arguments": {"seconds": 120}}, rid))
        assert created["result"]["resultType"] == "task", created
        tasks[name] = created["result"]["taskId"]
    return tasks


async def status(client: Any, task_id: str, rid: int) -> dict[str, Any]:
    answer = await post_modern(client, modern("tasks/get", {"taskId": task_id}, rid))
    return answer["result"]


@pytest.mark.reliability
@pytest.mark.asyncio
async def test_the_tasks_of_a_killed_process_fail_on_the_other_within_seconds(two, clients):
    (a, a_port), (_, b_port) = two
    tasks = await start_jobs(clients, a_port)
    b = clients.tcp(b_port)
    b.revision = MODERN
    for name, task_id in tasks.items():
        assert (await status(b, task_id, 10))["status"] == "working", name
    a.send_signal(signal.SIGKILL)
    a.wait(10)
    killed = time.monotonic()
    final: dict[str, dict[str, Any]] = {}
    rid = 100
    while len(final) < len(tasks):
        assert time.monotonic() - killed < DEADLINE, \
            f"still working {DEADLINE} s after SIGKILL: {sorted(set(tasks) - set(final))}"
        for name, task_id in tasks.items():
            if name in final:
                continue
            rid += 1
            task = await status(b, task_id, rid)
            if task["status"] != "working":
                final[name] = task
        await asyncio.sleep(0.2)
    for name, task in final.items():
        assert task["status"] == "failed", (name, task)
        assert task["error"]["data"] == {"code": "E_INTERRUPTED", "retryable": True,
                                         "suggestedFix": "Call the tool again."}, name
        assert "stopped before the task finished" in task["error"]["message"], name
    for _ in range(3):  # a final state: never working again
        for name, task_id in tasks.items():
            rid += 1
            assert (await status(b, task_id, rid))["status"] == "failed", name


@pytest.mark.reliability
@pytest.mark.asyncio
async def test_a_process_stopped_with_sigterm_settles_its_tasks_itself(two, clients):
    (a, a_port), (_, b_port) = two
    tasks = await start_jobs(clients, a_port)
    a.send_signal(signal.SIGTERM)
    assert a.wait(15) in (0, -signal.SIGTERM)
    b = clients.tcp(b_port)
    b.revision = MODERN
    for rid, (name, task_id) in enumerate(tasks.items(), 10):
        # at once, with no lease to wait for: A failed them on its way out
        task = await status(b, task_id, rid)
        assert task["status"] == "failed", (name, task)
        assert "shut down before the task finished" in task["error"]["message"], name
        assert task["error"]["data"]["retryable"] is True
