"""In-memory stores: the embedded default. Bounded, so memory stays flat under abuse."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from typing import Any

__all__ = ["MemoryEventStore"]


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
        log.events.append((self._counter, payload))
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
