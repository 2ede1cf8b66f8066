"""The fault suite: each fault an operator meets, under load, against what an operator runs.

Three processes of tests/scaleout/app.py behind the shipped HAProxy config, on a real Redis (with
an append-only file, or with no persistence; behind a proxy that delays its replies for the slow
case) or a real Redis Cluster of three masters with a replica each; the workload of tests/chaos/workload.py runs through the fault and its recovery.
Each test asserts that nothing was lost (harness.py lists the promises) and records its row of
the table in docs/deployment.md (``python tools/fault_table.py`` runs this suite and writes it).
Every wait is bounded; each test takes 15-30 s.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.harness import Deployment, record
from tests.chaos.workload import Workload
from tests.conftest import component_missing
from tests.scaleout.slowredis import SlowProxy
from tests.stores.conftest import REDIS_SERVER, ClusterProcess, RedisProcess

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(180)]

#: load before the fault, and after it (recovery included) before the checks
BEFORE, AFTER = 1.5, 4.0


def _needs_components() -> None:
    if REDIS_SERVER is None or shutil.which("redis-cli") is None:
        component_missing("the fault suite runs redis-server of its own: apt-get install redis-server")
    if shutil.which("haproxy") is None and not os.path.exists("/usr/sbin/haproxy"):
        component_missing("the fault suite runs HAProxy: bash tools/install-debian.sh haproxy")
    pytest.importorskip("redis")


@pytest.fixture
def redis_aof(tmp_path: Path) -> Iterator[RedisProcess]:
    """A Redis of the test's own with an append-only file (the durable setting)."""
    _needs_components()
    server = RedisProcess(aof_dir=str(tmp_path))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_bare() -> Iterator[RedisProcess]:
    """A Redis of the test's own with no persistence at all."""
    _needs_components()
    server = RedisProcess()
    server.start()
    yield server
    server.stop()


class Cluster(ClusterProcess):
    """A Redis Cluster of the test's own (tools/start-redis-cluster.sh: three masters, a replica
    each), asked about its nodes with redis-cli."""

    def ports(self) -> list[int]:
        base = Path(self.tmpdir, "mcpkit-redis-cluster")
        return sorted(int(p.name.split("-")[1]) for p in base.glob("node-*"))

    def ask(self, *command: str, skip: int = 0) -> str:
        """``command``'s answer from the first node that answers (not ``skip``)."""
        for port in self.ports():
            if port == skip:
                continue
            done = subprocess.run(["redis-cli", "-p", str(port), *command], capture_output=True, text=True, timeout=5)
            if done.returncode == 0 and done.stdout.strip() and not done.stdout.startswith("Could not connect"):
                return done.stdout
        raise AssertionError(f"no node of the cluster answers {command}")

    def healthy(self, dead: int) -> bool:
        """Every slot served again by the replica that took the dead master's over. Not just
        ``cluster_state:ok``: the others say that until they mark the dead node failed (2 s of
        cluster-node-timeout), so the fault would have seemed over before it began."""
        if "cluster_state:ok" not in self.ask("cluster", "info", skip=dead):
            return False
        nodes = [line.split() for line in self.ask("cluster", "nodes", skip=dead).strip().splitlines()]
        gone = [fields[0] for fields in nodes if fields[1].split("@")[0].endswith(f":{dead}")]
        if not gone:
            return False
        marked = any("fail" in fields[2].split(",") for fields in nodes if fields[0] == gone[0])
        still_its_replica = any("slave" in fields[2].split(",") and fields[3] == gone[0] for fields in nodes)
        return marked and not still_its_replica

    def kill_master(self) -> int:
        """SIGKILL a master that has a replica; its port."""
        nodes = [line.split() for line in self.ask("cluster", "nodes").strip().splitlines()]
        port_of = {fields[0]: int(fields[1].split(":")[1].split("@")[0]) for fields in nodes}
        masters = [fields[0] for fields in nodes if "master" in fields[2] and len(fields) > 8
                   and any(other[3] == fields[0] for other in nodes)]
        assert masters, f"no master with a replica: {nodes}"
        port = port_of[masters[0]]
        os.kill(self.pid(port), signal.SIGKILL)
        return port


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    _needs_components()
    made = Cluster(str(tmp_path))
    made.start()
    yield made
    made.stop()


