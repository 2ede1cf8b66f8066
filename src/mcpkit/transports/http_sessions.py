"""The session table of the HTTP app: sessions made, found, shared, swept and ended.

Sessions live in ``McpHttpApp.sessions`` (least recently used first). A new session takes room
as transports/http_quotas.py says (per-client quotas first, then the global cap, idle sessions
only). With a shared store (MCPKIT_STORE) every process can serve every session: its state is
saved after each change, restored on first use in another process, touched while served, and
news of changes and ends travel on the bus. Evicting a shared session from this process's
table at the global cap only drops the local copy; ending one (DELETE, quota, idle timeout)
ends it everywhere.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import OrderedDict
from typing import Any

from ..protocol import revisions
from .http_auth import ACCESS
from .http_quotas import SessionQuotas, client_address

__all__ = ["SessionTable"]

log = logging.getLogger("mcpkit.http")


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

    async def _drop_events(self, store: Any, stream_ids: list[str]) -> None:
        raise NotImplementedError

    def _owned(self, hs: Any) -> bool:
        raise NotImplementedError

    def _client_of(self, scope: dict[str, Any]) -> str:
        """Who a session counts against (http_quotas.py): the principal, else the address."""
        if self.auth is not None:
            return "principal:" + ACCESS.get()[0].subject
        return "address:" + client_address(scope)

    def _new_session(self, client: str) -> Any:
        """A session for ``client``, room made as http_quotas.py says (raises QuotaExceeded)."""
        self._sweep()
        sessions = self.sessions
        own = self.quotas.own_victim(
            client, lambda sid: sessions[sid].active == 0, lambda sid: sessions[sid].last_seen)
        if own is not None:
            self._end(own)  # the client's own oldest idle session: HL-17, it gets 404 from now on
        while len(sessions) >= self.max_sessions:
            victim = self.quotas.global_victim(sessions.items(), lambda hs: hs.active == 0)
            if self.session_store is not None:
                self._forget(victim)  # shared: only this process's copy goes; the session lives on
            else:
                self._end(victim)
        session_id = os.urandom(16).hex()  # HL-15: cryptographically random, visible ASCII
        hs = self._session_type(self, session_id)
        hs.client = client
        sessions[session_id] = hs
        self.quotas.add(client, session_id)
        self._shared_quota(client, session_id)
        return hs

    def _shared_quota(self, client: str, session_id: str) -> None:
        """With shared sessions, the per-client quota counts the client's sessions in every
        process: past it, its oldest ones end everywhere (their own client's, never another's)."""
        claim = getattr(self.session_store, "claim", None)
        if claim is None:
            return
        try:
            over = claim(client, session_id, self.quotas.per_client, self.session_idle_timeout)
        except Exception as exc:  # noqa: BLE001 - the store is down: this process's quota still holds
            log.warning("could not count the sessions of %s in the shared store: %s", client, exc)
            return
        for old in over:
            self._end(old, release=False)

    def _end(self, session_id: str, release: bool = True) -> None:
        if self.session_store is not None:
            try:
                hs = self.sessions.get(session_id)
                if release and hs is not None and hs.client is not None and hasattr(self.session_store, "release"):
                    self.session_store.release(hs.client, session_id)
                self.session_store.delete(session_id)
                self.server.stores.bus.publish("session", {"id": session_id, "ended": True})
            except Exception as exc:  # noqa: BLE001 - the store is down: its TTL ends it there
                log.warning("could not end shared session %s: %s", session_id, exc)
        hs = self.sessions.pop(session_id, None)
        self.quotas.remove(session_id)
        if hs is not None:
            stream_ids = hs.stream_ids()
            hs.close()
            if self.loop is not None:
                self.loop.create_task(self._drop_events(self.event_store, stream_ids))

    def _restore(self, session_id: str, hs: Any = None) -> Any:
        """A shared session, as the session store has it: served here, whichever process
        opened it or changed it last (None when it ended or expired everywhere)."""
        state = self.session_store.load(session_id)  # type: ignore[union-attr]
        if not state or state.get("revision") not in revisions.HANDSHAKE_VERSIONS:
            if hs is not None:
                self._forget(session_id)
            return None
        if hs is not None:
            hs.session.log_level = state.get("log_level")
            hs.session.subscriptions = set(state.get("subscriptions") or ())
            hs.shared_state, hs.synced = state, time.monotonic()
            return hs
        while len(self.sessions) >= self.max_sessions:
            self._forget(next(iter(self.sessions)))  # a copy: the session itself lives on
        hs = self._session_type(self, session_id)
        hs.session.refresh_state = lambda: self._restore(session_id, hs)  # type: ignore[attr-defined]
        engine = hs.session.engine
        engine.revision = revisions.get(state["revision"])
        engine.initialized = bool(state.get("initialized", True))
        engine.client_info = state.get("client_info") or {}
        engine.client_capabilities = state.get("client_capabilities") or {}
        hs.session.log_level = state.get("log_level")
        hs.session.subscriptions = set(state.get("subscriptions") or ())
        hs.owner = state.get("owner")
        hs.client = state.get("client")
        hs.shared_state, hs.synced = state, time.monotonic()
        self.server._session_started(hs.session)  # it gets this process's notifications now
        self.sessions[session_id] = hs
        if isinstance(hs.client, str):
            self.quotas.add(hs.client, session_id)
        return hs

    def _forget(self, session_id: str) -> None:
        """Drop this process's copy of a shared session; the session itself lives on."""
        hs = self.sessions.pop(session_id, None)
        self.quotas.remove(session_id)
        if hs is not None:
            hs.close()

    def _save(self, hs: Any) -> None:
        """Share a session's state (revision, client capabilities, log level, subscriptions,
        owner) so that the next request may go to any process."""
        engine = hs.session.engine
        if self.session_store is None or hs.id is None or engine.revision is None or hs.closed:
            return
        try:
            self._save_state(hs, engine)
        except Exception as exc:  # noqa: BLE001 - the store is down: this process still serves it
            log.warning("could not share session %s: %s", hs.id, exc)

    def _save_state(self, hs: Any, engine: Any) -> None:
        state = {
            "revision": engine.revision.version,
            "initialized": engine.initialized,
            "client_info": engine.client_info,
            "client_capabilities": engine.client_capabilities,
            "log_level": hs.session.log_level,
            "subscriptions": sorted(hs.session.subscriptions),
            "owner": hs.owner,
            "client": hs.client,
        }
        if state == hs.shared_state:
            return  # unchanged: most requests (tool calls) cost the store nothing
        self.session_store.save(hs.id, state, self.session_idle_timeout)  # type: ignore[union-attr]
        hs.shared_state = state
        hs.synced = time.monotonic()
        self.server.stores.bus.publish("session", {"id": hs.id})  # the other copies refresh

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
            try:
                self._restore(session_id, hs)
            except Exception:  # noqa: BLE001 - the store is down: keep what is known here
                log.warning("could not refresh shared session %s", session_id, exc_info=True)

        self.loop.call_soon_threadsafe(apply)

    def _periodic_sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        """Runs on a timer, so abandoned sessions go even when no new client comes."""
        if self._sweeper_loop is not loop or self._closed:
            return
        self._sweep(force=True)
        loop.call_later(self._sweep_every, self._periodic_sweep, loop)

    def _sweep(self, force: bool = False) -> None:
        """Evict sessions idle longer than the timeout (clients that never DELETE)."""
        now = time.monotonic()
        if not force and now - self._last_sweep < 1.0:
            return
        self._last_sweep = now
        cutoff = now - self.session_idle_timeout
        stale = [sid for sid, hs in self.sessions.items() if hs.last_seen < cutoff and hs.active == 0]
        for sid in stale:
            self._end(sid)

    def _lookup(self, headers: dict[bytes, bytes]) -> tuple[Any, int, str]:
        sid = headers.get(b"mcp-session-id")
        if sid is None:
            return None, 400, "Missing Mcp-Session-Id header: send initialize first, then the id it returned."
        hs = self.sessions.get(sid.decode("latin-1"))
        now = time.monotonic()
        if self.session_store is not None:
            try:
                if hs is None:  # opened by another process: served here from now on too
                    hs = self._restore(sid.decode("latin-1"))
                elif now - hs.synced > self._touch_every:
                    # keep the shared copy alive while this process is the one serving it
                    hs.synced = now
                    if hs.client is not None and hasattr(self.session_store, "renew"):
                        self.session_store.renew(hs.client, hs.id, self.session_idle_timeout)
                    if not self.session_store.touch(hs.id, self.session_idle_timeout):
                        self._forget(hs.id)  # type: ignore[arg-type]  # ended or expired elsewhere
                        hs = None
            except Exception as exc:  # noqa: BLE001 - the shared store is down (StoreUnavailable)
                if hs is None:
                    log.warning("session store unavailable: %s", exc)
                    return None, 503, "The session store is unavailable; retry in a few seconds."
        if hs is not None and hs.active == 0 and now - hs.last_seen > self.session_idle_timeout:
            self._end(hs.id)  # type: ignore[arg-type]  # idle too long: expired, whether swept yet or not
            hs = None
        if hs is not None and hs.owner is not None and not self._owned(hs):
            hs = None  # SEC-03: another user's session does not exist for this caller
        if hs is None:
            return None, 404, "Session not found: it ended or expired; initialize a new one."  # HL-17
        hs.last_seen = now
        self.sessions.move_to_end(hs.id)  # type: ignore[arg-type]
        return hs, 200, ""
