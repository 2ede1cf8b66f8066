"""Task stores for the ``io.modelcontextprotocol/tasks`` extension (TX-03, TX-04).

A store keeps task records by id. The interface is small so another backend can stand in:
``get(task_id)`` returns the record or None (expired records count as gone), ``put(record)``
saves it (a record is durable once ``put`` returned: TX-03), ``delete(task_id)`` forgets it.
A record is any object with ``task_id``, ``expires_at`` (``time.monotonic()`` seconds, or
None while it must not expire) and ``terminal``.

A task ends once: a store shared by several processes (stores/redis_tasks.py) never overwrites
a task that ended, and its ``put`` returns False when it refused to, having copied the stored
outcome into the record (the task ended elsewhere meanwhile: it was cancelled there, or its
process was taken for dead). ``put`` returns None otherwise.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from datetime import datetime, timezone
from collections import OrderedDict
from typing import Any, Protocol

from ..protocol.errors import INTERNAL_ERROR

__all__ = ["OWNER_GONE", "SHUT_DOWN", "TERMINAL", "TaskCancelled", "TaskRecord", "TaskStore", "MemoryTaskStore"]
TERMINAL = frozenset({"completed", "failed", "cancelled"})


def _interrupted(what: str) -> dict[str, Any]:
    # TX-05: a JSON-RPC error fails a task. The data follows handler_error's shape (code,
    # retryable, suggestedFix): the call never ran to its end, so calling again may succeed.
    fix = "Call the tool again."
    return {"code": INTERNAL_ERROR, "message": f"The server process running this task {what} before the task "
            f"finished. Fix: {fix}", "data": {"code": "E_INTERRUPTED", "retryable": True, "suggestedFix": fix}}


#: the error of a task whose process stopped renewing its lease (killed, hung, or cut off from
#: the store) while it ran
OWNER_GONE = _interrupted("stopped")
#: the error of a task still running when its process shut down gracefully
SHUT_DOWN = _interrupted("shut down")


class TaskStore(Protocol):
    def get(self, task_id: str) -> Any | None: ...

    def put(self, record: Any) -> bool | None: ...

    def delete(self, task_id: str) -> None: ...


class MemoryTaskStore:
    """The embedded default: in memory, bounded to ``max_tasks`` records.

    Expired records are dropped on access; past the bound the oldest ended task goes first,
    and only when every record is still running the oldest record of all.
    """

    def __init__(self, *, max_tasks: int = 10_000) -> None:
        if max_tasks < 1:
            raise ValueError("max_tasks must be a positive integer")
        self.max_tasks = max_tasks
        self._records: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._expire(time.monotonic())
            return len(self._records)

    def get(self, task_id: str) -> Any | None:
        with self._lock:
            record = self._records.get(task_id)
            if record is None:
                return None
            if record.expires_at is not None and record.expires_at <= time.monotonic():
                del self._records[task_id]
                return None
            return record

    def put(self, record: Any) -> None:
        with self._lock:
            self._records[record.task_id] = record
            self._records.move_to_end(record.task_id)
            if len(self._records) > self.max_tasks:
                self._expire(time.monotonic())
            while len(self._records) > self.max_tasks:
                victim = next((k for k, r in self._records.items() if r.terminal), None)
                if victim is None:
                    victim = next(iter(self._records))
                del self._records[victim]

    def delete(self, task_id: str) -> None:
        with self._lock:
            self._records.pop(task_id, None)

    def _expire(self, now: float) -> None:
        for key in [k for k, r in self._records.items() if r.expires_at is not None and r.expires_at <= now]:
            del self._records[key]


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class TaskCancelled(Exception):
    """Raised out of a pending input when its task was cancelled."""


class TaskRecord:
    """One task: its public state plus the live parts of its run (not meant to be persisted)."""

    def __init__(self, task_id: str, ttl_ms: int, poll_ms: int) -> None:
        self.task_id = task_id
        self.status = "working"
        self.created_at = self.updated_at = _now()
        self.ttl_ms = ttl_ms
        self.poll_ms = poll_ms
        self.result: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
        self.input_requests: dict[str, dict[str, Any]] = {}
        self.expires_at: float | None = None
        #: TX-07: who may see and change the task: the principal that created it (None when
        #: anonymous) and, where the transport has a lasting session, that session
        self.principal: str | None = None
        self.binding: str | None = None
        # the run
        self.future: Any = None  # the asyncio task / worker marker running the handler
        self.loop: Any = None
        self.cancel_event = threading.Event()
        self._waiters: dict[str, tuple[str, concurrent.futures.Future[Any]]] = {}
        self._used_keys: set[str] = set()
        self._counts: dict[str, int] = {}
        #: one write of this record to a shared store at a time, each of its state when it starts,
        #: so the last write holds the newest state; and whether a background write is due that
        #: has not read the record yet (server/tasks.py: writes made for the event loop)
        self._writing = threading.Lock()
        self._write_due = False

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def _touch(self) -> None:
        self.updated_at = _now()
        self.expires_at = time.monotonic() + self.ttl_ms / 1000 if self.terminal else None

    def created(self) -> dict[str, Any]:
        """TX-02: the flat CreateTaskResult."""
        return {
            "resultType": "task",
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.updated_at,
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_ms,
        }

    def detailed(self) -> dict[str, Any]:
        """TX-04: the Task by status (never requestState)."""
        out: dict[str, Any] = {
            "resultType": "complete",
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.updated_at,
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_ms,
        }
        if self.status == "completed" and self.result is not None:
            out["result"] = self.result
        elif self.status == "failed" and self.error is not None:
            out["error"] = self.error
        elif self.status == "input_required":
            out["inputRequests"] = dict(self.input_requests)
        return out