async def endure(store_url: str, wire: Any, fault: Callable[[Deployment], Awaitable[None]], *,
                 name: str, setup: str, lossy: bool = False) -> None:
    """Run the workload on a fresh deployment through ``fault``, check, and record the row."""
    with Deployment(store_url) as deployment:
        workload = Workload(deployment, wire, lossy=lossy)
        await workload.start()
        await asyncio.sleep(BEFORE)
        fault_at = time.monotonic()
        await fault(deployment)
        await asyncio.sleep(AFTER)
        await workload.stop()
        await workload.tasks_final()
        await workload.sessions_agree()
        await workload.quotas_kept()
        workload.notifications_delivered()
    tally = workload.tally
    for error in deployment.errors:
        tally.problem(error)
    record(name, setup, tally)
    if tally.problems:  # what the processes said, to find the cause
        tally.problems.insert(0, f"(the fault came at {fault_at - workload.t0:.2f} s)")
        said = []
        for i, text in enumerate(deployment.logs):
            lines = [line for line in text.splitlines() if line.startswith(("WARNING", "ERROR"))]
            said += [f"process {i}: {line[:300]}" for line in dict.fromkeys(lines)][-25:]  # each kind once
        raise AssertionError("\n".join([*tally.problems, "--- the processes' warnings:", *said]))
    assert tally.requests["ok"] > 50, tally.row()  # the load really ran through the fault
    assert tally.notifications["delivered"] > 5, tally.row()


@pytest.mark.asyncio
async def test_kill_9_of_a_server_process(redis_aof, wire):
    async def kill(deployment: Deployment) -> None:
        deployment.signal(0, signal.SIGKILL)

    await endure(redis_aof.url, wire, kill, name="kill -9 of a server process", setup="Redis, AOF")


@pytest.mark.asyncio
async def test_sigterm_of_a_server_process_under_load(redis_aof, wire):
    async def stop(deployment: Deployment) -> None:
        deployment.signal(1, signal.SIGTERM)

    await endure(redis_aof.url, wire, stop, name="SIGTERM of a server process", setup="Redis, AOF")


@pytest.mark.asyncio
async def test_redis_killed_and_restarted_with_an_append_only_file(redis_aof, wire):
    async def restart(_: Deployment) -> None:
        redis_aof.proc.kill()  # type: ignore[union-attr]
        redis_aof.proc.wait()  # type: ignore[union-attr]
        await asyncio.sleep(1.5)
        await asyncio.to_thread(redis_aof.start)

    await endure(redis_aof.url, wire, restart, name="Redis kill -9, restarted 1.5 s later", setup="Redis, AOF")


@pytest.mark.asyncio
async def test_redis_killed_and_restarted_without_persistence(redis_bare, wire):
    async def restart(_: Deployment) -> None:
        redis_bare.proc.kill()  # type: ignore[union-attr]
        redis_bare.proc.wait()  # type: ignore[union-attr]
        await asyncio.sleep(1.5)
        await asyncio.to_thread(redis_bare.start)

    await endure(redis_bare.url, wire, restart, name="Redis kill -9, restarted 1.5 s later",
                 setup="Redis, no persistence", lossy=True)


@pytest.mark.asyncio
async def test_redis_paused(redis_aof, wire):
    async def pause(_: Deployment) -> None:
        redis_aof.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
        try:
            await asyncio.sleep(3.0)
        finally:
            redis_aof.proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]

    await endure(redis_aof.url, wire, pause, name="Redis paused 3 s (SIGSTOP)", setup="Redis, AOF")


@pytest.fixture
def slowed(redis_aof: RedisProcess) -> Iterator[SlowProxy]:
    """``redis_aof`` behind a proxy that can delay every reply (tests/scaleout/slowredis.py)."""
    proxy = SlowProxy(redis_aof.port).start()
    yield proxy
    proxy.stop()


@pytest.mark.asyncio
async def test_redis_slowed_down(slowed, wire):
    async def slow(_: Deployment) -> None:
        slowed.delay = 1.5  # under the 2 s socket timeout: late, never failing
        try:
            await asyncio.sleep(4.0)
        finally:
            slowed.delay = 0.0

    await endure(slowed.url, wire, slow, name="Redis answering 1.5 s late for 4 s", setup="Redis, AOF")


@pytest.mark.asyncio
async def test_a_cluster_master_killed(cluster, wire):
    async def kill(_: Deployment) -> None:
        dead = cluster.kill_master()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while not await asyncio.to_thread(cluster.healthy, dead):
            assert loop.time() < deadline, "the cluster did not fail over within 20 s"
            await asyncio.sleep(0.2)

    await endure(cluster.url, wire, kill, name="a master killed (kill -9), its replica takes over",
                 setup="Redis Cluster, 3 masters + 3 replicas")
