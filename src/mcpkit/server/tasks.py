"""The ``io.modelcontextprotocol/tasks`` extension of 2026-07-28 (TX-01..TX-07).

A tool registered with ``task="optional"`` or ``task="required"`` is run as a task when the
request itself declares the extension in its clientCapabilities (TX-01): the task is stored
first (TX-03), the call is answered at once with a flat ``CreateTaskResult`` (TX-02), and the
handler runs in the background: async handlers on the session's loop, sync ones in the server's
worker threads. While it runs, ``ctx.elicit`` / ``ctx.sample`` / ``ctx.roots`` turn the task
``input_required`` until ``tasks/update`` brings the answers (TX-04). A tool result, even one
with ``isError``, completes the task; only a JSON-RPC error fails it (TX-05).

Tools registered with ``task_after_input=True`` (async handlers only) first resolve their inputs
as ordinary multi-round-trip requests; the task is created when the handler calls
``await ctx.start_task()`` (TX-03: MRTR exchanges before the task are resolved synchronously).
"""

from __future__ import annotations

import concurrent.futures
import logging
import secrets
import threading
from typing import TYPE_CHECKING, Any

from ..protocol.errors import (
    E_NOT_CONNECTED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    McpError,
    ToolError,
    clipped,
    handler_error,
)
from ..stores.errors import StoreUnavailable
from ..stores.tasks import OWNER_GONE, SHUT_DOWN, MemoryTaskStore, TaskCancelled, TaskRecord

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..protocol.engine import RequestReceived
    from .session import ServerSession

__all__ = ["EXTENSION", "TaskManager", "TaskRecord", "wants_tasks", "missing_extension", "TASK_METHODS"]

log = logging.getLogger("mcpkit")
#: seconds before a task write the store could not take is tried again
WRITE_RETRY = 0.5

EXTENSION = "io.modelcontextprotocol/tasks"
_KINDS = {"elicitation/create": "elicit", "sampling/createMessage": "sample", "roots/list": "roots"}


def wants_tasks(capabilities: Any) -> bool:
    """TX-01: did this very request declare the extension?"""
    if not isinstance(capabilities, dict):
        return False
    extensions = capabilities.get("extensions")
    return isinstance(extensions, dict) and EXTENSION in extensions


