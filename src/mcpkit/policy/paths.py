"""Path parameters confined to a sandbox: ``SandboxPath`` and ``confined(sandbox)``.

    @server.tool(read_only=True, destructive=False, open_world=False)
    def read(path: SandboxPath) -> str:
        return path.read_text()

The client sends a string (the inputSchema says ``type: string``); before the handler runs it
becomes a real ``pathlib.Path`` inside one of the sandbox roots, resolved with realpath, or the
call is refused with E_PERMISSION_DENIED (TL-11). ``SandboxPath`` uses the server's policy
sandbox; ``confined(my_sandbox)`` names one explicitly.
"""

from __future__ import annotations

import contextvars
import pathlib
from typing import Annotated, Any

from ..protocol.errors import E_PERMISSION_DENIED, ToolError

__all__ = ["ACTIVE_SANDBOX", "ExistingSandboxPath", "SandboxPath", "SandboxUri", "confined"]

#: the sandbox of the server whose call is being bound (set by policy/chain.py around binding)
ACTIVE_SANDBOX: contextvars.ContextVar[Any] = contextvars.ContextVar("mcpkit_sandbox", default=None)


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
        result: pathlib.Path = sandbox.resolve(value, must_exist=self.must_exist)
        return result

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
