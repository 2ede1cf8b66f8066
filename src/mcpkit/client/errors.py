"""The exceptions a :class:`~mcpkit.client.Client` raises."""

from __future__ import annotations

from typing import Any

__all__ = ["RpcError", "ClientError", "ClientTimeout", "HttpRpcError", "MessageTooLarge", "ToolCallError",
           "UnsupportedVersion", "MismatchedId"]


class RpcError(Exception):
    """A JSON-RPC error response: ``code``, ``message`` and ``data`` as the server sent them."""

    def __init__(self, code: Any, message: Any, data: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data

    @classmethod
    def from_error(cls, error: Any) -> RpcError:
        if not isinstance(error, dict):
            return cls(None, f"malformed error object: {error!r}")
        return cls(error.get("code"), error.get("message"), error.get("data"))

    def to_error(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class ClientError(Exception):
    """Transport or protocol trouble: the server exited, unusable output, an HTTP status that is
    not 2xx (``status``, ``headers`` and ``body`` keep the response), a timeout."""

    def __init__(
        self, message: str, *, status: int | None = None, headers: dict[str, str] | None = None, body: bytes = b""
    ) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}
        self.body = body


class MessageTooLarge(ClientError):
    """The answer to this request was larger than the client's ``max_message_bytes``: it was
    read past, never held whole, and the connection carries on (client/oversize.py)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"the answer is {size} bytes, over the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class UnsupportedVersion(ClientError):
    """The server answered initialize with a protocol version this client cannot speak
    (``answered``: what it said; the message reads "... answered protocol version '...', which ...")."""

    def __init__(self, answered: Any) -> None:
        super().__init__(f"the server answered protocol version {answered!r}, which this client cannot speak")
        self.answered = answered


class MismatchedId(ClientError):
    """The server answered the request ``request_id`` with ``answered`` (the same id in another JSON
    type, e.g. "1" for 1): a response must carry its request's id unchanged (JSON-RPC 2.0, BP-05)."""

    def __init__(self, request_id: Any, answered: Any) -> None:
        kinds = {str: "a string", int: "an integer", float: "a float"}
        super().__init__(f"the server answered request {request_id!r} with the id {answered!r} "
                         f"({kinds.get(type(answered), 'another type')}, not {kinds.get(type(request_id), 'the same')}); "
                         "a response must echo its request's id with the same JSON type")
        self.request_id = request_id
        self.answered = answered


class ClientTimeout(ClientError, TimeoutError):
    """No answer within the timeout (the request was cancelled on the server where possible)."""


class HttpRpcError(RpcError, ClientError):
    """A JSON-RPC error that came with an HTTP status that is not 2xx (2026-07-28 pairs errors with
    400 or 404): both an :class:`RpcError` and a :class:`ClientError`."""

    def __init__(self, error: Any, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        err = error if isinstance(error, dict) else {}
        RpcError.__init__(self, err.get("code"), err.get("message"), err.get("data"))
        self.status = status
        self.headers = headers
        self.body = body

    def __str__(self) -> str:
        return f"HTTP {self.status}: {self.code}: {self.message}"


def _text_of(result: Any) -> str:
    if isinstance(result, dict):
        content = result.get("content") or []
        texts = [c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text"]
        if texts:
            return "\n".join(texts)
    return "the tool reported an error"


class ToolCallError(Exception):
    """A tool's result with ``isError: true`` (from a tool proxy); ``result`` is the whole result."""

    def __init__(self, result: Any) -> None:
        super().__init__(_text_of(result))
        self.result = result
