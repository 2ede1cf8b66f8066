"""Resuming a POST stream on any process (shared stores, HL-14): it carries on, or says it cannot.

With a shared store a client may resume a stream (``Last-Event-ID``) on a process that does not
hold it: its own died, or a balancer moved the client. The stream's first stored entry is its
*record*: the process that owes its answers and the request ids it owes them for (``META``, never
sent). A process resuming a stream that still owes answers replays what was stored and then
follows the store live, in event-id order (so nothing is lost or sent twice), until every owed
request is answered. The owner keeps its lease (stores/redis_tasks.py, ``hold``) while the stream
owes answers; once that lease is gone the owner can never answer, so each request still owed is
answered here with a retryable error (``STOPPED``) and the stream ends. A request the client
cancelled is owed nothing: the owner stores that too (``cancelled``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from .. import _json
from ..protocol.errors import INTERNAL_ERROR

__all__ = ["META", "Resuming", "STOPPED", "cancelled", "event_seq", "sse_frame"]

log = logging.getLogger("mcpkit.http")

#: the first byte of a stream's stored record; a JSON-RPC payload never starts with it
META = b"\x00"
#: seconds one read of the store waits for a new event (under the Redis client's socket timeout)
FOLLOW_BLOCK = 0.5

_FIX = "Send the request again."
#: the answer of a request whose process stopped before answering it: it never ran to its end
#: here, so sending it again may succeed (the shape of the tool contract's errors, like a task's)
STOPPED = {"code": INTERNAL_ERROR,
           "message": f"The server process answering this request stopped before it answered. Fix: {_FIX}",
           "data": {"code": "E_INTERRUPTED", "retryable": True, "suggestedFix": _FIX}}


def cancelled(request_id: Any) -> bytes:
    """What a stream stores, and never sends, when the client cancelled one of its requests: no
    answer comes for it (CN-01), on any process."""
    return META + _json.dumps({"cancelled": [request_id]})


def _answered(payload: bytes) -> list[Any]:
    """The request ids a stored payload settles: a response, a batch of them, or a cancellation."""
    try:
        message = _json.loads(payload[len(META):] if payload.startswith(META) else payload)
    except ValueError:
        return []
    if payload.startswith(META):
        ids = message.get("cancelled") if isinstance(message, dict) else None
        return list(ids) if isinstance(ids, list) else []
    out = []
    for m in message if isinstance(message, list) else [message]:
        if isinstance(m, dict) and "method" not in m and ("result" in m or "error" in m) and "id" in m:
            out.append(m["id"])
    return out


def event_seq(event_id: str) -> int:
    return int(event_id.rpartition("_")[2])


def sse_frame(eid: str | None, payload: bytes) -> bytes:
    head = b"id: " + eid.encode() + b"\n" if eid is not None else b""
    return head + b"event: message\ndata: " + payload + b"\n\n"


class Resuming:
    """The resumption steps of McpHttpApp (transports/http.py), which sets the attributes below."""

    server: Any
    session_store: Any
    event_store: Any

    async def _stored(self, store: Any, stream_id: str, item: bytes) -> str | None:
        raise NotImplementedError

    def _cors(self, headers: dict[bytes, bytes]) -> list[tuple[bytes, bytes]]:
        raise NotImplementedError

    @property
    def _lease(self) -> Any:
        """The store whose per-process lease says which processes are alive (None: not shared)."""
        if self.session_store is None:
            return None
        tasks = self.server.stores.tasks
        return tasks if hasattr(tasks, "hold") and hasattr(self.event_store, "follow") else None

    def _record(self, stream: Any) -> bytes | None:
        """A POST stream's stored record, held by this process's lease until the stream ends."""
        lease = self._lease
        if lease is None or stream.standalone:
            return None
        lease.hold(stream.id)
        return META + _json.dumps({"owner": lease.origin, "owes": list(stream.pending)})

    def _let_go(self, stream: Any) -> None:
        lease = self._lease
        if lease is not None and not stream.standalone:
            lease.let_go(stream.id)

    def _reading_here(self, hs: Any) -> None:
        """Shared stores: this process writes the session's GET stream from now on; the other
        copies drop theirs (http_sessions.py), so a client that comes back to one of them later
        is not sent again what it received here."""
        if self.session_store is None:
            return
        try:
            self.server.stores.bus.publish("session", {"id": hs.id, "get": True})
        except Exception as exc:  # noqa: BLE001 - the others' copies hold a stale queue, as before
            log.warning("could not announce the GET stream of session %s: %s", hs.id, exc)

    async def _owed(self, stream_id: str) -> tuple[str, set[Any], list[tuple[str, bytes]]] | None:
        """The owner of a stored stream, the requests it still owes answers for, and all its
        events; None when it owes none (or has no record: stored before records were, or while
        the store was down)."""
        lease = self._lease
        if lease is None:
            return None
        try:
            found = await self.event_store.replay_after(f"{stream_id}_0")
        except Exception as exc:  # noqa: BLE001 - StoreUnavailable: what was replayed stands
            log.warning("event store unavailable: %s", exc)
            return None
        if not found or not found[1] or not found[1][0][1].startswith(META):
            return None
        try:
            record = _json.loads(found[1][0][1][len(META):])
            owner, owes = record["owner"], {rid for rid in record["owes"] if isinstance(rid, (int, str))}
        except (ValueError, KeyError, TypeError):
            return None
        for _eid, payload in found[1][1:]:
            owes.difference_update(_answered(payload))
        return (owner, owes, found[1]) if owes and isinstance(owner, str) else None

    async def _follow(self, send: Any, gone: asyncio.Event, stream_id: str, after: int,
                      owner: str, owes: set[Any]) -> None:
        """After the replay (events up to ``after``): what the owner stores next, until every
        owed request is answered; once the owner is gone, a retryable error for each of the rest."""
        store, lease = self.event_store, self._lease
        check_every = getattr(lease, "renew_every", 1.0)
        checked = time.monotonic()
        while owes and not gone.is_set():
            try:
                events = await store.follow(stream_id, after, FOLLOW_BLOCK)
                if not events and time.monotonic() - checked >= check_every:
                    checked = time.monotonic()
                    if not await asyncio.get_running_loop().run_in_executor(None, lease.alive, owner):
                        # stored just before it died? read once more, then answer what is left
                        found = await store.replay_after(f"{stream_id}_{after}")
                        events = found[1] if found else []
                        owes_after = set(owes)
                        for _eid, payload in events:
                            owes_after.difference_update(_answered(payload))
                        events += [(None, _json.dumps({"jsonrpc": "2.0", "id": rid, "error": STOPPED}))
                                   for rid in owes_after]
            except Exception as exc:  # noqa: BLE001 - StoreUnavailable: the client resumes again later
                log.warning("event store unavailable while following stream %s: %s", stream_id, exc)
                return
            chunks = []
            for eid, payload in events:
                if eid is None:  # an answer made here: stored, so a later resumption replays it
                    eid = await self._stored(store, stream_id, payload)
                else:
                    after = max(after, event_seq(eid))
                if payload and not payload.startswith(META):
                    chunks.append(sse_frame(eid, payload))
                owes.difference_update(_answered(payload))
            if chunks:
                await send({"type": "http.response.body", "body": b"".join(chunks), "more_body": True})
