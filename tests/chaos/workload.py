"""What the clients of a deployment do while a fault happens (tests/chaos/harness.py says what
each promise is), and the checks once it is over."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tests.chaos.harness import ANSWER_WITHIN, SETTLE_WITHIN, Client, Deployment, Tally

MODERN = "2026-07-28"
_TASKS_META = {"io.modelcontextprotocol/protocolVersion": MODERN,
               "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
#: one loopback address per client: the balancer tells the processes which one sent a request
CALLERS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
ENDER, SUBSCRIBER, PUBLISHER, TASKER, QUOTA, QUOTA_OTHER = (
    "127.0.0.5", "127.0.0.6", "127.0.0.7", "127.0.0.8", "127.0.0.9", "127.0.0.10")


class Workload:
    """The clients of one deployment. ``lossy``: the fault loses the store's data (a Redis
    restarted without persistence), so sessions may end (404 on every process alike, HL-17),
    tasks be forgotten and rate limits start again; nothing else is allowed to differ."""

    def __init__(self, deployment: Deployment, wire: Any, *, lossy: bool = False) -> None:
        self.deployment = deployment
        self.wire = wire
        self.lossy = lossy
        self.tally = Tally()
        self.running = True
        self.callers: list[Client] = []
        self.first_sessions: list[tuple[Client, str]] = []  # (client, the session it opened first)
        self.ended: list[tuple[Client, str, float]] = []  # sessions whose DELETE said 200, and when
        self.tasks: list[str] = []
        self.published: list[tuple[int, float, float]] = []  # (n, sent, answered) of updates answered ok
        self.received: list[int] = []
        self.windows: list[list[float]] = []  # [confirmed, broken] spans of the subscriber's stream
        self.resyncs: list[float] = []  # when "all of note://shared may have changed" arrived
        self._loops: list[asyncio.Task[None]] = []
        self.t0 = time.monotonic()  # the times in a report count from here

    def client(self, source: str) -> Client:
        return Client(self.deployment.port, source, self.wire)

    # -------------------------------------------------------------- before the fault

    async def start(self) -> None:
        for source in CALLERS:
            caller = self.client(source)
            assert await caller.open(self.tally), self.tally.problems
            self.callers.append(caller)
            self.first_sessions.append((caller, caller.http.session_id))  # type: ignore[arg-type]
        await self._start_tasks()
        await self._quota_before()
        subscriber = self.client(SUBSCRIBER)
        await self._subscribe(subscriber)
        self._loops = [asyncio.ensure_future(loop) for loop in (
            *(self._call_loop(c) for c in self.callers), self._end_loop(), self._listen(subscriber),
            self._publish_loop())]

    async def stop(self) -> None:
        """End the load; the last published update is awaited by the checks."""
        self.running = False
        await asyncio.sleep(1.0)  # the listener reads what is in flight
        for loop in self._loops:
            loop.cancel()
        for loop in self._loops:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await loop
        if self.windows and self.windows[-1][1] == 0:
            self.windows[-1][1] = time.monotonic()

    # -------------------------------------------------------------- requests

    async def _call_loop(self, caller: Client) -> None:
        n = 0
        while self.running:
            n += 1
            sent = time.monotonic()
            outcome, answer = await caller.request("tools/call", {"name": "add", "arguments": {"a": n, "b": 1000}})
            if outcome == "ok":
                self.tally.latencies.append(time.monotonic() - sent)
            if outcome == "ok" and (answer.get("structuredContent") or {}).get("result") != n + 1000:
                outcome = "wrong"
            self._count(outcome, answer, f"add from {caller.source}")
            if outcome == "gone":
                await caller.open(self.tally)
            await asyncio.sleep(0.05 if outcome == "ok" else 0.2)

    def _count(self, outcome: str, answer: Any, what: str) -> None:
        self.tally.requests[outcome] += 1
        if outcome in ("lost", "twice", "wrong"):
            self.tally.problem(f"{what}: {outcome}: {str(answer)[:300]}")
        if outcome == "gone":
            self.tally.sessions["ended by the fault (404)"] += 1
            if not self.lossy:
                self.tally.problem(f"{what}: its session was lost (404)")

    # -------------------------------------------------------------- sessions ended on purpose

    async def _end_loop(self) -> None:
        while self.running:
            client = self.client(ENDER)
            if not await client.open(self.tally):
                continue
            outcome, answer = await client.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})
            self._count(outcome, answer, "add in a session about to end")
            deadline = time.monotonic() + SETTLE_WITHIN
            while time.monotonic() < deadline:
                try:
                    reply = await asyncio.wait_for(client.http.delete(), ANSWER_WITHIN)
                    await client._drain(reply)
                except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
                    continue
                if reply.status in (200, 404):  # 404: it had ended already (the fault lost it)
                    self.ended.append((client, client.http.session_id, time.monotonic()))  # type: ignore[arg-type]
                    self.tally.sessions["ended by DELETE"] += 1
                    break
                if reply.status not in (502, 503, 504):
                    self.tally.problem(f"DELETE answered {reply.status}")
                    break
                self.tally.sessions["DELETE refused retryably"] += 1
                await asyncio.sleep(0.3)
            await asyncio.sleep(0.3)
            for other, session_id, _ in self.ended[-5:]:
                await self._never_served(other, session_id, self.deployment.port)

    async def _never_served(self, client: Client, session_id: str, port: int) -> None:
        status = await client.status_on(port, session_id)
        if status == 200:
            self.tally.sessions["ended, then served again"] += 1
            self.tally.problem(f"session {session_id} was served after its DELETE")

    # -------------------------------------------------------------- tasks

    async def _start_tasks(self) -> None:
        tasker = self.client(TASKER)
        for seconds in (0.5, 4, 4, 4, 4, 4):
            task_id = None
            deadline = time.monotonic() + SETTLE_WITHIN
            while task_id is None and time.monotonic() < deadline:
                outcome, answer = await self._modern(tasker, "tools/call", {"name": "job", "arguments": {"seconds": seconds}})
                if outcome == "ok":
                    task_id = answer["taskId"]
                elif outcome != "retryable":
                    self.tally.problem(f"a task could not be started: {outcome} {answer}")
                    break
            if task_id is not None:
                self.tasks.append(task_id)
                self.tally.tasks["started"] += 1

    @staticmethod
    async def _modern(client: Client, method: str, params: dict[str, Any]) -> tuple[str, Any]:
        client.http.revision = MODERN
        return await client.request(method, {**params, "_meta": _TASKS_META}, mcp_method=method,
                                    mcp_name=params.get("name") or params.get("taskId"))

    async def tasks_final(self) -> None:
        """Every task reaches a final state (a forgotten one only when the store lost it)."""
        tasker = self.client(TASKER)
        pending = list(self.tasks)
        deadline = time.monotonic() + SETTLE_WITHIN
        while pending and time.monotonic() < deadline:
            for task_id in list(pending):
                outcome, answer = await self._modern(tasker, "tasks/get", {"taskId": task_id})
                if outcome == "ok" and answer["status"] in ("completed", "failed", "cancelled"):
                    pending.remove(task_id)
                    error = answer.get("error") or {}
                    retryable = (error.get("data") or {}).get("retryable")
                    self.tally.tasks[answer["status"] + (" (retryable)" if retryable else "")] += 1
                    if answer["status"] == "failed" and not retryable:
                        self.tally.problem(f"task {task_id} failed for good: {error}")
                elif outcome == "wrong" and self.lossy and "Unknown task" in str(answer):
                    pending.remove(task_id)
                    self.tally.tasks["forgotten with the store"] += 1
            await asyncio.sleep(0.25)
        for task_id in pending:
            self.tally.tasks["never final"] += 1
            self.tally.problem(f"task {task_id} not in a final state {SETTLE_WITHIN} s after the fault")

    # -------------------------------------------------------------- notifications

    async def _subscribe(self, subscriber: Client) -> Any:
        """A session subscribed to note://shared and its GET stream, confirmed live by an update
        it published itself: what is published from then on must arrive."""
        deadline = time.monotonic() + SETTLE_WITHIN
        while time.monotonic() < deadline:
            if subscriber.http.session_id is None and not await subscriber.open(self.tally):
                continue
            outcome, _ = await subscriber.request("resources/subscribe", {"uri": "note://shared"})
            if outcome == "gone":
                subscriber.http.session_id = None
                continue
            if outcome == "ok":
                stream = await self._confirmed(subscriber, None)
                if stream is not None:
                    return stream
            await asyncio.sleep(0.2)
        raise AssertionError(f"the subscriber could not subscribe within {SETTLE_WITHIN} s: {self.tally.problems}")

    async def _confirmed(self, subscriber: Client, last: str | None) -> Any:
        """A GET stream (resumed after ``last``), once an update published after it opened arrived."""
        try:
            stream = await asyncio.wait_for(
                subscriber.http.get(**({"last_event_id": last} if last else {})), ANSWER_WITHIN)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            return None
        if stream.status != 200:
            await subscriber._drain(stream)
            if stream.status == 404:
                subscriber.http.session_id = None
            return None
        marker = -len(self.windows) - 1
        outcome, _ = await subscriber.request("tools/call", {"name": "touch", "arguments": {"uri": f"note://shared/{marker}"}})
        if outcome != "ok":
            stream.close()
            return None
        subscriber.stream = stream
        deadline = time.monotonic() + ANSWER_WITHIN
        while time.monotonic() < deadline:
            n = await self._next_update(subscriber, stream)
            if n is None:
                return None
            if n == marker:
                self.windows.append([time.monotonic(), 0.0])
                return stream
        stream.close()
        return None

    async def _next_update(self, subscriber: Client, stream: Any) -> int | None:
        """The number of the next update on ``stream`` (None when it ended)."""
        while True:
            try:
                event = await stream.next_event(timeout=ANSWER_WITHIN)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
                event = None
            if event is None:
                stream.close()
                return None
            if event.id:
                subscriber.last_event = event.id
            message = subscriber.http.event_message(event) if event.data else None
            if message and message.get("method") == "notifications/resources/updated":
                uri = message["params"]["uri"]
                if uri == "note://shared":  # all of it may have changed: a process's bus came back
                    self.resyncs.append(time.monotonic())
                    continue
                n = int(uri.rsplit("/", 1)[1])
                if n >= 0:
                    self.received.append(n)
                return n

    async def _listen(self, subscriber: Client) -> None:
        stream = subscriber.stream
        while True:  # reads on after the load stopped, until stop() cancels it
            n = await self._next_update(subscriber, stream)
            if n is not None:
                continue
            if not self.running:
                return
            self.windows[-1][1] = time.monotonic()  # the stream broke: resume where it did
            self.tally.notifications["stream resumed"] += 1
            stream = None
            while stream is None and self.running:
                await asyncio.sleep(0.2)
                if subscriber.http.session_id is None:
                    stream = await self._subscribe(subscriber)
                else:
                    stream = await self._confirmed(subscriber, getattr(subscriber, "last_event", None))

    async def _publish_loop(self) -> None:
        publisher = self.client(PUBLISHER)
        await publisher.open(self.tally)
        n = 0
        while self.running:
            sent = time.monotonic()
            outcome, answer = await publisher.request("tools/call", {"name": "touch", "arguments": {"uri": f"note://shared/{n}"}})
            self._count(outcome, answer, "touch")
            if outcome == "ok":
                self.published.append((n, sent, time.monotonic()))
            elif outcome == "gone":
                await publisher.open(self.tally)
            n += 1
            await asyncio.sleep(0.1)

    def notifications_delivered(self) -> None:
        """Every update published while the subscriber's stream was open (sent after it was
        confirmed, answered a second before it broke) arrived, and none twice."""
        got = set(self.received)
        twice = len(self.received) - len(got)
        if twice:
            self.tally.notifications["delivered twice"] += twice
            self.tally.problem(f"{twice} updates delivered twice")
        for n, sent, answered in self.published:
            inside = any(start < sent and (end == 0 or answered < end - 1.0) for start, end in self.windows)
            if not inside:
                self.tally.notifications["published while no stream was open" + (", delivered" if n in got else "")] += 1
                continue
            if n in got:
                self.tally.notifications["delivered"] += 1
            elif any(when > sent for when in self.resyncs):
                # a process's bus was away when it was published: the update of note://shared
                # that process sent once back tells the client to read it all again
                self.tally.notifications["missed, covered by a later update of note://shared"] += 1
            else:
                self.tally.notifications["missed"] += 1
                self.tally.problem(f"update {n} was published while the stream was open and never arrived "
                                   f"(sent at {sent - self.t0:.2f} s, answered at {answered - self.t0:.2f} s)")
        if any("never arrived" in p for p in self.tally.problems):
            spans = ", ".join(f"{a - self.t0:.2f}-{b - self.t0:.2f}" for a, b in self.windows)
            self.tally.problem(f"the stream was open {spans} s; whole-subscription updates arrived at "
                               f"{', '.join(f'{t - self.t0:.2f}' for t in self.resyncs) or 'no time'} s; "
                               f"received: {self.received}")

    # -------------------------------------------------------------- rate limits per client

    async def _quota_before(self) -> None:
        self.quota_client = self.client(QUOTA)
        await self.quota_client.open(self.tally)
        for _ in range(2):
            outcome, answer = await self.quota_client.request("tools/call", {"name": "rationed", "arguments": {}})
            if outcome != "ok" or answer.get("isError"):
                self.tally.problem(f"rationed before the fault: {outcome} {answer}")

    async def quotas_kept(self) -> None:
        """``rationed`` allows 3 calls an hour per client: the client that made two before the
        fault has one left (all three again only when the store lost its counts); another
        client, behind the same balancer, has its own three."""
        async def rationed(client: Client) -> str:
            deadline = time.monotonic() + SETTLE_WITHIN
            while time.monotonic() < deadline:
                outcome, answer = await client.request("tools/call", {"name": "rationed", "arguments": {}})
                if outcome == "gone":
                    await client.open(self.tally)
                elif outcome == "ok":
                    return "refused" if answer.get("isError") else "ok"
                elif outcome != "retryable":
                    return outcome
                await asyncio.sleep(0.2)
            return "no answer"

        mine = [await rationed(self.quota_client) for _ in range(2)]
        other = self.client(QUOTA_OTHER)
        await other.open(self.tally)
        theirs = [await rationed(other) for _ in range(3)]
        if mine == ["ok", "refused"]:
            self.tally.quotas.append("kept")
        elif mine == ["ok", "ok"] and self.lossy:
            self.tally.quotas.append("counted again from zero (the store lost its counts)")
        else:
            self.tally.problem(f"after the fault, a client with one call left got {mine}")
        if theirs != ["ok", "ok", "ok"]:
            self.tally.problem(f"another client's own 3 calls got {theirs}: clients are not told apart")
        else:
            self.tally.quotas.append("per client")

    # -------------------------------------------------------------- sessions after the fault

    async def sessions_agree(self) -> None:
        """Each caller's first session: served by every live process (kept), or, only when the
        store lost it, 404 on every one alike; and every ended session is 404 everywhere."""
        ports = self.deployment.live_ports()
        for client, session_id in self.first_sessions:
            statuses = {await self._settled(client, port, session_id) for port in ports}
            if statuses == {200}:
                self.tally.sessions["kept"] += 1
            elif statuses == {404} and self.lossy:
                self.tally.sessions["lost with the store, 404 everywhere"] += 1
            else:
                self.tally.sessions["split"] += 1
                self.tally.problem(f"session {session_id}: the processes answer {sorted(statuses)}")
        for client, session_id, _ in self.ended:
            for port in ports:
                await self._never_served(client, session_id, port)

    @staticmethod
    async def _settled(client: Client, port: int, session_id: str) -> int:
        """The process's answer once it is not 503 (the store coming back)."""
        deadline = time.monotonic() + SETTLE_WITHIN
        while True:
            status = await client.status_on(port, session_id)
            if status not in (0, 503) or time.monotonic() > deadline:
                return status
            await asyncio.sleep(0.2)


async def until(condition: Callable[[], Awaitable[bool]], what: str, within: float = SETTLE_WITHIN) -> float:
    """Wait (bounded) for ``condition``; how long it took."""
    started = time.monotonic()
    while not await condition():
        assert time.monotonic() - started < within, f"not within {within} s: {what}"
        await asyncio.sleep(0.1)
    return time.monotonic() - started

