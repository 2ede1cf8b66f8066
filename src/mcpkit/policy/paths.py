"""Path parameters confined to a sandbox: ``SandboxPath`` and ``confined(sandbox)``.

    @server.tool(read_only=True, destructive=False, open_world=False)
    def read(path: SandboxPath) -> str:
        return path.read_text()

The client sends a string (the inputSchema says ``type: string``); before the handler runs it
becomes a :class:`ConfinedPath` (a ``pathlib.Path``) inside one of the sandbox roots, resolved
with realpath, or the call is refused with E_PERMISSION_DENIED (TL-11). ``SandboxPath`` uses the
server's policy sandbox; ``confined(my_sandbox)`` names one explicitly.

A path checked once can be swapped afterwards (a parent directory replaced by a symlink out),
so a ConfinedPath does its file operations through its sandbox: ``open``, ``read_text``,
``read_bytes``, ``write_text``, ``write_bytes``, ``iterdir``, ``glob``, ``rglob``, ``stat``,
``lstat`` (and so ``exists``, ``is_file``, ``is_dir``, ``is_symlink``), ``mkdir``, ``rename``,
``replace``, ``unlink`` and ``rmdir`` walk from the root through directory descriptors with
O_NOFOLLOW and fail closed on a race (policy/sandbox.py). Paths derived from one (``p / "x"``,
``p.parent``, the entries of ``iterdir``) are confined the same way.

``file://`` resources (RS-06): on a server whose policy has a sandbox, reading or subscribing to
a resource whose URI is ``file:`` passes :class:`FileResourceStep` first: the URI's path,
percent-decoded and resolved with realpath (``..`` and symlinks followed), must lie inside the
sandbox roots (``Sandbox.check_uri``), whether the resource is static or a template's match,
and the URI may have no query or fragment (a template would hand them to the handler as path
text); else the request is refused with -32602 before the handler runs. With no roots configured every
``file:`` resource is refused: the check fails closed.
"""

from __future__ import annotations

import contextvars
import pathlib
from typing import Annotated, Any

from ..protocol.errors import E_PERMISSION_DENIED, INTERNAL_ERROR, McpError, ToolError, handler_error

__all__ = ["ACTIVE_SANDBOX", "ConfinedPath", "ExistingSandboxPath", "FileResourceStep", "SandboxPath", "SandboxUri",
           "confined", "is_file_resource"]

#: the sandbox of the server whose call is being bound (set by policy/chain.py around binding)
ACTIVE_SANDBOX: contextvars.ContextVar[Any] = contextvars.ContextVar("mcpkit_sandbox", default=None)


_BASE: Any = type(pathlib.Path())


class _Derived:
    """Python 3.11's pathlib makes every derived path (``p / "x"``, ``p.parent``, the entries
    of a listing) with ``_from_parsed_parts``: on an instance it keeps the sandbox."""

    def __get__(self, obj: Any, cls: Any) -> Any:
        make = _BASE._from_parsed_parts.__func__
        if obj is None:
            return make.__get__(cls, type(cls))
        sandbox = obj._sandbox

        def derived(*args: Any) -> Any:
            path = make(cls, *args)
            path._sandbox = sandbox
            return path

        return derived


class ConfinedPath(_BASE):  # type: ignore[misc, valid-type]
    """A path inside a sandbox whose file operations go through the sandbox (see the module
    docstring): a race fails closed instead of leading outside. Everything else is Path's."""

    _sandbox: Any = None

    if not hasattr(_BASE, "with_segments"):  # Python 3.11; 3.12+ calls with_segments
        _from_parsed_parts = _Derived()

    def with_segments(self, *segments: Any) -> Any:
        path = type(self)(*segments)
        path._sandbox = self._sandbox
        return path

    @classmethod
    def _make(cls, path: Any, sandbox: Any) -> ConfinedPath:
        made = cls(path)
        made._sandbox = sandbox
        return made

    def __reduce__(self) -> Any:
        return (ConfinedPath._make, (str(self), self._sandbox))  # pickled with its sandbox (isolation)

    def _box(self) -> Any:
        sandbox = self._sandbox
        if sandbox is None:
            raise RuntimeError("this ConfinedPath has no sandbox; make paths with Sandbox or SandboxPath")
        return sandbox

    # -- file operations, through descriptors ----------------------------------------------

    def open(self, mode: str = "r", buffering: int = -1, encoding: str | None = None,  # type: ignore[override]
             errors: str | None = None, newline: str | None = None) -> Any:
        if "b" not in mode and encoding is None:
            encoding = "utf-8"
        return self._box().open(self, mode, buffering=buffering, encoding=encoding, errors=errors, newline=newline)

    def read_bytes(self) -> bytes:
        return self._box().read_bytes(self)  # type: ignore[no-any-return]

    def read_text(self, encoding: str | None = None, errors: str | None = None) -> str:
        return self._box().read_text(self, encoding or "utf-8", errors or "strict")  # type: ignore[no-any-return]

    def write_bytes(self, data: Any) -> int:
        return self._box().write_bytes(self, bytes(memoryview(data)))  # type: ignore[no-any-return]

    def write_text(self, data: str, encoding: str | None = None, errors: str | None = None,
                   newline: str | None = None) -> int:
        if not isinstance(data, str):
            raise TypeError(f"data must be str, not {type(data).__name__}")
        with self.open("w", encoding=encoding, errors=errors, newline=newline) as f:
            return f.write(data)  # type: ignore[no-any-return]

    def iterdir(self) -> Any:
        return self._box().iterdir(self)

    def glob(self, pattern: str) -> Any:  # type: ignore[override]
        return self._box().glob(self, pattern)

    def rglob(self, pattern: str) -> Any:  # type: ignore[override]
        return self._box().glob(self, pattern, recursive=True)

    def stat(self, *, follow_symlinks: bool = True) -> Any:
        return self._box().stat(self, follow_symlinks=follow_symlinks)

    def lstat(self) -> Any:
        return self._box().stat(self, follow_symlinks=False)

    def mkdir(self, mode: int = 0o777, parents: bool = False, exist_ok: bool = False) -> None:
        self._box().mkdir(self, parents=parents, exist_ok=exist_ok)

    def rename(self, target: Any) -> Any:
        sandbox = self._box()
        sandbox.rename(self, target)
        return ConfinedPath._make(sandbox.resolve(target), sandbox)

    replace = rename  # os.rename replaces an existing file on POSIX, as Path.replace does

    def unlink(self, missing_ok: bool = False) -> None:
        try:
            self._box().unlink(self)
        except ToolError as exc:
            if not (missing_ok and exc.code == "E_NOT_FOUND"):
                raise

    def rmdir(self) -> None:
        self._box().rmdir(self)


