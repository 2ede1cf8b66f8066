"""RedisTaskStore: a task's public state is seen by every process; its run stays with its owner."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from mcpkit.server.tasks import TaskManager, TaskRecord
from mcpkit.stores.redis import RedisTaskStore, is_remote
from mcpkit.stores.redis_tasks import PUBLIC_FIELDS
from mcpkit.stores.tasks import OWNER_GONE, SHUT_DOWN, TaskCancelled


@contextlib.contextmanager
def pair(a_client: Any, b_client: Any, prefix: str, **lease: float) -> Iterator[tuple[RedisTaskStore, RedisTaskStore]]:
    """The task stores of two processes, A and B, on one Redis."""
    a = RedisTaskStore(a_client, prefix=prefix, origin="proc-a", **lease)
    b = RedisTaskStore(b_client, prefix=prefix, origin="proc-b", **lease)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


@pytest.fixture
def stores(redis_url: str, prefix: str):
    with pair(redis_url, redis_url, prefix) as both:
        yield both


#: the session that creates the tasks: TX-07 binds each task to its principal and session
CREATOR = SimpleNamespace(principal="alice", task_binding="session-1")


def public(record: TaskRecord) -> dict:
    return {name: getattr(record, name) for name in PUBLIC_FIELDS}


def test_a_task_put_by_one_process_is_rebuilt_by_another(stores) -> None:
    a, b = stores
    manager = TaskManager(ttl_ms=60_000, store=a)
    record = manager.create(CREATOR)
    record.future = object()  # stands for the running handler
    fut = manager.ask(record, "elicitation/create", {"message": "sure?"}, None)

    assert a.get(record.task_id) is record  # the owner gets its live record
    remote = b.get(record.task_id)
    assert remote is not None and remote is not record
    assert is_remote(remote) and not is_remote(record)
    assert remote.owner == "proc-a"
    assert public(remote) == public(record)
    assert (remote.principal, remote.binding) == ("alice", "session-1")  # TX-07 in every process
    assert remote.status == "input_required" and remote.input_requests == {"elicit_1": {
        "method": "elicitation/create", "params": {"message": "sure?"}}}
    assert remote.detailed() == record.detailed()
    # none of the run came along
    assert remote.future is None and remote.loop is None
    assert remote._waiters == {} and not remote.cancel_event.is_set()
    assert remote.expires_at is None

    manager.update(record, {"elicit_1": {"action": "accept", "content": {}}})
    assert fut.result(0) == {"action": "accept", "content": {}}
    manager.settle(record, {"content": [{"type": "text", "text": "done"}]}, None)
    done = b.get(record.task_id)
    assert done.status == "completed" and done.result == record.result
    assert done.detailed() == record.detailed()
    assert done.expires_at is not None and 55 < done.expires_at - time.monotonic() <= 60


def test_running_tasks_live_long_and_ended_ones_their_ttl(stores, prefix: str, rclient) -> None:
    a, _ = stores
    manager = TaskManager(ttl_ms=5_000, store=a)
    record = manager.create(CREATOR)
    key = f"{prefix}task:{record.task_id}"
    assert 23 * 3600_000 < rclient.pttl(key) <= 24 * 3600_000
    manager.settle(record, None, RuntimeError("boom"))
    assert record.status == "failed"
    assert 4_000 < rclient.pttl(key) <= 5_000


def test_ended_tasks_expire_everywhere(stores) -> None:
    a, b = stores
    manager = TaskManager(ttl_ms=200, store=a)
    record = manager.create(CREATOR)
    manager.cancel(record)
    assert b.get(record.task_id).status == "cancelled"
    time.sleep(0.3)
    assert a.get(record.task_id) is None
    assert b.get(record.task_id) is None
    assert record.task_id not in a.local_ids()


def test_a_remote_record_saved_elsewhere_keeps_its_owner_and_stays_remote(stores) -> None:
    a, b = stores
    record = TaskManager(store=a).create(CREATOR)
    remote = b.get(record.task_id)
    TaskManager(store=b).cancel(remote)  # only the public state: the owner's run goes on
    assert remote.status == "cancelled"
    assert b.local_ids() == []
    again = b.get(record.task_id)
    assert again is not remote and again.status == "cancelled" and again.owner == "proc-a"
    assert a.get(record.task_id) is record and record.status == "working"


def test_delete_forgets_a_task(stores) -> None:
    a, b = stores
    record = TaskManager(store=a).create(CREATOR)
    b.delete(record.task_id)
    assert b.get(record.task_id) is None
    a.delete(record.task_id)
    assert a.get(record.task_id) is None and a.local_ids() == []
    assert b.get("never-created") is None


# ---------------------------------------------------------------------- the lease on running tasks


def wait_until(predicate, deadline: float = 10.0, what: str = "the condition"):
    """Poll ``predicate`` until it returns a true value; fail after ``deadline`` seconds."""
    end = time.monotonic() + deadline
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < end, f"{what} did not happen within {deadline} s"
        time.sleep(0.02)


class FlakyRedis:
    """A client whose lease renewals fail while ``down`` is set: Redis out of reach of this
    process (or the process paused) while its tasks run; everything else goes through."""

    def __init__(self, url: str) -> None:
        from tests.stores.conftest import sync_redis

        self.real = sync_redis(url)
        self.down = False

    def set(self, key, *args, **kwargs):
        import redis

        if self.down and b":lease:" in (key if isinstance(key, bytes) else key.encode()):
            raise redis.ConnectionError("Redis is out of reach (simulated)")
        return self.real.set(key, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_a_task_whose_process_stops_renewing_its_lease_fails_for_every_process(redis_url, prefix, rclient) -> None:
    with pair(redis_url, redis_url, prefix, lease=0.5, renew_every=0.1) as (a, b):
        manager = TaskManager(ttl_ms=60_000, store=a)
        record = manager.create(CREATOR)
        waiting = manager.ask(record, "elicitation/create", {"message": "sure?"}, None)
        assert b.get(record.task_id).status == "input_required"
        a.close()  # the process is gone: nothing renews its lease, nothing settles its task
        wait_until(lambda: b.get(record.task_id).status not in ("working", "input_required"),
                   what="failing the task of a process whose lease expired")
        failed = b.get(record.task_id)
        assert failed.status == "failed" and failed.error == OWNER_GONE
        assert failed.error["data"]["retryable"] is True and "stopped" in failed.error["message"]
        assert failed.input_requests == {} and "inputRequests" not in failed.detailed()
        assert failed.detailed()["error"] == OWNER_GONE
        # stored as such, for every process, for the task's ttl
        with pair(redis_url, redis_url, prefix) as (_, third):
            assert third.get(record.task_id).status == "failed"
        assert 55_000 < rclient.pttl(f"{prefix}task:{record.task_id}") <= 60_000
        assert not waiting.done()  # (A's run is gone with A; nothing here pretends otherwise)


def test_the_lease_is_renewed_while_the_task_runs_and_left_to_expire_when_none_does(redis_url, prefix, rclient) -> None:
    lease_key = f"{prefix}lease:proc-a"
    with pair(redis_url, redis_url, prefix, lease=0.6, renew_every=0.1) as (a, b):
        manager = TaskManager(ttl_ms=60_000, store=a)
        first, second = manager.create(CREATOR), manager.create(CREATOR)
        assert rclient.exists(lease_key)  # written before the first record that names it
        ends = time.monotonic() + 4 * a.lease
        while time.monotonic() < ends:  # four leases long, the task still runs
            assert b.get(first.task_id).status == "working"
            time.sleep(0.05)
        manager.settle(first, {"content": []}, None)
        manager.settle(second, {"content": []}, None)
        # no task runs: no more renewals, the key expires
        wait_until(lambda: not rclient.exists(lease_key), what="the idle lease expiring")
        assert b.get(second.task_id).status == "completed"
        third = manager.create(CREATOR)  # the lease is taken again with the next task
        assert rclient.exists(lease_key) and b.get(third.task_id).status == "working"


def test_an_owner_taken_for_dead_cannot_turn_its_failed_task_back(redis_url, prefix, rclient) -> None:
    # renewals far apart: the lease key is deleted below as if it had expired, and stays so
    with pair(redis_url, redis_url, prefix, lease=120, renew_every=60) as (a, b):
        manager = TaskManager(ttl_ms=60_000, store=a)
        record = manager.create(CREATOR)
        rclient.delete(f"{prefix}lease:proc-a")  # A paused past its lease
        assert b.get(record.task_id).status == "failed"
        # A wakes up and asks for input: refused, the task ended; its run is told so
        answer = manager.ask(record, "elicitation/create", {"message": "sure?"}, None)
        with pytest.raises(TaskCancelled):
            answer.result(0)
        assert record.cancel_event.is_set()
        assert record.status == "failed" and record.error == OWNER_GONE and record.input_requests == {}
        manager.settle(record, {"content": [{"type": "text", "text": "late"}]}, None)  # nor with a result
        assert record.status == "failed" and record.result is None
        assert a.get(record.task_id) is record and b.get(record.task_id).status == "failed"
        assert record.task_id not in manager._running


def test_a_process_that_could_not_renew_in_time_fails_its_own_tasks(redis_url, prefix) -> None:
    client = FlakyRedis(redis_url)
    with pair(client, redis_url, prefix, lease=0.4, renew_every=0.1) as (a, b):
        manager = TaskManager(ttl_ms=60_000, store=a)
        record = manager.create(CREATOR)
        answer = manager.ask(record, "elicitation/create", {"message": "sure?"}, None)
        client.down = True  # nobody reads the task while the lease runs out
        wait_until(lambda: not client.real.exists(f"{prefix}lease:proc-a"), what="the lease expiring")
        client.down = False
        assert record.cancel_event.wait(10), "the owner did not stop the run after its lease lapsed"
        assert record.status == "failed" and record.error == OWNER_GONE
        with pytest.raises(TaskCancelled):
            answer.result(0)
        assert b.get(record.task_id).status == "failed"  # the same story on every process
    client.real.close()


def test_close_settles_the_running_tasks_at_once(stores) -> None:
    a, b = stores
    manager = TaskManager(ttl_ms=60_000, store=a)
    running, done = manager.create(CREATOR), manager.create(CREATOR)
    manager.settle(done, {"content": []}, None)
    manager.close()  # graceful shutdown: no other process waits for the lease
    failed = b.get(running.task_id)
    assert failed.status == "failed" and failed.error == SHUT_DOWN and failed.error["data"]["retryable"]
    assert b.get(done.task_id).status == "completed"


def test_a_process_holding_a_stream_keeps_its_lease_and_is_alive_for_the_others(redis_url, prefix, rclient) -> None:
    lease_key = f"{prefix}lease:proc-a"
    with pair(redis_url, redis_url, prefix, lease=0.6, renew_every=0.1) as (a, b):
        assert not b.alive("proc-a")  # neither tasks nor streams: no lease
        assert a.alive("proc-a")  # a process is alive to itself
        a.hold("sess.s1")
        wait_until(lambda: b.alive("proc-a"), what="the lease taken for a held stream")
        ends = time.monotonic() + 4 * a.lease
        while time.monotonic() < ends:  # renewed while held
            assert b.alive("proc-a")
            time.sleep(0.05)
        a.let_go("sess.s1")
        wait_until(lambda: not rclient.exists(lease_key), what="the lease expiring once nothing is held")
        assert not b.alive("proc-a")
