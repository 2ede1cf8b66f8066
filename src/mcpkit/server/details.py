"""Whether an internal error's answer names the exception and the line it came from.

In production it does not: a handler's exception is an opaque ``-32603`` (or, for a tool, an
``isError`` result, TL-10) carrying only its correlation id, which the server's log line about it
names with the traceback; a message could otherwise show a client paths, queries or secrets. In
development (``mcpkit dev``, ``mcpkit serve -v``) the developer is the client: the answer also
says ``Type: message at file:line``, the deepest line outside mcpkit, so the page or ``mcpkit
call`` shows where to look without a trip to the log.
"""

from __future__ import annotations

import os
import traceback

__all__ = ["describe", "show"]

_shown = False
_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # mcpkit's own package


def show(on: bool = True) -> None:
    """Name the exception in internal errors from now on (this process: a development server)."""
    global _shown
    _shown = on


def describe(exc: BaseException) -> str | None:
    """``Type: message at file:line`` while :func:`show` is on, else None."""
    if not _shown:
        return None
    frames = traceback.extract_tb(exc.__traceback__)
    theirs = [f for f in frames if not os.path.abspath(f.filename).startswith(_OWN + os.sep)]
    where = (theirs or frames)[-1:]
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return f"{text} at {where[0].filename}:{where[0].lineno}" if where else text
