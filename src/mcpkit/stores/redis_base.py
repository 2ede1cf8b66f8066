"""What the Redis stores share: the lazy import of redis-py, client construction, errors, ids.

Nothing here imports ``redis`` at module import time; :func:`require_redis` does, the first time
a Redis store is constructed.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
from types import ModuleType
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .._extras import needs
from .errors import StoreUnavailable

__all__ = [
    "CONNECT_TIMEOUT",
    "SOCKET_TIMEOUT",
    "LuaScript",
    "StoreUnavailable",
    "async_client",
    "cluster_url",
    "hash_tag",
    "down_errors",
    "process_origin",
    "require_redis",
    "sync_client",
    "unavailable",
]

#: seconds to open a connection, and to wait for an answer: a store that is down fails fast
CONNECT_TIMEOUT = 1.5
SOCKET_TIMEOUT = 2.0
#: a connection idle this long is PINGed before it is used again (catches half-open sockets)
HEALTH_CHECK_INTERVAL = 30
#: what needs redis-py, as a missing one's line says
_WHAT = "the Redis stores (MCPKIT_STORE=redis://)"


def require_redis() -> ModuleType:
    """The ``redis`` package, or a MissingExtra that says how to install it."""
    with needs("redis", _WHAT):
        import redis
    return redis


def down_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that mean "Redis is unreachable" (as opposed to a bad command).

    On a Redis Cluster that includes the cluster saying it cannot serve a slot now (CLUSTERDOWN,
    TRYAGAIN, a slot no node covers): what a command meets while a master's replica takes over,
    which redis-py re-discovers by itself once it has."""
    exceptions = require_redis().exceptions
    return (exceptions.ConnectionError, exceptions.TimeoutError, OSError, exceptions.ClusterDownError,
            exceptions.TryAgainError, exceptions.SlotNotCoveredError)


def unavailable(what: str, exc: BaseException) -> StoreUnavailable:
    return StoreUnavailable(f"{what}: Redis is unreachable ({type(exc).__name__}: {exc})")


def _options(retry: Any, no_backoff: Any) -> dict[str, Any]:
    # One retry without backoff: enough to replace a pooled connection that died with a restart,
    # never long enough to hang a caller while Redis is down.
    return {
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": SOCKET_TIMEOUT,
        "socket_keepalive": True,
        "health_check_interval": HEALTH_CHECK_INTERVAL,
        "retry": retry(no_backoff(), 1),
    }


def _check_decoding(client: Any, what: str) -> None:
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None) or {}
    if kwargs.get("decode_responses"):
        raise ValueError(f"{what} needs a client with decode_responses=False (it stores bytes)")


def _is_async_client(client: Any) -> bool:
    return type(client).__module__.startswith("redis.asyncio")


_TRUE = ("1", "true", "yes", "on")


def cluster_url(url: str) -> tuple[str, bool]:
    """``(url, is_cluster)``: a URL's ``cluster=1`` query argument taken out and reported.

    ``redis://host:port/0?cluster=1`` names any node of a Redis Cluster; the client learns the
    others from it (CLUSTER SLOTS) and sends each command to the node that owns its key."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    flags = [value for name, value in query if name == "cluster"]
    if not flags:
        return url, False
    rest = [(name, value) for name, value in query if name != "cluster"]
    return urlunsplit(parts._replace(query=urlencode(rest))), flags[-1].lower() in _TRUE


def sync_client(client_or_url: Any, what: str) -> tuple[Any, bool]:
    """``(client, owned)``: a ``redis.Redis`` (or, with ``?cluster=1``, a ``RedisCluster``)
    built from a URL (owned: ours to close), or the client given (not ours)."""
    redis = require_redis()
    if isinstance(client_or_url, str):
        with needs("redis", _WHAT):
            from redis.backoff import NoBackoff
            from redis.retry import Retry

        url, cluster = cluster_url(client_or_url)
        if cluster:
            with needs("redis", _WHAT):
                from redis.cluster import RedisCluster

            return RedisCluster.from_url(url, **_options(Retry, NoBackoff)), True
        return redis.Redis.from_url(url, **_options(Retry, NoBackoff)), True
    if _is_async_client(client_or_url):
        raise TypeError(f"{what} is synchronous: give it a redis.Redis client or a URL, not a redis.asyncio client")
    _check_decoding(client_or_url, what)
    return client_or_url, False


def async_client(client_or_url: Any, what: str) -> tuple[Any, bool]:
    """Like :func:`sync_client`, for a ``redis.asyncio.Redis`` client."""
    require_redis()
    if isinstance(client_or_url, str):
        with needs("redis", _WHAT):
            import redis.asyncio
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff

        url, cluster = cluster_url(client_or_url)
        if cluster:
            with needs("redis", _WHAT):
                from redis.asyncio.cluster import RedisCluster

            return RedisCluster.from_url(url, **_options(Retry, NoBackoff)), True
        return redis.asyncio.Redis.from_url(url, **_options(Retry, NoBackoff)), True
    if not _is_async_client(client_or_url):
        raise TypeError(f"{what} is asynchronous: give it a redis.asyncio.Redis client or a URL")
    _check_decoding(client_or_url, what)
    return client_or_url, False


def hash_tag(value: str) -> str:
    """``value`` as a Redis Cluster hash tag: keys that carry the same tag live in one slot, so
    a session's record and its event streams sit on one shard (and multi-key commands on them
    stay legal). Braces inside the value would end the tag early: they are replaced."""
    return "{" + value.replace("{", "(").replace("}", ")") + "}"


_origin: tuple[int, str] | None = None


def process_origin() -> str:
    """This process's id on the bus and as a task owner: ``host:pid:random``.

    Recomputed after a fork (the pid changed), so workers forked from one parent differ.
    """
    global _origin
    pid = os.getpid()
    if _origin is None or _origin[0] != pid:
        _origin = (pid, f"{socket.gethostname()}:{pid}:{secrets.token_hex(4)}")
    return _origin[1]


class LuaScript:
    """A Lua script run with EVALSHA, falling back to EVAL (which caches it again) on NOSCRIPT,
    e.g. after a restart or ``SCRIPT FLUSH``."""

    __slots__ = ("sha", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def __call__(self, client: Any, keys: list[Any], args: list[Any]) -> Any:
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except require_redis().exceptions.NoScriptError:
            return client.eval(self.source, len(keys), *keys, *args)

    async def run_async(self, client: Any, keys: list[Any], args: list[Any]) -> Any:
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except require_redis().exceptions.NoScriptError:
            return await client.eval(self.source, len(keys), *keys, *args)
