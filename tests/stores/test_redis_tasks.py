"""RedisTaskStore: a task's public state is seen by every process; its run stays with its owner."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from mcpkit.server.tasks import TaskManager, TaskRecord
from mcpkit.stores.redis import RedisTaskStore, is_remote
from mcpkit.stores.redis_tasks import PUBLIC_FIELDS


@pytest.fixture
def stores(redis_url: str, prefix: str):
    a = RedisTaskStore(redis_url, prefix=prefix, origin="proc-a")
    b = RedisTaskStore(redis_url, prefix=prefix, origin="proc-b")
    yield a, b
    a.close()
    b.close()


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
