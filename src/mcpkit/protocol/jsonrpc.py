"""JSON-RPC 2.0 framing: bytes -> typed messages, messages -> wire dicts.

Pure functions, no I/O. The id rules are MCP's, stricter than JSON-RPC (BP-03):
a request id is a string or an integer, never null, a float or a boolean.
"""

from __future__ import annotations

from typing import Any, Union

from .. import _json
from .errors import INVALID_REQUEST, PARSE_ERROR, McpError

__all__ = [
    "Request",
    "Notification",
    "Response",
    "ErrorResponse",
    "Invalid",
    "Message",
    "parse",
    "NO_ID",
]

#: Marker for "the id could not be read" (BP-06: the error is sent without an id).
NO_ID: Any = type("NoId", (), {"__repr__": lambda self: "NO_ID", "__slots__": ()})()


class Request:
    __slots__ = ("id", "method", "params")

    def __init__(self, id: str | int, method: str, params: dict[str, Any] | None) -> None:
        self.id = id
        self.method = method
        self.params = params

    def __repr__(self) -> str:
        return f"Request(id={self.id!r}, method={self.method!r})"


class Notification:
    __slots__ = ("method", "params")

    def __init__(self, method: str, params: dict[str, Any] | None) -> None:
        self.method = method
        self.params = params

    def __repr__(self) -> str:
        return f"Notification(method={self.method!r})"


class Response:
    __slots__ = ("id", "result")

    def __init__(self, id: str | int, result: dict[str, Any]) -> None:
        self.id = id
        self.result = result


class ErrorResponse:
    __slots__ = ("id", "error")

    def __init__(self, id: Any, error: dict[str, Any]) -> None:
        self.id = id
        self.error = error


class Invalid:
    """A frame element that is not a valid JSON-RPC message; ``id`` is NO_ID when unreadable."""

    __slots__ = ("id", "error")

    def __init__(self, id: Any, error: McpError) -> None:
        self.id = id
        self.error = error

    def __repr__(self) -> str:
        return f"Invalid(id={self.id!r}, error={self.error!r})"


Message = Union[Request, Notification, Response, ErrorResponse, Invalid]


def _valid_id(value: Any) -> bool:
    # bool is a subclass of int: exclude it explicitly.
    t = type(value)
    return t is str or t is int


def classify(obj: Any) -> Message:
    """One decoded JSON value -> one message (BP-01, BP-03, BP-05, BP-06)."""
    if type(obj) is not dict:
        return Invalid(NO_ID, McpError(INVALID_REQUEST, "A JSON-RPC message must be a JSON object."))
    raw_id = obj.get("id", NO_ID)
    id_type = type(raw_id)  # _valid_id, inline: every message passes here
    msg_id = raw_id if id_type is str or id_type is int else NO_ID
    if obj.get("jsonrpc") != "2.0":
        return Invalid(msg_id, McpError(INVALID_REQUEST, 'The "jsonrpc" member must be exactly "2.0".'))
    method = obj.get("method", NO_ID)
    if method is not NO_ID:
        if type(method) is not str or not method:
            return Invalid(msg_id, McpError(INVALID_REQUEST, 'The "method" member must be a non-empty string.'))
        params = obj.get("params")
        if params is not None and type(params) is not dict:
            return Invalid(
                msg_id, McpError(INVALID_REQUEST, 'The "params" member must be a JSON object when present.')
            )
        if raw_id is NO_ID:
            return Notification(method, params)
        if msg_id is NO_ID:
            return Invalid(
                NO_ID,
                McpError(
                    INVALID_REQUEST,
                    'A request "id" must be a string or an integer (not null, a float, a boolean or a structure).',
                    {"id": raw_id},
                ),
            )
        return Request(msg_id, method, params)
    # No method: a response to one of our requests.
    has_result = "result" in obj
    has_error = "error" in obj
    if has_result == has_error:
        return Invalid(
            msg_id,
            McpError(INVALID_REQUEST, 'A message needs a "method", or exactly one of "result" and "error".'),
        )
    if has_result:
        if msg_id is NO_ID or type(obj["result"]) is not dict:
            return Invalid(msg_id, McpError(INVALID_REQUEST, "A result response needs a valid id and an object result."))
        return Response(msg_id, obj["result"])
    err = obj["error"]
    if type(err) is not dict or type(err.get("code")) is not int:
        return Invalid(msg_id, McpError(INVALID_REQUEST, 'An error response needs an "error" object with an integer code.'))
    return ErrorResponse(raw_id if msg_id is not NO_ID else None, err)


def parse(data: bytes | str) -> tuple[list[Message], bool]:
    """Decode one frame. Returns (messages, is_batch).

    Raises McpError(PARSE_ERROR) for bytes that are not JSON (including invalid
    UTF-8, BP-02). An empty batch is a single Invalid (JSON-RPC 2.0 section 6).
    """
    try:
        obj = _json.loads(data)
    except _json.JSONDecodeError as exc:
        raise McpError(PARSE_ERROR, "Parse error: the message is not valid UTF-8 JSON.", {"detail": str(exc)}) from None
    if type(obj) is list:
        if not obj:
            return [Invalid(NO_ID, McpError(INVALID_REQUEST, "An empty batch is not a valid request."))], False
        return [classify(o) for o in obj], True
    return [classify(obj)], False


def response(id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": result}


def error(id: Any, err: dict[str, Any]) -> dict[str, Any]:
    # BP-06 / spec §0 "error id trap": an unreadable id is omitted, never null.
    if id is NO_ID or id is None:
        return {"jsonrpc": "2.0", "error": err}
    return {"jsonrpc": "2.0", "id": id, "error": err}


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    if params is None:
        return {"jsonrpc": "2.0", "method": method}
    return {"jsonrpc": "2.0", "method": method, "params": params}


def request(id: str | int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    if params is None:
        return {"jsonrpc": "2.0", "id": id, "method": method}
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}
