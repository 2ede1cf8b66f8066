"""The one error taxonomy: protocol failures are McpError with a JSON-RPC code.

A tool's own failure is never an McpError on the wire: it becomes a result with
``isError: true`` (TL-10). Handlers raise :class:`ToolError` for that.
"""

from __future__ import annotations

import re
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
#: RS-08: resource not found in the handshake era (the table picks it per revision).
RESOURCE_NOT_FOUND = -32002
#: 2026-07-28 (EC-02): an HTTP header missing, malformed or not matching the body.
HEADER_MISMATCH = -32020
#: MT-08: the request needs a client capability it did not declare.
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
#: VN-02: the request's protocol version is not one this server implements.
UNSUPPORTED_PROTOCOL_VERSION = -32022

__all__ = [
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "RESOURCE_NOT_FOUND",
    "HEADER_MISMATCH",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "McpError",
    "ToolError",
    "ResourceNotFound",
    "PromptNotFound",
    "handler_error",
    "clipped",
    "TOOL_ERROR_CODES",
    "E_SCHEMA_VALIDATION",
    "E_NOT_FOUND",
    "E_PERMISSION_DENIED",
    "E_TIMEOUT",
    "E_UNSUPPORTED",
    "E_RATE_LIMITED",
    "E_NOT_CONNECTED",
    "E_INTERNAL",
]

# The tool contract's error codes (docs/policy.md). They name why a *tool* failed; they live
# in the result's envelope, never in a JSON-RPC error object.
E_SCHEMA_VALIDATION = "E_SCHEMA_VALIDATION"
E_NOT_FOUND = "E_NOT_FOUND"
E_PERMISSION_DENIED = "E_PERMISSION_DENIED"
E_TIMEOUT = "E_TIMEOUT"
E_UNSUPPORTED = "E_UNSUPPORTED"
E_RATE_LIMITED = "E_RATE_LIMITED"
E_NOT_CONNECTED = "E_NOT_CONNECTED"
E_INTERNAL = "E_INTERNAL"
TOOL_ERROR_CODES = frozenset({
    E_SCHEMA_VALIDATION, E_NOT_FOUND, E_PERMISSION_DENIED, E_TIMEOUT, E_UNSUPPORTED,
    E_RATE_LIMITED, E_NOT_CONNECTED, E_INTERNAL,
})
#: the shape of every tool error code, the standard ones and a tool's own (``E_CONFLICT``)
_CODE = re.compile(r"E_[A-Z][A-Z_]*")
#: codes a caller may retry unchanged once the condition passes
_RETRYABLE = frozenset({E_TIMEOUT, E_RATE_LIMITED, E_NOT_CONNECTED})


class McpError(Exception):
    """A JSON-RPC error to send back as-is: code, one-sentence message (BP-08), optional data."""

    __slots__ = ("code", "message", "data")

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err

    def __repr__(self) -> str:
        return f"McpError({self.code}, {self.message!r})"


class ToolError(Exception):
    """Raised on purpose by a tool: its text reaches the client as an ``isError`` result.

    ``code`` is one of the tool contract's codes (E_NOT_FOUND, ...) or the tool's own, shaped
    ``E_[A-Z_]+`` (``E_CONFLICT``), passed through as given; ``details`` is JSON data
    for the caller, ``suggested_fix`` one sentence saying what to do instead, ``retryable``
    whether the same call may succeed later (by default: true for timeouts, rate limits and
    lost connections).
    """

    def __init__(
        self,
        message: str = "",
        *,
        code: str = "E_INTERNAL",
        details: Any = None,
        retryable: bool | None = None,
        suggested_fix: str | None = None,
    ) -> None:
        super().__init__(message)
        if not isinstance(code, str) or _CODE.fullmatch(code) is None:
            raise ValueError(f"invalid tool error code {code!r}: use one of {sorted(TOOL_ERROR_CODES)} or a code "
                             "of your own shaped like E_CONFLICT (E_ then capitals and underscores)")
        self.message = message
        self.code = code
        self.details = details
        self.retryable = code in _RETRYABLE if retryable is None else bool(retryable)
        self.suggested_fix = suggested_fix

    def to_error(self) -> dict[str, Any]:
        """The envelope's ``error`` object."""
        return {
            "code": self.code,
            "message": self.message,
            "details": self.details,
            "retryable": self.retryable,
            "suggestedFix": self.suggested_fix,
        }


class ResourceNotFound(Exception):
    """Raised by a resource or resource-template handler: there is no resource at ``uri``.

    Answered with the negotiated revision's code (RS-08): -32002 before 2026-07-28, -32602
    from 2026-07-28 on, with ``data.uri`` either way. Never hand-raise ``McpError(-32002)``:
    that is wrong for 2026-07-28 clients.
    """

    def __init__(self, uri: str, message: str | None = None) -> None:
        super().__init__(message or f"Resource not found: {clipped(uri)}")
        self.uri = uri
        self.message = message or f"Resource not found: {clipped(uri)}"


class PromptNotFound(Exception):
    """Raised by a prompt handler: there is no such prompt (or no such variant of it); -32602 (PM-05)."""

    def __init__(self, name: str, message: str | None = None) -> None:
        super().__init__(message or f"Unknown prompt: {clipped(name)}")
        self.name = name
        self.message = message or f"Unknown prompt: {clipped(name)}"


#: ToolError codes that say the request itself cannot be served as asked: -32602, not -32603
_INVALID_PARAMS_CODES = frozenset({E_SCHEMA_VALIDATION, E_NOT_FOUND, E_PERMISSION_DENIED, E_UNSUPPORTED})


#: how much of a name or URI the client chose an error message repeats back
_ECHO_CHARS = 256


def clipped(text: Any) -> Any:
    """``text`` as an error repeats it to the client: a name or URI of megabytes is cut to its
    first 256 characters and its length, so a refusal is never larger than what it refuses."""
    if type(text) is str and len(text) > _ECHO_CHARS:
        return f"{text[:_ECHO_CHARS]}... ({len(text)} characters)"
    return text


def handler_error(exc: BaseException, resource_not_found: int, *, uri: str | None = None) -> McpError | None:
    """The JSON-RPC error for what a resource or prompt handler raised on purpose, or None for
    anything else (an internal error). ``resource_not_found``: the negotiated revision's code
    (RS-08); ``uri``: the resource being read, when it is one."""
    if isinstance(exc, ResourceNotFound):
        return McpError(resource_not_found, exc.message, {"uri": clipped(exc.uri)})
    if isinstance(exc, PromptNotFound):
        return McpError(INVALID_PARAMS, exc.message, {"name": clipped(exc.name)})  # PM-05
    if isinstance(exc, ToolError):
        data: dict[str, Any] = {"code": exc.code, "retryable": exc.retryable}
        if exc.details is not None:
            data["details"] = exc.details
        if exc.suggested_fix:
            data["suggestedFix"] = exc.suggested_fix
        message = exc.message or "The request failed."
        if exc.suggested_fix:
            message += f" Fix: {exc.suggested_fix}"
        uri = clipped(uri)
        if uri is not None and exc.code == E_NOT_FOUND:
            return McpError(resource_not_found, message, {"uri": uri, **data})  # RS-08
        if uri is not None:
            data["uri"] = uri
        return McpError(INVALID_PARAMS if exc.code in _INVALID_PARAMS_CODES else INTERNAL_ERROR, message, data)
    return None
