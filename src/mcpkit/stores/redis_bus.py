"""The notification bus: what one process tells the others (list_changed, resource updates,
task cancellations, ...). The protocol, an in-process bus, and Redis pub/sub.

Messages are JSON objects. Each carries ``origin``, the publishing process's id (a reserved
key, added by ``publish``), and a subscriber does not receive messages of its own process
unless it subscribed with ``include_own=True``: the publisher has already acted locally, the
bus is how the *other* processes hear of it. Delivery is at most once: a process that is not
connected when a message is published never sees it, and none sees a message twice.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import deque
from concurrent.futures import Future
from collections.abc import Callable
from typing import Any, Protocol

from .. import _json
from .redis_base import down_errors, process_origin, sync_client, unavailable

__all__ = ["Bus", "MemoryBus", "RedisBus"]

logger = logging.getLogger("mcpkit.stores.bus")

Callback = Callable[[dict[str, Any]], None]


class Bus(Protocol):
    """``publish`` from any thread; ``subscribe`` returns the function that unsubscribes (calling
    it twice is harmless). A callback gets its own copy of the message (``origin`` included);
    an exception it raises is logged and goes no further. ``origin`` is this process's id.

    ``watch(callback)`` hears of the connection behind the subscriptions: ``callback(False)``
    when it is lost (what is published from then on is not received: a subscriber has missed
    messages), ``callback(True)`` once every subscription is made again. It returns the
    function that stops watching."""

    @property
    def origin(self) -> str: ...

    def publish(self, channel: str, message: dict[str, Any]) -> Any: ...

    def subscribe(self, channel: str, callback: Callback, *, include_own: bool = False) -> Callable[[], None]: ...

    def watch(self, callback: Callable[[bool], None]) -> Callable[[], None]: ...

    def close(self) -> None: ...


class _Subscription:
    __slots__ = ("callback", "include_own")

    def __init__(self, callback: Callback, include_own: bool) -> None:
        self.callback = callback
        self.include_own = include_own


#: the key of a RedisBus message's own id (``<bus>.<n>``): a message published again because
#: Redis's answer to the first PUBLISH was lost is recognised and delivered once
_MESSAGE_ID = "_mid"
#: message ids a listener remembers, to drop the second copy of any of them
_SEEN = 4096


def _encode(message: dict[str, Any], origin: str, message_id: str | None = None) -> bytes:
    if not isinstance(message, dict):
        raise TypeError(f"a bus message must be a dict, got {type(message).__name__}")
    for reserved in ("origin", _MESSAGE_ID):
        if reserved in message:
            raise ValueError(f"{reserved!r} is reserved in bus messages: the bus sets it")
    if message_id is None:
        return _json.dumps({**message, "origin": origin})
    return _json.dumps({**message, "origin": origin, _MESSAGE_ID: message_id})


def _deliver(channel: str, subs: list[_Subscription], data: bytes, own: bool) -> None:
    for sub in subs:
        if own and not sub.include_own:
            continue
        try:
            message = _json.loads(data)  # each subscriber its own copy
            message.pop(_MESSAGE_ID, None)
            sub.callback(message)
        except Exception:
            logger.exception("A bus callback on channel %r failed", channel)


def _nothing() -> None:
    pass


class _Hub:
    """What several MemoryBus objects share: one simulated Redis."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.subs: dict[str, list[tuple[MemoryBus, _Subscription]]] = {}


class MemoryBus:
    """The bus of a single process. ``publish`` runs the callbacks synchronously, in the
    publishing thread, before it returns; as the publisher's own process, they are called only
    if they subscribed with ``include_own=True``.

    :meth:`peer` makes another bus on the same hub with another origin: several "processes"
    in one, for tests of what crosses the bus.
    """

    def __init__(self, *, origin: str | None = None, _hub: _Hub | None = None) -> None:
        self._origin = origin
        self._hub = _hub if _hub is not None else _Hub()
        self._closed = False

    @property
    def origin(self) -> str:
        return self._origin if self._origin is not None else process_origin()

    def peer(self, origin: str | None = None) -> MemoryBus:
        """A bus sharing this one's hub, as if in another process (``origin``: random if not given)."""
        return MemoryBus(origin=origin or f"peer:{secrets.token_hex(4)}", _hub=self._hub)

    def publish(self, channel: str, message: dict[str, Any]) -> None:
        if self._closed:
            raise RuntimeError("this bus is closed")
        origin = self.origin
        data = _encode(message, origin)
        with self._hub.lock:
            targets = list(self._hub.subs.get(channel, ()))
        for bus, sub in targets:
            if not bus._closed:
                _deliver(channel, [sub], data, own=bus.origin == origin)

    def subscribe(self, channel: str, callback: Callback, *, include_own: bool = False) -> Callable[[], None]:
        if self._closed:
            raise RuntimeError("this bus is closed")
        entry = (self, _Subscription(callback, include_own))
        with self._hub.lock:
            self._hub.subs.setdefault(channel, []).append(entry)

        def unsubscribe() -> None:
            with self._hub.lock:
                subs = self._hub.subs.get(channel, [])
                if entry in subs:
                    subs.remove(entry)
                    if not subs:
                        del self._hub.subs[channel]

        return unsubscribe

    def watch(self, callback: Callable[[bool], None]) -> Callable[[], None]:
        """In one process nothing is ever lost: the callback is never called."""
        return _nothing

    def close(self) -> None:
        self._closed = True
        with self._hub.lock:
            for channel in list(self._hub.subs):
                kept = [e for e in self._hub.subs[channel] if e[0] is not self]
                if kept:
                    self._hub.subs[channel] = kept
                else:
                    del self._hub.subs[channel]


