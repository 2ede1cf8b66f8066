"""WorkerPool: where sync handlers run on asyncio transports (HTTP), off the event loop.

Leaner than concurrent.futures for this one job: no Future per call, no done-callback
chain through the loop. A job is a function plus a completion callback that runs in the
worker (the session's completion path is thread-safe), so a call costs one hand-over to
a worker and, at most, one wake-up of the loop per batch of answers (the transport
coalesces those). Idle workers sleep on a condition; workers are started on demand up
to ``max_workers``.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["WorkerPool"]

log = logging.getLogger("mcpkit")

Job = tuple[Callable[[], Any], Callable[[Any, BaseException | None], None]]


class WorkerPool:
    def __init__(self, max_workers: int, name: str = "mcpkit-worker") -> None:
        self.max_workers = max_workers
        self.name = name
        self._jobs: deque[Job] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._idle = 0
        self._workers = 0
        self._shutdown = False

    def submit(self, fn: Callable[[], Any], done: Callable[[Any, BaseException | None], None]) -> None:
        """Run ``fn()`` in a worker, then ``done(result, None)`` or ``done(None, exc)`` there."""
        if self._shutdown:
            raise RuntimeError("the worker pool is shut down")
        with self._cond:
            self._jobs.append((fn, done))
            if self._idle:
                self._cond.notify()
            elif self._workers < self.max_workers:
                self._workers += 1
                threading.Thread(target=self._work, name=f"{self.name}-{self._workers}", daemon=True).start()

    def _work(self) -> None:
        jobs = self._jobs
        cond = self._cond
        while True:
            try:
                fn, done = jobs.popleft()
            except IndexError:
                with cond:
                    while not jobs and not self._shutdown:
                        self._idle += 1
                        cond.wait()
                        self._idle -= 1
                    if self._shutdown and not jobs:
                        self._workers -= 1
                        return
                continue
            try:
                result = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the completion callback
                self._complete(done, None, exc)
            else:
                self._complete(done, result, None)
            # an idle worker must not keep the last job (and the session it closes over) alive
            fn = done = result = None  # type: ignore[assignment]

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
