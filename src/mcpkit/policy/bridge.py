"""A bridge: the server's link to the thing it drives, with health probes, backoff and a breaker.

Many MCP servers front something that comes and goes: an editor plugin over a socket, a desktop
app, a SaaS API. A :class:`Bridge` owns the connection to it:

* it connects (exponential backoff with jitter while the peer is away), probes the live
  connection every ``probe_interval`` seconds and reconnects when a probe fails;
* tools reach the peer through :meth:`Bridge.call` / :meth:`Bridge.acall`, which fail fast with a
  retryable ``E_NOT_CONNECTED`` :class:`ToolError` while down ("retry after N ms / start the
  editor", not a stack trace);
* a circuit breaker counts consecutive link failures: at ``failure_threshold`` it drops the
  connection and refuses calls for ``reset_timeout`` seconds, then goes half-open and tries one
  reconnect + probe, which closes it (up again) or re-opens it;
* :meth:`Bridge.on_change` reports each up/down transition exactly once: what a server needs to
  hide the tools that require the bridge and send ``notifications/tools/list_changed``.

``connect``, ``probe`` and ``close`` are plain synchronous callables: they run on the bridge's
own daemon thread (or in whoever calls :meth:`Bridge.step`), never on the event loop. A user whose
client is async wraps it, e.g. ``connect=lambda: asyncio.run_coroutine_threadsafe(c(), loop).result()``.

The whole state machine is driven by :meth:`Bridge.step`, which does whatever is due at a given
time and says how long until the next thing is due; the thread only loops ``wait(step())``. Tests
drive ``step`` with a fake clock and never need the thread.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from mcpkit.protocol.errors import E_NOT_CONNECTED, ToolError

__all__ = ["BreakerState", "Bridge"]

T = TypeVar("T")
BreakerState = Literal["closed", "open", "half_open"]

logger = logging.getLogger("mcpkit.bridge")

#: the longest the loop sleeps in one go, so a clock jump or a missed wake-up costs at most this
_MAX_WAIT = 60.0


class Bridge:
    """A supervised connection to an external peer; see the module docstring.

    ``connect()`` returns the connection object (anything, even ``None``); ``probe(conn)`` raises
    or returns ``False`` when the peer is unhealthy (any other return value is healthy); a
    fresh connection is probed once before the bridge reports up. ``close(conn)`` is best effort:
    its exceptions are logged and dropped. All three are synchronous and run off the event loop.

    ``call_errors`` are the exception types that mean "the link failed" (as opposed to a bug in
    the tool): they count towards the breaker and reach the caller as a retryable
    ``E_NOT_CONNECTED`` ToolError. Backoff delays are ``backoff_initial * backoff_factor**n``
    capped at ``backoff_max``, then scaled by a random factor in ``[1 - jitter, 1 + jitter]``.
    """

    def __init__(
        self,
        name: str,
        connect: Callable[[], Any],
        *,
        probe: Callable[[Any], Any] | None = None,
        close: Callable[[Any], Any] | None = None,
        probe_interval: float = 5.0,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        backoff_factor: float = 2.0,
        jitter: float = 0.1,
        failure_threshold: int = 3,
        reset_timeout: float = 30.0,
        call_errors: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError, OSError),
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        if not name:
            raise ValueError("a bridge needs a name")
        if not (probe_interval > 0 and 0 < backoff_initial <= backoff_max and backoff_factor >= 1
                and 0 <= jitter < 1 and failure_threshold >= 1 and reset_timeout >= 0):
            raise ValueError(
                "need probe_interval > 0, 0 < backoff_initial <= backoff_max, backoff_factor >= 1, "
                "0 <= jitter < 1, failure_threshold >= 1 and reset_timeout >= 0"
            )
        self.name = name
        self.call_errors = tuple(call_errors)
        self._connect = connect
        self._probe = probe
        self._close = close
        self._probe_interval = float(probe_interval)
        self._backoff_initial = float(backoff_initial)
        self._backoff_max = float(backoff_max)
        self._backoff_factor = float(backoff_factor)
        self._jitter = float(jitter)
        self._threshold = failure_threshold
        self._reset_timeout = float(reset_timeout)
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()

        self._lock = threading.Lock()  # guards every field below
        self._step_lock = threading.Lock()  # one step() at a time (thread, or a test)
        self._conn: Any = None
        self._connected = False
        # Bumped whenever the connection is replaced or dropped, so a late probe result or call
        # failure about a connection that is already gone changes nothing.
        self._gen = 0
        # What callbacks were last told, and the hot path's one-read answer to "up?".
        self._up = False
        self._transitions = 0  # how many times _up changed
        self._breaker: BreakerState = "closed"
        self._open_until = 0.0
        self._consecutive = 0  # consecutive call failures (the breaker's count)
        self._attempts = 0  # consecutive failed connect attempts (the backoff's exponent)
        self._next_connect = clock()  # the first attempt is due at once
        self._next_probe = 0.0
        self._stopped = False
        self._last_error: str | None = None
        self._stats = {"connects": 0, "disconnects": 0, "failures": 0, "probes": 0}
        self._callbacks: list[Callable[[bool], None]] = []
        self._pending: list[bool] = []  # transitions not yet delivered, in order
        self._draining = False
        # wait_up's listeners: told of a transition once every on_change callback has run, so
        # whoever waited sees a server that has already shown (and announced) what needs the bridge
        self._waiters: list[Callable[[bool], None]] = []
        self._thread: threading.Thread | None = None
        self._halt = threading.Event()  # one per thread run; set by stop()
        self._wake = threading.Event()  # cuts the loop's wait short after an outside change

    # --- state ------------------------------------------------------------------------------

    @property
    def up(self) -> bool:
        """Connected and the breaker not open: calls go through."""
        return self._up

    @property
    def transitions(self) -> int:
        """How many times :attr:`up` has changed. :meth:`on_change` callbacks run a moment after
        ``up`` changes, on whichever thread changed it: what is cached from the bridge's state (a
        server's tools/list) compares this with the count it was made under, not to serve, in
        that moment, what was true before."""
        return self._transitions

    @property
    def connection(self) -> Any:
        """The live connection object; raises the E_NOT_CONNECTED ToolError while down."""
        with self._lock:
            if self._up:
                return self._conn
            raise self._down_error_locked(self._clock())

    @property
    def breaker(self) -> BreakerState:
        return self._breaker

    @property
    def last_error(self) -> str | None:
        """The most recent failure (connect, probe, call or mark_down), kept after recovery."""
        return self._last_error

    @property
    def stats(self) -> dict[str, int]:
        """Counters: connects (successful), disconnects (live connections dropped), failures, probes."""
        with self._lock:
            return dict(self._stats)

    def __repr__(self) -> str:
        return f"<Bridge {self.name!r} {'up' if self._up else 'down'} breaker={self._breaker}>"

    def on_change(self, callback: Callable[[bool], None]) -> None:
        """Call ``callback(up)`` on every up/down transition, outside the bridge's lock.

        Each transition is delivered once and in order; a callback's exception is logged on the
        ``mcpkit.bridge`` logger and does not reach the bridge.
        """
        with self._lock:
            self._callbacks.append(callback)

    async def wait_up(self, timeout: float) -> bool:
        """Wait until the bridge is up (True) or ``timeout`` seconds pass (False).

        For start-up ("wait for the editor before serving") and tests; the bridge's own thread
        does the connecting, this only listens for the transition. It returns once every
        :meth:`on_change` callback has seen the transition: a server has already listed (and
        announced) the tools that need the bridge, so a client that connects next sees them
        and gets no late ``list_changed`` for a change that happened before it came.
        """
        import asyncio

        loop = asyncio.get_running_loop()
        arrived = loop.create_future()

        def on_delivered(up: bool) -> None:
            if up:
                loop.call_soon_threadsafe(lambda: arrived.done() or arrived.set_result(True))

        with self._lock:
            if self._up and not self._pending and not self._draining:
                return True  # up, and every callback has been told
            self._waiters.append(on_delivered)
        try:
            try:
                await asyncio.wait_for(arrived, timeout)
            except TimeoutError:
                return self._up
            return True
        finally:
            with self._lock:
                self._waiters.remove(on_delivered)

    # --- calls (the hot path) ---------------------------------------------------------------

    def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(conn, *args, **kwargs)`` on the live connection, with the breaker's accounting."""
        gen = self._gen
        if not self._up:
            raise self.not_connected_error()
        try:
            result = fn(self._conn, *args, **kwargs)
        except ToolError:
            raise  # deliberate refusals are the tool's answer, not a link failure
        except self.call_errors as exc:
            raise self._call_failed(exc, gen) from exc
        if self._consecutive:  # only touch the lock when there is a count to reset
            self._reset_count()
        return result

    async def acall(self, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
        """:meth:`call` for an async ``fn``; the same accounting."""
        gen = self._gen
        if not self._up:
            raise self.not_connected_error()
        try:
            result = await fn(self._conn, *args, **kwargs)
        except ToolError:
            raise
        except self.call_errors as exc:
            raise self._call_failed(exc, gen) from exc
        if self._consecutive:
            self._reset_count()
        return result

    def _reset_count(self) -> None:
        with self._lock:
            self._consecutive = 0

    def not_connected_error(self) -> ToolError:
        """The ToolError a call gets while the bridge is down (for callers that check ``up``)."""
        with self._lock:
            return self._down_error_locked(self._clock())

    def mark_down(self, reason: str) -> None:
        """Report a failure noticed elsewhere (a socket error in a tool): drop and reconnect at once.

        It counts towards the breaker like a failed call; while down it only sets :attr:`last_error`.
        """
        with self._lock:
            self._last_error = reason
            if not self._up:
                return
            now = self._clock()
            doomed = self._count_failure_locked(reason, now) or self._drop_locked()
            self._next_connect = now  # a transient drop: try again at once
        self._after_outside_change(doomed)

    def _call_failed(self, exc: BaseException, gen: int) -> ToolError:
        now = self._clock()
        doomed: list[Any] = []
        with self._lock:
            # A failure on a connection that has since been replaced says nothing about this one.
            if gen == self._gen and self._up:
                doomed = self._count_failure_locked(_describe(exc), now)
            if not self._up:
                err = self._down_error_locked(now)
            else:
                message = f"{self.name} call failed with a connection error ({type(exc).__name__})."
                err = self._error_locked(message, self._backoff_initial)
        if doomed:
            self._after_outside_change(doomed)
        return err

    def _count_failure_locked(self, error: str, now: float) -> list[Any]:
        """One more consecutive failure; at the threshold the breaker opens (returns what to close)."""
        self._stats["failures"] += 1
        self._last_error = error
        self._consecutive += 1
        if self._consecutive < self._threshold:
            return []
        self._breaker = "open"
        self._open_until = now + self._reset_timeout
        logger.warning("bridge %s: circuit breaker open after %d consecutive failures", self.name, self._consecutive)
        return self._drop_locked()

    # --- the state machine ------------------------------------------------------------------

    def step(self, now: float | None = None) -> float:
        """Do whatever is due at ``now`` (default: the clock); return seconds until the next thing.

        Due things are a connect attempt (while down), the half-open trial (once the breaker's
        reset_timeout has passed) and a probe (while up). ``connect``/``probe``/``close`` run
        without the bridge's lock held, so calls are never blocked behind a slow peer.
        """
        with self._step_lock:
            t = self._clock() if now is None else now
            with self._lock:
                if self._stopped:
                    return self._probe_interval
                if self._breaker == "open":
                    if t < self._open_until:
                        return self._open_until - t
                    self._breaker = "half_open"
                    action = "connect"
                elif not self._connected:
                    if t < self._next_connect:
                        return self._next_connect - t
                    action = "connect"
                elif self._probe is None:
                    return self._probe_interval
                elif t < self._next_probe:
                    return self._next_probe - t
                else:
                    action = "probe"
                conn, gen = self._conn, self._gen
            # The peer's callables may take a while: re-read the clock after them unless told the time.
            if action == "connect":
                self._attempt(now)
            else:
                self._check(conn, gen, now)
            t = self._clock() if now is None else now
            with self._lock:
                return self._due_in_locked(t)

    def _attempt(self, now: float | None) -> None:
        """One connect (+ probe) attempt; on success the bridge is up and the breaker closed."""
        conn: Any = None
        made = False
        error: str | None = None
        try:
            conn = self._connect()
            made = True
            if self._probe is not None:
                with self._lock:
                    self._stats["probes"] += 1
                if self._probe(conn) is False:
                    error = "probe reported the new connection unhealthy"
        except Exception as exc:  # noqa: BLE001 - anything the peer's client raises means "not now"
            error = _describe(exc)
        t = self._clock() if now is None else now
        doomed: list[Any] = []
        with self._lock:
            if self._stopped:  # stop() ran while we were connecting
                if made:
                    doomed.append(conn)
            elif error is None:
                self._conn, self._connected = conn, True
                self._gen += 1
                if self._breaker == "half_open":
                    self._breaker = "closed"
                    self._consecutive = 0
                # A plain reconnect keeps the count: only a successful call says the link works,
                # so a peer that accepts connections but fails every call still trips the breaker.
                self._attempts = 0
                self._next_probe = t + self._probe_interval
                self._stats["connects"] += 1
            else:
                if made:
                    doomed.append(conn)
                self._stats["failures"] += 1
                self._last_error = error
                if self._breaker == "half_open":
                    self._breaker = "open"
                    self._open_until = t + self._reset_timeout
                else:
                    self._attempts += 1
                    self._next_connect = t + self._backoff_locked(self._attempts)
            came_up = self._sync_locked()
            quiet = self._attempts > 1  # say it once per outage, not on every retry
        if came_up:
            logger.info("bridge %s is up", self.name)
        elif error is not None:
            logger.log(logging.DEBUG if quiet else logging.WARNING, "bridge %s cannot connect: %s", self.name, error)
        self._close_all(doomed)
        self._drain()

    def _check(self, conn: Any, gen: int, now: float | None) -> None:
        """Probe the live connection; a failure drops it and schedules an immediate reconnect."""
        assert self._probe is not None
        with self._lock:
            self._stats["probes"] += 1
        try:
            healthy = self._probe(conn) is not False
            error = None if healthy else "probe reported the connection unhealthy"
        except Exception as exc:  # noqa: BLE001 - a probe that raises says "unhealthy"
            error = _describe(exc)
        t = self._clock() if now is None else now
        doomed: list[Any] = []
        with self._lock:
            if gen != self._gen or self._stopped:
                return  # the connection changed under the probe; its verdict is moot
            if error is None:
                self._next_probe = t + self._probe_interval
                return
            self._stats["failures"] += 1
            self._last_error = error
            doomed = self._drop_locked()
            self._attempts = 0
            self._next_connect = t  # reconnect at once; backoff only if that fails too
        logger.warning("bridge %s is down: %s", self.name, error)
        self._close_all(doomed)
        self._drain()

    def _backoff_locked(self, attempts: int) -> float:
        delay = min(self._backoff_initial * self._backoff_factor ** (attempts - 1), self._backoff_max)
        if self._jitter:
            # Jitter spreads the reconnects of many servers after a shared peer restarts.
            delay *= 1.0 + self._rng.uniform(-self._jitter, self._jitter)
        return delay

    def _drop_locked(self) -> list[Any]:
        """Forget the live connection (returned, for closing outside the lock)."""
        if not self._connected:
            return []
        conn = self._conn
        self._conn, self._connected = None, False
        self._gen += 1
        self._stats["disconnects"] += 1
        self._sync_locked()
        return [conn]

    def _sync_locked(self) -> bool | None:
        """Queue a transition if up-ness changed; returns the new state, or None if unchanged."""
        up = self._connected and self._breaker == "closed"
        if up == self._up:
            return None
        self._up = up
        self._transitions += 1
        self._pending.append(up)
        return up

    def _due_in_locked(self, now: float) -> float:
        if self._stopped:
            return self._probe_interval
        if self._breaker == "open":
            due = self._open_until
        elif not self._connected:
            due = self._next_connect
        elif self._probe is None:
            return self._probe_interval
        else:
            due = self._next_probe
        return max(0.0, due - now)

    def _down_error_locked(self, now: float) -> ToolError:
        if self._breaker == "open":
            wait = self._open_until - now
            message = f"{self.name} is not connected (too many failures; paused before reconnecting)."
        else:
            wait = self._next_connect - now
            message = f"{self.name} is not connected (reconnecting)."
        return self._error_locked(message, wait)

    def _error_locked(self, message: str, wait: float) -> ToolError:
        ms = max(1, math.ceil(round(wait * 1000, 6)))  # float noise: 30.000000000004 s is 30000 ms
        return ToolError(
            message,
            code=E_NOT_CONNECTED,
            retryable=True,
            # the breaker and the last failure tell an agent (and its operator) why, not just when
            details={"bridge": self.name, "retryAfterMs": ms, "breaker": self._breaker,
                     "lastError": self._last_error},
            suggested_fix=f"Retry after {ms / 1000:g} s; if it keeps failing, start the {self.name} "
            f"or check that it is running and reachable.",
        )

    # --- side effects outside the lock ------------------------------------------------------

    def _after_outside_change(self, doomed: list[Any]) -> None:
        self._close_all(doomed)
        self._drain()
        self._wake.set()  # the loop's current wait was computed for the old state

    def _close_all(self, conns: list[Any]) -> None:
        if self._close is None:
            return
        for conn in conns:
            try:
                self._close(conn)
            except Exception:
                logger.warning("bridge %s: closing the connection failed", self.name, exc_info=True)

    def _drain(self) -> None:
        """Deliver queued transitions in order; one drainer at a time, so order holds across threads."""
        with self._lock:
            if self._draining or not self._pending:
                return
            self._draining = True
        try:
            while True:
                with self._lock:
                    if not self._pending:
                        # Cleared under the same lock as the check, so a transition queued by
                        # another thread is either seen here or drained by that thread.
                        self._draining = False
                        return
                    up = self._pending.pop(0)
                    callbacks = tuple(self._callbacks)
                for callback in callbacks:
                    try:
                        callback(up)
                    except Exception:
                        logger.exception("bridge %s: on_change callback %r failed", self.name, callback)
                with self._lock:  # read after the callbacks: a waiter that came meanwhile is told too
                    waiters = tuple(self._waiters)
                for waiter in waiters:
                    waiter(up)
        except BaseException:
            with self._lock:
                self._draining = False
            raise

    # --- the thread -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the daemon thread that connects, probes and reconnects. Idempotent."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive() and not self._halt.is_set():
                return
            self._stopped = False
            if not self._connected and self._breaker == "closed":
                self._next_connect = self._clock()
            halt = self._halt = threading.Event()
            thread = self._thread = threading.Thread(
                target=self._run, args=(halt,), name=f"mcpkit-bridge-{self.name}", daemon=True
            )
        thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the thread (waiting up to ``timeout``) and close the connection. Idempotent."""
        with self._lock:
            self._halt.set()
            thread = self._thread
            self._thread = None
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        with self._lock:
            self._stopped = True
            doomed = self._drop_locked()
        self._close_all(doomed)
        self._drain()

    def _run(self, halt: threading.Event) -> None:
        while not halt.is_set():
            try:
                delay = self.step()
            except Exception:  # step() catches the peer's errors; this is a last resort
                logger.exception("bridge %s: step failed", self.name)
                delay = self._backoff_initial
            if self._wake.wait(min(delay, _MAX_WAIT)):
                self._wake.clear()


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
