"""Bridge: connect with backoff, probes, the circuit breaker, transitions, the thread."""

from __future__ import annotations

import asyncio
import logging
import random
import threading
from typing import Any

import pytest

from mcpkit.policy.bridge import Bridge
from mcpkit.protocol.errors import E_NOT_CONNECTED, ToolError


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Peer:
    """A fake peer: connect/probe succeed or fail on demand, and every object is recorded."""

    def __init__(self) -> None:
        self.reachable = True
        self.healthy = True
        self.probe_raises = False
        self.made: list[dict[str, Any]] = []
        self.closed: list[dict[str, Any]] = []
        self.connect_calls = 0
        self.on_connect: Any = None

    def connect(self) -> dict[str, Any]:
        self.connect_calls += 1
        if self.on_connect is not None:
            self.on_connect()
        if not self.reachable:
            raise ConnectionRefusedError("refused")
        conn = {"id": len(self.made)}
        self.made.append(conn)
        return conn

    def probe(self, conn: Any) -> bool:
        if self.probe_raises:
            raise TimeoutError("probe timed out")
        return self.healthy

    def close(self, conn: Any) -> None:
        self.closed.append(conn)


def make(peer: Peer, clock: Clock, **kw: Any) -> tuple[Bridge, list[bool]]:
    kw.setdefault("jitter", 0.0)
    bridge = Bridge("editor", peer.connect, probe=peer.probe, close=peer.close, clock=clock, **kw)
    seen: list[bool] = []
    bridge.on_change(seen.append)
    return bridge, seen


def up_bridge(**kw: Any) -> tuple[Bridge, Peer, Clock, list[bool]]:
    peer, clock = Peer(), Clock()
    bridge, seen = make(peer, clock, **kw)
    bridge.step()
    assert bridge.up
    return bridge, peer, clock, seen


def refuse(conn: Any) -> None:
    raise ConnectionResetError("reset by peer")


def test_initial_connect_success_is_up_with_one_transition() -> None:
    peer, clock = Peer(), Clock()
    bridge, seen = make(peer, clock)
    assert not bridge.up and seen == []
    assert bridge.step() == 5.0  # the next probe
    assert bridge.up and bridge.breaker == "closed"
    assert seen == [True]
    assert bridge.connection is peer.made[0]
    assert bridge.stats == {"connects": 1, "disconnects": 0, "failures": 0, "probes": 1}
    assert bridge.last_error is None
    clock.t = 2.0
    assert bridge.step() == 3.0  # nothing due yet: no second connect, no probe
    assert peer.connect_calls == 1 and seen == [True]


def test_connect_failures_back_off_exponentially_up_to_the_cap() -> None:
    peer, clock = Peer(), Clock()
    peer.reachable = False
    bridge, seen = make(peer, clock, backoff_max=5.0)
    delays = [bridge.step()]
    for _ in range(6):
        clock.t += delays[-1]
        delays.append(bridge.step())
    assert delays == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    assert peer.connect_calls == 7
    assert not bridge.up and seen == []
    assert bridge.stats["failures"] == 7 and bridge.stats["connects"] == 0
    assert bridge.last_error == "ConnectionRefusedError: refused"
    # Stepping before the next attempt is due does nothing.
    clock.t += 1.0
    assert bridge.step() == 4.0 and peer.connect_calls == 7
    # The peer returns: the next due attempt succeeds and the backoff starts over.
    peer.reachable = True
    clock.t += 4.0
    assert bridge.step() == 5.0 and bridge.up and seen == [True]
    peer.reachable = False
    bridge.mark_down("socket closed")
    assert bridge.step() == 0.5  # the immediate reconnect failed: the first backoff again


@pytest.mark.parametrize("seed", range(20))
def test_jitter_stays_within_its_fraction(seed: int) -> None:
    peer, clock = Peer(), Clock()
    peer.reachable = False
    bridge = Bridge("api", peer.connect, clock=clock, jitter=0.25, backoff_max=8.0, rng=random.Random(seed))
    base = [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0]
    delays = []
    for expected in base:
        delay = bridge.step()
        assert expected * 0.75 <= delay <= expected * 1.25
        delays.append(delay)
        clock.t += delay
    assert [d / b for d, b in zip(delays, base, strict=True)] != [1.0] * len(base)  # jitter is really applied


