"""The fault suite's deployment and workload.

A deployment is what an operator runs: ``count`` processes of tests/scaleout/app.py (``mcpkit
serve --http``) on one store, behind the shipped HAProxy config (tools/haproxy.py), each trusting
the balancer's ``X-Forwarded-For`` so that every client is itself. The workload is what its
clients do meanwhile, each from a loopback address of its own, through the balancer:

- callers: sessions calling ``add`` in a loop; every request is answered exactly once, with the
  right sum, or fails retryably (a 503, a balancer's 502, a JSON-RPC error marked retryable). A
  POST stream that ends before its answer is resumed with ``Last-Event-ID``, as a client should;
- an ender: sessions opened, used and DELETEd; an ended session is never served again;
- tasks: started before the fault and polled to a final state;
- a subscriber and a publisher: resource updates ``note://shared/<n>`` published by one client,
  received on another's GET stream, which reconnects with ``Last-Event-ID`` when it ends; every
  update published while the stream is open is delivered exactly once;
- rate limits: ``rationed`` (3 an hour per client) used twice by one client before the fault.

:class:`Tally` counts what happened; a test asserts on it and :func:`record` writes its row for
tools/fault_table.py (the table in docs/deployment.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.test_http import TcpDriver, free_port, jsonrpc, start_server, stop_server
from tools.haproxy import HAProxy

APP = str(Path(__file__).resolve().parent.parent / "scaleout" / "app.py")
#: how long one request may take before it counts as lost (a hang guard, not a performance bound)
ANSWER_WITHIN = 12.0
#: how long the checks after a fault may wait for things to settle (leases, failover, reconnects)
SETTLE_WITHIN = 25.0
RETRYABLE_STATUS = {502, 503, 504}


@dataclass
class Tally:
    """What one fault did to each kind of state; ``problems`` lists every broken promise."""

    requests: Counter[str] = field(default_factory=Counter)
    sessions: Counter[str] = field(default_factory=Counter)
    tasks: Counter[str] = field(default_factory=Counter)
    notifications: Counter[str] = field(default_factory=Counter)
    quotas: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: seconds each answered call took (reported, never asserted: a figure, not a promise)
    latencies: list[float] = field(default_factory=list)

    def problem(self, what: str) -> None:
        if len(self.problems) < 50:
            self.problems.append(what)

    def row(self) -> dict[str, Any]:
        spread = sorted(self.latencies)
        pick = (lambda q: round(spread[min(len(spread) - 1, int(q * len(spread)))] * 1000)) if spread else (lambda q: None)
        return {"requests": dict(self.requests), "sessions": dict(self.sessions), "tasks": dict(self.tasks),
                "notifications": dict(self.notifications), "quotas": self.quotas, "problems": self.problems,
                "call_ms": {"p50": pick(0.5), "p99": pick(0.99), "max": pick(1.0)}}


def record(fault: str, setup: str, tally: Tally) -> None:
    """Add this fault's row to the file ``MCPKIT_FAULT_RESULTS`` names (tools/fault_table.py)."""
    path = os.environ.get("MCPKIT_FAULT_RESULTS")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"fault": fault, "setup": setup, **tally.row()}) + "\n")


# ============================================================================ the deployment


class Deployment:
    """``count`` processes of app.py on ``store_url`` behind HAProxy."""

    def __init__(self, store_url: str, count: int = 3) -> None:
        glue = "&" if "?" in store_url else "?"
        self.env = {"MCPKIT_STORE": f"{store_url}{glue}prefix=f{secrets.token_hex(4)}:",
                    "MCPKIT_STATE_KEY": secrets.token_hex(32)}
        self.count = count
        self.procs: list[tuple[Any, int]] = []
        self.proxy: HAProxy | None = None
        self.stopped: set[int] = set()

    def __enter__(self) -> Deployment:
        try:
            for _ in range(self.count):
                self.procs.append(start_server(APP, "--forwarded-allow-ips", "127.0.0.1", env=self.env))
            self.proxy = HAProxy(free_port(), [f"127.0.0.1:{port}" for _, port in self.procs])
            self.proxy.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    @property
    def port(self) -> int:
        assert self.proxy is not None
        return self.proxy.port

    def live_ports(self) -> list[int]:
        return [port for i, (_, port) in enumerate(self.procs) if i not in self.stopped]

    def signal(self, index: int, sig: int) -> None:
        proc = self.procs[index][0]
        proc.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.stopped.add(index)

    def __exit__(self, *_: Any) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        self.errors = []
        self.logs = []
        for i, (proc, _) in enumerate(self.procs):
            text = stop_server(proc)
            self.logs.append(text)
            at = text.find("Traceback")
            if at >= 0:
                self.errors.append(f"process {i} printed a traceback:\n{text[max(0, at - 300):at + 4000]}")


# ============================================================================ one request, as a careful client sends it


