"""Token buckets in Redis: one rate limit shared by every process (a global limit)."""

from __future__ import annotations

import math
from typing import Any

from .redis_base import LuaScript, down_errors, sync_client, unavailable

__all__ = ["RedisRateStore"]

#: how long past "full again" an idle bucket's key lives, in milliseconds
EXPIRY_MARGIN_MS = 1000

# The MemoryRateStore algorithm, atomically, on the Redis server's clock. KEYS[1] is the bucket
# (a hash: t = tokens, l = last refill, in seconds of Redis TIME); ARGV = capacity, refill per
# second, cost. Returns the seconds to wait as a string ("0" = taken): Lua numbers returned as
# such would be truncated to integers. Floats are stored with 17 significant digits, exactly.
_TAKE = LuaScript(
    """
if redis.replicate_commands then redis.replicate_commands() end
local capacity, refill, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local time = redis.call('TIME')
local now = tonumber(time[1]) + tonumber(time[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 't', 'l')
local tokens, last = tonumber(state[1]), tonumber(state[2])
local wait = 0
if tokens == nil or last == nil then
  tokens = capacity - cost
  last = now
else
  local elapsed = now - last
  if elapsed > 0 then
    tokens = math.min(tokens + elapsed * refill, capacity)
    last = now
  end
  if tokens + 1e-9 >= cost then
    tokens = math.max(0, tokens - cost)
  elseif refill > 0 then
    wait = (cost - tokens) / refill
  else
    wait = -1
  end
end
redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens), 'l', string.format('%.17g', last))
if refill > 0 then
  redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / refill * 1000) + tonumber(ARGV[4]))
end
if wait < 0 then return 'inf' end
return string.format('%.17g', wait)
"""
)


class RedisRateStore:
    """A :class:`~mcpkit.policy.ratelimit.RateStore` in Redis, shared by every process using it.

    ``take`` behaves like :class:`~mcpkit.policy.ratelimit.MemoryRateStore` (a missing bucket is
    full; 1e-9 tokens of slack; ``cost > capacity`` is ``math.inf`` without a round trip) in one
    Lua script, run with EVALSHA (EVAL when Redis answers NOSCRIPT). It reads the Redis server's
    clock (``TIME``) and ignores ``now``: hosts' clocks differ, and buckets shared across hosts
    need one clock. A bucket is a hash at ``{prefix}rl:{key}`` whose key expires once the bucket
    would be full again (plus a second): an idle bucket and no bucket are the same thing. A
    bucket that never refills (``refill_per_s <= 0``) does not expire.

    Redis being unreachable raises :class:`~mcpkit.stores.redis_base.StoreUnavailable`; whether
    to let calls through then (fail open) or refuse them is the caller's decision.
    """

    def __init__(self, client_or_url: Any, *, prefix: str = "mcpkit:") -> None:
        self._client, self._owned = sync_client(client_or_url, "RedisRateStore")
        self._down = down_errors()
        self.prefix = prefix

    def key(self, key: str) -> str:
        return f"{self.prefix}rl:{key}"

    def take(self, key: str, capacity: float, refill_per_s: float, now: float, cost: float = 1.0) -> float:
        if cost > capacity:
            return math.inf
        args = [repr(float(capacity)), repr(float(refill_per_s)), repr(float(cost)), EXPIRY_MARGIN_MS]
        try:
            wait = _TAKE(self._client, [self.key(key)], args)
        except self._down as exc:
            raise unavailable("taking a rate-limit token", exc) from exc
        return float(wait)

    def close(self) -> None:
        """Close the client if this store built it from a URL."""
        if self._owned:
            self._client.close()