def test_a_connection_that_fails_its_first_probe_is_closed_and_not_up() -> None:
    peer, clock = Peer(), Clock()
    peer.healthy = False
    bridge, seen = make(peer, clock)
    assert bridge.step() == 0.5
    assert not bridge.up and seen == []
    assert peer.closed == [peer.made[0]]
    assert bridge.last_error == "probe reported the new connection unhealthy"


def test_probe_failure_goes_down_once_then_reconnects() -> None:
    bridge, peer, clock, seen = up_bridge()
    first = peer.made[0]
    clock.t = 5.0
    assert bridge.step() == 5.0 and bridge.up  # healthy probe: next one in probe_interval
    peer.probe_raises = True
    clock.t = 10.0
    assert bridge.step() == 0.0  # down; the reconnect is due at once
    assert not bridge.up and seen == [True, False]
    assert peer.closed == [first]
    assert bridge.last_error == "TimeoutError: probe timed out"
    # The reconnect's own probe fails as well: still down, no second False, backoff.
    assert bridge.step() == 0.5
    assert seen == [True, False]
    peer.probe_raises = False
    clock.t = 10.5
    bridge.step()
    assert bridge.up and seen == [True, False, True]
    assert bridge.connection is peer.made[-1] and bridge.connection is not first
    assert bridge.stats == {"connects": 2, "disconnects": 1, "failures": 2, "probes": 5}


def test_a_probe_returning_false_is_unhealthy_but_other_values_are_fine() -> None:
    peer, clock = Peer(), Clock()
    results: list[Any] = [None, 0, False]
    bridge = Bridge("app", peer.connect, probe=lambda c: results.pop(0), clock=clock, probe_interval=1.0)
    bridge.step()
    assert bridge.up  # None
    clock.t = 1.0
    bridge.step()
    assert bridge.up  # 0 is not False
    clock.t = 2.0
    bridge.step()
    assert not bridge.up
    assert bridge.last_error == "probe reported the connection unhealthy"


def test_call_while_down_is_a_retryable_not_connected_error() -> None:
    peer, clock = Peer(), Clock()
    peer.reachable = False
    bridge, _ = make(peer, clock)
    bridge.step()  # fails; next attempt at 0.5
    clock.t = 0.2
    invoked = []
    with pytest.raises(ToolError) as info:
        bridge.call(invoked.append)
    err = info.value
    assert invoked == []
    assert err.code == E_NOT_CONNECTED and err.retryable is True
    assert err.details == {"bridge": "editor", "retryAfterMs": 300, "breaker": "closed",
                           "lastError": "ConnectionRefusedError: refused"}
    assert err.message == "editor is not connected (reconnecting)."
    assert err.suggested_fix is not None
    assert err.suggested_fix.startswith("Retry after 0.3 s") and "start the editor" in err.suggested_fix
    with pytest.raises(ToolError) as info:
        _ = bridge.connection
    assert info.value.details == {"bridge": "editor", "retryAfterMs": 300, "breaker": "closed",
                           "lastError": "ConnectionRefusedError: refused"}
    clock.t = 9.0  # the attempt is overdue (nobody stepped): still at least 1 ms
    assert bridge.not_connected_error().details == {"bridge": "editor", "retryAfterMs": 1, "breaker": "closed",
                                                  "lastError": "ConnectionRefusedError: refused"}


def test_call_runs_fn_on_the_connection_with_its_arguments() -> None:
    bridge, _peer, _, _ = up_bridge()
    assert bridge.call(lambda conn, a, b=0: (conn["id"], a, b), 7, b=8) == (0, 7, 8)
    assert bridge.call(lambda conn, fn: fn, fn="kw named fn") == "kw named fn"