class _Confine:
    __slots__ = ("sandbox", "must_exist")

    def __init__(self, sandbox: Any = None, must_exist: bool = False) -> None:
        self.sandbox = sandbox
        self.must_exist = must_exist

    def __mcp_load__(self, value: Any) -> pathlib.Path:
        sandbox = self.sandbox if self.sandbox is not None else ACTIVE_SANDBOX.get()
        if sandbox is None:
            raise ToolError(
                "This server has no sandbox configured, so it accepts no paths.",
                code=E_PERMISSION_DENIED,
                suggested_fix="The server's operator must configure sandbox roots "
                "(Policy(sandbox=...) or MCPKIT_ROOT).",
            )
        return ConfinedPath._make(sandbox.resolve(value, must_exist=self.must_exist), sandbox)

    def __repr__(self) -> str:
        return f"confined({self.sandbox!r}, must_exist={self.must_exist})"


class _ConfineUri(_Confine):
    __slots__ = ()

    def __mcp_load__(self, value: Any) -> str:  # type: ignore[override]
        sandbox = self.sandbox if self.sandbox is not None else ACTIVE_SANDBOX.get()
        if sandbox is None:
            raise ToolError(
                "This server has no sandbox configured, so it accepts no URIs.",
                code=E_PERMISSION_DENIED,
                suggested_fix="The server's operator must configure a sandbox (Policy(sandbox=...) or MCPKIT_ROOT).",
            )
        result: str = sandbox.check_uri(value, must_exist=self.must_exist)
        return result


def confined(sandbox: Any = None, *, must_exist: bool = False) -> Any:
    """``Annotated[Path, confined(sandbox)]``: a path parameter confined to ``sandbox``'s roots."""
    return Annotated[pathlib.Path, _Confine(sandbox, must_exist)]


#: a path inside the server's sandbox (it need not exist yet: a write target)
SandboxPath = Annotated[pathlib.Path, _Confine()]
#: a path inside the server's sandbox that must exist (E_NOT_FOUND otherwise)
ExistingSandboxPath = Annotated[pathlib.Path, _Confine(must_exist=True)]
#: a URI whose scheme the sandbox allows (``Sandbox(schemes=...)``, "file" by default); a
#: ``file:`` URI must also point inside the roots. The handler gets the URI string unchanged.
SandboxUri = Annotated[str, _ConfineUri()]


# ------------------------------------------------------------------------- file:// resources (RS-06)


def is_file_resource(item: Any) -> bool:
    """Whether a resource (its URI) or a resource template (its literal scheme) is ``file:``."""
    uri = getattr(item, "uri", None)
    if uri is None:
        template = getattr(item, "template", None)
        uri = getattr(template, "template", None)
    return isinstance(uri, str) and uri[:5].lower() == "file:"


class FileResourceStep:
    """RS-06: a ``file:`` resource is read (or subscribed to) only inside the sandbox roots.

    A guard (server/pipeline.py) for ``resources/read`` and ``resources/subscribe`` of the
    ``file:`` resources and templates of a server whose policy has a sandbox (policy/layer.py).
    The URI the client asked for is checked, not the template's variables: ``file:///{+path}``
    matched by ``file:///srv/docs/%2e%2e/%2e%2e/etc/passwd`` is ``/etc/passwd``, refused.
    """

    order = 15  # after the scopes, before anything that runs or binds
    __slots__ = ("sandbox",)

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox

    def check(self, cc: Any) -> None:
        uri = cc.name
        try:
            if "?" in uri or "#" in uri:
                # a file is named by its path alone (RFC 8089); a query or fragment is not part
                # of the path checked, yet a template hands it to the handler as path text
                raise ToolError("a file: URI takes no query or fragment.", code=E_PERMISSION_DENIED,
                                suggested_fix="Name the file by its path alone; percent-encode ? and # in names.")
            self.sandbox.check_uri(uri)
        except ToolError as exc:
            refusal = ToolError(f"File resource {uri!r} is refused: {exc.message}", code=exc.code,
                                details={"uri": uri}, suggested_fix=exc.suggested_fix)
            raise handler_error(refusal, cc.request.revision.resource_not_found, uri=uri) or McpError(
                INTERNAL_ERROR, refusal.message) from None
        except (ValueError, OSError) as exc:  # a misconfigured MCPKIT_ROOT: nothing can be vouched for
            import logging

            logging.getLogger("mcpkit").error("file resource %r not checked: %s", uri, exc)
            raise McpError(INTERNAL_ERROR, f"File resource {uri!r} cannot be checked against the sandbox roots; "
                           "the server's sandbox is misconfigured.", {"uri": uri}) from None
