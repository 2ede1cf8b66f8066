"""SSE events for resumption, in Redis: any process can replay what another one stored."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .redis_base import LuaScript, async_client, down_errors, hash_tag, unavailable

__all__ = ["RedisEventStore"]

# One Redis Stream per SSE stream; entry ids are ``0-<n>``, so ``n`` (the number in the event id)
# is the stream's own sequence: the next one is the last entry's plus one. Trimming keeps the
# newest entry, so the sequence survives it. Reading the last id and adding happen in one
# script, so concurrent writers in any number of processes get distinct, ordered numbers.
_STORE = LuaScript(
    """
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local n = 1
if last[1] then
  local id = last[1][1]
  n = tonumber(string.sub(id, string.find(id, '-', 1, true) + 1)) + 1
end
redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[2], string.format('0-%d', n), 'p', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return n
"""
)

_MAX_SEQ = 2**64 - 1


class RedisEventStore:
    """The Redis counterpart of :class:`~mcpkit.stores.memory.MemoryEventStore` (async).

    Each SSE stream is a Redis Stream at ``{prefix}ev:{{session}}.n`` (the session id as hash tag). Event ids are
    ``<stream_id>_<n>`` like the memory store's, ``n`` counting up per stream whichever process
    wrote the event, so a client may resume with ``Last-Event-ID`` on any worker. A stream keeps
    its last ``max_events_per_stream`` events, and its key expires ``ttl`` seconds after the last
    write. ``replay_after`` returns None for an unknown or expired stream.

    ``client_or_url`` is a ``redis.asyncio.Redis`` (bound to the event loop it is used on) or a
    URL; a client built from a URL is closed by :meth:`aclose`. Redis being unreachable raises
    :class:`~mcpkit.stores.redis_base.StoreUnavailable`.
    """

    def __init__(
        self,
        client_or_url: Any,
        *,
        prefix: str = "mcpkit:",
        max_events_per_stream: int = 1000,
        ttl: float = 600.0,
    ) -> None:
        if isinstance(max_events_per_stream, bool) or not isinstance(max_events_per_stream, int) \
                or max_events_per_stream < 1:
            raise ValueError("max_events_per_stream must be a positive integer")
        if not ttl > 0:
            raise ValueError("ttl must be a positive number of seconds")
        self._client, self._owned = async_client(client_or_url, "RedisEventStore")
        self._down = down_errors()
        self.prefix = prefix
        self.max_events_per_stream = max_events_per_stream
        self.ttl = float(ttl)
        self._ttl_ms = max(1, int(self.ttl * 1000))

    def key(self, stream_id: str) -> str:
        # ``<session id>.<n>``: the session id is the key's hash tag, so on a Redis Cluster a
        # session's streams share a slot with each other and with the session's record
        session, dot, n = stream_id.rpartition(".")
        if not dot:
            return f"{self.prefix}ev:{hash_tag(stream_id)}"
        return f"{self.prefix}ev:{hash_tag(session)}.{n}"

    async def store(self, stream_id: str, payload: bytes) -> str:
        try:
            n = await _STORE.run_async(
                self._client, [self.key(stream_id)], [payload, self.max_events_per_stream, self._ttl_ms]
            )
        except self._down as exc:
            raise unavailable("storing an SSE event", exc) from exc
        return f"{stream_id}_{int(n)}"

    async def replay_after(self, last_event_id: str) -> tuple[str, list[tuple[str, bytes]]] | None:
        """The stream an id belongs to and its events after that id; None when unknown or expired."""
        stream_id, sep, number = last_event_id.rpartition("_")
        if not sep or not (number.isascii() and number.isdigit()):
            return None
        start = f"0-{min(int(number) + 1, _MAX_SEQ)}"
        key = self.key(stream_id)
        try:
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.exists(key)
                pipe.xrange(key, min=start)
                exists, entries = await pipe.execute()
        except self._down as exc:
            raise unavailable("replaying SSE events", exc) from exc
        if not exists:
            return None
        events = []
        for entry_id, fields in entries:
            seq = entry_id.rpartition(b"-")[2].decode()
            events.append((f"{stream_id}_{seq}", fields[b"p"]))
        return stream_id, events

    async def follow(self, stream_id: str, after: int, block: float) -> list[tuple[str, bytes]]:
        """The events of ``stream_id`` numbered above ``after``, waiting up to ``block`` seconds
        for one to be stored (any process may store it): [] when none came. ``block`` stays
        under the client's socket timeout (2 s)."""
        try:
            found = await self._client.xread({self.key(stream_id): f"0-{after}"},
                                             block=max(1, int(block * 1000)))
        except self._down as exc:
            raise unavailable("following SSE events", exc) from exc
        events = []
        for entries in (found.values() if isinstance(found, dict) else [e for _k, e in found or ()]):
            for entry_id, fields in entries:
                seq = entry_id.rpartition(b"-")[2].decode()
                events.append((f"{stream_id}_{seq}", fields[b"p"]))
        return events

    async def drop(self, stream_ids: Iterable[str], grace: float = 0.0) -> None:
        """Forget these streams: now, or ``grace`` seconds from now (see RESUME_GRACE)."""
        keys = [self.key(sid) for sid in stream_ids]
        if not keys:
            return
        try:
            if grace > 0:
                ms = max(1, int(grace * 1000))
                for key in keys:  # PEXPIRE is one key a command; on a cluster they may differ in slot
                    await self._client.pexpire(key, ms)
                return
            await self._client.delete(*keys)
        except self._down as exc:
            raise unavailable("dropping SSE streams", exc) from exc

    async def aclose(self) -> None:
        """Close the client if this store built it from a URL."""
        if self._owned:
            await self._client.aclose()