def test_three_failing_calls_open_the_breaker_and_later_calls_fail_fast() -> None:
    bridge, peer, clock, seen = up_bridge()
    clock.t = 1.0
    for n in (1, 2):
        with pytest.raises(ToolError) as info:
            bridge.call(refuse)
        assert info.value.code == E_NOT_CONNECTED and info.value.retryable
        assert isinstance(info.value.__cause__, ConnectionResetError)
        assert bridge.up and bridge.breaker == "closed" and bridge.stats["failures"] == n
    with pytest.raises(ToolError) as info:
        bridge.call(refuse)
    assert info.value.details == {"bridge": "editor", "retryAfterMs": 30000, "breaker": "open",
                                   "lastError": "ConnectionResetError: reset by peer"}
    assert "not connected" in info.value.message
    assert not bridge.up and bridge.breaker == "open"
    assert seen == [True, False]
    assert peer.closed == [peer.made[0]]
    assert bridge.last_error == "ConnectionResetError: reset by peer"
    invoked = []
    clock.t = 11.0
    with pytest.raises(ToolError) as info:
        bridge.call(invoked.append)
    assert invoked == [] and info.value.details == {"bridge": "editor", "retryAfterMs": 20000, "breaker": "open",
                                                        "lastError": "ConnectionResetError: reset by peer"}
    assert bridge.step() == 20.0 and peer.connect_calls == 1  # no reconnect while open


def test_a_success_resets_the_consecutive_failure_count() -> None:
    bridge, _, _, _ = up_bridge()
    for fn in (refuse, refuse, lambda c: "ok", refuse, refuse):
        try:
            bridge.call(fn)
        except ToolError:
            pass
    assert bridge.up and bridge.breaker == "closed" and bridge.stats["failures"] == 4


def open_breaker(bridge: Bridge) -> None:
    for _ in range(3):
        with pytest.raises(ToolError):
            bridge.call(refuse)
    assert bridge.breaker == "open"


def test_half_open_trial_success_closes_the_breaker() -> None:
    bridge, peer, clock, seen = up_bridge(reset_timeout=10.0)
    open_breaker(bridge)
    during: list[str] = []
    peer.on_connect = lambda: during.append(bridge.breaker)
    clock.t = 9.99
    assert bridge.step() == pytest.approx(0.01) and during == []
    clock.t = 10.0
    assert bridge.step() == 5.0
    assert during == ["half_open"]
    assert bridge.up and bridge.breaker == "closed" and seen == [True, False, True]
    assert bridge.call(lambda c: c) is peer.made[-1]
    # The count starts over: two more failures do not re-open it.
    for _ in range(2):
        with pytest.raises(ToolError):
            bridge.call(refuse)
    assert bridge.breaker == "closed"


def test_half_open_trial_failure_reopens_the_breaker() -> None:
    bridge, peer, clock, seen = up_bridge(reset_timeout=10.0)
    open_breaker(bridge)
    peer.reachable = False
    clock.t = 10.0
    assert bridge.step() == 10.0  # one trial, failed: open for another reset_timeout
    assert bridge.breaker == "open" and not bridge.up and peer.connect_calls == 2
    assert seen == [True, False]
    with pytest.raises(ToolError) as info:
        bridge.call(lambda c: c)
    assert info.value.details["retryAfterMs"] == 10000
    peer.reachable, peer.healthy = True, False  # connects, but the trial's probe fails
    clock.t = 20.0
    assert bridge.step() == 10.0 and bridge.breaker == "open"
    assert peer.closed[-1] is peer.made[-1]
    peer.healthy = True
    clock.t = 30.0
    bridge.step()
    assert bridge.up and bridge.breaker == "closed" and seen == [True, False, True]


def test_other_exceptions_propagate_and_do_not_count() -> None:
    bridge, _, _, seen = up_bridge()

    def buggy(conn: Any) -> None:
        raise KeyError("tool bug")

    def refusing(conn: Any) -> None:
        raise ToolError("no such file", code="E_NOT_FOUND")

    for _ in range(5):
        with pytest.raises(KeyError):
            bridge.call(buggy)
        with pytest.raises(ToolError) as info:
            bridge.call(refusing)
        assert info.value.code == "E_NOT_FOUND"
    assert bridge.up and bridge.breaker == "closed" and seen == [True]
    assert bridge.stats["failures"] == 0 and bridge.last_error is None


def test_call_errors_are_configurable() -> None:
    peer, clock = Peer(), Clock()
    bridge = Bridge("api", peer.connect, clock=clock, call_errors=(LookupError,), failure_threshold=1)
    bridge.step()
    with pytest.raises(ConnectionError):
        bridge.call(refuse)  # not a call error for this bridge
    assert bridge.up
    with pytest.raises(ToolError):
        bridge.call(lambda c: {}["x"])
    assert bridge.breaker == "open"


