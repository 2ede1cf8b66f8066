"""In-memory stores: the embedded default. Bounded, so memory stays flat under abuse."""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from typing import Any

from .._json import kept

__all__ = ["MemoryEventStore", "MemoryRateStore"]


class _StreamLog:
    __slots__ = ("events", "expires", "touched")

    def __init__(self) -> None:
        self.events: deque[tuple[int, bytes]] = deque()
        self.touched = time.monotonic()
        self.expires: float | None = None  # set by drop(..., grace=)


class MemoryEventStore:
    """SSE events kept for resumption with ``Last-Event-ID`` (HL-14).

    Event ids are ``<stream>_<n>``: they encode their stream, so a resumed GET replays
    only that stream (HL-14 MUST NOT replay other streams). Each stream keeps its last
    ``max_events_per_stream`` events; streams idle for ``ttl`` seconds are dropped, and at
    most ``max_streams`` are kept (oldest first out).
    """

    def __init__(self, *, max_events_per_stream: int = 1000, max_streams: int = 10_000, ttl: float = 600.0) -> None:
        self.max_events_per_stream = max_events_per_stream
        self.max_streams = max_streams
        self.ttl = ttl
        self._streams: OrderedDict[str, _StreamLog] = OrderedDict()
        self._counter = 0

    async def store(self, stream_id: str, payload: bytes) -> str:
        log = self._streams.get(stream_id)
        if log is None:
            log = self._streams[stream_id] = _StreamLog()
            self._evict()
        else:
            self._streams.move_to_end(stream_id)
        self._counter += 1
        log.events.append((self._counter, kept(payload)))  # held up to ttl: no encoder's slack
        if len(log.events) > self.max_events_per_stream:
            log.events.popleft()
        log.touched = time.monotonic()
        return f"{stream_id}_{self._counter}"

    async def replay_after(self, last_event_id: str) -> tuple[str, list[tuple[str, bytes]]] | None:
        """The stream an id belongs to and the events after it; None when unknown or expired."""
        stream_id, _, number = last_event_id.rpartition("_")
        log = self._streams.get(stream_id)
        if log is None or not (number.isascii() and number.isdigit()):
            return None
        if log.expires is not None and time.monotonic() >= log.expires:
            del self._streams[stream_id]
            return None
        after = int(number)
        return stream_id, [(f"{stream_id}_{n}", p) for n, p in log.events if n > after]

    async def drop(self, stream_ids: Any, grace: float = 0.0) -> None:
        """Forget these streams: now, or ``grace`` seconds from now (see RESUME_GRACE)."""
        if grace > 0:
            until = time.monotonic() + grace
            for sid in stream_ids:
                log = self._streams.get(sid)
                if log is not None:
                    log.expires = until
            return
        for sid in stream_ids:
            self._streams.pop(sid, None)

    def _evict(self) -> None:
        now = time.monotonic()
        while self._streams:
            oldest_id, oldest = next(iter(self._streams.items()))
            if len(self._streams) > self.max_streams or now - oldest.touched > self.ttl \
                    or (oldest.expires is not None and now >= oldest.expires):
                self._streams.popitem(last=False)
            else:
                break

    def __len__(self) -> int:
        return len(self._streams)

_EPSILON = 1e-9


class MemoryRateStore:
    """In-process buckets: thread-safe, and bounded at ``max_keys`` buckets.

    A bucket is a list ``[tokens, last, capacity, refill_per_s]``. When a new key would exceed
    ``max_keys`` one bucket is evicted: a full one among the least recently used few if there
    is one (a full bucket is the same as no bucket, so that loses nothing), else the least
    recently used. A key among the ``max_keys`` most recently used therefore always keeps its
    bucket, so a caller who was just limited cannot get a fresh one by crowding the store.
    """

    #: how many of the least recently used buckets eviction looks at for a full one
    EVICTION_SCAN = 16

    def __init__(self, max_keys: int = 100_000) -> None:
        if isinstance(max_keys, bool) or not isinstance(max_keys, int) or max_keys < 1:
            raise ValueError(f"max_keys must be a positive integer, got {max_keys!r}")
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._buckets)

    def __contains__(self, key: object) -> bool:
        return key in self._buckets

    def clear(self) -> None:
        with self._lock:
            self._buckets.clear()

    def take(self, key: str, capacity: float, refill_per_s: float, now: float, cost: float = 1.0) -> float:
        if cost > capacity:
            return math.inf
        buckets = self._buckets
        with self._lock:
            bucket = buckets.get(key)
            if bucket is None:
                # a fresh bucket is full, and cost <= capacity: always allowed
                buckets[key] = [capacity - cost, now, capacity, refill_per_s]
                if len(buckets) > self.max_keys:
                    self._evict(now)
                return 0.0
            buckets.move_to_end(key)
            tokens, last = bucket[0], bucket[1]
            # A clock that stepped back counts as no time passed; keeping the later ``last``
            # means the interval is not counted twice when the clock comes forward again.
            if now > last:
                tokens += (now - last) * refill_per_s
                if tokens > capacity:
                    tokens = capacity
                bucket[1] = now
            if bucket[3] is not refill_per_s:  # the same Rate's numbers on every call: stored once
                bucket[2] = capacity
                bucket[3] = refill_per_s
            if tokens + _EPSILON >= cost:
                tokens -= cost
                bucket[0] = tokens if tokens > 0.0 else 0.0
                return 0.0
            bucket[0] = tokens
        if refill_per_s <= 0:
            return math.inf
        return (cost - tokens) / refill_per_s

    def _evict(self, now: float) -> None:
        # Called with the lock held, only when a new key pushed the store one over its cap.
        buckets = self._buckets
        victim = None
        for i, (key, (tokens, last, capacity, refill)) in enumerate(buckets.items()):
            if i >= self.EVICTION_SCAN or i >= len(buckets) - 1:  # never the key just added
                break
            if tokens + max(now - last, 0.0) * refill >= capacity:
                victim = key
                break
        if victim is None:
            buckets.popitem(last=False)
        else:
            del buckets[victim]
