"""Task records in Redis: a task's public state is visible to every process; its run stays home.

A process that runs tasks holds a lease on them: one key, ``{prefix}lease:{origin}``, that a
thread of its own renews every ``renew_every`` seconds while any of its tasks runs (one SET per
interval for all of them, never on the event loop). A process that is killed stops renewing it,
and once it expired (``lease`` seconds) any process that reads one of its running tasks fails it
(:data:`~mcpkit.stores.tasks.OWNER_GONE`: retryable), so no task says ``working`` for a process
that is gone.

The same lease says "this process is alive" for whatever else it owes the other processes: a
POST stream still owing answers ``hold``s it (transports/http_resume.py), and another process
that finds ``alive(owner)`` false answers those requests with a retryable error.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import _json
from .redis_base import LuaScript, down_errors, process_origin, sync_client, unavailable
from .tasks import OWNER_GONE, TERMINAL, _now

__all__ = ["DEFAULT_LEASE", "DEFAULT_RENEW", "PUBLIC_FIELDS", "RedisTaskStore", "is_remote"]

logger = logging.getLogger("mcpkit.stores.tasks")

#: what of a TaskRecord is persisted; everything else (future, loop, cancel_event, waiters, the
#: input-key counters) belongs to the run in the owning process
PUBLIC_FIELDS = ("task_id", "status", "created_at", "updated_at", "ttl_ms", "poll_ms", "result", "error",
                 "input_requests", "principal", "binding")

#: seconds a process's lease on its running tasks lasts without renewal, and how often it is
#: renewed: a killed process's tasks fail within about DEFAULT_LEASE seconds
DEFAULT_LEASE = 5.0
DEFAULT_RENEW = 1.0

#: how often, at most, ``put`` sweeps expired records out of the local table (seconds)
_SWEEP_EVERY = 30.0

# A task ends once: a record that ended (completed, failed, cancelled) is never overwritten, so
# an owner that finishes after another process took it for dead, or after it was cancelled
# elsewhere, cannot turn it back. Returns nil when ARGV[1] was written (with a TTL of ARGV[2]
# ms), else the stored record and its PTTL.
_PUT = LuaScript("""
local current = redis.call('GET', KEYS[1])
if current then
  local ok, record = pcall(cjson.decode, current)
  if ok and type(record) == 'table' then
    local status = record['status']
    if status == 'completed' or status == 'failed' or status == 'cancelled' then
      return {current, redis.call('PTTL', KEYS[1])}
    end
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
""")

# Compare and set: ARGV[2] (TTL ARGV[3] ms) replaces the record only if it is still ARGV[1].
_SWAP = LuaScript("""
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
""")


def is_remote(record: Any) -> bool:
    """True for a record rebuilt from Redis, whose task runs in another process."""
    return getattr(record, "remote", False) is True


class RedisTaskStore:
    """A :class:`~mcpkit.stores.tasks.TaskStore` in Redis (sync), for tasks seen by every process.

    ``put`` writes the record's public state (:data:`PUBLIC_FIELDS`, plus ``owner``: the
    process running it) as JSON at ``{prefix}task:{task_id}``, unless the stored task ended
    already: then it copies the stored outcome into the record and returns False. A task still
    running gets ``running_ttl`` seconds (24 h by default), refreshed on each ``put``; a task
    that ended keeps what is left of its ``ttl_ms`` (from ``expires_at``), so it expires in
    Redis when it would in memory. Records of tasks started in this process are also kept,
    live, in a local table: ``get`` returns that very object (the manager needs its future and
    cancel_event).

    The lease (module docstring): ``lease`` seconds, renewed every ``renew_every`` (at most half
    of ``lease``). If this process could not renew it in time (a pause, or Redis out of reach
    for longer than the lease), other processes may have failed its tasks meanwhile: it then
    fails them itself, so every process tells the same story, and calls the ``on_lapse``
    callbacks (:meth:`watch`) with them, so the manager stops their runs.

    A task of another process comes back as a fresh ``TaskRecord`` rebuilt from the JSON, with
    ``remote = True`` (see :func:`is_remote`), ``owner`` set, ``expires_at`` from the key's TTL,
    and no live parts: no future or loop, no waiters, an unset cancel_event. When it is still
    running and its owner's lease has expired, it is failed (in Redis, for every process) before
    it is returned. Changing such a record changes only what Redis says: cancelling it, or
    answering its input requests, does not reach the run. For that the integrator publishes on
    the bus to the owner (``owner`` is the owner's ``Bus.origin``), whose process applies the
    change to its live record; until it does, the run goes on, but what it writes when it ends
    is refused (the task ended already).
    """

    def __init__(
        self,
        client_or_url: Any,
        *,
        prefix: str = "mcpkit:",
        running_ttl: float = 86_400.0,
        origin: str | None = None,
        lease: float = DEFAULT_LEASE,
        renew_every: float = DEFAULT_RENEW,
    ) -> None:
        if not running_ttl > 0:
            raise ValueError("running_ttl must be a positive number of seconds")
        check_lease(lease, renew_every)
        self._client, self._owned = sync_client(client_or_url, "RedisTaskStore")
        self._down = down_errors()
        self.prefix = prefix
        self.running_ttl = float(running_ttl)
        self.lease = float(lease)
        self.renew_every = float(renew_every)
        self._origin = origin
        self._local: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._swept = time.monotonic()
        # the lease: ids of this process's running tasks (what it renews for), until when the
        # lease is known held (monotonic; from when the last renewal was sent), when the thread
        # renews next, and tasks whose lease lapsed, for the thread to report
        self._running: set[str] = set()
        self._held: set[str] = set()  # other things renewed for (``hold``): streams owing answers
        self._held_until = -math.inf
        self._next_beat = -math.inf
        self._lapsed: set[str] = set()
        self._on_lapse: list[Callable[[list[Any]], None]] = []
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._closed = False
        self._failing = False  # renewals fail (Redis out of reach): logged once per outage

    @property
    def origin(self) -> str:
        """The owner id written for tasks put from this process."""
        return self._origin if self._origin is not None else process_origin()

    def key(self, task_id: str) -> str:
        return f"{self.prefix}task:{task_id}"

    def lease_key(self, origin: str) -> str:
        return f"{self.prefix}lease:{origin}"

    def hold(self, name: str) -> None:
        """Keep this process's lease renewed while ``name`` is held (from any thread, never
        blocking: the lease thread renews it at once if nothing held it)."""
        with self._lock:
            if not self._running and not self._held:
                self._wake.notify()
            self._held.add(name)
            self._start()

    def let_go(self, name: str) -> None:
        with self._lock:
            self._held.discard(name)

    def alive(self, origin: str) -> bool:
        """Does ``origin``'s lease stand (it renews it while it runs tasks or holds anything)?"""
        if origin == self.origin:
            return True
        try:
            return bool(self._client.exists(self.lease_key(origin)))
        except self._down as exc:
            raise unavailable("reading a process's lease", exc) from exc

    def watch(self, on_lapse: Callable[[list[Any]], None]) -> None:
        """Call ``on_lapse(records)`` (in the lease's thread) with this process's running tasks
        when its lease lapsed; they were failed already."""
        self._on_lapse.append(on_lapse)

    def put(self, record: Any) -> bool | None:
        remote = is_remote(record)
        state = {name: getattr(record, name) for name in PUBLIC_FIELDS}
        # a copy (atomic under the GIL): the event loop may add an input request while this
        # thread writes the record (server/tasks.py writes it in the background there)
        state["input_requests"] = dict(state["input_requests"] or {})
        now = time.monotonic()
        if remote:
            state["owner"] = getattr(record, "owner", None)
            if getattr(record, "leased", False):
                state["leased"] = True
        else:
            state["owner"] = self.origin
            state["leased"] = True  # readers check this owner's lease (older records have none)
        expires_at = getattr(record, "expires_at", None)
        if expires_at is not None:
            ttl_ms = max(1, math.ceil((expires_at - now) * 1000))
        elif getattr(record, "terminal", False):
            ttl_ms = max(1, int(record.ttl_ms))
        else:
            ttl_ms = int(self.running_ttl * 1000)
        running = not remote and not record.terminal
        if running and now - (self._held_until - self.lease) > 1.5 * self.renew_every:
            # the thread has not renewed lately (no task ran): the lease is written before the
            # first record that names it, so no reader finds a running task without it
            with self._lock:
                new = record.task_id not in self._running
            self._renew(record.task_id if new else None)
        data = _json.dumps(state)
        try:
            stored = _PUT(self._client, [self.key(record.task_id)], [data, ttl_ms])
        except self._down as exc:
            raise unavailable("saving a task", exc) from exc
        if stored is not None:
            self._adopt(record, _json.loads(stored[0]), int(stored[1]))
        if not remote:
            with self._lock:
                self._local[record.task_id] = record
                if not record.terminal:
                    if not self._running:
                        self._wake.notify()  # the thread renews while tasks run
                    self._running.add(record.task_id)
                    self._start()
                else:
                    self._running.discard(record.task_id)
                if now - self._swept > _SWEEP_EVERY:
                    self._sweep(now)
        return None if stored is None else False

    def get(self, task_id: str) -> Any | None:
        with self._lock:
            record = self._local.get(task_id)
            if record is not None:
                if record.expires_at is not None and record.expires_at <= time.monotonic():
                    del self._local[task_id]
                    return None
                return record
        for _ in range(3):  # a record that changes while it is being failed is read again
            data, pttl = self._read(task_id)
            if data is None:
                return None
            state = _json.loads(data)
            if not self._abandoned(state):
                return self._rebuild(state, pttl)
            failed = {**state, "status": "failed", "error": OWNER_GONE, "input_requests": {}, "updated_at": _now()}
            ttl_ms = max(1, int(state.get("ttl_ms") or 1))
            try:
                swapped = _SWAP(self._client, [self.key(task_id)], [data, _json.dumps(failed), ttl_ms])
            except self._down as exc:
                raise unavailable("failing a task whose process is gone", exc) from exc
            if swapped:
                return self._rebuild(failed, ttl_ms)
        return self._rebuild(state, pttl)

    def delete(self, task_id: str) -> None:
        with self._lock:
            self._local.pop(task_id, None)
            self._running.discard(task_id)
        try:
            self._client.delete(self.key(task_id))
        except self._down as exc:
            raise unavailable("deleting a task", exc) from exc

    def local_ids(self) -> list[str]:
        """Ids of the tasks this process runs (their live records are kept here)."""
        with self._lock:
            return list(self._local)

    def close(self) -> None:
        """Stop renewing the lease (tasks still running here fail once it expired; settle them
        first, TaskManager.close), and close the client if this store built it from a URL."""
        with self._lock:
            self._closed = True
            self._wake.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5.0)
        if self._owned:
            self._client.close()

    # ------------------------------------------------------------------ reading

    def _read(self, task_id: str) -> tuple[bytes | None, int]:
        try:
            with self._client.pipeline(transaction=True) as pipe:
                pipe.get(self.key(task_id))
                pipe.pttl(self.key(task_id))
                data, pttl = pipe.execute()
        except self._down as exc:
            raise unavailable("reading a task", exc) from exc
        return data, pttl

    def _abandoned(self, state: dict[str, Any]) -> bool:
        """Is this a running task whose owner's lease expired?"""
        owner = state.get("owner")
        if state.get("status") in TERMINAL or not state.get("leased") or not isinstance(owner, str):
            return False
        if owner == self.origin:
            return False  # ours, yet not in the local table: not for the lease to say
        try:
            return not self._client.exists(self.lease_key(owner))
        except self._down as exc:
            raise unavailable("reading a task owner's lease", exc) from exc

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
        record.leased = state.get("leased") is True  # type: ignore[attr-defined]
        return record

    @staticmethod
    def _adopt(record: Any, state: dict[str, Any], pttl: int) -> None:
        """A put refused: the task ended elsewhere. The record takes the stored outcome."""
        for name in ("status", "updated_at", "result", "error"):
            setattr(record, name, state.get(name))
        record.input_requests = {}
        record.expires_at = time.monotonic() + max(pttl, 1) / 1000

    # ------------------------------------------------------------------ the lease

    def _start(self) -> None:
        # with the lock held
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._heartbeat, name="mcpkit-task-lease", daemon=True)
            self._thread.start()

    def _renew(self, new: str | None = None) -> bool:
        """SET the lease key; True if Redis took it. ``new``: a task being created (it was not
        running while the lease may have lapsed)."""
        sent = time.monotonic()
        try:
            self._client.set(self.lease_key(self.origin), b"1", px=max(1, int(self.lease * 1000)))
        except self._down as exc:
            with self._lock:
                self._next_beat = sent + self.renew_every
                failing, self._failing = self._failing, True
            if not failing:
                logger.warning("could not renew the lease of this process's tasks, Redis is unreachable (%s: %s); "
                               "they fail %g s after the last renewal", type(exc).__name__, exc, self.lease)
            if new is not None:
                raise unavailable("taking the lease of a new task", exc) from exc
            return False
        with self._lock:
            if sent > self._held_until:
                # not renewed in time: other processes may have failed these tasks meanwhile
                lapsed = self._running - {new} if new is not None else set(self._running)
                if lapsed:
                    self._lapsed |= lapsed
                    self._wake.notify()
            self._held_until = max(self._held_until, sent + self.lease)
            self._next_beat = sent + self.renew_every
            self._failing = False
        return True

    def _heartbeat(self) -> None:
        """The lease's thread: renews while tasks run or anything is held, sleeps otherwise."""
        while True:
            with self._lock:
                while True:
                    if self._closed:
                        return
                    lapsed, self._lapsed = self._lapsed, set()
                    if lapsed:
                        records = [self._local[i] for i in lapsed if i in self._local]
                        break
                    if not self._running and not self._held:
                        self._wake.wait()
                        continue
                    delay = self._next_beat - time.monotonic()
                    if delay <= 0:
                        records = None
                        break
                    self._wake.wait(delay)
            try:
                if records is None:
                    self._renew()
                else:
                    self._lapse(records)
            except Exception:  # noqa: BLE001 - the thread must live on: its death would fail every task
                logger.exception("the task lease thread")
                with self._lock:
                    self._next_beat = time.monotonic() + self.renew_every

    def _lapse(self, records: list[Any]) -> None:
        running = [r for r in records if not r.terminal]
        if not running:
            return
        logger.warning("the lease of this process's tasks lapsed; %d running task(s) fail", len(running))
        if not self._on_lapse:
            for record in running:  # no manager to stop the runs: the records at least say so
                record.status, record.error = "failed", OWNER_GONE
                record.input_requests.clear()
                record._touch()
                self.put(record)
        for callback in self._on_lapse:
            callback(running)


def check_lease(lease: Any, renew_every: Any) -> None:
    """ValueError unless ``lease`` and ``renew_every`` are positive seconds, renew at most half
    of the lease (a renewal that is a little late must not let it lapse)."""
    for name, value in (("task_lease", lease), ("task_renew", renew_every)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
    if renew_every > lease / 2:
        raise ValueError(f"task_renew ({renew_every:g} s) must be at most half of task_lease ({lease:g} s), "
                         "so that a late renewal does not let the lease expire")