def test_acall_has_the_same_accounting() -> None:
    bridge, _peer, _, seen = up_bridge()

    async def ok(conn: Any, x: int) -> int:
        return conn["id"] + x

    async def fails(conn: Any) -> None:
        raise ConnectionAbortedError("gone")

    async def buggy(conn: Any) -> None:
        raise RuntimeError("bug")

    async def scenario() -> None:
        assert await bridge.acall(ok, 41) == 41
        with pytest.raises(RuntimeError):
            await bridge.acall(buggy)
        for _ in range(2):
            with pytest.raises(ToolError):
                await bridge.acall(fails)
        assert await bridge.acall(ok, 1) == 1  # resets the count
        for _ in range(3):
            with pytest.raises(ToolError):
                await bridge.acall(fails)
        invoked = []

        async def record(conn: Any) -> None:
            invoked.append(conn)

        with pytest.raises(ToolError) as info:
            await bridge.acall(record)
        assert invoked == [] and info.value.code == E_NOT_CONNECTED

    asyncio.run(scenario())
    assert bridge.breaker == "open" and seen == [True, False]
    assert bridge.stats["failures"] == 5


def test_mark_down_drops_and_reconnects_at_once_and_feeds_the_breaker() -> None:
    bridge, peer, _clock, seen = up_bridge()
    bridge.mark_down("socket error in a tool")
    assert not bridge.up and seen == [True, False] and bridge.last_error == "socket error in a tool"
    assert peer.closed == [peer.made[0]]
    bridge.mark_down("again")  # already down: recorded, nothing else
    assert seen == [True, False] and bridge.stats["failures"] == 1 and bridge.last_error == "again"
    assert bridge.step() == 5.0 and bridge.up and seen == [True, False, True]
    bridge.mark_down("2")
    bridge.step()
    bridge.mark_down("3")  # the third consecutive failure without a successful call
    assert bridge.breaker == "open"
    assert seen == [True, False, True, False, True, False]


def test_a_failure_on_a_replaced_connection_does_not_count() -> None:
    bridge, _peer, _, _ = up_bridge(failure_threshold=2)

    def reconnect_then_fail(conn: Any) -> None:
        bridge.mark_down("noticed elsewhere")
        bridge.step()  # a new connection is up before this call's error arrives
        raise ConnectionResetError("late")

    with pytest.raises(ToolError) as info:
        bridge.call(reconnect_then_fail)
    assert info.value.message == "editor call failed with a connection error (ConnectionResetError)."
    assert bridge.up and bridge.breaker == "closed" and bridge.stats["failures"] == 1


def test_raising_callbacks_are_logged_and_do_not_break_the_bridge(caplog: pytest.LogCaptureFixture) -> None:
    peer, clock = Peer(), Clock()
    bridge = Bridge("editor", peer.connect, probe=peer.probe, close=peer.close, clock=clock, jitter=0)
    seen: list[bool] = []

    def broken(up: bool) -> None:
        raise RuntimeError("callback bug")

    bridge.on_change(broken)
    bridge.on_change(seen.append)
    with caplog.at_level(logging.ERROR, logger="mcpkit.bridge"):
        bridge.step()
        bridge.mark_down("x")
        bridge.step()
    assert bridge.up and seen == [True, False, True]
    bugs = [r for r in caplog.records if r.name == "mcpkit.bridge" and r.exc_info]
    assert len(bugs) == 3 and all("callback bug" in str(r.exc_info[1]) for r in bugs)


def test_callbacks_run_outside_the_lock_and_may_use_the_bridge() -> None:
    bridge, _peer, _clock, _seen = up_bridge()
    looked: list[tuple[bool, dict[str, int]]] = []
    bridge.on_change(lambda up: looked.append((bridge.up, bridge.stats)))
    bridge.mark_down("x")  # would deadlock if the callback ran under the lock
    assert looked == [(False, {"connects": 1, "disconnects": 1, "failures": 1, "probes": 1})]


