"""Redis-backed stores, so that several server processes share their state; and the bundle of all
stores (:class:`Stores`), in memory or in Redis (:func:`from_url`).

Importing this module does not import ``redis``: constructing a Redis store does (and says
``pip install 'mcpkit[redis]'`` when it is missing). Every Redis store takes a client or a URL
and a key ``prefix`` (default ``"mcpkit:"``); keys are ``{prefix}ev:``, ``rl:``, ``task:``,
``lease:`` (a process's lease on its running tasks), ``session:`` and channels ``{prefix}bus:``. Redis being unreachable raises
:class:`StoreUnavailable` within a few seconds rather than hanging.

==================  =====================================  =============================
state               memory (default)                       Redis
==================  =====================================  =============================
SSE events (async)  ``stores.memory.MemoryEventStore``     :class:`RedisEventStore`
rate buckets        ``stores.memory.MemoryRateStore``      :class:`RedisRateStore`
tasks               ``stores.tasks.MemoryTaskStore``       :class:`RedisTaskStore`
sessions            :class:`MemorySessionStore`            :class:`RedisSessionStore`
notification bus    :class:`MemoryBus`                     :class:`RedisBus`
==================  =====================================  =============================
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .redis_base import StoreUnavailable, cluster_url, process_origin, sync_client
from .redis_bus import Bus, MemoryBus, RedisBus
from .redis_events import RedisEventStore
from .redis_rates import RedisRateStore
from .redis_sessions import MemorySessionStore, RedisSessionStore, SessionStore
from .redis_tasks import DEFAULT_LEASE, DEFAULT_RENEW, RedisTaskStore, check_lease, is_remote

__all__ = [
    "DEFAULT_PREFIX",
    "Bus",
    "MemoryBus",
    "MemorySessionStore",
    "RedisBus",
    "RedisEventStore",
    "RedisRateStore",
    "RedisSessionStore",
    "RedisTaskStore",
    "SessionStore",
    "StoreUnavailable",
    "Stores",
    "from_url",
    "is_remote",
    "process_origin",
]

DEFAULT_PREFIX = "mcpkit:"
#: threads that wait on the synchronous stores for the event loop (:meth:`Stores.call`): a paused
#: Redis holds each for its 2 s socket timeout, and what comes meanwhile queues for them
STORE_THREADS = 8


@dataclass
class Stores:
    """One store of each kind: ``events`` (async), ``rates``, ``tasks``, ``sessions``, ``bus``."""

    events: Any
    rates: Any
    tasks: Any
    sessions: Any
    bus: Any
    _closers: list[Callable[[], None]] = field(default_factory=list, repr=False, compare=False)
    _aclosers: list[Callable[[], Awaitable[None]]] = field(default_factory=list, repr=False, compare=False)
    #: whether a store call may wait on the network (Redis): :meth:`call` then runs it on a thread
    remote: bool = field(default=True, compare=False)
    _threads: Any = field(default=None, repr=False, compare=False)

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` (a call of a synchronous store) awaited from the event loop: on one of
        :data:`STORE_THREADS` threads when the stores are remote, so a slow or paused Redis
        stalls only the requests that need it, never the loop that serves the others; inline
        for the in-memory stores, which never wait. In a copy of the caller's context."""
        if not self.remote:
            return fn(*args)
        import asyncio

        return await asyncio.wrap_future(self.submit(fn, *args))

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` started on one of the stores' threads, from any thread; its
        ``concurrent.futures.Future``. For a store call whose answer nobody waits for (a task's
        settle, written in the background: server/tasks.py). In a copy of the caller's context."""
        threads = self._threads
        if threads is None:
            from concurrent.futures import ThreadPoolExecutor

            threads = self._threads = ThreadPoolExecutor(STORE_THREADS, thread_name_prefix="mcpkit-store")
        import contextvars

        # in a copy of the caller's context, as asyncio.to_thread: what a guard reads of it
        # (the caller's token, the correlation id) is there on the thread too
        return threads.submit(contextvars.copy_context().run, fn, *args)

    @classmethod
    def memory(cls) -> Stores:
        """Everything in this process: the embedded default."""
        from .memory import MemoryEventStore, MemoryRateStore
        from .tasks import MemoryTaskStore

        return cls(MemoryEventStore(), MemoryRateStore(), MemoryTaskStore(), MemorySessionStore(), MemoryBus(),
                   remote=False)

    def close(self) -> None:
        """Stop the bus and close the synchronous connections."""
        self.bus.close()
        threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown(wait=False, cancel_futures=True)  # what waits on a store gets its error
        for closer in self._closers:
            closer()

    async def aclose(self) -> None:
        """:meth:`close`, and close the event store's asyncio connections (on their loop)."""
        self.close()
        for closer in self._aclosers:
            await closer()


def _check_client_arguments(names: Any) -> None:
    """A query argument redis-py does not take is refused now, in one line: redis-py passes it on
    to its connections, which fail with a TypeError at the first command, in whichever request
    or thread makes it, while the server keeps running."""
    import inspect

    from .._extras import needs

    with needs("redis", "MCPKIT_STORE=redis://"):
        from redis import connection

    known = {"cluster", *connection.URL_QUERY_ARGUMENT_PARSERS}
    for cls in (connection.AbstractConnection, connection.Connection, connection.SSLConnection,
                connection.UnixDomainSocketConnection, connection.ConnectionPool):
        known.update(inspect.signature(cls.__init__).parameters)
    for name in names:
        if name not in known or name in ("self", "args", "kwargs", "connection_kwargs"):
            raise ValueError(f"the store URL's query argument {name!r} is not one mcpkit or redis-py takes: "
                             "use prefix, task_lease, task_renew, cluster, or a redis-py connection "
                             "argument such as socket_timeout")


def from_url(url: str, *, origin: str | None = None) -> Stores:
    """The Redis bundle for ``redis://[:password@]host:port/db`` (``rediss://`` for TLS,
    ``unix:///path?db=N`` for a socket). ``?prefix=app:`` sets the key prefix (default
    ``mcpkit:``); ``?cluster=1`` means the host is a node of a Redis Cluster (keys carry hash
    tags, so a session's keys share a slot); ``?task_lease=5&task_renew=1`` set how many seconds
    a process's lease on its running tasks lasts and how often it is renewed (the defaults: a
    killed process's tasks fail within about 5 s); other query arguments are redis-py's. The
    synchronous stores and the bus share one connection pool; the event store has its own
    asyncio client. ``origin`` (default: this process's id) names this process on the bus and as
    the owner of its tasks.
    """
    clean, prefix, lease = parse_url(url)
    client, _ = sync_client(clean, "from_url")  # redis-py imported here, or its extra named
    events = RedisEventStore(clean, prefix=prefix)
    tasks = RedisTaskStore(client, prefix=prefix, origin=origin, lease=lease["task_lease"],
                           renew_every=lease["task_renew"])
    return Stores(
        events=events,
        rates=RedisRateStore(client, prefix=prefix),
        tasks=tasks,
        sessions=RedisSessionStore(client, prefix=prefix),
        bus=RedisBus(client, prefix=prefix, origin=origin),
        _closers=[tasks.close, client.close],
        _aclosers=[events.aclose],
    )


def parse_url(url: str) -> tuple[str, str, dict[str, float]]:
    """What :func:`from_url` reads of a store URL, checked without connecting: (the URL for
    redis-py, the key prefix, the task lease settings); a ValueError of one line for anything it
    would not take (MCPKIT_STORE is checked so at start-up, however the server is served)."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ValueError(f"a store URL must start with redis://, rediss:// or unix://, not {parts.scheme!r}://")
    prefix = DEFAULT_PREFIX
    lease = {"task_lease": DEFAULT_LEASE, "task_renew": DEFAULT_RENEW}
    rest = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name == "prefix":
            prefix = value
        elif name in lease:
            try:
                lease[name] = float(value)
            except ValueError:
                raise ValueError(f"the store URL's {name}={value!r} must be a number of seconds") from None
        else:
            rest.append((name, value))
    check_lease(lease["task_lease"], lease["task_renew"])
    clean = urlunsplit(parts._replace(query=urlencode(rest)))
    if cluster_url(clean)[1] and ("{" in prefix or "}" in prefix):
        raise ValueError(f"on a Redis Cluster the key prefix cannot hold braces (they are hash tags): {prefix!r}")
    _check_client_arguments(name for name, _ in rest)
    return clean, prefix, lease