class Client:
    """A client of the balancer from loopback address ``source``, in one session."""

    def __init__(self, port: int, source: str, wire: Any) -> None:
        from tests.test_http import McpHttp

        self.port = port
        self.source = source
        self.http = McpHttp(TcpDriver(port, source), wire)

    async def open(self, tally: Tally) -> bool:
        """Initialize a session (retrying while the answer is retryable); False if it never opened."""
        deadline = time.monotonic() + SETTLE_WITHIN
        while time.monotonic() < deadline:
            self.http.session_id = self.http.revision = None
            try:
                await asyncio.wait_for(self.http.initialize(), ANSWER_WITHIN)
                return True
            except AssertionError as exc:
                # a retryable status, of initialize or of its notifications/initialized (503 from a
                # process that does not hold the new session while the store is down): start over
                if not re.search(r"\b(502|503|504)\b", str(exc)):
                    tally.problem(f"initialize from {self.source}: {exc}"[:300])
                    return False
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
                pass
            await asyncio.sleep(0.2)
        tally.problem(f"no session could be opened from {self.source} within {SETTLE_WITHIN} s")
        return False

    async def request(self, method: str, params: dict[str, Any], **headers: str | None) -> tuple[str, Any]:
        """(outcome, answer): ``ok``, ``retryable``, ``gone`` (404: the session ended), ``lost``
        (no answer), ``twice`` (answered more than once) or ``wrong`` (any other answer)."""
        rid = self.http.next_id()
        try:
            reply = await asyncio.wait_for(self.http.post(jsonrpc(method, params, rid), **headers), ANSWER_WITHIN)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
            return "lost", f"no reply: {type(exc).__name__}"
        if reply.status == 404:
            await self._drain(reply)
            return "gone", None
        if reply.status in RETRYABLE_STATUS:
            await self._drain(reply)
            return "retryable", reply.status
        if reply.status != 200:
            return "wrong", (reply.status, await self._drain(reply))
        if reply.content_type.startswith("application/json"):
            try:
                answers = [json.loads(await asyncio.wait_for(reply.read(), ANSWER_WITHIN))]
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
                return "lost", f"a JSON body cut short: {exc}"
        else:
            answers, last = await self._stream(reply, rid)
            trail = [f"POST stream ended after event {last}"]  # what each resumption met, for the report
            attempts = 0
            while not answers and last is not None and attempts < 5:
                attempts += 1  # the stream ended before its answer: resume it where it broke (HL-14)
                await asyncio.sleep(0.1 * attempts)
                try:
                    resumed = await asyncio.wait_for(self.http.get(last_event_id=last), ANSWER_WITHIN)
                except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
                    trail.append(f"GET: {type(exc).__name__}")
                    continue
                if resumed.status != 200:
                    body = await self._drain(resumed)
                    trail.append(f"GET: {resumed.status} {body[:200]!r}")
                    if resumed.status == 404:
                        return "gone", None
                    continue
                more, last = await self._stream(resumed, rid, last)
                trail.append(f"GET: 200, {len(more)} message(s) up to event {last}")
                answers += more
            if not answers:
                return "lost", ("the stream ended without an answer and could not be resumed: "
                                + "; ".join(trail))
        answers = [a for a in answers if isinstance(a, dict) and a.get("id") == rid and "method" not in a]
        if len(answers) > 1:
            return "twice", answers
        if not answers:
            return "lost", "no answer with the request's id"
        answer = answers[0]
        if "error" in answer:
            data = answer["error"].get("data") or {}
            return ("retryable" if isinstance(data, dict) and data.get("retryable") else "wrong"), answer
        return "ok", answer["result"]

    async def _stream(self, reply: Any, rid: int, last: str | None = None) -> tuple[list[Any], str | None]:
        """The messages of an SSE stream up to its end, and the id of its last event."""
        out: list[Any] = []
        try:
            while True:
                event = await reply.next_event(timeout=ANSWER_WITHIN)
                if event is None:
                    break
                if event.id:
                    last = event.id
                if event.data:
                    message = self.http.event_message(event)
                    out.append(message)
                    if isinstance(message, dict) and message.get("id") == rid and "method" not in message:
                        # the answer ends the stream; read on briefly for a second answer
                        more = await reply.next_event(timeout=0.5)
                        if more is not None and more.data:
                            out.append(self.http.event_message(more))
                        break
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
            pass
        reply.close()
        return out, last

    @staticmethod
    async def _drain(reply: Any) -> bytes:
        try:
            return await asyncio.wait_for(reply.read(), 2.0)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            return b""
        finally:
            reply.close()

    async def status_on(self, port: int, session_id: str) -> int:
        """What the process on ``port`` answers a plain request of ``session_id`` (0: no answer)."""
        from tests.test_http import McpHttp

        probe = McpHttp(TcpDriver(port, self.source), self.http.wire)
        probe.session_id, probe.revision = session_id, self.http.revision
        try:
            reply = await asyncio.wait_for(probe.post(jsonrpc("tools/list", {}, 1)), ANSWER_WITHIN)
            await self._drain(reply)
            return reply.status
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            return 0
