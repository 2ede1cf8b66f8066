"""A project-workspace server: list, read, search, write, move and delete the files of one
directory tree, safely.

    mcpkit serve examples/workspace.py --root path/to/project
    MCPKIT_ROOT=path/to/project python examples/workspace.py

Every guard rail of mcpkit.policy is on:

- gates: each tool says whether it reads, writes or destroys. ``MCPKIT_READ_ONLY=1`` keeps the
  readers only; ``delete`` and overwriting need ``MCPKIT_ALLOW_DESTRUCTIVE=1``. A gated tool is
  neither listed nor callable, not even through ``batch`` or an action of ``files``;
- the tool contract: every result is an ``{ok, summary, result, error, meta}`` envelope;
- an audit trail in ``<root>/.mcpkit/audit.log``, secrets redacted;
- rate limits (600 calls a minute, 60 writes a minute), timeouts, size limits, terminal
  escape sequences stripped from what the tools return;
- paths confined to the root (``SandboxPath``): ``..`` and symlinks that lead out are refused,
  glob patterns cannot climb out, hard links are refused, and every file operation goes through
  directory descriptors (O_NOFOLLOW), so swapping a directory for a symlink mid-call fails closed;
- ``search`` with ``regex=true`` uses RE2, a linear-time engine (``pip install mcpkit[regex]``):
  no pattern can make it backtrack for hours; and it runs in a worker process
  (``isolation="process"``) that is killed at its 10 s deadline whatever it is doing;
- ``files``, a manager tool with one action per operation;
- ``open_in_editor``, which needs an editor plugin listening on a Unix socket
  (``MCPKIT_EDITOR_SOCKET``, default ``<root>/.mcpkit/editor.sock``): it is listed only while
  the editor is reachable, and clients are told when that changes.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mcpkit import Context, Server, ToolError
from mcpkit.policy import Bridge, ExistingSandboxPath, Outcome, Policy, SandboxPath


def _root_from_argv() -> None:
    """``--root DIR`` when run as a script; ``mcpkit serve --root`` sets MCPKIT_ROOT itself."""
    if "--root" in sys.argv:
        at = sys.argv.index("--root")
        if at + 1 < len(sys.argv):
            os.environ["MCPKIT_ROOT"] = os.path.abspath(sys.argv[at + 1])


_root_from_argv()
if not os.environ.get("MCPKIT_ROOT"):
    raise SystemExit("workspace: give the project directory with --root DIR or MCPKIT_ROOT=DIR")

policy = Policy.secure(contract=True)
ROOT = policy.sandbox.roots[0]
server = Server(
    "workspace",
    "1.0.0",
    policy=policy,
    instructions="Files of one project. Paths are relative to the project root.",
)

MAX_READ = 200_000
MAX_LIST = 1_000


@dataclass
class FileInfo:
    path: str
    kind: Literal["file", "directory", "other"]
    size: int


@dataclass
class Match:
    path: str
    line: int
    text: str


def _info(path: Path) -> FileInfo:
    st = path.lstat()
    kind: Literal["file", "directory", "other"] = (
        "directory" if path.is_dir() else "file" if path.is_file() else "other"
    )
    return FileInfo(policy.sandbox.relative(path), kind, st.st_size if kind == "file" else 0)


def _hidden(path: Path) -> bool:
    return ".mcpkit" in path.relative_to(ROOT).parts  # the audit trail is not the model's to read


# ---------------------------------------------------------------------------------------- readers


@server.tool(read_only=True, open_world=False)
def list_files(path: SandboxPath = Path("."), pattern: str = "*", recursive: bool = False) -> list[FileInfo]:
    """List the entries of a directory.

    Args:
        path: the directory, relative to the project root.
        pattern: a glob on the entry name, e.g. "*.py" (relative; ".." is refused).
        recursive: descend into subdirectories.
    """
    if not path.is_dir():
        raise ToolError(f"{policy.sandbox.relative(path)!r} is not a directory.", code="E_NOT_FOUND",
                        suggested_fix="List its parent directory to see what exists.")
    # a SandboxPath globs through the sandbox: the pattern cannot climb out, results stay inside
    entries = path.rglob(pattern) if recursive else path.glob(pattern)
    out = []
    for entry in entries:
        if _hidden(entry) or (entry.is_symlink() and not entry.exists()):
            continue  # the audit trail, and links that lead outside (or nowhere)
        out.append(_info(entry))
        if len(out) >= MAX_LIST:
            break
    return out


@server.tool(read_only=True, open_world=False, max_result_bytes=MAX_READ + 4_000)
def read_file(path: SandboxPath) -> str:
    """Read a text file (UTF-8) of the project."""
    if _hidden(path):
        raise ToolError("That file is not part of the project.", code="E_PERMISSION_DENIED")
    if not path.is_file():
        raise ToolError(f"{policy.sandbox.relative(path)!r} is not a file.", code="E_NOT_FOUND",
                        suggested_fix="List the directory to see which files exist.")
    data = policy.sandbox.read_bytes(path, MAX_READ + 1)
    text = data[:MAX_READ].decode("utf-8", errors="replace")
    if len(data) > MAX_READ:
        text += f"\n[... truncated at {MAX_READ} bytes]"
    return text


MAX_PATTERN = 1_000


def _matcher(query: str, regex: bool):  # type: ignore[no-untyped-def]
    """A line predicate. Regular expressions run on RE2, whose matching time is linear in the
    text whatever the pattern: Python's re backtracks, and a pattern like (\\w+\\s?)*$ on a
    long identifier would run for hours."""
    if not regex:
        return lambda line: query in line
    if len(query) > MAX_PATTERN:
        raise ToolError(f"The regular expression is longer than {MAX_PATTERN} characters.",
                        code="E_SCHEMA_VALIDATION", suggested_fix="Use a shorter pattern.")
    try:
        import re2  # google-re2: mcpkit[regex]
    except ImportError:
        raise ToolError("Regular-expression search is not available on this server: it needs the "
                        "linear-time RE2 engine.", code="E_UNSUPPORTED",
                        suggested_fix="Search with regex=false, or ask the operator to install "
                                      "mcpkit[regex] (google-re2).") from None
    try:
        return re2.compile(query).search
    except re2.error as exc:
        raise ToolError(f"Invalid regular expression: {exc}.", code="E_SCHEMA_VALIDATION",
                        suggested_fix="RE2 syntax has no backreferences or lookaround; escape special "
                                      "characters, or search with regex=false.") from None


@server.tool(read_only=True, open_world=False, timeout=10.0, isolation="process")
def search(query: str, path: SandboxPath = Path("."), regex: bool = False, max_results: int = 100) -> list[Match]:
    """Find lines containing ``query`` in the project's text files.

    Args:
        query: the text (or, with regex=true, the RE2 regular expression) to find.
        path: where to look, a file or a directory.
        regex: treat query as a regular expression (RE2 syntax).
        max_results: stop after this many matches.
    """
    matches = _matcher(query, regex)
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file() and not p.is_symlink()]
    found: list[Match] = []
    for file in files:
        if _hidden(file):
            continue
        try:
            with file.open("r", encoding="utf-8", errors="strict") as fh:
                for number, line in enumerate(fh, 1):
                    if matches(line):
                        found.append(Match(policy.sandbox.relative(file), number, line.rstrip("\n")[:300]))
                        if len(found) >= max_results:
                            return found
        except (UnicodeDecodeError, OSError, ToolError):
            continue  # binary, unreadable, a hard link or raced away: not a text file to search
    return found


# ---------------------------------------------------------------------------------------- writers


@server.tool(destructive=False, idempotent=False, open_world=False, rate_limit="60/min")
def write_file(path: SandboxPath, content: str) -> Outcome:
    """Create a new text file (UTF-8); refuses to replace an existing one."""
    return Outcome(_write(path, content, overwrite=False), f"created {policy.sandbox.relative(path)}")


def _write(path: Path, content: str, overwrite: bool) -> FileInfo:
    if _hidden(path):
        raise ToolError("That location is reserved for the server.", code="E_PERMISSION_DENIED")
    if path.is_dir():
        raise ToolError(f"{policy.sandbox.relative(path)!r} is a directory.", code="E_UNSUPPORTED")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # "x" creates or fails, atomically: no check-then-write window
        with path.open("w" if overwrite else "x", encoding="utf-8") as fh:
            fh.write(content)
    except FileExistsError:
        raise ToolError(f"{policy.sandbox.relative(path)!r} already exists.", code="E_PERMISSION_DENIED",
                        suggested_fix="Choose another name, or use files with action=write and overwrite=true.") from None
    return _info(path)


@server.tool(destructive=False, open_world=False, rate_limit="60/min")
def move(source: ExistingSandboxPath, destination: SandboxPath) -> FileInfo:
    """Move or rename a file or directory; refuses to replace an existing destination."""
    if _hidden(source) or _hidden(destination):
        raise ToolError("That location is reserved for the server.", code="E_PERMISSION_DENIED")
    if destination.exists() or destination.is_symlink():
        raise ToolError(f"{policy.sandbox.relative(destination)!r} already exists.", code="E_PERMISSION_DENIED",
                        suggested_fix="Move to a new name, or delete the destination first.")
    if source == ROOT:
        raise ToolError("The project root cannot be moved.", code="E_PERMISSION_DENIED")
    destination.parent.mkdir(parents=True, exist_ok=True)
    moved = source.rename(destination)  # through directory descriptors: a swapped parent fails closed
    return _info(moved)


@server.tool(destructive=True, open_world=False, rate_limit="60/min")
def delete(path: ExistingSandboxPath) -> Outcome:
    """Delete a file or an empty directory."""
    if _hidden(path) or path == ROOT:
        raise ToolError("That location cannot be deleted.", code="E_PERMISSION_DENIED")
    if path.is_dir() and not path.is_symlink():
        if any(path.iterdir()):
            raise ToolError(f"{policy.sandbox.relative(path)!r} is not empty.", code="E_UNSUPPORTED",
                            suggested_fix="Delete its entries first.")
        path.rmdir()
    else:
        path.unlink()
    return Outcome(None, f"deleted {policy.sandbox.relative(path)}")


# ---------------------------------------------------------------------------------------- one tool, many actions

files = server.manager("files", description="Work with the project's files: one action per operation.")
files.action(list_files, name="list", read_only=True, open_world=False)
files.action(read_file, name="read", read_only=True, open_world=False)
files.action(search, name="search", read_only=True, open_world=False)


@files.action(name="write", destructive=True, open_world=False)
def files_write(path: SandboxPath, content: str, overwrite: bool = False) -> FileInfo:
    """Write a text file; with overwrite=true an existing file is replaced."""
    return _write(path, content, overwrite)


files.action(move, name="move", destructive=False, open_world=False)
files.action(delete, name="delete", destructive=True, open_world=False)


# ---------------------------------------------------------------------------------------- batches


@dataclass
class Call:
    name: str
    arguments: dict


@server.tool(destructive=False, open_world=False)
def batch(calls: list[Call], ctx: Context) -> list[dict]:
    """Run several tool calls in order; each is checked exactly as if called on its own."""
    if len(calls) > 50:
        raise ToolError("At most 50 calls per batch.", code="E_SCHEMA_VALIDATION")
    results = []
    for call in calls:
        result = ctx.call_tool(call.name, call.arguments)
        results.append(result.get("structuredContent") or {"ok": not result.get("isError"),
                                                            "content": result.get("content")})
    return results


# ---------------------------------------------------------------------------------------- the editor


def _editor_socket() -> str:
    return os.environ.get("MCPKIT_EDITOR_SOCKET") or str(ROOT / ".mcpkit" / "editor.sock")


def _editor_connect() -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(2.0)
    try:
        sock.connect(_editor_socket())
    except OSError:
        sock.close()
        raise
    return sock


#: one exchange at a time on the editor's socket: the bridge's probes (on its own thread) and the
#: tools' calls share it, and two requests in flight would read each other's replies
_EDITOR_EXCHANGE = threading.Lock()


def _editor_request(sock: socket.socket, message: bytes) -> bytes:
    with _EDITOR_EXCHANGE:
        sock.sendall(message + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError("the editor closed the connection")
            reply += chunk
        return reply.strip()


_BACKOFF_MAX = float(os.environ.get("MCPKIT_EDITOR_BACKOFF_MAX", "10.0"))
editor = Bridge(
    "editor",
    _editor_connect,
    probe=lambda sock: _editor_request(sock, b'{"method":"ping"}') == b'{"ok":true}',
    close=lambda sock: sock.close(),
    probe_interval=float(os.environ.get("MCPKIT_EDITOR_PROBE_INTERVAL", "2.0")),
    backoff_initial=min(0.5, _BACKOFF_MAX),
    backoff_max=_BACKOFF_MAX,
)


@server.tool(destructive=False, open_world=False, requires=editor)
def open_in_editor(path: ExistingSandboxPath, line: int = 1) -> str:
    """Show a file in the user's editor, at a line."""
    import json

    message = json.dumps({"method": "open", "path": str(path), "line": line}).encode()
    reply = editor.call(_editor_request, message)
    if reply != b'{"ok":true}':
        raise ToolError("The editor refused to open the file.", code="E_UNSUPPORTED")
    return f"opened {policy.sandbox.relative(path)} at line {line}"


editor.start()

if __name__ == "__main__":
    server.run()
