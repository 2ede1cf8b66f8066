"""One timer thread for the deadlines of sync tool calls.

An async handler's timeout cancels its task. A sync handler runs on a thread, and Python
cannot interrupt a thread: when its deadline passes, the call is answered with E_TIMEOUT at
once and the request's ``ctx.cancelled`` is set so a cooperative handler can stop; whatever
the handler returns afterwards is dropped. One shared thread watches the deadlines, so a
call that finishes in time costs a dict insert and a dict pop, not a thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["Deadlines"]

log = logging.getLogger("mcpkit.policy")


class Deadlines:
    """The armed deadlines are a dict (callback -> when) the timer thread scans every ``tick``
    seconds while any exist: arming and disarming one is a dict insert and a dict pop (no
    lock, no wake-up of the thread, no object), which is what a call that finishes in time
    pays. A deadline fires at most ``tick`` late. With nothing armed for a whole tick the
    thread parks until the next add."""

    def __init__(self, tick: float = 0.05, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tick = tick
        self._live: dict[Callable[[], None], float] = {}
        self._cond = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._parked = True

    def add(self, seconds: float, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (on the timer thread) ``seconds`` from now unless :meth:`cancel`
        is given it first. The callback is the deadline's handle: a fresh one per deadline
        (a lambda or a partial), since one armed twice is one deadline."""
        self._live[callback] = self._clock() + seconds
        if self._parked:
            self._unpark()
        return callback

    def cancel(self, handle: Callable[[], None]) -> bool:
        """Disarm; True when it was still armed. The timer thread disarms a deadline the same
        way before it fires, and a dict pop is atomic, so exactly one of the two wins."""
        return self._live.pop(handle, None) is not None

    def _unpark(self) -> None:
        with self._cond:
            if self._parked:
                self._parked = False
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="mcpkit-deadlines", daemon=True)
                    self._thread.start()
                else:
                    self._cond.notify()

    def pending(self) -> int:
        """Deadlines still armed (for tests and diagnostics)."""
        return len(self._live)

    def _run(self) -> None:
        idle = 0
        while True:
            with self._cond:
                if idle >= 2:  # nothing armed for a whole tick: sleep until an add wakes us
                    self._parked = True
                    # an add that armed before it saw the flag set is seen here: never park on it
                    if self._live:
                        self._parked = False
                    while self._parked:
                        self._cond.wait()
                    idle = 0
                else:
                    self._cond.wait(self._tick)
            live = self._live
            if not live:
                idle += 1
                continue
            idle = 0
            now = self._clock()
            for callback in [c for c, when in list(live.items()) if when <= now]:
                if live.pop(callback, None) is not None:  # still armed: nobody cancelled it meanwhile
                    try:
                        callback()
                    except Exception:  # noqa: BLE001 - one bad callback must not stop the timer
                        log.exception("a deadline callback failed")
