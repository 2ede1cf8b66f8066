"""Token-bucket rate limits on tool calls, one bucket per (principal, tool) (TL-11).

TL-11 says a server MUST rate-limit tool invocations. A token bucket is the usual answer: a
bucket holds up to ``capacity`` tokens, refills continuously at ``calls / per`` tokens a second,
and every call takes one token. A quiet caller can spend a whole bucket at once (the burst), a
busy one settles at the configured rate, and a refused caller is told exactly how long to wait.

The buckets live in a :class:`RateStore`, a one-method protocol, so that a shared store (Redis)
can replace the in-process :class:`MemoryRateStore` without anything else noticing. The limiter
itself holds no state beyond its default rate.

Hot path: :meth:`RateLimiter.check` is a clock read, one string join, and one store call
under a lock; it returns ``None`` (allowed) in the common case and allocates nothing else.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from mcpkit.protocol.errors import E_NOT_CONNECTED, E_RATE_LIMITED, INTERNAL_ERROR, McpError, ToolError, handler_error

from ..server.session import caller_of
from ..stores.memory import MemoryRateStore

__all__ = ["COMPLETION_KEY", "CompletionRateLimit", "KEY_SEPARATOR", "MemoryRateStore", "Rate", "RateLimiter",
           "RateStore"]

log = logging.getLogger("mcpkit")

#: Joins principal and tool into a bucket key. Tool names are ``[A-Za-z0-9_.-]`` and principals
#: are identifiers chosen by the auth layer, so neither contains U+001F (unit separator); the key
#: is therefore unambiguous.
KEY_SEPARATOR = "\x1f"

#: The bucket name of ``completion/complete`` (CP-05): one bucket per principal for every
#: completion, whatever prompt or template it completes. A tool name never contains "/", so no
#: tool shares it.
COMPLETION_KEY = "completion/complete"

# Floating-point slack, in tokens, when comparing what a bucket holds with what a call costs:
# 0.6 s at 100/60 tokens a second may come out as 0.9999999999999999 tokens, and a caller who
# waited exactly the advertised retry delay must then be let through.

_UNITS: dict[str, float] = {}
for _names, _seconds in (
    (("s", "sec", "secs", "second", "seconds"), 1.0),
    (("m", "min", "mins", "minute", "minutes"), 60.0),
    (("h", "hr", "hrs", "hour", "hours"), 3600.0),
    (("d", "day", "days"), 86400.0),
):
    for _name in _names:
        _UNITS[_name] = _seconds
_UNIT_NAMES = {1.0: "s", 60.0: "min", 3600.0: "hour", 86400.0: "day"}

# "100/min", "5 / s", "100/30s", "2/1.5 hours"
_RATE_RE = re.compile(r"\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*([A-Za-z]+)\s*")


@dataclass(frozen=True, slots=True)
class Rate:
    """``calls`` per ``per`` seconds, with an optional ``burst`` (bucket size) above or below ``calls``.

    ``capacity`` is the bucket size (``burst`` if given, else ``calls``); ``refill_per_s`` the
    tokens added per second. Both are computed once here so the hot path only reads them.
    """

    calls: int
    per: float
    burst: int | None = None
    capacity: int = field(init=False, repr=False, compare=False)
    refill_per_s: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.calls, bool) or not isinstance(self.calls, int) or self.calls < 1:
            raise ValueError(f"rate calls must be a positive integer, got {self.calls!r}")
        if isinstance(self.per, bool) or not isinstance(self.per, (int, float)):
            raise TypeError(f"rate period must be a number of seconds, got {self.per!r}")
        if not (math.isfinite(self.per) and self.per > 0):
            raise ValueError(f"rate period must be a positive, finite number of seconds, got {self.per!r}")
        if self.burst is not None and (
            isinstance(self.burst, bool) or not isinstance(self.burst, int) or self.burst < 1
        ):
            raise ValueError(f"rate burst must be a positive integer or None, got {self.burst!r}")
        object.__setattr__(self, "per", float(self.per))
        object.__setattr__(self, "capacity", self.calls if self.burst is None else self.burst)
        object.__setattr__(self, "refill_per_s", self.calls / self.per)

    @classmethod
    def parse(cls, text: str) -> Rate:
        """``"100/min"``, ``"5/s"``, ``"10/second"``, ``"1000/hour"``, ``"20/day"``, ``"100/30s"``.

        Units: s/sec/second(s), m/min/minute(s), h/hr/hour(s), d/day(s); a number before the
        unit multiplies it. Raises ValueError saying what was expected.
        """
        if not isinstance(text, str):
            raise TypeError(f"a rate must be a string like '100/min', got {type(text).__name__}")
        m = _RATE_RE.fullmatch(text)
        if m is None:
            raise ValueError(
                f"invalid rate {text!r}: expected '<calls>/<period>' such as '100/min', '5/s' or '100/30s'"
            )
        calls_s, count_s, unit = m.groups()
        seconds = _UNITS.get(unit.lower())
        if seconds is None:
            raise ValueError(
                f"invalid rate {text!r}: unknown time unit {unit!r}; use s, min, hour or day"
            )
        calls = int(calls_s)
        if calls < 1:
            raise ValueError(f"invalid rate {text!r}: the number of calls must be at least 1")
        count = float(count_s) if count_s is not None else 1.0
        if count <= 0:
            raise ValueError(f"invalid rate {text!r}: the period must be longer than zero")
        return cls(calls, count * seconds)

    @classmethod
    def coerce(cls, value: Rate | str | None) -> Rate | None:
        """A :class:`Rate` from a Rate, a string for :meth:`parse`, or None (no limit)."""
        if value is None or isinstance(value, Rate):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        raise TypeError(f"a rate must be a Rate, a string like '100/min' or None, got {type(value).__name__}")

    def __str__(self) -> str:
        unit = _UNIT_NAMES.get(self.per)
        return f"{self.calls}/{unit}" if unit else f"{self.calls}/{self.per:g}s"


class RateStore(Protocol):
    """Where token buckets live; the limiter's only dependency.

    ``take`` refills the bucket at ``key`` for the time elapsed since its last use (at
    ``refill_per_s`` tokens a second, up to ``capacity``; a bucket never seen is full), then
    takes ``cost`` tokens if the bucket holds that many and returns 0.0. Otherwise it takes
    nothing and returns the seconds until ``cost`` tokens will be there (``math.inf`` if
    ``cost`` exceeds ``capacity``: that call can never pass).

    A Redis implementation does the same atomically in one Lua script, reading the server's
    clock (``TIME``) rather than ``now`` so several processes share one bucket whatever their
    clocks say, and sets a TTL of ``capacity / refill_per_s`` on the key: a full bucket and no
    bucket are the same thing.
    """

    def take(self, key: str, capacity: float, refill_per_s: float, now: float, cost: float = 1.0) -> float: ...


# MemoryRateStore lives with the other in-process stores (stores/memory.py), below the
# server and the policy alike; it is imported here so that both names keep working.
class RateLimiter:
    """Per-(principal, tool) token buckets with a default rate and optional per-tool rates.

    ``check(principal, tool, rate)`` uses ``rate`` (the tool's own) or else ``default``; it
    returns None when no rate applies or the call may go ahead, else the milliseconds to wait
    (an int, at least 1), for :meth:`limit_error`. The bucket key is
    ``f"{principal}\\x1f{tool}"`` (see :data:`KEY_SEPARATOR`).
    """

    __slots__ = ("_clock", "default", "store")

    def __init__(
        self,
        default: Rate | str | None = None,
        *,
        store: RateStore | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.default = Rate.coerce(default)
        self.store: RateStore = MemoryRateStore() if store is None else store
        self._clock = clock

    def check(self, principal: str, tool: str, rate: Rate | None = None) -> int | None:
        if rate is None:
            rate = self.default
            if rate is None:
                return None
        wait = self.store.take(
            f"{budget_of(principal)}{KEY_SEPARATOR}{tool}", rate.capacity, rate.refill_per_s, self._clock()
        )
        if not wait:
            return None
        if wait == math.inf:  # a store's answer for "never"; not reachable with cost 1
            return 2**31 - 1
        # 0.6 s is 600.0000000000001 ms in floating point: don't round that up to 601
        return max(1, math.ceil(wait * 1000.0 - 1e-6))

    def limit_error(self, tool: str, retry_after_ms: int, rate: Rate | None = None) -> ToolError:
        """The E_RATE_LIMITED error for a refused call; ``rate`` is the one that refused it."""
        return self.exceeded(f"tool {tool!r}", retry_after_ms, rate,
                             f"Wait {retry_after_ms} ms before calling {tool} again.")

    def exceeded(self, subject: str, retry_after_ms: int, rate: Rate | None, fix: str) -> ToolError:
        """E_RATE_LIMITED for ``subject`` (``tool 'x'``, ``completion/complete``)."""
        rate = rate or self.default
        limit = str(rate) if rate is not None else None
        details: dict[str, object] = {"retryAfterMs": retry_after_ms, "limit": limit}
        if rate is not None and rate.burst is not None:
            details["burst"] = rate.burst
        return ToolError(
            f"Rate limit exceeded for {subject}"
            + (f" ({limit} per caller)" if limit else "")
            + f"; retry after {retry_after_ms} ms.",
            code=E_RATE_LIMITED,
            details=details,
            retryable=True,
            suggested_fix=fix,
        )


@functools.lru_cache(maxsize=4096)
def budget_of(principal: str) -> str:
    """Whose bucket a call takes from: the principal, except that an anonymous HTTP caller
    named by an IPv6 address (``anonymous@2001:db8::5``) spends its /64's budget: one host is
    commonly given a whole /64, and could otherwise take a fresh budget at every address in it.
    Its audit lines keep its own address."""
    if not principal.startswith("anonymous@") or ":" not in principal:
        return principal
    import ipaddress

    try:
        address = ipaddress.IPv6Address(principal[len("anonymous@"):])
    except ValueError:
        return principal
    return f"anonymous@{ipaddress.IPv6Network((address, 64), strict=False).network_address}/64"


class CompletionRateLimit:
    """The pipeline step that rate-limits ``completion/complete`` (CP-05).

    A client asks for completions as its user types, so they are metered like tool calls: the
    policy's :class:`RateLimiter`, its default rate, one bucket per principal (the policy's
    ``principal``, as for tools) named :data:`COMPLETION_KEY`. A refusal is the JSON-RPC error
    any handler's E_RATE_LIMITED becomes outside tools/call (protocol/errors.py ``handler_error``):
    ``data`` carries ``code``, ``retryable`` and ``details.retryAfterMs``.
    """

    order = 30  # where the tools' rate limit sits (policy/chain.py)

    __slots__ = ("limiter",)

    def __init__(self, limiter: RateLimiter) -> None:
        self.limiter = limiter

    @staticmethod
    def may_wait(server: Any) -> bool:
        """Whether the bucket may live in a shared store (then ``check_async`` is awaited)."""
        return bool(server.shared)

    async def check_async(self, cc: Any) -> None:
        """``check`` in an async chain: a bucket in the shared store (Redis) is taken from on
        the stores' threads, so a slow or paused Redis stalls this request, not the event loop."""
        server = cc.session.server
        if server.shared and self.limiter.store is server.stores.rates:
            await server.stores.call(self.check, cc)
        else:
            self.check(cc)

    def check(self, cc: Any) -> None:
        """A guard (server/pipeline.py): refuses, or lets the completion pass."""
        session = cc.session
        policy = session.server._policy
        caller = policy.principal_of(session, cc.request) if policy is not None else caller_of(session)
        limiter = self.limiter
        try:
            wait = limiter.check(caller, COMPLETION_KEY)
        except Exception as exc:  # noqa: BLE001 - a shared store that is down (StoreUnavailable)
            log.warning("rate limit of completion/complete not checked: %s", exc)
            raise _as_rpc(ToolError("Completions cannot be served now: their rate limit cannot be checked.",
                                    code=E_NOT_CONNECTED, retryable=True,
                                    suggested_fix="Retry in a few seconds.")) from None
        if wait is not None:
            raise _as_rpc(limiter.exceeded("completion/complete", wait, None,
                                           f"Wait {wait} ms before asking for completions again."))


def _as_rpc(error: ToolError) -> McpError:
    # a ToolError always has its JSON-RPC error; the fallback only keeps the type checker content
    return handler_error(error, 0) or McpError(INTERNAL_ERROR, error.message)
