"""WorkerPool: where sync handlers run on asyncio transports (HTTP), off the event loop.

Leaner than concurrent.futures for this one job: no Future per call, no done-callback
chain through the loop. A job is a function plus a completion callback that runs in the
worker (the session's completion path is thread-safe), so a call costs one hand-over to
a worker and, at most, one wake-up of the loop per batch of answers (the transport
coalesces those). Idle workers sleep on a condition; workers are started on demand up
to ``max_workers``.

Fairness. Every job carries the key of whoever asked for it (the HTTP transport passes the
principal, or the session): one key holds at most ``max_per_key`` workers at a time, and the
keys with waiting jobs are served round-robin, one job each in turn. So one client sending
forty slow calls takes its share of the workers and queues the rest behind its own calls,
while another client's call still finds a free worker at once. Jobs without a key (None) are
not capped; they take their turn in the same round.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

__all__ = ["WorkerPool"]

log = logging.getLogger("mcpkit")

Job = tuple[Callable[[], Any], Callable[[Any, BaseException | None], None]]


class WorkerPool:
    def __init__(self, max_workers: int, name: str = "mcpkit-worker", *, max_per_key: int | None = None) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be a positive integer")
        if max_per_key is not None and max_per_key < 1:
            raise ValueError("max_per_key must be a positive integer (or None for a quarter of max_workers)")
        self.max_workers = max_workers
        #: the most workers one key (a principal or a session) holds at once
        self.max_per_key = max_per_key if max_per_key is not None else max(1, max_workers // 4)
        self.name = name
        self._waiting: dict[Any, deque[Job]] = {}  # key -> its jobs not started yet
        self._running: dict[Any, int] = {}  # key -> its jobs running now
        self._turns: OrderedDict[Any, None] = OrderedDict()  # keys with a job that may start, in turn
        #: jobs given to a free worker as they came, when no key had a turn waiting (counted in _running)
        self._direct: deque[tuple[Any, Job]] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._idle = 0
        #: idle workers notified for a job and not yet awake: not free for the next one
        self._woken = 0
        self._workers = 0
        self._shutdown = False

    def _may_start(self, key: Any) -> bool:
        return key is None or self._running.get(key, 0) < self.max_per_key

    def submit(self, fn: Callable[[], Any], done: Callable[[Any, BaseException | None], None], key: Any = None) -> None:
        """Run ``fn()`` in a worker, then ``done(result, None)`` or ``done(None, exc)`` there."""
        if self._shutdown:
            raise RuntimeError("the worker pool is shut down")
        with self._cond:
            free = self._idle - self._woken  # idle workers no one has woken for a job yet
            if not self._turns and free > 0 and (key is None or self._running.get(key, 0) < self.max_per_key):
                # nobody is waiting and a worker is free: straight to it, no turn to take
                if key is not None:
                    self._running[key] = self._running.get(key, 0) + 1
                self._direct.append((key, (fn, done)))
                self._woken += 1
                self._cond.notify()
                return
            queue = self._waiting.get(key)
            if queue is None:
                queue = self._waiting[key] = deque()
            queue.append((fn, done))
            if key not in self._turns and (key is None or self._running.get(key, 0) < self.max_per_key):
                self._turns[key] = None
            if not self._turns:
                return  # over its key's share: it starts when one of that key's jobs ends
            if free > 0:
                self._woken += 1
                self._cond.notify()
            elif self._workers < self.max_workers:  # every idle worker is spoken for: one more
                self._workers += 1
                threading.Thread(target=self._work, name=f"{self.name}-{self._workers}", daemon=True).start()

    def _next(self) -> tuple[Any, Job] | None:
        """With the lock held: the next job in turn, or None at shutdown."""
        while not self._turns and not self._direct:
            if self._shutdown:
                return None
            self._idle += 1
            self._cond.wait()
            self._idle -= 1
            if self._woken:
                self._woken -= 1
        if self._direct:  # handed over while no key had a turn waiting: older than any turn
            return self._direct.popleft()
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
        self._running[key] = self._running.get(key, 0) + 1
        if queue and self._may_start(key):
            self._turns[key] = None  # to the back of the round
        return key, job

    def _ended(self, key: Any) -> None:
        """With the lock held: one job of ``key`` ended; its next job may now take a turn."""
        left = self._running[key] - 1
        if left:
            self._running[key] = left
        else:
            del self._running[key]
        if key in self._waiting and key not in self._turns and self._may_start(key):
            self._turns[key] = None

    def _work(self) -> None:
        cond = self._cond
        with cond:
            picked = self._next()
        while picked is not None:
            key, (fn, done) = picked
            try:
                result = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the completion callback
                self._complete(done, None, exc)
            else:
                self._complete(done, result, None)
            # an idle worker must not keep the last job (and the session it closes over) alive
            fn = done = result = picked = None  # type: ignore[assignment]
            with cond:
                if key is not None:  # an uncapped job ends without a count to settle
                    self._ended(key)
                picked = self._next()
        with cond:
            self._workers -= 1

    @staticmethod
    def _complete(done: Callable[[Any, BaseException | None], None], result: Any, exc: BaseException | None) -> None:
        try:
            done(result, exc)
        except Exception:  # noqa: BLE001 - a broken callback must not kill the worker
            log.exception("completion callback failed")

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
