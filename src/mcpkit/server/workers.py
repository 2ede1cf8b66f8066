"""WorkerPool: where sync handlers run on asyncio transports (HTTP), off the event loop.

Leaner than concurrent.futures for this one job: no Future per call, no done-callback
chain through the loop. A job is a function plus a completion callback that runs in the
worker (the session's completion path is thread-safe), so a call costs one hand-over to
a worker and, at most, one wake-up of the loop per batch of answers (the transport
coalesces those). Workers are started on demand up to ``max_workers``.

Fairness. Every job carries the key of whoever asked for it (the HTTP transport passes the
principal, or the session): one key holds at most ``max_per_key`` workers at a time, and the
keys with waiting jobs are served round-robin, one job each in turn. So one client sending
forty slow calls takes its share of the workers and queues the rest behind its own calls,
while another client's call still gets a worker of its own, at most about ``spare_after``
later. Jobs without a key (None) are not capped; they take their turn in the same round.

Few threads. A worker that ends a job takes the next one in turn without sleeping, and a job
that comes while a worker is busy waits for that worker instead of waking another: on a stream
of fast calls one thread does the work, with no wake-up per call. Only when no worker is busy
is an idle one woken (the one that went to sleep last: it is warm, and the others sleep on) or
a new one started. That the busy worker comes back soon is a guess, and a slow job proves it
wrong, so a job that may start and has waited ``spare_after`` seconds gets a worker of its own:
the watcher, a thread that looks at the queue every ``spare_after`` while jobs come (and sleeps
once they stop), wakes or starts one for each key whose next job is that late, less the workers
already woken or started and not yet at the queue (a worker woken for one job is not counted
free for the next). A new job does not wait for the watcher when no job has been started or
handed out for ``spare_after``: every busy worker is then in a slow job.

``spare_after`` is two GIL switch intervals (10 ms) unless given: under load a fast job commonly
waits a few milliseconds for the GIL held by the event loop, and another thread would wait for
the GIL as well; a worker started for such a wait only adds switching.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

__all__ = ["WorkerPool"]

log = logging.getLogger("mcpkit")

#: the function, its completion callback, and when it was queued
Job = tuple[Callable[[], Any], Callable[[Any, BaseException | None], None], float]

#: empty polls after which the watcher sleeps until a job waits for a busy worker again
_LINGER = 50


class WorkerPool:
    def __init__(self, max_workers: int, name: str = "mcpkit-worker", *, max_per_key: int | None = None,
                 spare_after: float | None = None) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be a positive integer")
        if max_per_key is not None and max_per_key < 1:
            raise ValueError("max_per_key must be a positive integer (or None for a quarter of max_workers)")
        if spare_after is not None and not spare_after > 0:
            raise ValueError("spare_after must be a positive number of seconds")
        self.max_workers = max_workers
        #: the most workers one key (a principal or a session) holds at once
        self.max_per_key = max_per_key if max_per_key is not None else max(1, max_workers // 4)
        #: how long a job that may start waits for a busy worker before it gets one of its own
        self.spare_after = spare_after if spare_after is not None else 2 * sys.getswitchinterval()
        self.name = name
        self._waiting: dict[Any, deque[Job]] = {}  # key -> its jobs not started yet
        self._running: dict[Any, int] = {}  # key -> its jobs running now
        self._turns: OrderedDict[Any, None] = OrderedDict()  # keys with a job that may start, in turn
        self._lock = threading.Lock()
        #: idle workers, each asleep on a lock of its own, released to wake it; the last one in
        #: is woken first
        self._sleepers: list[Any] = []
        #: workers woken or started and not yet at the queue: each will take a job
        self._coming = 0
        self._workers = 0
        self._started = 0  # workers ever started: their names
        #: when a job was last started, or a worker woken or started for one
        self._progress = time.monotonic()
        self._alarm: Any = None  # held while the watcher sleeps; released to wake it
        self._watching = False  # the watcher polls (True) or sleeps until it is woken (False)
        self._shutdown = False

    def submit(self, fn: Callable[[], Any], done: Callable[[Any, BaseException | None], None], key: Any = None) -> None:
        """Run ``fn()`` in a worker, then ``done(result, None)`` or ``done(None, exc)`` there."""
        if self._shutdown:
            raise RuntimeError("the worker pool is shut down")
        now = time.monotonic()
        with self._lock:
            queue = self._waiting.get(key)
            if queue is None:
                queue = self._waiting[key] = deque()
            queue.append((fn, done, now))
            if key not in self._turns:
                if key is not None and self._running.get(key, 0) >= self.max_per_key:
                    return  # over its key's share: it starts when one of that key's jobs ends
                self._turns[key] = None
            if self._workers > len(self._sleepers) and now - self._progress < self.spare_after:
                # a worker is busy and jobs start: it takes this one when it is done, with no
                # wake-up; the watcher gives the job a worker of its own if that takes too long
                if not self._watching:
                    self._watch()
                return
            self._hand_over(now)

    def _hand_over(self, now: float) -> bool:
        """With the lock held: wake the idle worker that slept last, or start one. False at the cap."""
        if self._sleepers:
            self._sleepers.pop().release()
        elif self._workers < self.max_workers:
            self._workers += 1
            self._started += 1
            threading.Thread(target=self._work, name=f"{self.name}-{self._started}", daemon=True).start()
        else:
            return False
        self._coming += 1
        self._progress = now
        return True

    def _watch(self) -> None:
        """With the lock held: the watcher polls from now on (started the first time)."""
        self._watching = True
        if self._alarm is None:
            self._alarm = threading.Lock()
            self._alarm.acquire()
            threading.Thread(target=self._watcher, name=f"{self.name}-watcher", daemon=True).start()
        else:
            self._alarm.release()

    def _watcher(self) -> None:
        alarm = self._alarm
        lock = self._lock
        empty = 0
        while True:
            with lock:
                if self._shutdown:
                    return
                spare = self.spare_after
                if self._turns:
                    empty = 0
                    now = time.monotonic()
                    oldest = now
                    late = 0
                    for key in self._turns:  # each key's next job: the oldest it has
                        queued = self._waiting[key][0][2]
                        if now - queued >= spare:
                            late += 1
                        elif queued < oldest:
                            oldest = queued
                    for _ in range(late - self._coming):
                        if not self._hand_over(now):
                            break
                    timeout = spare if late else oldest + spare - now
                elif empty < _LINGER:
                    empty += 1
                    timeout = spare
                else:  # no job has waited for a while: sleep until one does (submit, _work)
                    empty = 0
                    self._watching = False
                    timeout = -1
            alarm.acquire(timeout=timeout)

    def _next(self) -> tuple[Any, Job] | None:
        """With the lock held: the next job in turn, or None when no job may start."""
        if not self._turns:
            return None
        key, _ = self._turns.popitem(last=False)
        queue = self._waiting[key]
        job = queue.popleft()
        if key is None:  # uncapped: no count to keep
            if queue:
                self._turns[key] = None  # to the back of the round
            else:
                del self._waiting[key]
            return key, job
        if not queue:
            del self._waiting[key]
        running = self._running[key] = self._running.get(key, 0) + 1
        if queue and running < self.max_per_key:
            self._turns[key] = None  # to the back of the round
        return key, job

    def _ended(self, key: Any) -> None:
        """With the lock held: one job of ``key`` ended; its next job may now take a turn."""
        left = self._running[key] - 1
        if left:
            self._running[key] = left
        else:
            del self._running[key]
        if key in self._waiting and key not in self._turns:  # it was at its cap: below it now
            self._turns[key] = None

    def _work(self) -> None:
        lock = self._lock
        me = threading.Lock()  # held while this worker sleeps; released to wake it
        me.acquire()
        monotonic = time.monotonic
        lock.acquire()
        self._coming -= 1  # started for a job: at the queue now
        while True:
            picked = self._next()
            if picked is None:
                if self._shutdown:
                    break
                self._sleepers.append(me)
                lock.release()
                me.acquire()
                lock.acquire()
                self._coming -= 1  # woken for a job (or the shutdown): at the queue now
                continue
            self._progress = monotonic()
            if self._turns and not self._watching:  # jobs left for the busy workers: watched
                self._watch()
            lock.release()
            key, (fn, done, _) = picked
            try:
                result = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the completion callback
                self._complete(done, None, exc)
            else:
                self._complete(done, result, None)
            # an idle worker must not keep the last job (and the session it closes over) alive
            fn = done = result = picked = None  # type: ignore[assignment]
            lock.acquire()
            if key is not None:  # an uncapped job ends without a count to settle
                self._ended(key)
        self._workers -= 1
        lock.release()

    @staticmethod
    def _complete(done: Callable[[Any, BaseException | None], None], result: Any, exc: BaseException | None) -> None:
        try:
            done(result, exc)
        except Exception:  # noqa: BLE001 - a broken callback must not kill the worker
            log.exception("completion callback failed")

    def shutdown(self) -> None:
        """Idle workers end now, busy ones once no job is left; the watcher at its next look."""
        with self._lock:
            self._shutdown = True
            sleepers, self._sleepers = self._sleepers, []
            self._coming += len(sleepers)
            for me in sleepers:
                me.release()
            if self._alarm is not None and not self._watching:
                self._watching = True
                self._alarm.release()
