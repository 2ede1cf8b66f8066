"""A user's mistake is one line with the fix, never a traceback (the ``mcpkit`` command).

:func:`explain` turns the exceptions a configuration mistake raises (a bad environment value, a
tokens file others can read, a missing root, an optional dependency not installed) into that line;
``mcpkit -v`` shows the traceback instead.
"""

from __future__ import annotations

from typing import Any

__all__ = ["explain", "OPTIONAL_DEPENDENCIES", "missing_dependency"]

#: importable name -> (what needs it, the pip extra that installs it)
OPTIONAL_DEPENDENCIES: dict[str, tuple[str, str]] = {
    "uvicorn": ("serving HTTP", "http"),
    "httpx": ("talking to an HTTP server", "client"),
    "redis": ("MCPKIT_STORE=redis://", "redis"),
    "jwt": ("--auth jwt", "auth"),
    "cryptography": ("--auth jwt", "auth"),
    "pydantic": ("a tool parameter typed with a pydantic model", "pydantic"),
    "watchfiles": ("mcpkit dev --reload", "reload"),
}


def missing_dependency(name: str) -> str | None:
    """The fix for a missing optional module, or None when ``name`` is not one of ours."""
    top = name.split(".")[0]
    if top not in OPTIONAL_DEPENDENCIES:
        return None
    need, extra = OPTIONAL_DEPENDENCIES[top]
    return f"{need} needs {top}, which is not installed: pip install 'mcpkit[{extra}]'"


def explain(exc: BaseException) -> str | None:
    """The one line for a user's mistake, or None for an unexpected error (a bug to report)."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return missing_dependency(exc.name)
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
