"""Session state (HTTP sessions of the handshake era): the protocol, in memory, and in Redis.

A session's state is a small JSON object: the negotiated revision, the client's capabilities and
info, its log level, its subscriptions, the principal that owns it. Both stores keep it as JSON
bytes, so what comes back from ``load`` is always a fresh copy of what was saved, in memory as
in Redis: changing it changes nothing until it is saved again.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from typing import Any, Protocol

from .. import _json
from .redis_base import LuaScript, down_errors, hash_tag, sync_client, unavailable

__all__ = ["MemorySessionStore", "RedisSessionStore", "SessionStore"]


class SessionStore(Protocol):
    """Session state by session id; every method is synchronous.

    ``save`` stores ``state`` (a JSON-able dict) for ``ttl`` seconds; ``update`` does the same
    only for a session the store still has (False, and nothing stored, when it ended, expired or
    was lost: a change never brings back a session that ended); ``load`` returns a copy of it,
    or None once it expired or was deleted; ``touch`` gives a live session ``ttl`` more seconds
    (False when there was none); ``delete`` forgets it; ``existing`` says which of some
    sessions the store still has.
    """

    def save(self, session_id: str, state: dict[str, Any], ttl: float) -> None: ...

    def update(self, session_id: str, state: dict[str, Any], ttl: float) -> bool: ...

    def load(self, session_id: str) -> dict[str, Any] | None: ...

    def touch(self, session_id: str, ttl: float) -> bool: ...

    def delete(self, session_id: str) -> None: ...

    def existing(self, session_ids: list[str]) -> set[str]: ...


#: Sessions of one client across every process (the HTTP app's per-client quota, shared): a
#: sorted set of session ids scored by when each expires. ARGV: session id, now (ms), ttl (ms),
#: the quota. Adds the session, drops expired members, and returns (and forgets) the members
#: past the quota, those expiring first (the least recently used) first.
_CLAIM = LuaScript("""
local key, sid = KEYS[1], ARGV[1]
local now, ttl, limit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
redis.call('ZADD', key, now + ttl, sid)
redis.call('PEXPIRE', key, ttl)
local count = redis.call('ZCARD', key)
if count <= limit then return {} end
local over = redis.call('ZRANGE', key, 0, count - limit - 1)
local out = {}
for _, member in ipairs(over) do
  if member ~= sid then
    redis.call('ZREM', key, member)
    out[#out + 1] = member
  end
end
return out
""")


def _ttl_ms(ttl: float) -> int:
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not (ttl > 0 and math.isfinite(ttl)):
        raise ValueError(f"a session ttl must be a positive, finite number of seconds, got {ttl!r}")
    return max(1, math.ceil(ttl * 1000))


def _encode(state: dict[str, Any]) -> bytes:
    if not isinstance(state, dict):
        raise TypeError(f"session state must be a dict, got {type(state).__name__}")
    return _json.dumps(state)


class MemorySessionStore:
    """In this process: thread-safe, bounded to ``max_sessions`` (the least recently saved or
    touched goes first), expired sessions dropped on access."""

    def __init__(self, *, max_sessions: int = 100_000) -> None:
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise ValueError("max_sessions must be a positive integer")
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, tuple[bytes, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._expire(time.monotonic())
            return len(self._sessions)

    def save(self, session_id: str, state: dict[str, Any], ttl: float) -> None:
        data, ms = _encode(state), _ttl_ms(ttl)
        now = time.monotonic()
        with self._lock:
            self._sessions[session_id] = (data, now + ms / 1000)
            self._sessions.move_to_end(session_id)
            if len(self._sessions) > self.max_sessions:
                self._expire(now)
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)

    def update(self, session_id: str, state: dict[str, Any], ttl: float) -> bool:
        data, ms = _encode(state), _ttl_ms(ttl)
        with self._lock:
            if self._live(session_id) is None:
                return False
            self._sessions[session_id] = (data, time.monotonic() + ms / 1000)
            self._sessions.move_to_end(session_id)
            return True

    def load(self, session_id: str) -> dict[str, Any] | None:
        with self._lock:
            entry = self._live(session_id)
        return None if entry is None else _json.loads(entry[0])

    def existing(self, session_ids: list[str]) -> set[str]:
        with self._lock:
            return {sid for sid in session_ids if self._live(sid) is not None}

    def touch(self, session_id: str, ttl: float) -> bool:
        ms = _ttl_ms(ttl)
        with self._lock:
            entry = self._live(session_id)
            if entry is None:
                return False
            self._sessions[session_id] = (entry[0], time.monotonic() + ms / 1000)
            self._sessions.move_to_end(session_id)
            return True

    def delete(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    def _live(self, session_id: str) -> tuple[bytes, float] | None:
        # with the lock held
        entry = self._sessions.get(session_id)
        if entry is not None and entry[1] <= time.monotonic():
            del self._sessions[session_id]
            return None
        return entry

    def _expire(self, now: float) -> None:
        for key in [k for k, (_, deadline) in self._sessions.items() if deadline <= now]:
            del self._sessions[key]


class RedisSessionStore:
    """Sessions in Redis, at ``{prefix}session:{{session_id}}`` (JSON, with a key expiry of ``ttl``),
    so any process can serve any session. Redis being unreachable raises
    :class:`~mcpkit.stores.redis_base.StoreUnavailable`."""

    def __init__(self, client_or_url: Any, *, prefix: str = "mcpkit:") -> None:
        self._client, self._owned = sync_client(client_or_url, "RedisSessionStore")
        self._down = down_errors()
        self.prefix = prefix

    def key(self, session_id: str) -> str:
        # the session id as hash tag: one slot for the record and the session's event streams
        return f"{self.prefix}session:{hash_tag(session_id)}"

    def save(self, session_id: str, state: dict[str, Any], ttl: float) -> None:
        data, ms = _encode(state), _ttl_ms(ttl)
        try:
            self._client.set(self.key(session_id), data, px=ms)
        except self._down as exc:
            raise unavailable("saving a session", exc) from exc

    def update(self, session_id: str, state: dict[str, Any], ttl: float) -> bool:
        data, ms = _encode(state), _ttl_ms(ttl)
        try:
            # XX: only while the key exists, so a process that has not heard of an end yet
            # cannot bring the session back by saving a change to it
            return bool(self._client.set(self.key(session_id), data, px=ms, xx=True))
        except self._down as exc:
            raise unavailable("saving a session", exc) from exc

    def load(self, session_id: str) -> dict[str, Any] | None:
        try:
            data = self._client.get(self.key(session_id))
        except self._down as exc:
            raise unavailable("loading a session", exc) from exc
        return None if data is None else _json.loads(data)

    def existing(self, session_ids: list[str]) -> set[str]:
        """One round trip (per shard, on a cluster) for all of them."""
        if not session_ids:
            return set()
        try:
            with self._client.pipeline(transaction=False) as pipe:
                for session_id in session_ids:
                    pipe.exists(self.key(session_id))
                found = pipe.execute()
        except self._down as exc:
            raise unavailable("checking sessions", exc) from exc
        return {sid for sid, count in zip(session_ids, found) if count}

    def touch(self, session_id: str, ttl: float) -> bool:
        ms = _ttl_ms(ttl)
        try:
            return bool(self._client.pexpire(self.key(session_id), ms))
        except self._down as exc:
            raise unavailable("touching a session", exc) from exc

    def delete(self, session_id: str) -> None:
        try:
            self._client.delete(self.key(session_id))
        except self._down as exc:
            raise unavailable("deleting a session", exc) from exc

    def client_key(self, client: str) -> str:
        return f"{self.prefix}client:{hash_tag(client)}"

    def claim(self, client: str, session_id: str, limit: int, ttl: float) -> list[str]:
        """Count ``session_id`` against ``client``'s quota in every process; returns the ids of
        that client's oldest sessions past ``limit``, which the caller ends."""
        now_ms = int(time.time() * 1000)
        try:
            over = _CLAIM(self._client, [self.client_key(client)], [session_id, now_ms, _ttl_ms(ttl), limit])
        except self._down as exc:
            raise unavailable("counting a client's sessions", exc) from exc
        return [m.decode() if isinstance(m, bytes) else str(m) for m in over]

    def renew(self, client: str, session_id: str, ttl: float) -> None:
        """The session was used: it expires ``ttl`` from now, in the quota as in the store."""
        try:
            self._client.zadd(self.client_key(client), {session_id: int(time.time() * 1000) + _ttl_ms(ttl)}, xx=True)
        except self._down as exc:
            raise unavailable("counting a client's sessions", exc) from exc

    def release(self, client: str, session_id: str) -> None:
        """The session ended: it no longer counts against ``client``."""
        try:
            self._client.zrem(self.client_key(client), session_id)
        except self._down as exc:
            raise unavailable("counting a client's sessions", exc) from exc

    def close(self) -> None:
        """Close the client if this store built it from a URL."""
        if self._owned:
            self._client.close()
