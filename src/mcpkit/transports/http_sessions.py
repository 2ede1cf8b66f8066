"""The session table of the HTTP app: sessions made, found, shared, swept and ended.

Sessions live in ``McpHttpApp.sessions`` (least recently used first). A new session takes room
as transports/http_quotas.py says (per-client quotas first, then the global cap, idle sessions
only). With a shared store (MCPKIT_STORE) every process can serve every session: its state is
saved after each change, restored on first use in another process, touched while served, and
news of changes and ends travel on the bus.

With a shared store the store's record *is* the session; what a process holds is a copy:

- An end (DELETE, a per-client quota) is recorded in the store before it takes effect anywhere.
  When it cannot be (the store is down) nothing ends, and the request that asked for it gets
  503 with Retry-After: a logout is refused, never acknowledged and then undone. A new session
  that cannot be recorded is refused the same way.
- The idle timeout is the record's expiry, renewed by whichever process serves the session: a
  copy idle here is only dropped here, as a copy evicted at the global cap is.
- A change is saved only while the record exists (``update``), so a process that has not heard
  of an end yet never brings the session back.
- A copy held through a store outage (the bus lost Redis, or a store call failed) is checked
  against the store before it is served again, and the copies the store no longer has (ended
  meanwhile, or lost with a restart without persistence) are dropped as soon as the bus is back,
  so every process answers 404 for them alike (HL-17: the client initializes again).
- Each save numbers the state (``version``). A copy that saw a later version than the store
  has (a restart that lost its last writes: AOF fsynced every second and a host crash) saves
  it again rather than taking the older one: a subscription the client was told is made stays
  made, as long as a process holds a copy of the session.

No request waits on the store unless it needs it, and none waits on the event loop: a copy held
here, checked and renewed recently, is served with no store call (the hot path); its renewal,
when due, runs in the background; what a request does need (a restore, a check, a save, an end,
the quota claim) is awaited on the stores' threads (stores/redis.py ``Stores.call``), so a slow
or paused Redis stalls those requests only (docs/deployment.md, "A slow or paused Redis").
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any

from ..protocol import revisions
from ..stores.errors import StoreUnavailable
from .http_auth import ACCESS
from .http_streams import _END
from .http_quotas import QuotaExceeded, SessionQuotas, client_address

__all__ = ["ASK_STORE", "STORE_DOWN", "STORE_RETRY_AFTER", "STORE_WAIT", "SessionTable"]

log = logging.getLogger("mcpkit.http")

#: what a request that needs the session store gets while it is down: 503 and Retry-After
STORE_DOWN = "The session store is unavailable; retry in a few seconds."
STORE_RETRY_AFTER = 2
STORE_WAIT = [(b"retry-after", str(STORE_RETRY_AFTER).encode())]
NOT_FOUND = "Session not found: it ended or expired; initialize a new one."

#: ``_lookup``'s status when the session store must be asked (``_lookup_shared``)
ASK_STORE = 0

#: seconds a request of a copy held through a store outage waits for its check (a healthy store
#: answers in a millisecond): past it the store counts as down and the copy is served meanwhile
RECHECK_WAIT = 0.2

#: store epochs: a new one each time the store was unreachable (the copies of older ones are re-checked)
_EPOCHS = itertools.count(1)


class SessionTable:
    """The session steps of McpHttpApp (transports/http.py), which sets the attributes below."""

    sessions: OrderedDict[str, Any]
    quotas: SessionQuotas
    max_sessions: int
    session_idle_timeout: float
    session_store: Any
    event_store: Any
    server: Any
    auth: Any
    stateless: bool
    loop: Any
    _session_type: Any
    _last_sweep: float
    _sweeper_loop: Any
    _sweep_every: float
    _touch_every: float
    _closed: bool
    #: by session id: the background renewal in flight (``_touch``), the check of a copy held
    #: through an outage (``_rechecked``), the lock of its saves
    _touching: dict[str, Any]
    _checking: dict[str, Any]
    _saving: dict[str, asyncio.Lock]
    #: tasks of this table's own (a refresh heard on the bus), kept until done
    _tasks: set[Any]
    #: the store epoch this process is in; a copy of an older one is checked before it is served
    _store_epoch: int = 0
    #: the bus is not connected: news of an end may be published unheard, so every copy is
    #: checked against the store each time it is served until the bus is back
    _bus_down: bool = False

    async def _drop_events(self, store: Any, stream_ids: list[str]) -> None:
        raise NotImplementedError

    def _owned(self, hs: Any) -> bool:
        raise NotImplementedError

    def _client_of(self, scope: dict[str, Any]) -> str:
        """Who a session counts against (http_quotas.py): the principal, else the address."""
        if self.auth is not None:
            return "principal:" + ACCESS.get()[0].subject
        return "address:" + client_address(scope)

    async def _in_store(self, fn: Any, *args: Any) -> Any:
        """A call of the session store, awaited off the event loop (stores/redis.py ``call``):
        the requests that do not need the store go on meanwhile, however slow it answers."""
        return await self.server.stores.call(fn, *args)

    async def _new_session(self, client: str) -> Any:
        """A session for ``client``, room made as http_quotas.py says (raises QuotaExceeded, with
        503 when a shared store cannot record what that takes)."""
        self._sweep()
        sessions = self.sessions
        own = self.quotas.own_victim(
            client, lambda sid: sessions[sid].active == 0, lambda sid: sessions[sid].last_seen)
        if own is not None and not await self._end(own):  # the client's own oldest idle session: HL-17, 404 from now on
            raise QuotaExceeded(503, STORE_DOWN, STORE_RETRY_AFTER)
        while len(sessions) >= self.max_sessions:
            victim = self.quotas.global_victim(sessions.items(), lambda hs: hs.active == 0)
            if self.session_store is not None:
                self._forget(victim)  # shared: only this process's copy goes; the session lives on
            else:
                self._end_here(victim)
        session_id = os.urandom(16).hex()  # HL-15: cryptographically random, visible ASCII
        hs = self._session_type(self, session_id)
        hs.client = client
        hs.epoch = self._store_epoch
        sessions[session_id] = hs
        self.quotas.add(client, session_id)
        try:
            await self._shared_quota(client, session_id)
        except QuotaExceeded:
            self._forget(session_id)
            raise
        return hs

    async def _shared_quota(self, client: str, session_id: str) -> None:
        """With shared sessions, the per-client quota counts the client's sessions in every
        process: past it, its oldest ones end everywhere (their own client's, never another's).
        Raises QuotaExceeded (503) when the store cannot count them or record those ends."""
        claim = getattr(self.session_store, "claim", None)
        if claim is None:
            return
        try:
            over = await self._in_store(claim, client, session_id, self.quotas.per_client, self.session_idle_timeout)
        except Exception as exc:  # noqa: BLE001 - the store is down: no session it cannot record
            self._store_lost()
            log.warning("could not count the sessions of %s in the shared store: %s", client, exc)
            raise QuotaExceeded(503, STORE_DOWN, STORE_RETRY_AFTER) from None
        for old in over:
            if not await self._end(old, release=False):
                raise QuotaExceeded(503, STORE_DOWN, STORE_RETRY_AFTER)

    async def _end(self, session_id: str, release: bool = True) -> bool:
        """End a session everywhere. With a shared store the end is recorded there first; when
        it cannot be, nothing ends (here either) and the answer is False."""
        store = self.session_store
        if store is not None:
            hs = self.sessions.get(session_id)
            client = hs.client if release and hs is not None else None
            try:
                await self._in_store(_record_end, store, session_id, client)
            except Exception as exc:  # noqa: BLE001 - the store is down (StoreUnavailable)
                self._store_lost()
                log.warning("could not end shared session %s: %s", session_id, exc)
                return False
            # recorded: the news only tells the others sooner (the copies a process missed it
            # about are re-checked by themselves); queued after the end, never before it
            await self._tell_others({"id": session_id, "ended": True})
        self._end_here(session_id)
        return True

    def _end_here(self, session_id: str) -> None:
        """The end of a session in this process (recorded in the shared store first, if any)."""
        hs = self.sessions.pop(session_id, None)
        self.quotas.remove(session_id)
        self._touching.pop(session_id, None)
        self._checking.pop(session_id, None)
        self._saving.pop(session_id, None)
        if hs is not None:
            stream_ids = hs.stream_ids()
            hs.close()
            if self.loop is not None:
                self.loop.create_task(self._drop_events(self.event_store, stream_ids))

    def _fetch(self, session_id: str, client: Any) -> tuple[Any, bool]:
        """On a store thread: a session's stored state, and whether its record is still alive
        once renewed (with the quota entry of its ``client``; the state's when None): a copy just
        read is renewed at once, since its record may be about to expire while this process would
        go on serving it. Raises when the store is down."""
        store = self.session_store
        state = store.load(session_id)  # type: ignore[union-attr]
        if not state:
            return None, False
        return state, self._renew(store, session_id, client if client is not None else state.get("client"))

    def _renew(self, store: Any, session_id: str, client: Any) -> bool:
        """On a store thread: keep the shared record alive while this process serves it (False:
        it ended or expired elsewhere)."""
        if isinstance(client, str) and hasattr(store, "renew"):
            store.renew(client, session_id, self.session_idle_timeout)
        return bool(store.touch(session_id, self.session_idle_timeout))

    async def _restore(self, session_id: str) -> Any:
        """A shared session, as the session store has it: served here, whichever process
        opened it or changed it last (None when it ended or expired everywhere)."""
        epoch = self._store_epoch
        state, alive = await self._in_store(self._fetch, session_id, None)
        if not state or not alive or state.get("revision") not in revisions.HANDSHAKE_VERSIONS:
            return None
        held = self.sessions.get(session_id)
        if held is not None:  # restored by another request meanwhile: one copy
            return held
        while len(self.sessions) >= self.max_sessions:
            self._forget(next(iter(self.sessions)))  # a copy: the session itself lives on
        hs = self._session_type(self, session_id)
        hs.session.refresh_state = lambda: self._refresh(hs)  # type: ignore[attr-defined]
        engine = hs.session.engine
        engine.revision = revisions.get(state["revision"])
        engine.initialized = bool(state.get("initialized", True))
        engine.client_info = state.get("client_info") or {}
        engine.client_capabilities = state.get("client_capabilities") or {}
        hs.owner = state.get("owner")
        hs.client = state.get("client")
        self._adopt(hs, state)  # a new copy: nothing of its own to save again
        hs.epoch = epoch
        hs.synced = time.monotonic()
        self.server._session_started(hs.session)  # it gets this process's notifications now
        self.sessions[session_id] = hs
        if isinstance(hs.client, str):
            self.quotas.add(hs.client, session_id)
        return hs

    def _adopt(self, hs: Any, stored: dict[str, Any]) -> bool:
        """Take the stored state for this copy, unless it holds a change the store does not
        have yet (made while the store was down: it is saved with the request it came in), or
        the store has an older version than this copy saw saved: then True, save it again."""
        state = {key: value for key, value in stored.items() if key != "version"}
        version = stored.get("version", 0)
        if hs.shared_state is not None:
            if self._state_of(hs) != hs.shared_state:
                return False
            if version < hs.version:  # the store lost writes (a restart): this copy knows better
                return True
        # every field _state_of compares that may change after initialize: a copy that missed
        # one (notifications/initialized answered by another process) would differ from what
        # it adopted, take that for a change of its own, and never adopt anything again
        engine = hs.session.engine
        engine.initialized = engine.initialized or bool(state.get("initialized", True))
        hs.session.log_level = state.get("log_level")
        hs.session.subscriptions = set(state.get("subscriptions") or ())
        hs.shared_state, hs.version = state, version
        return False

    def _save_again(self, hs: Any) -> None:
        """From any thread: what this copy saw saved last, back into a store that lost it (only
        while the store has the session: an end is never undone)."""
        shared = hs.shared_state
        try:
            if shared is not None and self._update(hs.id, {**shared, "version": hs.version}):
                log.warning("shared session %s: the store had lost its last change; saved again", hs.id)
        except Exception as exc:  # noqa: BLE001 - down again: the next check tries again
            self._store_lost()
            log.warning("could not save shared session %s again: %s", hs.id, exc)

    async def _reload(self, hs: Any, renew: bool = True) -> bool:
        """This copy checked against the store, and its record renewed (False, and the copy
        dropped, when the store no longer has the session). Raises when the store is down."""
        epoch = self._store_epoch
        if renew:
            state, alive = await self._in_store(self._fetch, hs.id, hs.client)
        else:
            state = await self._in_store(self.session_store.load, hs.id)  # type: ignore[union-attr]
            alive = bool(state)
        if not state or not alive:
            self._forget_copy(hs)  # ended or expired elsewhere
            return False
        if self._adopt(hs, state):
            await self._in_store(self._save_again, hs)
        hs.epoch = epoch
        if renew:
            hs.synced = time.monotonic()
        return True

    def _refresh(self, hs: Any) -> None:
        """From any thread (a resource update being delivered): this copy's subscriptions as
        the store has them; a copy the store no longer has is dropped, on the loop."""
        state = self.session_store.load(hs.id)  # type: ignore[union-attr]
        if state:
            if self._adopt(hs, state):
                self._save_again(hs)
        elif self.loop is not None:
            self.loop.call_soon_threadsafe(self._forget_copy, hs)

    def _forget_copy(self, hs: Any) -> None:
        if self.sessions.get(hs.id) is hs:
            self._forget(hs.id)

    def _forget(self, session_id: str) -> None:
        """Drop this process's copy of a shared session; the session itself lives on."""
        hs = self.sessions.pop(session_id, None)
        self.quotas.remove(session_id)
        self._touching.pop(session_id, None)
        self._checking.pop(session_id, None)
        self._saving.pop(session_id, None)
        if hs is not None:
            hs.close()

    def _state_of(self, hs: Any) -> dict[str, Any]:
        engine = hs.session.engine
        return {
            "revision": engine.revision.version,
            "initialized": engine.initialized,
            "client_info": engine.client_info,
            "client_capabilities": engine.client_capabilities,
            "log_level": hs.session.log_level,
            "subscriptions": sorted(hs.session.subscriptions),
            "owner": hs.owner,
            "client": hs.client,
        }

    def _changed(self, hs: Any) -> bool:
        """Whether this session's state differs from what the store has of it: most requests
        (tool calls) change nothing and cost the store nothing, with no coroutine either."""
        return (hs.id is not None and hs.session.engine.revision is not None and not hs.closed
                and self._state_of(hs) != hs.shared_state)

    async def _save(self, hs: Any) -> bool:
        """Share a session's state (revision, client capabilities, log level, subscriptions,
        owner) so that the next request may go to any process. False when a new session could
        not be recorded: it is dropped, since no other process could serve it (its initialize
        gets 503). A change the store cannot take now is kept here and saved with a later
        request; one to a session the store no longer has drops this copy. The saves of one
        session are made one at a time, in order: a later state never lands before an earlier."""
        store = self.session_store
        if store is None:
            return True
        lock = self._saving.get(hs.id)
        if lock is None:
            lock = self._saving[hs.id] = asyncio.Lock()
        async with lock:
            if not self._changed(hs):
                return True  # saved meanwhile by the request before this one
            state = self._state_of(hs)
            version = hs.version + 1
            try:
                if hs.shared_state is None:
                    await self._in_store(store.save, hs.id, {**state, "version": version}, self.session_idle_timeout)
                elif not await self._in_store(self._update, hs.id, {**state, "version": version}):
                    self._forget_copy(hs)  # ended or expired meanwhile, on another process
                    return True
            except Exception as exc:  # noqa: BLE001 - the store is down (StoreUnavailable)
                self._store_lost()
                log.warning("could not share session %s: %s", hs.id, exc)
                if hs.shared_state is None:
                    self._forget_copy(hs)
                    return False
                return True
            hs.shared_state, hs.version = state, version
            hs.synced = time.monotonic()
        await self._tell_others({"id": hs.id})  # the other copies refresh
        return True

    async def _tell_others(self, news: dict[str, Any]) -> None:
        """Session news on the bus, awaited (off the loop) until Redis took it, so the request
        that made it is answered once the other processes can hear it, as when publishing was
        synchronous. Lost news is only later news: the copies it missed are checked by themselves."""
        try:
            sent = self.server.stores.bus.publish("session", news)
            if isinstance(sent, Future):  # RedisBus; a MemoryBus delivered it already
                await asyncio.wrap_future(sent)
        except Exception as exc:  # noqa: BLE001
            log.warning("not every process may have heard of session %s yet: %s", news.get("id"), exc)

    def _update(self, session_id: str, state: dict[str, Any]) -> bool:
        update = getattr(self.session_store, "update", None)
        if update is None:  # a store without it: a plain save
            self.session_store.save(session_id, state, self.session_idle_timeout)  # type: ignore[union-attr]
            return True
        return bool(update(session_id, state, self.session_idle_timeout))

    def _share_sessions(self) -> None:
        """Hear of the sessions other processes change or end, and of the bus losing Redis."""
        bus = self.server.stores.bus
        bus.subscribe("session", self._session_news)
        watch = getattr(bus, "watch", None)
        if watch is not None:
            watch(self._bus_connection)

    def _store_lost(self) -> None:
        """From any thread: the store could not be reached, so an end recorded meanwhile, or the
        store's data lost with a restart, may have gone unheard: every copy held now is checked
        against the store before it is served again (``_lookup``)."""
        self._store_epoch = next(_EPOCHS)

    def _bus_connection(self, connected: bool) -> None:
        """On the bus thread: lost, the copies held become unchecked; back, the ones the store
        no longer has are dropped at once (their open streams end)."""
        if not connected:
            self._bus_down = True
            self._store_lost()
            return
        # a copy checked while the bus was down may have missed an end published then (the
        # store came back before the bus did): every copy is checked again, now that any later
        # news is heard
        self._store_lost()
        self._bus_down = False
        loop = self.loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(lambda: loop.create_task(self._drop_gone()))
            except RuntimeError:  # the loop closed meanwhile
                pass

    async def _drop_gone(self) -> None:
        existing = getattr(self.session_store, "existing", None)
        unchecked = [sid for sid, hs in self.sessions.items()
                     if hs.epoch != self._store_epoch and hs.shared_state is not None]
        if existing is None or not unchecked:
            return
        try:
            alive = await self._in_store(existing, unchecked)
        except Exception as exc:  # noqa: BLE001 - down again: the next lookups check them one by one
            self._store_lost()
            log.warning("could not check the sessions held here against the store: %s", exc)
            return
        for sid in unchecked:
            if sid not in alive:
                self._forget(sid)  # ended or lost everywhere; an id is never made again

    def _session_news(self, message: dict[str, Any]) -> None:
        """On the bus thread: another process saved or ended a session; refresh or drop ours."""
        session_id = message.get("id")
        if not isinstance(session_id, str) or self.loop is None or session_id not in self.sessions:
            return

        def apply() -> None:
            hs = self.sessions.get(session_id)
            if hs is None:
                return
            if message.get("ended"):
                self._forget(session_id)
                return
            if message.get("get"):
                # its GET stream is read on that process now: what this copy queued for it, or
                # would queue, reaches the client there (notifications cross the bus), never here
                stream, hs.get_stream = hs.get_stream, None
                if stream is not None:
                    stream.push(_END)  # a reader that has not noticed its client left stops
                return
            self._tasks.add(asyncio.ensure_future(self._refreshed(hs)))

        self.loop.call_soon_threadsafe(apply)

    async def _refreshed(self, hs: Any) -> None:
        """Another process changed this session: this copy takes the stored state (read off the
        loop: the requests of every other session go on meanwhile)."""
        try:
            await self._reload(hs, renew=False)
        except Exception as exc:  # noqa: BLE001 - the store is down: keep what is known here
            self._store_lost()
            log.warning("could not refresh shared session %s: %s", hs.id, exc,
                        exc_info=not isinstance(exc, StoreUnavailable))
        finally:
            self._tasks.discard(asyncio.current_task())  # type: ignore[arg-type]

    def _periodic_sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        """Runs on a timer, so abandoned sessions go even when no new client comes."""
        if self._sweeper_loop is not loop or self._closed:
            return
        self._sweep(force=True)
        loop.call_later(self._sweep_every, self._periodic_sweep, loop)

    def _sweep(self, force: bool = False) -> None:
        """Evict sessions idle longer than the timeout (clients that never DELETE). A shared
        session's copy only: the store's record expires by itself unless another process
        kept it alive by serving it."""
        now = time.monotonic()
        if not force and now - self._last_sweep < 1.0:
            return
        self._last_sweep = now
        stale = [sid for sid, hs in self.sessions.items() if self._idle(hs, now)]
        for sid in stale:
            if self.session_store is not None:
                self._forget(sid)
            else:
                self._end_here(sid)

    def _idle(self, hs: Any, now: float) -> bool:
        return hs.active == 0 and now - hs.last_seen > self.session_idle_timeout

    def _lookup(self, headers: dict[bytes, bytes]) -> tuple[Any, int, str]:
        """The session a request names, from what this process holds: ``(session, 200, "")``,
        or ``(None, status, why)``; ``(None, ASK_STORE, session id)`` when the shared store must
        be asked first (``_lookup_shared``, awaited off the loop). A copy held, checked and
        touched recently is served without the store, so is one whose touch is due: that is
        done in the background (``_touch``)."""
        sid = headers.get(b"mcp-session-id")
        if sid is None:
            return None, 400, "Missing Mcp-Session-Id header: send initialize first, then the id it returned."
        session_id = sid.decode("latin-1")
        hs = self.sessions.get(session_id)
        now = time.monotonic()
        if self.session_store is None:
            if hs is not None and hs.active == 0 and now - hs.last_seen > self.session_idle_timeout:
                self._end_here(session_id)  # idle too long: expired, whether swept yet or not
                hs = None
        elif hs is None or hs.epoch != self._store_epoch or self._bus_down or self._idle(hs, now):
            # opened by another process; held through a store outage (ended meanwhile? lost
            # with a restart?), served while the bus cannot tell of an end, or idle here (kept
            # alive by another process?): the store says
            return None, ASK_STORE, session_id
        elif now - hs.synced > self._touch_every:
            self._touch(hs, now)
        # as _found, written out: the hot path of every request of a session held here
        if hs is not None and hs.owner is not None and not self._owned(hs):
            hs = None  # SEC-03: another user's session does not exist for this caller
        if hs is None:
            return None, 404, NOT_FOUND  # HL-17
        hs.last_seen = now
        self.sessions.move_to_end(session_id)
        return hs, 200, ""

    async def _lookup_shared(self, session_id: str) -> tuple[Any, int, str]:
        """``_lookup`` for a session this process must check against the shared store first.
        A copy held through an outage (not idle) waits for its check at most RECHECK_WAIT
        seconds: the store answers that in a millisecond when it is well, and a store that
        cannot is treated as down, when the copy is served (as it always was while the store
        is down), its check going on in the background and dropping it if the session ended."""
        hs = self.sessions.get(session_id)
        now = time.monotonic()
        try:
            if hs is None:  # opened by another process: served here from now on too
                hs = await self._restore(session_id)
            elif self._idle(hs, now):  # kept alive by another process, or expired?
                if not await self._reload(hs):
                    hs = None
            elif session_id not in self._checking:
                check = self._checking[session_id] = asyncio.ensure_future(self._rechecked(hs))
                done, _ = await asyncio.wait((check,), timeout=RECHECK_WAIT)
                if done and not check.result():
                    hs = None
            # else: its check is in flight already, and the store did not answer it in time
        except Exception as exc:  # noqa: BLE001 - the shared store is down (StoreUnavailable)
            self._store_lost()
            if hs is None or self._idle(hs, now):
                log.warning("session store unavailable: %s", exc)
                return None, 503, STORE_DOWN
            # a copy held here is served: while the store is down no end can be recorded
            # (DELETE gets 503), and it is checked again once the store answers
        return self._found(hs, time.monotonic())

    async def _rechecked(self, hs: Any) -> bool:
        """A copy held through a store outage, checked against the store (False: dropped)."""
        try:
            return await self._reload(hs)
        except Exception as exc:  # noqa: BLE001 - still down: served, and checked again next time
            self._store_lost()
            log.warning("could not check shared session %s against the store: %s", hs.id, exc)
            return True
        finally:
            if self._checking.get(hs.id) is asyncio.current_task():
                del self._checking[hs.id]

    def _found(self, hs: Any, now: float) -> tuple[Any, int, str]:
        if hs is not None and hs.owner is not None and not self._owned(hs):
            hs = None  # SEC-03: another user's session does not exist for this caller
        if hs is None:
            return None, 404, NOT_FOUND  # HL-17
        hs.last_seen = now
        self.sessions.move_to_end(hs.id)  # type: ignore[arg-type]
        return hs, 200, ""

    def _touch(self, hs: Any, now: float) -> None:
        """Keep the shared record of a copy served here alive, in the background: the request
        that found it due does not need it (at most one in flight per session)."""
        hs.synced = now
        if hs.id not in self._touching:
            self._touching[hs.id] = asyncio.ensure_future(self._touched(hs))

    async def _touched(self, hs: Any) -> None:
        try:
            alive = await self._in_store(self._renew, self.session_store, hs.id, hs.client)
        except Exception as exc:  # noqa: BLE001 - the store is down: checked before it is served again
            self._store_lost()
            log.warning("could not renew shared session %s: %s", hs.id, exc)
            return
        finally:
            if self._touching.get(hs.id) is asyncio.current_task():
                del self._touching[hs.id]
        if not alive:
            self._forget_copy(hs)  # ended or expired elsewhere


def _record_end(store: Any, session_id: str, client: str | None) -> None:
    """On a store thread: a session's end recorded (raises when the store is down), then its
    entry in the client's shared quota released, best effort: an entry left behind expires."""
    store.delete(session_id)
    if client is not None and hasattr(store, "release"):
        try:
            store.release(client, session_id)
        except Exception as exc:  # noqa: BLE001 - recorded already; the entry expires by itself
            log.warning("shared session %s ended; its quota entry is left to expire: %s", session_id, exc)
