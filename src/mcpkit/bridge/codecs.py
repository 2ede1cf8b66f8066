"""Message shapes: how a bridge call becomes a plugin's message, and how its answer is found.

The framing (:mod:`.framing`, or a :class:`~mcpkit.bridge.WebSocket`) cuts the byte stream into
JSON values; a codec gives them meaning. The bridge numbers its requests itself (1, 2, 3, ...
per link) and holds each call until the codec reads an :class:`Answer` carrying its id:

- :class:`JsonRpc` (the default): JSON-RPC 2.0, the bridge kit's own wire contract
  (docs/bridge.md, "The wire contract").
- :class:`Fields`: a plugin's own JSON objects, read by the field names the user gives, e.g.
  ``{"command": name, "params": args, "id": n}`` answered by ``{"id": n, "result": ...}`` or
  ``{"id": n, "error": ...}``.
- :class:`Custom`: a pair of functions, ``encode(call) -> message`` and
  ``decode(message) -> Answer | Event | None``, for anything else.

A codec never raises for a message it does not understand: it returns None and the bridge
drops the message with a log line, so one odd message from a plugin never takes the link down.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Answer", "Call", "Codec", "Custom", "Event", "Fields", "JsonRpc", "Reply"]

log = logging.getLogger("mcpkit.bridge")

#: the method a mirror (and any caller of a plugin's tool) sends; shapes other than JSON-RPC
#: send the tool's own name as their command, with its arguments as the parameters
TOOLS_CALL = "tools/call"


@dataclass(frozen=True)
class Call:
    """One request the bridge sends: ``id`` (an int, unique on its link), ``method`` and
    ``params`` as the caller gave them (``bridge.request(method, params)``)."""

    id: int
    method: str
    params: Any = None

    @property
    def command(self) -> str:
        """The plugin's command: the tool's name for a ``tools/call``, else the method."""
        if self.method == TOOLS_CALL and isinstance(self.params, Mapping) and isinstance(self.params.get("name"), str):
            return str(self.params["name"])
        return self.method

    @property
    def arguments(self) -> Any:
        """The command's parameters: a ``tools/call``'s ``arguments``, else the params."""
        if self.method == TOOLS_CALL and isinstance(self.params, Mapping) and isinstance(self.params.get("name"), str):
            return self.params.get("arguments") or {}
        return self.params


@dataclass(frozen=True)
class Answer:
    """The plugin's answer to the request ``id``: its ``result``, or its ``error`` when that is
    not None (an object like JSON-RPC's ``{"code", "message", "data"}``, or just a message)."""

    id: Any
    result: Any = None
    error: Any = None


@dataclass(frozen=True)
class Event:
    """A message the plugin sent on its own (a notification): ``method`` and ``params``."""

    method: str
    params: Any = None


@dataclass(frozen=True)
class Reply:
    """A message to send back at once (JSON-RPC refuses a plugin's own requests this way)."""

    message: Any


class Codec(Protocol):
    """What :class:`~mcpkit.bridge.RpcBridge` asks of a message shape."""

    #: a received JSON array is a batch of messages (JSON-RPC's); else it is one message
    batches: bool

    def request(self, call: Call) -> Any:
        """The message that carries ``call``."""
        ...

    def notification(self, method: str, params: Any) -> Any | None:
        """The message for ``bridge.notify(method, params)``; None: the shape has none."""
        ...

    def cancel(self, request_id: int, reason: str) -> Any | None:
        """The message telling the plugin a request is no longer waited for; None: none sent."""
        ...

    def decode(self, message: Any) -> Answer | Event | Reply | None:
        """What one received message is; None: not understood (dropped with a log line)."""
        ...


class JsonRpc:
    """JSON-RPC 2.0: ``{"jsonrpc": "2.0", "id": n, "method": ..., "params": ...}`` answered by
    ``{"id": n, "result": ...}`` or ``{"id": n, "error": {"code", "message", "data"}}``;
    notifications both ways, ``notifications/cancelled`` when a call is given up, and a
    plugin's own requests refused with -32601 (a bridge serves nothing)."""

    batches = True

    def request(self, call: Call) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": call.id, "method": call.method}
        if call.params is not None:
            message["params"] = call.params
        return message

    def notification(self, method: str, params: Any) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        return message

    def cancel(self, request_id: int, reason: str) -> dict[str, Any]:
        return self.notification("notifications/cancelled", {"requestId": request_id, "reason": reason})

    def decode(self, message: Any) -> Answer | Event | Reply | None:
        if not isinstance(message, dict):
            return None
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:
                return Reply({"jsonrpc": "2.0", "id": message["id"],
                              "error": {"code": -32601, "message": f"Method not found: {method}"}})
            return Event(method, message.get("params"))
        if "error" in message:
            error = message["error"]
            return Answer(message.get("id"), error=error if error is not None else {"message": "error"})
        return Answer(message.get("id"), result=message.get("result"))

    def __repr__(self) -> str:
        return "JsonRpc()"


class Fields:
    """A plugin's own JSON objects, read by field names.

    A request is ``{**constant, method: call.command, params: call.arguments, id: n}`` (a
    ``tools/call`` goes out as the tool's own name with its arguments; ``params`` is ``{}`` when
    there are none). A message carrying ``id`` answers that request: it failed when its
    ``error`` field holds anything but null, false or "" (a message, or an object with
    ``message``, ``code`` and ``data.kind`` read by the bridge's error table), else its
    ``result`` field is the result (``result=None``: the whole message but the id). With
    ``event`` named, a message without an id that has that field is a notification. The plugin
    is told nothing of a call given up (there is no cancel message in such protocols).
    ``events`` renames the plugin's event names to the methods the kit listens for, e.g.
    ``{"commandsChanged": "notifications/tools/list_changed"}`` has a mirror re-read the list.
    ``constant`` fields go in every message sent (``{"type": "request"}``). ``string_ids``
    sends ids as strings ("1", "2", ...).
    """

    batches = False

    def __init__(self, *, method: str = "method", params: str = "params", id: str = "id",  # noqa: A002
                 result: str | None = "result", error: str = "error", event: str | None = None,
                 events: Mapping[str, str] | None = None, constant: Mapping[str, Any] | None = None,
                 string_ids: bool = False) -> None:
        names = [method, params, id, error, *([result] if result is not None else []), *([event] if event else [])]
        if any(not isinstance(n, str) or not n for n in names):
            raise ValueError("Fields: every field name must be a non-empty string")
        if len({method, params, id}) < 3:
            raise ValueError("Fields: method, params and id must be three different fields")
        self.method, self.params, self.id = method, params, id
        self.result, self.error, self.event = result, error, event
        self.events = dict(events or {})
        self.constant = dict(constant or {})
        self.string_ids = string_ids

    def request(self, call: Call) -> dict[str, Any]:
        arguments = call.arguments
        return {**self.constant, self.method: call.command, self.params: {} if arguments is None else arguments,
                self.id: str(call.id) if self.string_ids else call.id}

    def notification(self, method: str, params: Any) -> dict[str, Any]:
        return {**self.constant, self.method: method, self.params: {} if params is None else params}

    def cancel(self, request_id: int, reason: str) -> None:
        return None

    def decode(self, message: Any) -> Answer | Event | None:
        if not isinstance(message, dict):
            return None
        rid = message.get(self.id)
        if rid is not None:
            error = message.get(self.error)
            if error is not None and error is not False and error != "":
                return Answer(rid, error=error)
            if self.result is None:
                return Answer(rid, result={k: v for k, v in message.items() if k not in (self.id, self.error)})
            return Answer(rid, result=message.get(self.result))
        if self.event is not None and isinstance(message.get(self.event), str):
            name = message[self.event]
            return Event(self.events.get(name, name), message.get(self.params))
        return None

    def __repr__(self) -> str:
        return f"Fields(method={self.method!r}, params={self.params!r}, id={self.id!r}, result={self.result!r})"


class Custom:
    """A message shape given as functions: ``encode(call) -> message`` (a JSON-able value the
    framing sends), ``decode(message) -> Answer | Event | None``; optionally ``notify(method,
    params) -> message`` and ``cancel(request_id, reason) -> message``. A received JSON array
    is one message, given to ``decode`` whole."""

    batches = False

    def __init__(self, encode: Callable[[Call], Any], decode: Callable[[Any], Answer | Event | None], *,
                 notify: Callable[[str, Any], Any] | None = None,
                 cancel: Callable[[int, str], Any] | None = None) -> None:
        if not callable(encode) or not callable(decode):
            raise TypeError("Custom(encode, decode): both must be functions")
        self._encode, self._decode = encode, decode
        self._notify, self._cancel = notify, cancel

    def request(self, call: Call) -> Any:
        return self._encode(call)

    def notification(self, method: str, params: Any) -> Any | None:
        return self._notify(method, params) if self._notify is not None else None

    def cancel(self, request_id: int, reason: str) -> Any | None:
        return self._cancel(request_id, reason) if self._cancel is not None else None

    def decode(self, message: Any) -> Answer | Event | Reply | None:
        try:
            decoded = self._decode(message)
        except Exception:  # a user's decoder failing on one message must not take the link down
            log.exception("bridge: the codec's decode failed on a message; it is dropped")
            return None
        if decoded is not None and not isinstance(decoded, (Answer, Event)):
            log.warning("bridge: the codec's decode returned %s, not an Answer, an Event or None; dropped",
                        type(decoded).__name__)
            return None
        return decoded

    def __repr__(self) -> str:
        return f"Custom({getattr(self._encode, '__name__', '?')}, {getattr(self._decode, '__name__', '?')})"