class RedisBus:
    """The bus over Redis pub/sub, channel ``{prefix}bus:{channel}``, messages as JSON.

    ``publish`` never waits on Redis: it queues the message (at most ``max_queue`` of them) for
    a publisher thread, which PUBLISHes them one at a time in the order they were queued, so a
    message published after another (a session's end after its delete was recorded) is never
    received before it, and a caller on the event loop never stalls on a slow or paused Redis.
    A message that finds the queue full is dropped, with a warning. One Redis cannot take (it is
    unreachable: connect and socket timeouts of 1.5-2 s) is tried again (redis-py moves a
    cluster's keyless commands to a live node itself) for up to ``retry_for`` seconds, then logged and dropped: on a Redis
    Cluster the node a process publishes through may die while the others' subscriptions, on
    live nodes, never notice, so a message dropped at once would be lost to every process with
    no outage of its own to resync from. A PUBLISH whose answer was lost may have been taken:
    each message carries an id, and a listener delivers a message id once. ``close`` publishes
    what is queued first, for up to ``flush_timeout`` seconds. Subscriptions are served by one listener thread per bus, started by
    the first ``subscribe``; callbacks run on it, one message at a time, so a slow callback
    delays the others. ``subscribe`` returns once Redis confirmed the subscription (or after
    ``subscribe_timeout`` seconds, e.g. while Redis is down: it is then made when Redis is back).
    When the connection is lost the listener logs a warning, retries (up to every 2 s),
    subscribes again and logs when it is back; messages published meanwhile are lost, and
    ``watch`` callbacks hear of both moments. A connection that redis-py re-made on its own
    (it re-subscribes as it reconnects) counts as lost too: Redis confirms a subscription that
    was already confirmed. On a Redis Cluster the subscriptions live on the master of the
    first channel's slot; the listener reads the cluster's slots again before each retry, so it
    follows a failover to the promoted replica.

    Construct it (or at least subscribe) after forking worker processes: a thread does not
    survive a fork.
    """

    #: how long the listener waits for a message before it looks at its subscriptions again
    POLL = 0.2
    #: messages queued for the publisher at most (about 1 s of a busy process's news)
    MAX_QUEUE = 10_000
    #: seconds a message Redis cannot take is tried again: a cluster's failover (2 s of
    #: cluster-node-timeout, then the election) and a Redis restarted at once fit in it
    RETRY_FOR = 10.0

    def __init__(
        self,
        client_or_url: Any,
        *,
        prefix: str = "mcpkit:",
        origin: str | None = None,
        subscribe_timeout: float = 2.0,
        max_queue: int = MAX_QUEUE,
        flush_timeout: float = 5.0,
        retry_for: float = RETRY_FOR,
    ) -> None:
        self._client, self._owned = sync_client(client_or_url, "RedisBus")
        self._down = down_errors()
        self.prefix = prefix
        self.subscribe_timeout = subscribe_timeout
        self._origin = origin
        self._subs: dict[str, list[_Subscription]] = {}  # by Redis channel; lists replaced, never mutated
        self._ready: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watchers: list[Callable[[bool], None]] = []  # replaced, never mutated
        self._down_since: float | None = None  # on the listener thread: when the connection was lost
        self.max_queue = max_queue
        self.flush_timeout = flush_timeout
        self.retry_for = retry_for
        self._id = secrets.token_hex(4)  # this bus's part of its message ids
        self._sent_count = 0  # under _queued
        self._give_up_at: float | None = None  # under _queued: set by close, ends a message's retries
        self._seen: set[str] = set()  # on the listener thread: message ids delivered lately...
        self._seen_order: deque[str] = deque()  # ... oldest first
        #: (channel, message, its Future) to publish, in order
        self._outbox: deque[tuple[str, bytes, Future[bool]]] = deque()
        self._queued = threading.Condition(threading.Lock())
        self._publisher: threading.Thread | None = None
        self._closing = False  # under _queued: the publisher stops once the outbox is empty
        self._dropping = False  # under _queued: warned of a full outbox since the last message queued

    @property
    def origin(self) -> str:
        return self._origin if self._origin is not None else process_origin()

    def channel_key(self, channel: str) -> str:
        return f"{self.prefix}bus:{channel}"

    def publish(self, channel: str, message: dict[str, Any]) -> Future[bool]:
        """Queue ``message`` for the publisher thread (see the class): returns at once, with a
        Future that says True once Redis took the message, False when it was dropped (a full
        queue, Redis unreachable, the bus closed first). A caller that must know the news went
        out before it answers (a session's end) awaits it off the event loop; others ignore it."""
        sent: Future[bool] = Future()
        with self._queued:
            if self._closing:
                raise RuntimeError("this bus is closed")
            self._sent_count += 1
            data = _encode(message, self.origin, f"{self._id}.{self._sent_count}")
            if len(self._outbox) >= self.max_queue:
                if not self._dropping:
                    self._dropping = True
                    logger.warning("Redis bus: %d messages wait to be published (is Redis slow or down?); "
                                   "dropping what comes until there is room", len(self._outbox))
                sent.set_result(False)
                return sent
            self._dropping = False
            self._outbox.append((channel, data, sent))
            if self._publisher is None:
                self._publisher = threading.Thread(target=self._publish, name="mcpkit-redis-bus-publisher",
                                                   daemon=True)
                self._publisher.start()
            self._queued.notify()
        return sent

    def _publish(self) -> None:
        """The publisher thread: the outbox, in order, until the bus closes and it is empty."""
        queued = self._queued
        while True:
            with queued:
                while not self._outbox and not self._closing:
                    queued.wait()
                if not self._outbox:
                    return
                channel, data, sent = self._outbox.popleft()
            taken = False
            try:
                taken = self._publish_one(channel, data)
            except Exception:  # noqa: BLE001 - the publisher goes on with the next one
                logger.exception("Redis bus: a message on channel %r was not published", channel)
            finally:
                sent.set_result(taken)

    def _publish_one(self, channel: str, data: bytes) -> bool:
        """PUBLISH one message, trying again while Redis cannot take it, for up to ``retry_for``
        seconds (less once ``close`` gave up waiting); False when it never could."""
        deadline = time.monotonic() + self.retry_for
        delay = 0.05
        while True:
            try:
                self._client.publish(self.channel_key(channel), data)
                return True
            except self._down as exc:
                with self._queued:
                    give_up_at = self._give_up_at
                now = time.monotonic()
                if now >= deadline or (give_up_at is not None and now >= give_up_at):
                    logger.warning("Redis bus: a message was not published: %s",
                                   unavailable(f"publishing on bus channel {channel!r}", exc))
                    return False
            # no rediscovery here: redis-py reads a cluster's slots again after a failed
            # command by itself, and re-reading them from this thread re-makes the
            # listener's connection (a false outage, and a resync, each time)
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 1.0)

    def subscribe(self, channel: str, callback: Callback, *, include_own: bool = False) -> Callable[[], None]:
        name = self.channel_key(channel)
        sub = _Subscription(callback, include_own)
        with self._lock:
            if self._stop.is_set():
                raise RuntimeError("this bus is closed")
            self._subs[name] = [*self._subs.get(name, ()), sub]
            ready = self._ready.setdefault(name, threading.Event())
            if self._thread is None:
                self._thread = threading.Thread(target=self._listen, name="mcpkit-redis-bus", daemon=True)
                self._thread.start()
        self._wake.set()
        if threading.current_thread() is not self._thread:
            ready.wait(self.subscribe_timeout)

        def unsubscribe() -> None:
            with self._lock:
                kept = [s for s in self._subs.get(name, ()) if s is not sub]
                if kept:
                    self._subs[name] = kept
                elif name in self._subs:
                    del self._subs[name]
                    self._ready.pop(name, None)
            self._wake.set()

        return unsubscribe

    def watch(self, callback: Callable[[bool], None]) -> Callable[[], None]:
        with self._lock:
            self._watchers = [*self._watchers, callback]

        def unwatch() -> None:
            with self._lock:
                self._watchers = [w for w in self._watchers if w is not callback]

        return unwatch

    def close(self) -> None:
        """Publish what is queued (for up to ``flush_timeout`` seconds), stop the listener and
        forget the subscriptions (and close the client if it is ours)."""
        with self._queued:
            self._closing = True
            self._give_up_at = time.monotonic() + self.flush_timeout
            self._queued.notify()
            publisher = self._publisher
        if publisher is not None and publisher is not threading.current_thread():
            publisher.join(self.flush_timeout)
        with self._queued:
            if self._outbox:
                logger.warning("Redis bus: closed with %d messages not published", len(self._outbox))
                for _channel, _data, sent in self._outbox:
                    sent.set_result(False)
                self._outbox.clear()  # the publisher stops after the one it is sending
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5.0)
        with self._lock:
            self._subs.clear()
            self._ready.clear()
        if self._owned:
            self._client.close()

    # ------------------------------------------------------------------ the listener thread

    def _listen(self) -> None:
        delay = 0.1
        while not self._stop.is_set():
            pubsub: Any = None
            sent: set[str] = set()  # channels SUBSCRIBEd on this connection
            confirmed: set[str] = set()  # ... and acknowledged by Redis
            try:
                pubsub = self._client.pubsub()
                while not self._stop.is_set():
                    self._wake.clear()
                    self._sync(pubsub, sent, confirmed)
                    if not sent:
                        self._wake.wait(1.0)
                        continue
                    message = pubsub.get_message(timeout=self.POLL)
                    if message is not None:
                        self._handle(message, sent, confirmed)
                    if self._down_since is not None and confirmed >= sent:
                        logger.warning("Redis bus: connection back after %.1f s; subscriptions restored",
                                       time.monotonic() - self._down_since)
                        self._down_since, delay = None, 0.1
                        self._tell(True)
            except self._down as exc:
                self._lost(f"{type(exc).__name__}: {exc}")
                self._rediscover()
                with self._lock:
                    for ready in self._ready.values():
                        ready.clear()
                self._stop.wait(delay)
                delay = min(delay * 2, 2.0)
            except Exception:
                logger.exception("Redis bus: listener error; starting over")
                self._lost("a listener error")  # a new connection: what came meanwhile is missed
                self._stop.wait(1.0)
            finally:
                if pubsub is not None:
                    try:
                        pubsub.close()
                    except Exception:  # closing a broken connection
                        pass

    def _lost(self, why: str) -> None:
        if self._down_since is not None:
            return
        self._down_since = time.monotonic()
        logger.warning("Redis bus: connection lost (%s); retrying until it is back", why)
        self._tell(False)

    def _rediscover(self) -> None:
        """On a Redis Cluster, learn again which node serves which slot before subscribing again.

        The subscriptions live on the node of the first channel's slot. When that node is gone
        (a master killed, its replica promoted), redis-py re-reads the cluster's slots for a
        command that failed, never for a pub/sub connection: without this the listener would
        retry the dead node for ever and the process hear nothing more from the others."""
        nodes = getattr(self._client, "nodes_manager", None)
        if nodes is None:  # a single Redis: the same address comes back
            return
        try:
            nodes.initialize()
        except Exception as exc:  # noqa: BLE001 - no node answers yet: the next retry asks again
            logger.debug("Redis bus: could not read the cluster's slots yet: %s", exc)

    def _tell(self, connected: bool) -> None:
        for callback in self._watchers:
            try:
                callback(connected)
            except Exception:
                logger.exception("A bus connection watcher failed")

    def _sync(self, pubsub: Any, sent: set[str], confirmed: set[str]) -> None:
        with self._lock:
            wanted = set(self._subs)
            for name in wanted & confirmed:
                self._ready[name].set()
        new, gone = wanted - sent, sent - wanted
        if gone:
            pubsub.unsubscribe(*gone)
            sent -= gone
            confirmed -= gone
        if new:
            pubsub.subscribe(*new)
            sent |= new

    def _handle(self, message: dict[str, Any], sent: set[str], confirmed: set[str]) -> None:
        kind, channel = message.get("type"), message.get("channel")
        name = channel.decode() if isinstance(channel, bytes) else str(channel)
        if kind == "subscribe":
            if name in confirmed:
                # confirmed twice: redis-py lost the connection and re-subscribed on a new one
                # by itself; what was published in between never arrived
                self._lost("the connection was re-made")
                confirmed.clear()
            if name in sent:
                confirmed.add(name)
                with self._lock:
                    ready = self._ready.get(name)
                if ready is not None:
                    ready.set()
        elif kind == "unsubscribe":
            confirmed.discard(name)
        elif kind == "message":
            with self._lock:
                subs = self._subs.get(name, [])
            data = message["data"]
            try:
                decoded = _json.loads(data)
            except _json.JSONDecodeError:
                decoded = None
            if not isinstance(decoded, dict):
                logger.warning("Redis bus: ignored a message on %r that is not a JSON object", name)
                return
            mid = decoded.get(_MESSAGE_ID)
            if isinstance(mid, str):
                if mid in self._seen:
                    return  # published again after Redis took it the first time
                self._seen.add(mid)
                self._seen_order.append(mid)
                if len(self._seen_order) > _SEEN:
                    self._seen.discard(self._seen_order.popleft())
            _deliver(name[len(self.prefix) + 4:], subs, data, own=decoded.get("origin") == self.origin)
