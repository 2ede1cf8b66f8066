"""What an HTTP stream holds for a client that reads it slower than the server writes
(transports/http_streams.py): bounded, the oldest progress and log notifications giving way,
answers and server requests never; and bytes held a while keep no encoder's slack (_json.kept)."""

from __future__ import annotations

import asyncio
import logging
import tracemalloc

import pytest

from mcpkit import _json
from mcpkit.stores.memory import MemoryEventStore
from mcpkit.transports.http_streams import _END, BACKLOG_BYTES, _Stream


def progress(n: int, size: int = 1000) -> bytes:
    return _json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": 1, "progress": n, "message": "p" * size}})


def log_line(n: int, size: int = 1000) -> bytes:
    return _json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                        "params": {"level": "info", "data": {"n": n, "text": "x" * size}}})


def answer(rid: int, size: int = 10) -> bytes:
    return _json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "a" * size}]}})


def server_request(rid: int) -> bytes:
    return _json.dumps({"jsonrpc": "2.0", "id": rid, "method": "sampling/createMessage",
                        "params": {"messages": [], "maxTokens": 1}})


def test_a_stream_nobody_reads_sheds_its_oldest_notifications_and_keeps_its_answers(caplog):
    stream = _Stream("s.1", {1, 2}, json_mode=False)
    first = answer(1)
    asked = server_request(99)
    with caplog.at_level(logging.WARNING, logger="mcpkit.http"):
        stream.push(first)
        stream.push(asked)
        for n in range(20_000):  # about 21 MB offered
            stream.push(progress(n) if n % 2 else log_line(n))
            assert stream.backlog <= BACKLOG_BYTES + 2048
        last = answer(2)
        stream.push(last)
        stream.push(_END)
    held = list(stream.queue)
    assert held[0] == first and held[1] == asked  # never shed, in their place
    assert held[-2:] == [last, _END]
    assert stream.dropped > 10_000
    assert len(held) - 4 == 20_000 - stream.dropped
    # what is left is the newest, in order
    numbers = [_json.loads(item)["params"].get("progress", _json.loads(item)["params"].get("data", {}).get("n"))
               for item in held[2:-2]]
    assert numbers == sorted(numbers) and numbers[-1] == 19_999
    assert stream.backlog == sum(len(item) for item in held if item is not _END)
    warnings = [r for r in caplog.records if "reads slower" in r.getMessage()]
    assert len(warnings) == 1  # once per stream, not per shed


def test_the_writer_taking_messages_keeps_the_count_true():
    stream = _Stream("s.1", {1}, json_mode=False)
    for n in range(10):
        stream.push(log_line(n))
    while stream.queue:
        stream.pop()
    assert stream.backlog == 0


def test_answers_alone_are_never_dropped_and_not_scanned_at_each_push():
    """A backlog of what may not give way grows (the work of the handler bounds it); the stream
    looks again only when it has doubled."""
    class Counting(_Stream):
        __slots__ = ("scans",)

        def _shed(self) -> None:
            self.scans += 1
            super()._shed()

    stream = Counting("s.1", set(range(3000)), json_mode=False)
    stream.scans = 0
    for rid in range(3000):
        stream.push(answer(rid, size=10_000))  # 30 MB of answers
    assert len(stream.queue) == 3000 and stream.dropped == 0
    assert stream.scans <= 4  # 8, 16, 32 MB: a handful of looks, not one per push


def test_the_standalone_stream_keeps_its_last_thousand_messages_with_a_true_count():
    stream = _Stream("s.get", set(), json_mode=False, standalone=True)
    updates = [_json.dumps({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                            "params": {"uri": f"x://{n}"}}) for n in range(1500)]
    for item in updates:
        stream.push(item)
    assert list(stream.queue) == updates[-1000:]
    assert stream.backlog == sum(map(len, updates[-1000:]))


def test_a_backlog_holds_its_messages_without_the_encoders_slack():
    stream = _Stream("s.1", {1}, json_mode=False)
    messages = [log_line(n) for n in range(2000)]  # 2 MB, made before measuring
    tracemalloc.start()
    try:
        for item in messages:
            stream.push(item)
        del messages
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert stream.backlog > 2_000_000
    assert held < 1.5 * stream.backlog, (held, stream.backlog)


def test_stored_events_keep_no_encoders_slack():
    store = MemoryEventStore()
    events = [log_line(n) for n in range(1000)]

    async def keep() -> None:
        for item in events:
            await store.store("s.1", item)

    tracemalloc.start()
    try:
        asyncio.run(keep())
        del events
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 1.5 * 1000 * len(log_line(0)), held


@pytest.mark.parametrize("size", [0, 10, 1000, 40_000])
def test_kept_is_the_same_bytes(size: int):
    data = _json.dumps({"x": "y" * size})
    assert _json.kept(data) == data and type(_json.kept(data)) is bytes
