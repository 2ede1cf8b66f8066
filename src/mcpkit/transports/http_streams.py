"""The HTTP app's sessions and streams: where each message the engine emits goes.

Every message names the client request it belongs to (``Outgoing.related``). A POST that carries
requests gets a :class:`_Stream` for them, which receives exactly the messages related to its
requests and ends with the last response (HL-06, HL-07); everything else goes to the session's
standalone GET stream (HL-12), each message on one stream only (HL-13). A request the client
cancels is never answered (CN-01): its stream ends without the answer, once it waits for nothing
else. transports/http.py writes the streams out.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from .._json import kept
from ..server.session import ServerSession, on_loop_thread
from .http_resume import cancelled

if TYPE_CHECKING:
    import asyncio

    from ..protocol.engine import Outgoing
    from .http import McpHttpApp

#: the end of a stream, in its queue
_END = None

#: what a stream may hold for a client that reads it slower than the server writes (a client
#: that stopped reading holds its connection open): past it, the oldest progress and log
#: notifications waiting give way, as a client that read them late would have skipped them;
#: answers, server requests and list changes never do (the GET stream also keeps only its last
#: 1000 messages)
BACKLOG_BYTES = 8 * 1024 * 1024
#: how the engine writes the notifications that may give way (a request puts its id first)
_SHEDDABLE = (b'{"jsonrpc":"2.0","method":"notifications/progress"',
              b'{"jsonrpc":"2.0","method":"notifications/message"')

#: a backlog past which messages are held long enough to be worth their own copy (_json.kept)
_BEHIND = 64 * 1024

log = logging.getLogger("mcpkit.http")


def _drop(messages: Any) -> None:
    """The send of an ended session: nothing goes anywhere any more."""


class _Unanswered:
    """Routed as a response without being one: the client cancelled the request, so no answer
    comes (CN-01), and the stream that waited for it ends once it waits for nothing else."""

    __slots__ = ("related", "answers")
    payload = None

    def __init__(self, request_id: Any) -> None:
        self.related = request_id
        self.answers = (request_id,)


class _Stream:
    """A logical SSE stream (or JSON body): the messages for some requests, or the GET stream."""

    __slots__ = ("id", "pending", "queue", "writer", "json", "frames", "done", "standalone", "draining",
                 "backlog", "limit", "dropped")

    def __init__(self, stream_id: str, pending: set[Any], *, json_mode: bool, standalone: bool = False) -> None:
        self.id = stream_id
        self.pending = pending
        self.standalone = standalone
        self.json = json_mode
        self.queue: deque[Any] = deque()
        self.writer: asyncio.Event | None = None  # set to wake the connection writing this stream
        self.frames: list[bytes] = []  # JSON mode: the responses collected
        self.done: asyncio.Future[None] | None = None
        self.draining = False  # shared stores: its reader left, its events go to the store alone
        self.backlog = 0  # the bytes in the queue
        self.limit = BACKLOG_BYTES  # the backlog that makes it shed (see _shed)
        self.dropped = 0  # notifications shed

    def push(self, item: Any) -> None:
        if self.json:
            if item is not _END:
                self.frames.append(item)
            elif self.done is not None and not self.done.done():
                self.done.set_result(None)
            return
        if item is not _END:
            if self.backlog > _BEHIND:
                item = kept(item)  # the writer is behind: held a while, so without the encoder's slack
            self.backlog += len(item)
            self.queue.append(item)
            if self.backlog > self.limit:
                self._shed()
        else:
            self.queue.append(item)
        if self.standalone and len(self.queue) > 1000:
            self.pop()  # nobody is reading the GET stream: keep memory flat
        if self.writer is not None:
            self.writer.set()

    def pop(self) -> Any:
        """The next message to write (or _END)."""
        item = self.queue.popleft()
        if item is not _END:
            self.backlog -= len(item)
        return item

    def _shed(self) -> None:
        """The client reads slower than the server writes: the oldest progress and log
        notifications waiting give way, down to half of BACKLOG_BYTES when they can. What may not
        give way may grow on (a handler's answers and requests are bounded by its work); the
        next look comes when it has doubled, so a backlog of answers is not scanned at each push."""
        target = BACKLOG_BYTES // 2
        kept: deque[Any] = deque()
        dropped = 0
        for item in self.queue:
            if self.backlog > target and item is not _END and item.startswith(_SHEDDABLE):
                self.backlog -= len(item)
                dropped += 1
            else:
                kept.append(item)
        self.queue = kept
        self.limit = max(BACKLOG_BYTES, 2 * self.backlog)
        if dropped:
            if not self.dropped:
                log.warning("stream %s: its client reads slower than the server writes; the oldest progress and "
                            "log notifications waiting for it are dropped (answers never are)", self.id)
            self.dropped += dropped


#: stream ids of this process's copies of sessions: a random prefix per process, then a count
_PROCESS_TAG = os.urandom(4).hex()
_tag_counter = itertools.count(1)


class _HttpSession:
    """One Mcp-Session-Id: a ServerSession and the streams its messages go to."""

    #: shutting down (transports/http_drain.py): a legacy stream ends once nothing is in flight
    end_when_idle = False

    def __init__(self, app: McpHttpApp, session_id: str | None) -> None:
        self.id = session_id
        self.app = app
        self.loop = app.loop
        self.session = ServerSession(app.server, self._send, self.loop, inline_sync=False)
        self.session.on_cancelled = self._cancelled
        if session_id is None:
            app._passing.add(self)  # a shutdown's deadline finds it there
        # fair turns at the worker threads (server/workers.py): a session is one client unless
        # auth names its principal (http_auth._bind) or it has no id (then its address does)
        self.session.worker_key = session_id
        self.session.task_binding = session_id  # TX-07; None: sessionless, the principal alone
        self.session.session_id = session_id
        self.by_request: dict[Any, _Stream] = {}
        self.get_stream: _Stream | None = None
        self.streams: dict[str, _Stream] = {}
        self.last_seen = time.monotonic()
        self.active = 0  # connections currently open on this session
        self.owner: str | None = None  # with auth: the subject whose token opened the session
        self.client: str | None = None  # whose quota it counts against (http_quotas.py)
        self.shared_state: dict[str, Any] | None = None  # shared stores: what was saved last
        self.synced = 0.0  # shared stores: when the stored copy was last saved or touched
        self.epoch = 0  # shared stores: the store epoch it was last checked in (http_sessions.py)
        self.version = 0  # shared stores: the version of shared_state (counts the saves, http_sessions.py)
        self._seq = 0
        # this process's copy of the session numbers its streams with a tag of its own: with
        # shared stores, other processes serve the same session and must never mint the same
        # stream id (one stream's events would be replayed as another's, HL-14); made with the
        # first stream id (a stateless JSON request never needs one: no system call for it)
        self._tag_made: str | None = None
        self.closed = False

    @property
    def _tag(self) -> str:
        tag = self._tag_made
        if tag is None:  # this process's random prefix and a count: unique, and no system call
            tag = self._tag_made = f"{_PROCESS_TAG}{next(_tag_counter):x}g"
        return tag

    def stream_ids(self) -> list[str]:
        """Every stream id this copy of the session minted, and the GET stream's."""
        return [f"{self.id}.{self._tag}{n}" for n in range(1, self._seq + 1)] + [f"{self.id}.get"]

    def next_stream_id(self) -> str:
        self._seq += 1
        return f"{self.id or 'x'}.{self._tag}{self._seq}"

    def _send(self, messages: list[Outgoing]) -> None:
        # called under the session lock, possibly from a worker thread
        if on_loop_thread(self.loop):
            self._route(messages)
            return
        self.app.from_worker(self, messages)

    def _route(self, messages: list[Outgoing]) -> None:
        for m in messages:
            stream = self.by_request.get(m.related) if m.related is not None else None
            if stream is not None and stream.json and not m.answers:
                # a JSON body is the response alone (HL-06): what else the request causes
                # (progress, logs, server->client requests) can only ride the GET stream
                stream = None
            if stream is None:
                stream = self.get_stream
                if stream is None or m.payload is None:
                    continue  # unrelated and no GET stream: nothing can carry it (HL-12 is a MAY)
                stream.push(m.payload)
                continue
            if m.payload is None:  # _Unanswered: cancelled, no answer comes for it (CN-01)
                stream.pending.discard(m.related)
                if self.app.session_store is not None and not stream.json:
                    # stored, never sent: a process resuming the stream owes it nothing either
                    stream.push(cancelled(m.related))
                if not stream.pending:  # else a batch's answer still names it, and finds the stream by it
                    for rid in [rid for rid, s in self.by_request.items() if s is stream]:
                        del self.by_request[rid]
                    stream.push(_END)
                continue
            stream.push(m.payload)
            for rid in m.answers:
                if self.by_request.get(rid) is stream:
                    del self.by_request[rid]
                stream.pending.discard(rid)
            if m.answers and not stream.pending:
                stream.push(_END)
        if self.end_when_idle and not self.session.engine.in_flight_count:
            self.end_standalone()

    def _cancelled(self, request_id: Any) -> None:
        """The client cancelled a request (called after what it said before, in order)."""
        self._send([_Unanswered(request_id)])  # type: ignore[list-item]

    def end_standalone(self) -> None:
        """Shutting down: end the GET stream, or the legacy stream once nothing is in flight
        (its answers ride it)."""
        legacy = self.id is not None and self.app.legacy.get(self.id) is self
        self.end_when_idle = legacy and self.session.engine.in_flight_count > 0
        if not self.end_when_idle and self.get_stream is not None:
            self.get_stream.push(_END)

    def open_stream(self, ids: list[Any], json_mode: bool) -> _Stream:
        stream = _Stream(self.next_stream_id(), set(ids), json_mode=json_mode)
        if json_mode:
            stream.done = self.loop.create_future()
        else:
            self.streams[stream.id] = stream
        for rid in ids:
            self.by_request[rid] = stream
        return stream

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.id is None:
            self.app._passing.discard(self)
        self.session.close()
        # the ServerSession holds our bound method: break the cycle so memory is freed at once,
        # not at the next full garbage collection (sessions abandoned by the thousand)
        self.session._send = _drop
        self.session.on_cancelled = None
        for stream in list(self.streams.values()):
            stream.push(_END)
        if self.get_stream is not None:
            self.get_stream.push(_END)
        self.streams.clear()
        self.by_request.clear()
