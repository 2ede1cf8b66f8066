"""The audit trail: one JSON line per tool call, secrets redacted, rotated by size.

TL-11 asks for access control and rate limits on tool calls; an audit trail is how an operator
later learns who called what, with which arguments, and what came of it. Each line is one JSON
object, ``time`` first (ISO 8601 UTC with milliseconds), then the entry's fields in the order
given: ``correlationId``, ``principal``, ``tool``, ``action``, ``arguments``, ``outcome``
(``ok`` | ``error`` | ``denied``), ``code`` and ``durationMs``.

Guarantees:

* **No secrets** (LG-05): ``arguments`` pass through :meth:`Redactor.redact` (secret keys and
  credential shapes), every other field too (an error message may quote a secret).
* **No stdout** (ST-02): on stdio, stdout is the protocol wire and a stray line corrupts it, so a
  path naming stdout (``-``, ``/dev/stdout``, or any path that is the same file as fd 1) is
  refused at construction and again when the file is opened.
* **Private**: the directory is created with mode 0o700, the file with mode 0o600.
* **Durable lines**: each line is one ``os.write`` on an ``O_APPEND`` descriptor (no buffer),
  so a crash loses at most the line being written; ``fsync=True`` also syncs every line.
* **Bounded**: like ``logging.handlers.RotatingFileHandler``, a write that would take the file
  past ``max_bytes`` first shifts ``path`` → ``path.1`` → … → ``path.<backups>`` (the oldest
  dropped); ``backups=0`` truncates in place. A line is never split across files. Rotation
  assumes one writing process per file.
* **Evidence survives a burst**: a caller must not be able to wipe the record of what it did by
  making many large calls. A line keeps at most ``max_argument_bytes`` of arguments (as
  redacted JSON); larger arguments are replaced by ``null`` and an ``argumentsTruncated``
  object: their size in bytes, the sha256 of that redacted JSON and its first bytes as a
  preview. And rotation never drops a backup whose newest line is younger than
  ``keep_recent`` seconds (an hour by default): a burst makes more backups instead, up to
  ``max_backups`` (then the oldest goes, with a warning on the ``mcpkit.audit`` logger).

Thread-safe (one lock); the file is opened on the first record, and again after :meth:`close`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Self

from orjson import OPT_APPEND_NEWLINE
from orjson import dumps as _orjson_dumps

from mcpkit import _json
from mcpkit.policy.redact import Redactor, default_redactor

__all__ = ["shortened", "STDOUT_NAMES", "AuditLog", "read_lines"]

#: Names that always mean this process's stdout.
STDOUT_NAMES = frozenset({"-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"})

_DIR_MODE = 0o700
_FILE_MODE = 0o600
_OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _fd_stat(fd: int) -> os.stat_result | None:
    try:
        return os.fstat(fd)
    except OSError:
        return None  # closed


def _is_stdout(st: os.stat_result, wire_fds: tuple[int, ...]) -> bool:
    """Whether ``st`` is the file behind stdout (or another protocol descriptor).

    A file that is also stderr is allowed: stdio transports move fd 1 onto stderr once they
    have taken the real stdout for the protocol, and stderr is where logs belong (ST-03).
    """
    if st.st_rdev and os.path.exists(os.devnull) and _same_file(st, os.stat(os.devnull)):
        return False  # /dev/null as stdout and audit log: nothing reaches a wire
    stderr = _fd_stat(2)
    if stderr is not None and _same_file(st, stderr):
        return False
    return any(wire is not None and _same_file(st, wire) for wire in map(_fd_stat, wire_fds))


def _refusal(path: str) -> ValueError:
    return ValueError(
        f"audit log path {path!r} is this process's stdout, which carries only protocol messages on "
        "stdio (ST-02: never write anything else to the wire); use a file path or stderr instead"
    )


class AuditLog:
    """Appends one redacted JSON line per tool call to ``path``; see the module docstring.

    ``wire_fds`` are the descriptors that must never receive a line: fd 1 by default; a stdio
    server that moved the protocol to another descriptor passes that one too.
    ``clock`` returns seconds since the epoch (tests inject one).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_bytes: int = 10 * 1024 * 1024,
        backups: int = 5,
        redactor: Redactor | None = None,
        fsync: bool = False,
        wire_fds: tuple[int, ...] = (1,),
        clock: Callable[[], float] = time.time,
        flush_interval: float = 0.0,
        max_argument_bytes: int = 4096,
        keep_recent: float = 3600.0,
        max_backups: int = 50,
    ) -> None:
        self.path = os.fspath(path)
        if max_argument_bytes < 0 or keep_recent < 0 or max_backups < 0:
            raise ValueError("max_argument_bytes, keep_recent and max_backups must be >= 0 (0: off)")
        #: arguments larger than this (as redacted JSON) are summarised: size, sha256, preview
        self.max_argument_bytes = max_argument_bytes
        #: seconds: a backup whose newest line is younger is kept on rotation, beyond ``backups``
        self.keep_recent = keep_recent
        #: however recent, never more backups than this (a disk budget: max_bytes each)
        self.max_backups = max(max_backups, backups)
        if flush_interval < 0:
            raise ValueError("flush_interval must be >= 0 seconds (0: every line is written at once)")
        #: 0: each record is written before record() returns. > 0: lines are buffered and
        #: written by a background thread at most this many seconds later (and at close and
        #: interpreter exit), which takes the write system call off every tool call; a hard
        #: kill can then lose the last interval's lines.
        self.flush_interval = flush_interval
        # buffered mode: lines queue here (a deque append is atomic, no lock on the call's
        # path) and the flusher writes them, rotating between lines as record() would
        self._queue: deque[bytes] = deque()
        self._flusher: threading.Thread | None = None
        self._wake = threading.Event()
        if max_bytes < 0 or backups < 0:
            raise ValueError("max_bytes and backups must be >= 0 (max_bytes=0 disables rotation)")
        self.max_bytes = max_bytes
        self.backups = backups
        self.fsync = fsync
        self.redactor = redactor or default_redactor()
        self._wire_fds = wire_fds
        self._clock = clock
        self._check_path()
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._size = 0
        self._stamp = (-1, "")  # (millisecond, its formatted time)
        self._date = (-1, "")  # (whole second, its formatted date and time)
        self._names: dict[str, str] = {}

    # -- path checks ----------------------------------------------------------------------

    def _check_path(self) -> None:
        path = self.path
        if not path:
            raise ValueError("audit log path is empty: give a file path")
        if path in STDOUT_NAMES or os.path.realpath(path) in STDOUT_NAMES:
            raise _refusal(path)
        try:
            st = os.stat(path)
        except OSError:
            return  # does not exist yet: checked again once opened
        if _is_stdout(st, self._wire_fds):
            raise _refusal(path)

    def open(self) -> None:
        """Open the file now (creating its directory) rather than at the first line, so a path
        that cannot be written is an error at start-up, not a lost line on every call.
        Raises OSError naming the file."""
        with self._lock:
            if self._fd is not None:
                return
            try:
                self._open()
            except OSError as exc:
                why = exc.strerror or str(exc)
                if isinstance(exc, FileExistsError):  # makedirs met a file where a folder should be
                    why = f"{exc.filename} is not a directory"
                raise OSError(exc.errno, f"cannot open the audit log {self.path}: {why}; "
                              "give a file in a writable directory") from None

    # -- writing --------------------------------------------------------------------------

    def record(self, entry: Mapping[str, Any]) -> None:
        """Append ``entry`` as one JSON line, redacted, ``time`` first unless it has one."""
        try:  # plain JSON only: a set or an object's __json__ would be written unredacted
            clean = self._redact(entry)
            clean = clean if "time" in clean else {"time": self._now(), **clean}
            line = _orjson_dumps(clean, option=_json.OPTIONS)
        except TypeError:
            # Not plain JSON (a set, an object, a huge integer): made plain, then redacted.
            clean = self.redactor.redact(_jsonable(entry))
            clean = clean if "time" in clean else {"time": self._now(), **clean}
            line = _last_resort(clean)
        if self.max_argument_bytes and len(line) > self.max_argument_bytes and "arguments" in clean:
            line = self._capped(dict(clean)) or line
        self._append(line + b"\n")

    def _capped(self, entry: dict[str, Any]) -> bytes | None:
        """The line of ``entry`` with its (redacted) arguments summarised when they are larger
        than max_argument_bytes; None when they are not."""
        try:
            data = _json.dumps(entry["arguments"])
        except TypeError:
            data = _json.dumps(_jsonable(entry["arguments"]))
        if len(data) <= self.max_argument_bytes:
            return None
        entry["arguments"] = None
        entry["argumentsTruncated"] = {
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "preview": data[:_PREVIEW_BYTES].decode("utf-8", "ignore"),
        }
        try:
            return _json.dumps(entry)
        except TypeError:
            return _json.dumps(self.redactor.redact(_jsonable(entry)))

    def _append(self, data: bytes | tuple[Any, ...]) -> None:
        if self.flush_interval:
            queue = self._queue
            queue.append(data)
            if self._flusher is None or len(queue) == _FLUSH_LINES:
                self._kick()
            return
        with self._lock:
            self._write_lines([data])  # type: ignore[list-item]

    def _kick(self) -> None:
        """Buffered mode: start the flusher, or wake it early for a burst (once, as the
        queue reaches _FLUSH_LINES lines)."""
        if self._flusher is None:
            with self._lock:
                if self._flusher is None:
                    self._start_flusher()
        else:
            self._wake.set()  # a burst: write now rather than at the next interval

    def _write_lines(self, lines: list[bytes]) -> None:
        """Write whole lines, rotating before one that would take the file past max_bytes
        (called with the lock held)."""
        if self._fd is None:
            self._open()
        size = self._size
        if not self.max_bytes or size + sum(map(len, lines)) <= self.max_bytes:
            data = b"".join(lines)  # the common case: no rotation within the batch
            self._write(data)
            self._size = size + len(data)
            return
        batch: list[bytes] = []
        for data in lines:
            if size and size + len(data) > self.max_bytes:
                if batch:
                    self._write(b"".join(batch))
                    batch = []
                self._rotate()
                size = self._size
            batch.append(data)
            size += len(data)
        if batch:
            self._write(b"".join(batch))
        self._size = size

    def record_call(
        self, correlation_id: str, principal: str, tool: str, action: str | None, arguments: Any,
        outcome: str, code: str | None, duration_ms: float, parent: str | None = None,
        trace: tuple[str, str] | None = None,
    ) -> None:
        """The line of one tool call, as the policy chain writes it: the same line as
        ``record({...})`` with these fields, built without walking the fixed ones. In
        buffered mode the fields are queued and the line is built by the flusher, in bulk.
        ``trace``: the OpenTelemetry trace and span ids of the call, when it is traced."""
        if self.flush_interval:  # _append, inline: this runs on every policed call
            queue = self._queue
            queue.append((self._clock(), correlation_id, principal, tool, action, arguments, outcome, code,
                           duration_ms, parent, trace))
            if self._flusher is None or len(queue) == _FLUSH_LINES:
                self._kick()
            return
        self._append(self._call_line(self._clock(), correlation_id, principal, tool, action, arguments, outcome,
                                     code, duration_ms, parent, trace))

    def _call_line(
        self, when: float, correlation_id: str, principal: str, tool: str, action: str | None, arguments: Any,
        outcome: str, code: str | None, duration_ms: float, parent: str | None,
        trace: tuple[str, str] | None = None,
    ) -> bytes:
        names = self._names  # principals and tool names repeat: redact each once
        clean_principal = names.get(principal)
        if clean_principal is None:
            clean_principal = self._remember(principal)
        clean_tool = names.get(tool)
        if clean_tool is None:
            clean_tool = self._remember(tool)
        try:
            duration = round(duration_ms * 1000) / 1000  # round(x, 3) formats digits: slower
        except (TypeError, ValueError, OverflowError):  # not a finite number: written as given
            duration = duration_ms
        millis = int(when * 1000)
        stamp = self._stamp
        entry: dict[str, Any] = {
            "time": stamp[1] if stamp[0] == millis else self._stamped(millis),
            "correlationId": correlation_id,
            "principal": clean_principal,
            "tool": clean_tool,
            "action": action,
            "arguments": self.redactor.redact(arguments),
            "outcome": outcome,
            "code": code,
            "durationMs": duration,
        }
        if parent is not None:
            entry["parentCorrelationId"] = parent
        if trace is not None:
            entry["traceId"], entry["spanId"] = trace
        try:  # the common line: orjson alone, newline included
            line = _orjson_dumps(entry, option=_LINE_OPTIONS)
        except TypeError:
            # Not plain JSON (a set, an object with __json__, a huge integer, a lone surrogate):
            # the arguments made plain first, then redacted, so nothing inside one goes unmasked
            entry["arguments"] = self.redactor.redact(_jsonable(arguments))
            line = _last_resort(entry) + b"\n"
        if self.max_argument_bytes and len(line) > self.max_argument_bytes:
            capped = self._capped(entry)
            if capped is not None:
                line = capped + b"\n"
        return line

    def _remember(self, name: str) -> str:
        if len(name) > _NAME_CHARS:
            # a caller-chosen name (an unknown tool's, a nested call's) is not a place for
            # megabytes, in the line or in this cache
            return shortened(name, self.redactor.redact_text)
        clean = self.redactor.redact_text(name)
        if len(self._names) < 4096:  # names can be caller-chosen (a nested call's tool name)
            self._names[name] = clean
        return clean

    def _redact(self, entry: Mapping[str, Any]) -> Mapping[str, Any]:
        """The entry with secrets masked. Only values that can carry one are walked: the
        arguments (by key and by value) and the other strings (by value); numbers, None and
        the fixed-vocabulary fields of the chain's entries cost nothing."""
        redactor = self.redactor
        out: dict[str, Any] | None = None
        for key, value in entry.items():
            if value is None or type(value) in (int, float, bool):
                continue
            if key in _PLAIN_FIELDS and type(value) is str:
                continue
            if redactor.is_secret_key(key):
                clean: Any = redactor.mask
            else:
                clean = redactor.redact_text(value) if type(value) is str else redactor.redact(value)
            if clean is not value:
                if out is None:
                    out = dict(entry)
                out[key] = clean
        return entry if out is None else out

    def flush(self) -> None:
        """Write the buffered lines now."""
        with self._lock:
            self._write_pending()

    def _write_pending(self) -> None:
        # the lines queued when the flush began, in one write: lines that come meanwhile wait for
        # the next one, so a busy server's writer does not chase its calls a few lines at a time
        queue = self._queue
        if not queue:
            return
        popleft = queue.popleft
        call_line = self._call_line
        lines = []
        append = lines.append
        for _ in range(len(queue)):  # only the lock holder takes from the queue: as many as it holds
            item = popleft()
            if type(item) is bytes:
                append(item)
                continue
            # a queued tool call becomes its line here, off the call's path; one that cannot be
            # written must not take the lines queued with it along
            try:
                append(call_line(*item))
            except Exception as exc:  # noqa: BLE001
                _log.error("audit: the line of call %s could not be made: %s", item[1], exc)
                append(_last_resort({"time": self._now(item[0]), "correlationId": item[1], "tool": str(item[3]),
                                     "outcome": item[6], "arguments": None,
                                     "auditError": f"arguments not writable: {type(exc).__name__}"}) + b"\n")
        self._write_lines(lines)

    def _write(self, data: bytes | bytearray) -> None:
        fd = self._fd
        assert fd is not None
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if self.fsync:
            os.fsync(fd)

    def _start_flusher(self) -> None:
        import atexit
        import weakref

        ref = weakref.ref(self)
        interval = self.flush_interval
        wake = self._wake

        def run() -> None:
            while True:
                wake.wait(interval)
                wake.clear()
                log = ref()
                if log is None:
                    return
                try:
                    log.flush()
                except OSError:  # a full disk: keep the lines and try again next time
                    pass
                del log

        self._flusher = threading.Thread(target=run, name="mcpkit-audit-flush", daemon=True)
        self._flusher.start()
        atexit.register(_flush_at_exit, ref)

    def _now(self, when: float | None = None) -> str:
        millis = int((self._clock() if when is None else when) * 1000)
        stamp = self._stamp
        return stamp[1] if stamp[0] == millis else self._stamped(millis)

    def _stamped(self, millis: int) -> str:
        """The time of a new millisecond: its second's text (strftime once a second) and one of
        1,000 suffixes; kept, with the millisecond, as one tuple swapped in whole."""
        second, ms = divmod(millis, 1000)
        date = self._date
        if date[0] != second:
            date = self._date = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
        stamp = self._stamp = (millis, date[1] + _MILLIS[ms])
        return stamp[1]

    def _open(self, *, truncate: bool = False) -> None:
        directory = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(directory):
            os.makedirs(directory, mode=_DIR_MODE, exist_ok=True)
        fd = os.open(self.path, _OPEN_FLAGS | (os.O_TRUNC if truncate else 0), _FILE_MODE)
        st = os.fstat(fd)
        if _is_stdout(st, self._wire_fds):
            os.close(fd)
            raise _refusal(self.path)
        self._fd = fd
        self._size = st.st_size

    def _rotate(self) -> None:
        assert self._fd is not None
        os.close(self._fd)
        self._fd = None
        if self.backups == 0:
            self._open(truncate=True)
            return
        count = 0
        while os.path.exists(f"{self.path}.{count + 1}"):
            count += 1
        now = time.time()  # file times are the system's, whatever clock stamps the lines
        while count >= self.backups:
            oldest = f"{self.path}.{count}"
            recent = now - _mtime(oldest) < self.keep_recent
            if recent and count < self.max_backups:
                break  # recent history is evidence: this burst gets more backups instead
            if recent:
                _log.warning("audit log %s: %d backups written within %.0f s; dropping the oldest "
                             "(raise max_backups to keep more)", self.path, count, self.keep_recent)
            os.remove(oldest)
            count -= 1
        for n in range(count, 0, -1):
            os.replace(f"{self.path}.{n}", f"{self.path}.{n + 1}")
        if os.path.exists(self.path):
            os.replace(self.path, f"{self.path}.1")
        self._open()

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Close the file; a later :meth:`record` opens it again."""
        with self._lock:
            self._write_pending()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AuditLog({self.path!r}, max_bytes={self.max_bytes}, backups={self.backups})"

    @classmethod
    def from_env(
        cls,
        default_path: str | os.PathLike[str] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> AuditLog | None:
        """An audit log configured by ``MCPKIT_AUDIT_LOG`` (path), ``MCPKIT_AUDIT_MAX_BYTES``,
        ``MCPKIT_AUDIT_BACKUPS``, ``MCPKIT_AUDIT_MAX_ARGUMENT_BYTES``, ``MCPKIT_AUDIT_KEEP_RECENT``
        (seconds) and ``MCPKIT_AUDIT_MAX_BACKUPS``; ``None`` when neither the environment nor
        ``default_path`` names a file. ``options`` go to the constructor."""
        from ..switches import read

        env = os.environ if environ is None else environ
        path = read("MCPKIT_AUDIT_LOG", env) or default_path
        if not path:
            return None
        for name, option in (("MCPKIT_AUDIT_MAX_BYTES", "max_bytes"), ("MCPKIT_AUDIT_BACKUPS", "backups"),
                             ("MCPKIT_AUDIT_MAX_ARGUMENT_BYTES", "max_argument_bytes"),
                             ("MCPKIT_AUDIT_KEEP_RECENT", "keep_recent"),
                             ("MCPKIT_AUDIT_MAX_BACKUPS", "max_backups")):
            value = read(name, env)
            if value is not None:
                options[option] = value
        return cls(path, **options)


#: fields the policy chain fills from its own vocabulary (ids, tool names, outcome words,
#: E_* codes, registered action names): never a secret, so not scanned
_PLAIN_FIELDS = frozenset({"correlationId", "parentCorrelationId", "action", "outcome", "code"})

#: buffered lines are written at once beyond this many, whatever the interval
_FLUSH_LINES = 512
#: a line's milliseconds and zone, by millisecond: one concatenation instead of a format
_MILLIS = tuple(f".{ms:03d}Z" for ms in range(1000))
_LINE_OPTIONS = _json.OPTIONS | OPT_APPEND_NEWLINE
#: how much of summarised arguments a line keeps, as a preview
_PREVIEW_BYTES = 256
#: the longest principal or tool name a line keeps whole (tool names are at most 128, SEP-986)
_NAME_CHARS = 256

_log = logging.getLogger("mcpkit.audit")


def shortened(name: str, redact_text: Callable[[str], str]) -> str:
    """A name, URI or principal as an audit line keeps it: whole up to 256 characters; a longer
    (caller-chosen) one as its start, redacted with some text after it so that a secret cut in
    two is masked whole, and its length."""
    if len(name) <= _NAME_CHARS:
        return name
    clean = redact_text(name[:_NAME_CHARS + _PREVIEW_BYTES])[:_NAME_CHARS]
    return f"{clean}…[{len(name)} characters]"


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _flush_at_exit(ref: Any) -> None:
    log = ref()
    if log is not None:
        try:
            log.flush()
        except OSError:
            pass


def _jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` as plain JSON: sets and tuples as lists, an object's ``__json__`` as what it
    returns, anything else JSON cannot hold as its str()."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if depth > 64:
        return "…"
    if isinstance(value, Mapping):
        return {k if isinstance(k, (str, int, float, bool)) else str(k): _jsonable(v, depth + 1)
                for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v, depth + 1) for v in value]
    to_json = getattr(value, "__json__", None)
    if callable(to_json):
        try:
            return _jsonable(to_json(), depth + 1)
        except Exception:  # noqa: BLE001 - a broken hook: the object's str() instead
            pass
    return str(value)


def _last_resort(entry: Any) -> bytes:
    """An entry already plain JSON as a line, whatever its strings and integers: huge integers
    exact, and a lone surrogate (what os.fsdecode makes of a name that is not UTF-8) written as
    the text ``\\udcff``, so the line stays UTF-8 that every JSON reader accepts."""
    try:
        return _json.dumps(entry)
    except TypeError:
        return _json.dumps(_no_surrogates(entry))


def _no_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_no_surrogates(k): _no_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_surrogates(v) for v in value]
    return value


def read_lines(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The entries of an audit log file, in order (blank lines skipped)."""
    with open(path, "rb") as f:
        return [_json.loads(line) for line in f if line.strip()]
