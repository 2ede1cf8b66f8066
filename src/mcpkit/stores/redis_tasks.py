"""Task records in Redis: a task's public state is visible to every process; its run stays home."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from .. import _json
from .redis_base import down_errors, process_origin, sync_client, unavailable

__all__ = ["PUBLIC_FIELDS", "RedisTaskStore", "is_remote"]

#: what of a TaskRecord is persisted; everything else (future, loop, cancel_event, waiters, the
#: input-key counters) belongs to the run in the owning process
PUBLIC_FIELDS = ("task_id", "status", "created_at", "updated_at", "ttl_ms", "poll_ms", "result", "error",
                 "input_requests", "principal", "binding")

#: how often, at most, ``put`` sweeps expired records out of the local table (seconds)
_SWEEP_EVERY = 30.0


def is_remote(record: Any) -> bool:
    """True for a record rebuilt from Redis, whose task runs in another process."""
    return getattr(record, "remote", False) is True


class RedisTaskStore:
    """A :class:`~mcpkit.stores.tasks.TaskStore` in Redis (sync), for tasks seen by every process.

    ``put`` writes the record's public state (:data:`PUBLIC_FIELDS`, plus ``owner``: the
    process running it) as JSON at ``{prefix}task:{task_id}``. A task still running gets
    ``running_ttl`` seconds (24 h by default), refreshed on each ``put``; a task that ended keeps
    what is left of its ``ttl_ms`` (from ``expires_at``), so it expires in Redis when it would
    in memory. Records of tasks started in this process are also kept, live, in a local table:
    ``get`` returns that very object (the manager needs its future and cancel_event).

    A task of another process comes back as a fresh ``TaskRecord`` rebuilt from the JSON, with
    ``remote = True`` (see :func:`is_remote`), ``owner`` set, ``expires_at`` from the key's TTL,
    and no live parts: no future or loop, no waiters, an unset cancel_event. Changing such a
    record changes only what Redis says: cancelling it, or answering its input requests, does
    not reach the run. For that the integrator publishes on the bus to the owner (``owner`` is
    the owner's ``Bus.origin``), whose process applies the change to its live record; until it
    does, the owner may still overwrite the state (e.g. complete a task another process marked
    cancelled).
    """

    def __init__(
        self,
        client_or_url: Any,
        *,
        prefix: str = "mcpkit:",
        running_ttl: float = 86_400.0,
        origin: str | None = None,
    ) -> None:
        if not running_ttl > 0:
            raise ValueError("running_ttl must be a positive number of seconds")
        self._client, self._owned = sync_client(client_or_url, "RedisTaskStore")
        self._down = down_errors()
        self.prefix = prefix
        self.running_ttl = float(running_ttl)
        self._origin = origin
        self._local: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._swept = time.monotonic()

    @property
    def origin(self) -> str:
        """The owner id written for tasks put from this process."""
        return self._origin if self._origin is not None else process_origin()

    def key(self, task_id: str) -> str:
        return f"{self.prefix}task:{task_id}"

    def put(self, record: Any) -> None:
        remote = is_remote(record)
        state = {name: getattr(record, name) for name in PUBLIC_FIELDS}
        state["owner"] = getattr(record, "owner", None) if remote else self.origin
        now = time.monotonic()
        expires_at = getattr(record, "expires_at", None)
        if expires_at is not None:
            ttl_ms = max(1, math.ceil((expires_at - now) * 1000))
        elif getattr(record, "terminal", False):
            ttl_ms = max(1, int(record.ttl_ms))
        else:
            ttl_ms = int(self.running_ttl * 1000)
        data = _json.dumps(state)
        try:
            self._client.set(self.key(record.task_id), data, px=ttl_ms)
        except self._down as exc:
            raise unavailable("saving a task", exc) from exc
        if not remote:
            with self._lock:
                self._local[record.task_id] = record
                if now - self._swept > _SWEEP_EVERY:
                    self._sweep(now)

    def get(self, task_id: str) -> Any | None:
        with self._lock:
            record = self._local.get(task_id)
            if record is not None:
                if record.expires_at is not None and record.expires_at <= time.monotonic():
                    del self._local[task_id]
                    return None
                return record
        try:
            with self._client.pipeline(transaction=True) as pipe:
                pipe.get(self.key(task_id))
                pipe.pttl(self.key(task_id))
                data, pttl = pipe.execute()
        except self._down as exc:
            raise unavailable("reading a task", exc) from exc
        if data is None:
            return None
        return self._rebuild(_json.loads(data), pttl)

    def delete(self, task_id: str) -> None:
        with self._lock:
            self._local.pop(task_id, None)
        try:
            self._client.delete(self.key(task_id))
        except self._down as exc:
            raise unavailable("deleting a task", exc) from exc

    def local_ids(self) -> list[str]:
        """Ids of the tasks this process runs (their live records are kept here)."""
        with self._lock:
            return list(self._local)

    def close(self) -> None:
        """Close the client if this store built it from a URL."""
        if self._owned:
            self._client.close()

    def _sweep(self, now: float) -> None:
        # with the lock held
        self._swept = now
        for task_id in [k for k, r in self._local.items() if r.expires_at is not None and r.expires_at <= now]:
            del self._local[task_id]

    @staticmethod
    def _rebuild(state: dict[str, Any], pttl: int) -> Any:
        from .tasks import TaskRecord

        record = TaskRecord(state["task_id"], state["ttl_ms"], state["poll_ms"])
        for name in PUBLIC_FIELDS:
            setattr(record, name, state.get(name))
        if record.input_requests is None:
            record.input_requests = {}
        record.expires_at = time.monotonic() + pttl / 1000 if record.terminal and pttl > 0 else None
        record.remote = True  # type: ignore[attr-defined]
        record.owner = state.get("owner")  # type: ignore[attr-defined]
        return record
