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

__all__ = ["Deadlines", "Deadline"]

log = logging.getLogger("mcpkit.policy")


class Deadline:
    __slots__ = ("when", "callback", "_live")

    def __init__(self, when: float, callback: Callable[[], None], live: dict[Deadline, None]) -> None:
        self.when = when
        self.callback = callback
        self._live = live

    def cancel(self) -> bool:
        """Disarm; True when it was still armed. The timer thread disarms a deadline the same
        way before it fires, and a dict pop is atomic, so exactly one of the two wins."""
        return self._live.pop(self, 0) is None

    @property
    def active(self) -> bool:
        return self in self._live


class Deadlines:
    """The armed deadlines are a dict the timer thread scans every ``tick`` seconds while any
    exist: arming and disarming one is a dict insert and a dict pop (no lock, no wake-up of
    the thread), which is what a call that finishes in time pays. A deadline fires at most
    ``tick`` late. With nothing armed for a whole tick the thread parks until the next add."""

    def __init__(self, tick: float = 0.05, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tick = tick
        self._live: dict[Deadline, None] = {}
        self._cond = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._parked = True

    def add(self, seconds: float, callback: Callable[[], None]) -> Deadline:
        """Call ``callback`` (on the timer thread) ``seconds`` from now unless cancelled first."""
        entry = Deadline(self._clock() + seconds, callback, self._live)
        self._live[entry] = None
        if self._parked:
            with self._cond:
                if self._parked:
                    self._parked = False
                    if self._thread is None:
                        self._thread = threading.Thread(target=self._run, name="mcpkit-deadlines", daemon=True)
                        self._thread.start()
                    else:
                        self._cond.notify()
        return entry

    def pending(self) -> int:
        """Deadlines still armed (for tests and diagnostics)."""
        return len(self._live)

    def _run(self) -> None:
        idle = 0
        while True:
            with self._cond:
                if idle >= 2:  # nothing armed for a whole tick: sleep until an add wakes us
                    self._parked = True
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
            for entry in [e for e in list(live) if e.when <= now]:
                if live.pop(entry, 0) is None:  # still armed: nobody cancelled it meanwhile
                    try:
                        entry.callback()
                    except Exception:  # noqa: BLE001 - one bad callback must not stop the timer
                        log.exception("a deadline callback failed")