def missing_extension(what: str) -> McpError:
    return McpError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{what} needs the client capability extensions[{EXTENSION!r}] in this request.",
        {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


class TaskManager:
    """The server's tasks: a store (bounded, in memory by default) plus the logic around it."""

    def __init__(self, *, ttl_ms: int = 300_000, poll_interval_ms: int = 500, store: Any = None,
                 stores: Any = None) -> None:
        if not isinstance(ttl_ms, int) or ttl_ms < 1:
            raise ValueError("task_ttl_ms must be a positive integer")
        self.ttl_ms = ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self.store = store if store is not None else MemoryTaskStore()
        #: the stores bundle (stores/redis.py) when ``store`` may wait on the network: then what
        #: is written on the event loop is written on the stores' threads (:meth:`create_async`,
        #: :meth:`_save`), so a slow or paused Redis never stalls the loop
        self._stores = stores if stores is not None and stores.remote else None
        self._lock = threading.RLock()
        #: the tasks this manager runs and that have not ended, by id: what close() settles
        self._running: dict[str, TaskRecord] = {}
        #: background writes not yet done (what close() waits for before it settles the rest)
        self._writes: set[concurrent.futures.Future[Any]] = set()
        self._closing = False
        watch = getattr(self.store, "watch", None)
        if watch is not None:  # a shared store's lease lapsed: those tasks failed, their runs stop
            watch(self._lapsed)

    # ------------------------------------------------------------------ lifecycle

    def create(self, session: ServerSession) -> TaskRecord:
        """TX-03, TX-07: a random id, bound to the creator (``session``'s principal and binding),
        stored before anyone hears of it."""
        record = self._new(session)
        self._write(record)
        with self._lock:
            self._running[record.task_id] = record
        return record

    def offloaded(self) -> bool:
        """Must a task be created with :meth:`create_async`: on the event loop, with a store
        that may wait on the network?"""
        if self._stores is None:
            return False
        import asyncio

        return asyncio._get_running_loop() is not None

    async def create_async(self, session: ServerSession) -> TaskRecord:
        """:meth:`create` on the event loop: the record is stored on the stores' threads (TX-03:
        still before anyone hears of it); while the task store is down, the retryable
        E_NOT_CONNECTED error, as tasks/get answers."""
        import asyncio

        record = self._new(session)
        try:
            await self._stores.call(self._write, record)
        except StoreUnavailable as exc:
            raise store_down("tools/call", exc) from None
        except asyncio.CancelledError:
            # the call was cancelled while its task was being stored: the task ends cancelled
            # (written after its creation, record._writing), so it never says working for ever
            self.cancel(record)
            raise
        with self._lock:
            self._running[record.task_id] = record
        return record

    def _new(self, session: ServerSession) -> TaskRecord:
        record = TaskRecord(secrets.token_urlsafe(24), self.ttl_ms, self.poll_interval_ms)
        record.principal = session.principal
        record.binding = session.task_binding
        return record

    def _save(self, record: TaskRecord) -> bool:
        """Store the record's new state; False when the store refused it because the task had
        ended elsewhere (the record then holds that outcome, and the caller stops the run).
        On the event loop with a store that may wait on the network, the write is made in the
        background (:meth:`_write_soon`) and this says True: a refusal stops the run there."""
        record._touch()
        if self._stores is not None and not self._closing:
            import asyncio

            if asyncio._get_running_loop() is not None:
                if record.terminal:
                    self._running.pop(record.task_id, None)
                self._write_soon(record)
                return True
        kept = self._write(record)
        if record.terminal:  # a refused write made it so too (the outcome stored elsewhere)
            self._running.pop(record.task_id, None)
        return kept

    def _write(self, record: TaskRecord) -> bool:
        if self._stores is None:
            return self.store.put(record) is not False
        with record._writing:  # after any write of this record begun before (its creation first)
            return self.store.put(record) is not False

    def _write_soon(self, record: TaskRecord) -> None:
        """Write the record on a store thread (with ``self._lock`` held). One write due at a
        time: a write not begun yet reads the record when it begins, so it carries this state
        too. Writes of one record never overtake each other (record._writing), and each reads
        the record as it begins, so the last one written holds its newest state: a settle lands
        after the creation, a cancel is not overwritten by what was due before it."""
        if record._write_due:
            return
        record._write_due = True
        try:
            write = self._stores.submit(self._written, record)
        except RuntimeError:  # the stores were closed (shutdown): the lease settles the rest
            record._write_due = False
            log.warning("task %s not saved: the stores are closed", record.task_id)
            return
        self._writes.add(write)
        write.add_done_callback(self._writes.discard)

    def _written(self, record: TaskRecord) -> None:
        # a store thread
        with self._lock:
            record._write_due = False  # what changes from here on is written again
        try:
            kept = self._write(record)
        except StoreUnavailable as exc:
            # the store is out of reach (an outage, a failover): written again until it takes
            # it, or a later write carries the state. Given up, a settled task would read
            # "working" everywhere for as long as this process (and so its lease) lives
            log.warning("task %s not saved yet, written again shortly: %s", record.task_id, exc)
            self._write_later(record)
            return
        except Exception:  # noqa: BLE001 - a background write: nobody else would hear of it
            log.exception("task %s not saved", record.task_id)
            return
        if not kept:  # the task ended elsewhere (the record took that outcome): whatever runs stops
            with self._lock:
                self._running.pop(record.task_id, None)
            self._stop_run(record)

    def _write_later(self, record: TaskRecord) -> None:
        """Write ``record`` again in a moment (a store thread found the store out of reach)."""
        import threading

        def again() -> None:
            with self._lock:
                self._write_soon(record)

        timer = threading.Timer(WRITE_RETRY, again)
        timer.daemon = True
        timer.start()

    def close(self) -> None:
        """Graceful shutdown: every task still running here fails (:data:`SHUT_DOWN`, retryable)
        and its run is stopped, so that no client waits for it and no other process waits for
        this one's lease to expire."""
        with self._lock:
            self._closing = True  # from here on every write is made at once, in this thread
            running = list(self._running.values())
            writes = list(self._writes)
        concurrent.futures.wait(writes, timeout=5.0)  # what was due is written first
        for record in running:
            try:
                self.interrupt(record, SHUT_DOWN)
            except Exception:  # noqa: BLE001 - the store is out of reach: the lease settles the rest
                log.exception("could not settle task %s at shutdown", record.task_id)
                break

    def interrupt(self, record: TaskRecord, error: dict[str, Any]) -> None:
        """The task fails with ``error`` before its handler ended, and its run is stopped."""
        with self._lock:
            if not record.terminal:
                record.input_requests.clear()
                record.error, record.status = dict(error), "failed"  # the outcome first: see settle
                self._save(record)
        self._stop_run(record)

    def _lapsed(self, records: list[TaskRecord]) -> None:
        # the lease's thread: this process's lease lapsed while these ran; others may have
        # failed them already (then the store keeps their outcome)
        for record in records:
            if record.task_id in self._running:
                self.interrupt(record, OWNER_GONE)

    def settle(self, record: TaskRecord, result: dict[str, Any] | None, error: BaseException | None) -> None:
        """The handler ended: completed with its result (even isError, TX-05), or failed on a JSON-RPC error."""
        with self._lock:
            if record.terminal:
                return  # a cancelled task stays cancelled
            record.input_requests.clear()
            if error is None:
                if isinstance(result, dict) and "resultType" not in result:
                    result = {"resultType": "complete", **result}  # the CallToolResult of 2026-07-28
                # the outcome before the status: a store thread may be writing the record meanwhile
                # (_write_soon), and reads the status first: it never writes an ended task
                # without its outcome (a write that read the old status is followed by another)
                record.result, record.status = result, "completed"
            else:
                if isinstance(error, McpError):
                    err: dict[str, Any] = {"code": error.code, "message": error.message}
                    if error.data is not None:
                        err["data"] = error.data
                else:
                    err = {"code": INTERNAL_ERROR, "message": "Internal error."}
                record.error, record.status = err, "failed"
            self._save(record)  # refused: it ended elsewhere, and the run is over anyway

    # ------------------------------------------------------------------ inputs (TX-04)

    def ask(self, record: TaskRecord, method: str, params: dict[str, Any] | None, key: str | None) -> Any:
        """Record an input request; returns a concurrent Future the answer arrives on."""
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            if record.terminal:
                fut.set_exception(TaskCancelled())
                return fut
            base = key or _KINDS.get(method, "input")
            chosen = base if key is not None and base not in record._used_keys else None
            while chosen is None or chosen in record._used_keys:  # keys are never reused
                n = record._counts.get(base, 0) + 1
                record._counts[base] = n
                chosen = f"{base}_{n}"
            record._used_keys.add(chosen)
            request: dict[str, Any] = {"method": method}
            if params is not None:
                request["params"] = params
            record.input_requests[chosen] = request
            record._waiters[chosen] = (method, fut)
            record.status = "input_required"
            kept = self._save(record)
        if not kept:
            self._stop_run(record)  # the task ended elsewhere: nobody will answer
        return fut

    def update(self, record: TaskRecord, responses: Any) -> None:
        from .rounds import _valid_answer

        if not isinstance(responses, dict):
            raise McpError(INVALID_PARAMS, "tasks/update needs an 'inputResponses' object.")
        answered = []
        kept = True
        with self._lock:
            for key, answer in responses.items():
                waiter = record._waiters.get(key)
                if waiter is None or not _valid_answer(waiter[0], answer):
                    continue  # unknown or not outstanding: ignored (TX-04)
                del record._waiters[key]
                record.input_requests.pop(key, None)
                answered.append((waiter[1], answer))
            if answered and not record.terminal:
                if not record.input_requests:
                    record.status = "working"
                kept = self._save(record)
        if not kept:
            self._stop_run(record)
            return
        for fut, answer in answered:
            if not fut.done():
                fut.set_result(answer)

    def cancel(self, record: TaskRecord) -> None:
        with self._lock:
            if not record.terminal:
                record.status = "cancelled"
                record.input_requests.clear()
                self._save(record)  # refused: it ended elsewhere first, and that outcome holds
        self._stop_run(record)

    def _stop_run(self, record: TaskRecord) -> None:
        """The task ended: its handler hears it (ctx.cancelled, its pending inputs, the task
        running it), and whatever it returns later is not the task's outcome any more."""
        with self._lock:
            waiters = list(record._waiters.values())
            record._waiters.clear()
        record.cancel_event.set()
        for _method, fut in waiters:
            if not fut.done():
                fut.set_exception(TaskCancelled())
        run, loop = record.future, record.loop
        if run is not None and loop is not None and not run.done():
            loop.call_soon_threadsafe(run.cancel)

    # ------------------------------------------------------------------ lookups

    def find(self, session: ServerSession, req: RequestReceived) -> TaskRecord:
        """The gate (-32021) comes before the lookup (-32602)."""
        if not wants_tasks(req.capabilities):
            raise missing_extension(req.method)
        task_id = (req.params or {}).get("taskId")
        if not isinstance(task_id, str):
            raise McpError(INVALID_PARAMS, f"{req.method} needs a string 'taskId' parameter.")
        record = self.store.get(task_id)
        if record is None or not _bound_to(record, session):
            # TX-07: another principal's (or session's) task is answered as if it did not exist,
            # so a leaked id reveals nothing, not even that the task exists
            task_id = clipped(task_id)
            raise McpError(INVALID_PARAMS, f"Unknown task: {task_id}", {"taskId": task_id})
        return record


def _bound_to(record: TaskRecord, session: ServerSession) -> bool:
    if getattr(record, "principal", None) != session.principal:
        return False
    binding = getattr(record, "binding", None)
    return binding is None or binding == session.task_binding


# ---------------------------------------------------------------------- method handlers


def tasks_get(session: ServerSession, req: RequestReceived) -> dict[str, Any]:
    manager = session.server.tasks
    record = manager.find(session, req)
    with manager._lock:
        return record.detailed()


def tasks_update(session: ServerSession, req: RequestReceived) -> dict[str, Any]:
    manager = session.server.tasks
    record = manager.find(session, req)
    manager.update(record, (req.params or {}).get("inputResponses"))
    return {"resultType": "complete"}


def tasks_cancel(session: ServerSession, req: RequestReceived) -> dict[str, Any]:
    manager = session.server.tasks
    manager.cancel(manager.find(session, req))
    return {"resultType": "complete"}


def _off_the_loop(handler: Callable[[ServerSession, RequestReceived], dict[str, Any]]) -> Any:
    """``handler`` as a method: on the event loop with a shared task store (Redis) it runs on
    the stores' threads and is awaited, so a slow or paused Redis stalls this request only;
    elsewhere (stdio's reader thread, a store in this process) it runs as it is."""

    def method(session: ServerSession, req: RequestReceived) -> Any:
        server = session.server
        if server.shared and session._on_loop_thread():
            return server.stores.call(_answered, handler, session, req)  # a coroutine: session.py awaits it
        return _answered(handler, session, req)

    return method


def _answered(handler: Callable[[ServerSession, RequestReceived], dict[str, Any]], session: ServerSession,
              req: RequestReceived) -> dict[str, Any]:
    """``handler``'s answer; the retryable -32603 (E_NOT_CONNECTED) while the task store is down,
    as a rate limit that cannot be checked gets, never an internal error with a traceback."""
    try:
        return handler(session, req)
    except StoreUnavailable as exc:
        raise store_down(req.method, exc) from None


def store_down(method: str, exc: StoreUnavailable) -> McpError:
    """The retryable -32603 (E_NOT_CONNECTED) of a request the task store could not serve."""
    log.warning("%s not answered: %s", method, exc)
    down = ToolError("The task store is unavailable.", code=E_NOT_CONNECTED, retryable=True,
                     suggested_fix="Retry in a few seconds.")
    return handler_error(down, 0) or McpError(INTERNAL_ERROR, down.message)


TASK_METHODS = {"tasks/get": _off_the_loop(tasks_get), "tasks/update": _off_the_loop(tasks_update),
                "tasks/cancel": _off_the_loop(tasks_cancel)}
