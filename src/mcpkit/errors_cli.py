"""A user's mistake is one line with the fix, never a traceback (the ``mcpkit`` command).

:func:`explain` turns the exceptions a configuration mistake raises (a bad environment value, a
tokens file others can read, a missing root, an optional dependency not installed) into that line;
``mcpkit -v`` shows the traceback instead.
"""

from __future__ import annotations

from typing import Any

__all__ = ["explain", "missing_dependency"]


def missing_dependency(exc: ModuleNotFoundError) -> str | None:
    """The fix for a missing optional package, or None when it is not one an extra installs.
    mcpkit's own imports of them say which extra (_extras.needs); what is left is a module the
    server's code imports (``import re2``, ``from pydantic import BaseModel``)."""
    from ._extras import MissingExtra, extra_of

    if isinstance(exc, MissingExtra):
        return str(exc)
    extra = extra_of(exc.name or "")
    if extra is None:
        return None
    return f"{exc.name} is not installed: pip install 'mcpkit[{extra}]'"


def explain(exc: BaseException) -> str | None:
    """The one line for a user's mistake, or None for an unexpected error (a bug to report)."""
    if isinstance(exc, ModuleNotFoundError):
        return missing_dependency(exc)
    if isinstance(exc, PermissionError):
        return str(exc) if not exc.filename else f"{exc.filename}: {exc.strerror or exc}"
    if isinstance(exc, FileNotFoundError):
        return f"{exc.filename}: no such file or directory" if exc.filename else str(exc)
    if isinstance(exc, NotADirectoryError | IsADirectoryError):
        return f"{exc.filename}: {exc.strerror}"
    name = type(exc).__name__
    if isinstance(exc, ValueError | TypeError) or name in ("StoreUnavailable", "SchemaError", "BindError"):
        return str(exc) or name
    return None


def describe_unexpected(exc: BaseException) -> str:
    where: Any = exc.__traceback__
    while where is not None and where.tb_next is not None:
        where = where.tb_next
    place = f" at {where.tb_frame.f_code.co_filename}:{where.tb_lineno}" if where is not None else ""
    return f"{type(exc).__name__}: {exc}{place}"
