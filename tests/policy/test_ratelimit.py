"""Token-bucket rate limits (policy/ratelimit.py): exact counts against an injected clock."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.policy.ratelimit import KEY_SEPARATOR, MemoryRateStore, Rate, RateLimiter
from mcpkit.protocol.errors import E_RATE_LIMITED, ToolError


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


# --- Rate ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "calls", "per"),
    [
        ("100/min", 100, 60.0),
        ("5/s", 5, 1.0),
        ("10/second", 10, 1.0),
        ("10/seconds", 10, 1.0),
        ("1000/hour", 1000, 3600.0),
        ("20/day", 20, 86400.0),
        ("100/30s", 100, 30.0),
        ("3/2min", 3, 120.0),
        ("7/1.5h", 7, 5400.0),
        (" 60 / MIN ", 60, 60.0),
        ("1/m", 1, 60.0),
        ("2/hr", 2, 3600.0),
        ("4/d", 4, 86400.0),
        ("9/sec", 9, 1.0),
    ],
)
def test_rate_parse(text: str, calls: int, per: float) -> None:
    rate = Rate.parse(text)
    assert (rate.calls, rate.per, rate.burst) == (calls, per, None)
    assert rate.capacity == calls
    assert rate.refill_per_s == calls / per


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected '<calls>/<period>'"),
        ("100", "expected '<calls>/<period>'"),
        ("100/", "expected '<calls>/<period>'"),
        ("/min", "expected '<calls>/<period>'"),
        ("-5/min", "expected '<calls>/<period>'"),
        ("1.5/min", "expected '<calls>/<period>'"),
        ("100 per minute", "expected '<calls>/<period>'"),
        ("100/fortnight", "unknown time unit 'fortnight'"),
        ("100/5parsecs", "unknown time unit 'parsecs'"),
        ("0/min", "at least 1"),
        ("5/0s", "longer than zero"),
        ("5/0.0min", "longer than zero"),
    ],
)
def test_rate_parse_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="invalid rate") as info:
        Rate.parse(text)
    assert message in str(info.value)


def test_rate_parse_rejects_non_strings() -> None:
    with pytest.raises(TypeError):
        Rate.parse(100)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"calls": 0, "per": 1.0}, ValueError),
        ({"calls": True, "per": 1.0}, ValueError),
        ({"calls": 1.5, "per": 1.0}, ValueError),
        ({"calls": 1, "per": 0.0}, ValueError),
        ({"calls": 1, "per": -1.0}, ValueError),
        ({"calls": 1, "per": float("inf")}, ValueError),
        ({"calls": 1, "per": float("nan")}, ValueError),
        ({"calls": 1, "per": "60"}, TypeError),
        ({"calls": 1, "per": 1.0, "burst": 0}, ValueError),
    ],
)
def test_rate_validates(kwargs: dict, error: type) -> None:
    with pytest.raises(error):
        Rate(**kwargs)


def test_rate_burst_capacity_and_str() -> None:
    rate = Rate(10, 1, burst=50)
    assert (rate.capacity, rate.refill_per_s, rate.per) == (50, 10.0, 1.0)
    assert str(rate) == "10/s"
    assert str(Rate.parse("100/min")) == "100/min"
    assert str(Rate.parse("1000/hour")) == "1000/hour"
    assert str(Rate.parse("20/day")) == "20/day"
    assert str(Rate.parse("100/30s")) == "100/30s"
    assert Rate.parse("100/min") == Rate(100, 60)


def test_rate_coerce() -> None:
    rate = Rate(1, 1)
    assert Rate.coerce(rate) is rate
    assert Rate.coerce(None) is None
    assert Rate.coerce("5/s") == Rate(5, 1)
    with pytest.raises(TypeError):
        Rate.coerce(5)  # type: ignore[arg-type]


# --- RateLimiter -----------------------------------------------------------------------------


@pytest.mark.req("TL-11")
def test_100_per_minute_allows_exactly_100_of_10000_simultaneous_calls() -> None:
    clock = FakeClock()
    limiter = RateLimiter("100/min", clock=clock)
    answers = [limiter.check("alice", "search") for _ in range(10_000)]
    assert answers[:100] == [None] * 100
    # an empty bucket refills 100/60 tokens a second: one token in exactly 0.6 s
    assert answers[100:] == [600] * 9_900

    clock.t += 0.6
    assert limiter.check("alice", "search") is None
    assert limiter.check("alice", "search") == 600
    assert limiter.check("alice", "search") == 600


@pytest.mark.req("TL-11")
def test_retry_after_counts_partial_refill_and_waiting_it_out_succeeds() -> None:
    clock = FakeClock()
    limiter = RateLimiter("100/min", clock=clock)
    for _ in range(100):
        assert limiter.check("p", "t") is None
    clock.t += 0.3  # half a token back
    assert limiter.check("p", "t") == 300
    clock.t += 0.299
    assert limiter.check("p", "t") == 1
    clock.t += 0.001
    assert limiter.check("p", "t") is None


def test_retry_after_rounds_up_and_is_at_least_one_ms() -> None:
    clock = FakeClock()
    limiter = RateLimiter("3/s", clock=clock)  # a token every 333.33 ms
    for _ in range(3):
        assert limiter.check("p", "t") is None
    assert limiter.check("p", "t") == 334
    clock.t += 0.3333333
    assert limiter.check("p", "t") == 1


@pytest.mark.req("TL-11")
def test_principals_and_tools_have_separate_buckets() -> None:
    clock = FakeClock()
    limiter = RateLimiter("2/min", clock=clock)
    for principal, tool in [("alice", "a"), ("alice", "b"), ("bob", "a")]:
        assert limiter.check(principal, tool) is None
        assert limiter.check(principal, tool) is None
        assert limiter.check(principal, tool) == 30_000
    store = limiter.store
    assert isinstance(store, MemoryRateStore)
    assert len(store) == 3
    assert f"alice{KEY_SEPARATOR}a" in store and "alice\x1fb" in store and "bob\x1fa" in store


def test_burst_allows_a_larger_first_spend_then_the_rate() -> None:
    clock = FakeClock()
    rate = Rate(10, 1.0, burst=50)
    limiter = RateLimiter(rate, clock=clock)
    allowed = sum(limiter.check("p", "t") is None for _ in range(200))
    assert allowed == 50
    clock.t += 1.0
    assert sum(limiter.check("p", "t") is None for _ in range(200)) == 10
    clock.t += 100.0  # refills to the burst, not beyond
    assert sum(limiter.check("p", "t") is None for _ in range(200)) == 50


def test_burst_smaller_than_calls_smooths_the_rate() -> None:
    clock = FakeClock()
    limiter = RateLimiter(Rate(60, 60.0, burst=1), clock=clock)
    assert limiter.check("p", "t") is None
    assert limiter.check("p", "t") == 1000
    clock.t += 1.0
    assert limiter.check("p", "t") is None


def test_per_tool_rate_overrides_the_default_and_no_rate_means_no_limit() -> None:
    clock = FakeClock()
    unlimited = RateLimiter(clock=clock)
    assert unlimited.default is None
    assert all(unlimited.check("p", "t") is None for _ in range(1000))
    assert len(unlimited.store) == 0  # type: ignore[arg-type]

    limiter = RateLimiter("1000/min", clock=clock)
    tight = Rate.parse("1/hour")
    assert limiter.check("p", "slow", tight) is None
    assert limiter.check("p", "slow", tight) == 3_600_000
    assert limiter.check("p", "other") is None
    assert limiter.check("p", "other") is None
    # a per-tool rate also applies when there is no default
    assert RateLimiter(clock=clock).check("p", "slow", tight) is None


def test_a_clock_going_backwards_counts_as_no_time() -> None:
    clock = FakeClock(500.0)
    limiter = RateLimiter("1/s", clock=clock)
    assert limiter.check("p", "t") is None
    clock.t = 499.0  # stepped back a second
    assert limiter.check("p", "t") == 1000
    clock.t = 500.5  # half a second after the call, whatever happened in between
    assert limiter.check("p", "t") == 500
    clock.t = 501.0
    assert limiter.check("p", "t") is None
    assert limiter.check("p", "t") == 1000


@pytest.mark.req("TL-11")
def test_limit_error_is_a_retryable_rate_limited_tool_error() -> None:
    limiter = RateLimiter("100/min", clock=FakeClock())
    err = limiter.limit_error("search", 600)
    assert isinstance(err, ToolError)
    assert err.code == E_RATE_LIMITED
    assert err.retryable is True
    assert err.details == {"retryAfterMs": 600, "limit": "100/min"}
    assert err.suggested_fix == "Wait 600 ms before calling search again."
    assert err.message == "Rate limit exceeded for tool 'search' (100/min per caller); retry after 600 ms."
    assert err.to_error()["suggestedFix"] == "Wait 600 ms before calling search again."
    # the rate that refused the call, when it is a tool's own
    own = limiter.limit_error("slow", 5, Rate(1, 1, burst=3))
    assert own.details == {"retryAfterMs": 5, "limit": "1/s", "burst": 3}


# --- MemoryRateStore -------------------------------------------------------------------------


def test_store_take_contract() -> None:
    store = MemoryRateStore()
    assert store.take("k", 2, 1.0, now=0.0) == 0.0
    assert store.take("k", 2, 1.0, now=0.0, cost=1.0) == 0.0
    assert store.take("k", 2, 1.0, now=0.0) == 1.0  # nothing taken on refusal
    assert store.take("k", 2, 1.0, now=0.5, cost=2.0) == 1.5
    assert store.take("k", 2, 1.0, now=2.0, cost=2.0) == 0.0
    assert store.take("k", 2, 1.0, now=2.0, cost=3.0) == float("inf")  # can never pass
    assert store.take("new", 2, 1.0, now=2.0, cost=3.0) == float("inf")
    assert "new" not in store
    store.clear()
    assert len(store) == 0


def test_store_rejects_a_bad_cap() -> None:
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError):
            MemoryRateStore(max_keys=bad)  # type: ignore[arg-type]


@pytest.mark.req("TL-11")
def test_eviction_honours_the_cap_and_keeps_recently_limited_keys() -> None:
    cap = 50
    store = MemoryRateStore(max_keys=cap)
    clock = FakeClock()
    limiter = RateLimiter("1/hour", store=store, clock=clock)
    assert limiter.check("victim", "t") is None
    assert limiter.check("victim", "t") is not None
    for n in range(5_000):
        assert limiter.check(f"crowd-{n}", "t") is None
        assert len(store) <= cap
        if n % (cap - 1) == cap - 2:
            # the victim is among the `cap` most recently used keys until now: still limited
            assert limiter.check("victim", "t") is not None
    assert len(store) == cap
    # once cap other keys have been used since, an idle key may go (its bucket is a fresh one)
    for n in range(cap):
        limiter.check(f"late-{n}", "t")
    assert "victim\x1ft" not in store


def test_eviction_prefers_full_buckets_over_the_least_recently_used() -> None:
    store = MemoryRateStore(max_keys=3)
    assert store.take("slow", 1, 1 / 3600, now=0.0) == 0.0  # empty for an hour
    assert store.take("fast", 1, 1.0, now=0.0) == 0.0  # full again after 1 s
    assert store.take("other", 1, 1 / 3600, now=0.0) == 0.0
    assert store.take("new", 1, 1 / 3600, now=10.0) == 0.0
    assert len(store) == 3
    assert "slow" in store and "fast" not in store
    assert store.take("slow", 1, 1 / 3600, now=10.0) > 0  # still limited
    # no full bucket: the least recently used goes
    assert store.take("newer", 1, 1 / 3600, now=11.0) == 0.0
    assert "other" not in store and {"slow", "new", "newer"} == set(store._buckets)


@pytest.mark.req("TL-11")
def test_threads_share_one_bucket_exactly() -> None:
    limiter = RateLimiter(Rate(500, 3600.0), clock=FakeClock())
    allowed = [0] * 8
    barrier = threading.Barrier(8)

    def worker(n: int) -> None:
        barrier.wait()
        allowed[n] = sum(limiter.check("p", "t") is None for _ in range(1000))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(allowed) == 500


# --- properties ------------------------------------------------------------------------------


@pytest.mark.req("TL-11")
@settings(max_examples=200, deadline=None)
@given(
    capacity=st.integers(1, 50),
    refill=st.floats(0.01, 100.0),
    steps=st.lists(
        st.tuples(st.floats(0.0, 5.0), st.sampled_from([0.5, 1.0, 1.0, 2.0, 3.0])), max_size=200
    ),
)
def test_allowed_never_exceeds_capacity_plus_refill(
    capacity: int, refill: float, steps: list[tuple[float, float]]
) -> None:
    store = MemoryRateStore()
    now = 0.0
    spent = 0.0
    for dt, cost in steps:
        now += dt
        wait = store.take("k", capacity, refill, now, cost)
        assert wait >= 0.0
        if wait == 0.0:
            spent += cost
        assert spent <= capacity + refill * now + 1e-6


@settings(max_examples=200, deadline=None)
@given(
    calls=st.integers(1, 1000),
    per=st.sampled_from([0.5, 1.0, 30.0, 60.0, 3600.0, 86400.0]),
    burst=st.none() | st.integers(1, 20),
    gaps=st.lists(st.floats(0.0, 10.0), max_size=50),
)
def test_waiting_the_advertised_time_is_enough(
    calls: int, per: float, burst: int | None, gaps: list[float]
) -> None:
    clock = FakeClock(0.0)
    limiter = RateLimiter(Rate(calls, per, burst=burst), clock=clock)
    for gap in gaps:
        clock.t += gap
        while (wait_ms := limiter.check("p", "t")) is None:
            pass  # spend the bucket
        assert wait_ms >= 1
        clock.t += wait_ms / 1000
        assert limiter.check("p", "t") is None
