"""What the server sent on one connection, judged message by message as it arrives.

The checker's client hands every message it receives to :meth:`Wire.observe` (Client
``on_message``) before routing it, so the envelope rules (protocol.error-object,
protocol.result-or-error, protocol.response-id) and the progress rules cost no request of their
own: they read what the other rules' requests brought back, the handshake's answer included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Wire", "PROGRESS_PREFIX"]

#: the progress tokens the checker sends (ctx.call_tool) start with this
PROGRESS_PREFIX = "mcpkit-check-progress-"
#: at most this many problems of one kind are kept per connection (the first ones say enough)
KEEP = 5


def _short(msg: Any) -> str:
    text = repr(msg)
    return text if len(text) <= 160 else text[:157] + "..."


@dataclass
class Wire:
    #: kind -> what was wrong, one line each: "error-object", "result-and-error", "id-type",
    #: "progress-token", "progress-order"
    problems: dict[str, list[str]] = field(default_factory=dict)
    #: kind -> how many problems of that kind there were (all, not only those kept)
    counts: dict[str, int] = field(default_factory=dict)
    #: how many messages arrived
    heard: int = 0
    #: how many of them were responses (a server that answered with a broken envelope was not silent)
    answers: int = 0
    #: progress token the checker sent -> the last progress value seen for it (None: none yet)
    tokens: dict[Any, float | None] = field(default_factory=dict)

    def _add(self, kind: str, text: str) -> None:
        found = self.problems.setdefault(kind, [])
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if len(found) < KEEP:
            found.append(text)

    def sent_token(self, token: Any) -> None:
        """The checker sent ``token`` as a request's progressToken."""
        self.tokens.setdefault(token, None)

    def observe(self, msg: dict[str, Any]) -> None:
        self.heard += 1
        if "method" in msg:
            if msg.get("method") == "notifications/progress" and "id" not in msg:
                self._progress(msg.get("params"))
            return
        self.answers += 1
        self._response(msg)

    def _response(self, msg: dict[str, Any]) -> None:
        rid = msg.get("id")
        if "result" in msg and "error" in msg:
            # BP-07: "Either a result or an error MUST be set. A response MUST NOT set both."
            self._add("result-and-error", f"the response to request {rid!r} has both result and error: {_short(msg)}")
        if "error" in msg:
            error = msg["error"]
            wrong = []
            if not isinstance(error, dict):
                wrong.append("is not an object")
            else:
                code = error.get("code")
                if not isinstance(code, int) or isinstance(code, bool):
                    wrong.append("has no code" if "code" not in error else f"has the code {code!r}, not an integer")
                if not isinstance(error.get("message"), str):
                    wrong.append("has no message" if "message" not in error else
                                 f"has the message {error.get('message')!r}, not a string")
            if wrong:  # BP-06: "error has an integer code and a string message"
                self._add("error-object", f"the error answering request {rid!r} {' and '.join(wrong)}: {_short(error)}")
        # the checker's client numbers its requests with integers: any other id echoes none of them
        # (an error for an unreadable request may carry null)
        if rid is not None and (not isinstance(rid, int) or isinstance(rid, bool)):
            self._add("id-type", f"a response carries the id {rid!r} (a {type(rid).__name__}); the requests "
                      f"were numbered with integers, so it answers none of them: {_short(msg)}")

    def _progress(self, params: Any) -> None:
        if not isinstance(params, dict):
            return
        token, value = params.get("progressToken"), params.get("progress")
        if isinstance(token, (dict, list)) or token not in self.tokens:
            # PR-02: progress only for a token a request of the client carried
            self._add("progress-token", f"progress for the token {token!r}, which no request carried: "
                      f"{_short(params)}")
            return
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return
        last = self.tokens[token]
        if last is not None and value <= last:
            # PR-03: "The progress value MUST increase with each notification"
            self._add("progress-order", f"progress for the token {token!r} went from {last:g} to {value:g}")
        self.tokens[token] = value if last is None else max(last, value)