@pytest.mark.asyncio
async def test_wait_up_returns_once_every_callback_has_seen_the_transition() -> None:
    # A server subscribes when its first tool needs the bridge, often after someone already
    # waits: the waiter must not return while the server has yet to list and announce the
    # tools, or a client connecting next gets a late list_changed for a change before it came.
    peer, clock = Peer(), Clock()
    bridge = Bridge("editor", peer.connect, probe=peer.probe, close=peer.close, clock=clock)
    waiting = asyncio.ensure_future(bridge.wait_up(10))
    await asyncio.sleep(0)  # the waiter subscribes first
    announced = threading.Event()

    def slow_server(up: bool) -> None:
        threading.Event().wait(0.3)
        announced.set()

    bridge.on_change(slow_server)
    stepping = asyncio.get_running_loop().run_in_executor(None, bridge.step)
    assert await waiting is True
    assert announced.is_set()
    await stepping


@pytest.mark.asyncio
async def test_wait_up_on_an_up_bridge_still_waits_for_a_transition_being_delivered() -> None:
    peer, clock = Peer(), Clock()
    bridge = Bridge("editor", peer.connect, probe=peer.probe, close=peer.close, clock=clock)
    entered, release, done = threading.Event(), threading.Event(), threading.Event()

    def slow_server(up: bool) -> None:
        entered.set()
        release.wait(5)
        done.set()

    bridge.on_change(slow_server)
    stepping = asyncio.get_running_loop().run_in_executor(None, bridge.step)
    assert await asyncio.get_running_loop().run_in_executor(None, entered.wait, 5)
    assert bridge.up  # up already, but its callbacks are still being told
    waiting = asyncio.ensure_future(bridge.wait_up(10))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    release.set()
    assert await waiting is True and done.is_set()
    await stepping
    assert await bridge.wait_up(0) is True  # settled: at once
    assert not bridge._waiters


def test_close_errors_are_swallowed() -> None:
    peer, clock = Peer(), Clock()

    def bad_close(conn: Any) -> None:
        raise OSError("already closed")

    bridge = Bridge("editor", peer.connect, close=bad_close, clock=clock)
    bridge.step()
    bridge.mark_down("x")
    assert not bridge.up
    bridge.stop()


def test_stop_closes_the_connection_and_step_then_does_nothing() -> None:
    bridge, peer, clock, seen = up_bridge()
    bridge.stop()
    assert not bridge.up and seen == [True, False] and peer.closed == [peer.made[0]]
    bridge.stop()  # idempotent
    assert peer.closed == [peer.made[0]] and seen == [True, False]
    clock.t = 100.0
    bridge.step()
    assert peer.connect_calls == 1 and not bridge.up


def test_a_stop_during_a_connect_discards_the_new_connection() -> None:
    peer, clock = Peer(), Clock()
    bridge: Bridge

    def connect() -> dict[str, Any]:
        conn = peer.connect()
        bridge.stop()
        return conn

    bridge = Bridge("editor", connect, close=peer.close, clock=clock)
    bridge.step()
    assert not bridge.up and peer.closed == peer.made


def test_the_thread_connects_recovers_and_stops_promptly() -> None:
    peer = Peer()
    bridge = Bridge(
        "editor", peer.connect, probe=peer.probe, close=peer.close,
        probe_interval=0.01, backoff_initial=0.01, backoff_max=0.02, jitter=0,
    )
    seen: list[bool] = []
    changed = threading.Event()

    def record(up: bool) -> None:
        seen.append(up)
        changed.set()

    bridge.on_change(record)

    def wait_for(n: int) -> None:
        for _ in range(500):
            if len(seen) >= n:
                return
            changed.wait(0.01)
            changed.clear()
        raise AssertionError(f"only {seen} after 5 s")

    bridge.start()
    bridge.start()  # idempotent
    thread = bridge._thread
    assert thread is not None
    wait_for(1)
    peer.healthy = False
    wait_for(2)
    peer.healthy = True
    wait_for(3)
    bridge.stop()
    thread.join(1.0)
    assert not thread.is_alive()
    assert seen == [True, False, True, False]  # the last one is the stop
    assert peer.closed[-1] is peer.made[-1] and not bridge.up
    bridge.stop()


@pytest.mark.parametrize(
    "kw",
    [
        {"probe_interval": 0},
        {"backoff_initial": 0},
        {"backoff_max": 0.1},
        {"backoff_factor": 0.5},
        {"jitter": 1.0},
        {"failure_threshold": 0},
        {"reset_timeout": -1},
    ],
)
def test_bad_settings_are_rejected(kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Bridge("x", lambda: None, **kw)
