"""The in-memory event store refuses ids whose counter is not ASCII digits."""

from __future__ import annotations

import pytest

from mcpkit.stores.memory import MemoryEventStore


@pytest.mark.asyncio
async def test_a_non_ascii_digit_counter_is_an_unknown_id():
    store = MemoryEventStore()
    eid = await store.store("s1", b"x")
    assert (await store.replay_after(eid)) == ("s1", [])
    assert await store.replay_after("s1_²") is None  # "²".isdigit() is true; int("²") would raise
