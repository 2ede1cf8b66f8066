"""The server process behind ``mcpkit dev --reload``: ``mcpkit serve TARGET`` on stdio, run by
the dev process (dev/attach.py) and restarted by it when one of the server's own files changes.

It also writes, to the ``--state`` file, what that process cannot see from outside: the files of
the watched folder this server imported (only those restart it) and, when it did not load, why,
as ``file:line: Type: message`` at the deepest line of the watched folder the error passed
through (the developer's own line, not importlib's).

    python -m mcpkit.dev.child --state FILE --watched DIR [--policy] [--read-only] [--root DIR] TARGET
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from typing import Any

__all__ = ["main", "load_error", "own_files"]


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def own_files(watched: str) -> list[str]:
    """The files under ``watched`` that this process imported (its modules' sources)."""
    folder = os.path.realpath(watched)
    found = set()
    for module in list(sys.modules.values()):
        source = getattr(module, "__file__", None)
        if isinstance(source, str):
            path = os.path.realpath(source)
            if _inside(path, folder):
                found.add(path)
    return sorted(found)


def load_error(exc: BaseException, watched: str) -> tuple[str, str | None]:
    """(the one line saying why the server did not load, the file it points at or None)."""
    folder = os.path.realpath(watched)
    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SystemExit):  # a TargetError or another one-line refusal: said already
        message = str(exc.code).removeprefix("mcpkit: ")
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        path = os.path.realpath(exc.filename)
        return f"{path}:{exc.lineno}: {type(exc).__name__}: {exc.msg}", path
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _inside(os.path.realpath(f.filename), folder)]
    if not frames:
        return message, None
    last = frames[-1]
    path = os.path.realpath(last.filename)
    return f"{path}:{last.lineno}: {message}", path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcpkit.dev.child")
    parser.add_argument("target", nargs="?")
    parser.add_argument("--state", required=True)
    parser.add_argument("--watched", required=True)
    parser.add_argument("--policy", action="store_true")
    parser.add_argument("--read-only", action="store_true")
    parser.add_argument("--root", action="append")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from ..cli_serving import policy_env, policy_flags_apply
    from ..targets import resolve
    from ..transports.stdio import guard_stdout, run_stdio

    from ..server.details import show

    show()  # the developer is the client: internal errors name the exception and its line
    out_fd = guard_stdout()  # ST-02, as under mcpkit serve: before the user's module is imported
    error: str | None = None
    refused = False  # a one-line refusal (a flag or switch that cannot apply), not the code failing
    extra: list[str] = []
    server: Any = None
    stage = "flags"
    try:
        policy_env(args)
        stage = "load"
        server = resolve(args.target).load()
        stage = "flags"
        policy_flags_apply(server, args)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure to load is the developer's to see
        error, where = load_error(exc, args.watched)
        extra = [where] if where else []
        # a flag that cannot apply, or a TARGET that names no server: not the code failing
        refused = stage == "flags" or (isinstance(exc, SystemExit) and where is None)
        if refused and not isinstance(exc, SystemExit):
            error = str(exc)
    with open(args.state, "w", encoding="utf-8") as out:
        json.dump({"files": sorted({*own_files(args.watched), *extra}), "error": error, "refused": refused}, out)
    if error is not None:
        return 2  # the dev process says why, once, in its terminal and on the page
    from ..startup import announce, startup_line

    announce(startup_line(server, "stdio"))
    run_stdio(server, out_fd=out_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
