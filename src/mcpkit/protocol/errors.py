"""The one error taxonomy: protocol failures are McpError with a JSON-RPC code.

A tool's own failure is never an McpError on the wire: it becomes a result with
``isError: true`` (TL-10). Handlers raise :class:`ToolError` for that.
"""

from __future__ import annotations

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
]


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
    """Raised on purpose by a tool: its text reaches the client as an ``isError`` result."""
