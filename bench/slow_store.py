#!/usr/bin/env python3
"""slow_store: how long requests take while the shared Redis is healthy, slow or paused.

    python bench/slow_store.py                         # the mcpkit this interpreter imports
    python bench/slow_store.py --seconds 10 --slow 1.5

Starts a redis-server of its own behind a proxy that delays its replies
(tests/scaleout/slowredis.py), and two ``mcpkit serve tests/scaleout/app.py --http`` processes
on it (MCPKIT_STORE; the processes import what ``PYTHONPATH`` says). In each phase (Redis
healthy; every reply 1.5 s late; Redis stopped with SIGSTOP) it keeps two requests that need
Redis in flight on process A (an ``initialize`` of a new session, then a ``tools/call`` of a
session process B opened, which A restores), and meanwhile calls ``tools/call add`` back to
back on a session A holds (JSON answers; the per-client quota is lifted, since every session
comes from one address). It prints the p50, p99 and maximum of each kind per phase.

Needs the test dependencies (pytest, redis) and redis-server: it reuses the tests' helpers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tests.test_http as http  # noqa: E402
from tests.scaleout.slowredis import SlowProxy  # noqa: E402
from tests.stores.conftest import RedisProcess  # noqa: E402

APP = str(ROOT / "tests" / "scaleout" / "app.py")
JSON = "application/json"


class NoWire:
    def record(self, *args: Any) -> None:
        pass


def quantiles(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{p50 * 1000:,.0f} / {p99 * 1000:,.0f} / {ordered[-1] * 1000:,.0f} ms (n={len(values)})"


async def post(client: Any, method: str, params: dict[str, Any]) -> int:
    reply = await client.post(http.jsonrpc(method, params, client.next_id()), accept=JSON)
    await reply.read()
    return reply.status


async def needing(port_a: int, port_b: int, until: float, out: list[float]) -> None:
    """Requests that need Redis, one after the other, until ``until``."""
    while time.monotonic() < until:
        started = time.monotonic()
        fresh = http.McpHttp(http.TcpDriver(port_a), NoWire())
        await post(fresh, "initialize", http.init_params(fresh.offered))
        out.append(time.monotonic() - started)
        other = http.McpHttp(http.TcpDriver(port_b), NoWire())
        try:
            await other.initialize(accept=JSON)
        except AssertionError:  # B could not record it either (Redis paused): nothing to restore
            continue
        stranger = http.McpHttp(http.TcpDriver(port_a), NoWire())
        stranger.session_id, stranger.revision = other.session_id, other.revision
        started = time.monotonic()
        await post(stranger, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})
        out.append(time.monotonic() - started)


async def phase(name: str, seconds: float, held: Any, port_a: int, port_b: int) -> tuple[str, list[float], list[float]]:
    until = time.monotonic() + seconds
    need: list[float] = []
    workers = [asyncio.ensure_future(needing(port_a, port_b, until, need)) for _ in range(2)]
    probes: list[float] = []
    while time.monotonic() < until or not all(w.done() for w in workers):
        started = time.monotonic()
        status = await post(held, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
        assert status == 200, status
        probes.append(time.monotonic() - started)
    await asyncio.gather(*workers)
    return name, probes, need


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each phase")
    parser.add_argument("--slow", type=float, default=1.5, help="seconds each Redis reply is late")
    args = parser.parse_args()
    http.STEP = 120.0  # a stalled request is what this measures: the clients wait for it
    redis = RedisProcess()
    redis.start()
    proxy = SlowProxy(redis.port).start()
    env = {"MCPKIT_STORE": f"{proxy.url}?prefix=b{secrets.token_hex(4)}:", "MCPKIT_STATE_KEY": secrets.token_hex(32)}
    servers = [http.start_server(APP, "--session-idle-timeout", "60", "--max-sessions", "100000",
                                 "--max-sessions-per-client", "100000", env=env) for _ in range(2)]
    (_, port_a), (_, port_b) = servers
    results = []
    try:
        held = http.McpHttp(http.TcpDriver(port_a), NoWire())
        await held.initialize()
        results.append(await phase("healthy", args.seconds, held, port_a, port_b))
        proxy.delay = args.slow
        results.append(await phase(f"{args.slow:g} s slow", args.seconds, held, port_a, port_b))
        proxy.delay = 0.0
        assert redis.proc is not None
        redis.proc.send_signal(signal.SIGSTOP)
        try:
            results.append(await phase("paused", args.seconds, held, port_a, port_b))
        finally:
            redis.proc.send_signal(signal.SIGCONT)
    finally:
        for proc, _ in servers:
            http.stop_server(proc)
        proxy.stop()
        redis.stop()
    print(json.dumps({"python_path": os.environ.get("PYTHONPATH", "")}))
    print("| Redis | held session tools/call p50 / p99 / max | needing Redis p50 / p99 / max |")
    print("|---|---|---|")
    for name, probes, need in results:
        print(f"| {name} | {quantiles(probes)} | {quantiles(need)} |")


if __name__ == "__main__":
    asyncio.run(main())
