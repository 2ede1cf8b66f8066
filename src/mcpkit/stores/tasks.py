"""Task stores for the ``io.modelcontextprotocol/tasks`` extension (TX-03, TX-04).

A store keeps task records by id. The interface is small so another backend can stand in:
``get(task_id)`` returns the record or None (expired records count as gone), ``put(record)``
saves it (a record is durable once ``put`` returned: TX-03), ``delete(task_id)`` forgets it.
A record is any object with ``task_id``, ``expires_at`` (``time.monotonic()`` seconds, or
None while it must not expire) and ``terminal``.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Protocol

__all__ = ["TaskStore", "MemoryTaskStore"]


class TaskStore(Protocol):
    def get(self, task_id: str) -> Any | None: ...

    def put(self, record: Any) -> None: ...

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
