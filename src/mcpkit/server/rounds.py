"""Multi-round-trip requests of 2026-07-28 (MR-01..MR-10): one handler API for both eras.

A handler calls ``await ctx.elicit(...)``, ``ctx.sample(...)`` or ``ctx.roots()``. In the
handshake era that is a request to the client. In 2026-07-28 the server sends no requests:
the first time, the call cannot be answered, so the handler is stopped and the client gets an
``InputRequiredResult`` listing every input asked for so far (calls made together, e.g. with
``asyncio.gather``, are asked for together) plus a sealed ``requestState``. The client retries
the same request with ``inputResponses``; the handler runs again from the start, and this time
each call returns its answer, in the order the handler asks.

``requestState`` carries the answers of earlier rounds, encrypted and authenticated
(:mod:`mcpkit.protocol.sealed`), bound to the method and the request's own parameters, so any
process with the key can resume it and a client cannot forge or transplant it (MR-06, MR-07).
"""

from __future__ import annotations

from typing import Any

from ..protocol.errors import INVALID_PARAMS, McpError
from ..protocol.sealed import Sealer, StateError, digest

__all__ = ["InputRequired", "Rounds", "bind_for"]

_METHOD_KINDS = {"elicitation/create": "elicit", "sampling/createMessage": "sample", "roots/list": "roots"}


class InputRequired(Exception):
    """Raised out of a handler whose inputs are not all answered yet (caught by dispatch)."""


def bind_for(method: str, params: dict[str, Any], principal: str | None = None) -> str:
    """What a requestState belongs to: the method and the request's own parameters (MR-07), and
    on an authenticated server the user it was issued to (SEC-04: possession of the state is
    no authentication, so another user's token cannot resume it)."""
    own = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState", "_meta")}
    bound = f"{method}:{digest(own)}"
    return bound if principal is None else f"{digest(principal)}@{bound}"


def _valid_answer(method: str, answer: Any) -> bool:
    """MR-09: an answer must have the shape of its request's result."""
    if not isinstance(answer, dict):
        return False
    if method == "elicitation/create":
        return answer.get("action") in ("accept", "decline", "cancel")
    if method == "sampling/createMessage":
        return isinstance(answer.get("content"), (dict, list)) and answer.get("role") == "assistant"
    if method == "roots/list":
        return isinstance(answer.get("roots"), list)
    return True


class Rounds:
    """The inputs of one modern request: answers known so far, and what is still missing."""

    __slots__ = ("method", "params", "answers", "asked", "_counts", "_fresh", "_sealer", "_bind")

    def __init__(self, method: str, params: dict[str, Any], sealer: Sealer, principal: str | None = None) -> None:
        self.method = method
        self.params = params
        self._bind = bind_for(method, params, principal)
        self.answers: dict[str, Any] = {}
        self.asked: dict[str, dict[str, Any]] = {}
        self._counts: dict[str, int] = {}
        self._sealer = sealer
        state = params.get("requestState")
        if state is not None:
            if not isinstance(state, str):
                raise McpError(INVALID_PARAMS, "requestState must be a string.")
            try:
                sealed = sealer.open(state, bind=self._bind)
            except StateError as exc:  # MR-06: reject state that fails verification
                raise McpError(INVALID_PARAMS, str(exc)) from None
            self.answers.update(sealed.get("answers") or {})
        responses = params.get("inputResponses")
        self._fresh: dict[str, Any] = responses if isinstance(responses, dict) else {}

    def key(self, method: str, key: str | None) -> str:
        if key is not None:
            return key
        kind = _METHOD_KINDS[method]
        n = self._counts.get(kind, 0) + 1
        self._counts[kind] = n
        return f"{kind}_{n}"

    def ask(self, key: str, method: str, params: dict[str, Any] | None) -> tuple[bool, Any]:
        """(True, answer) when answered; else the request is recorded as asked and (False, None)."""
        if key in self.answers:
            return True, self.answers[key]
        fresh = self._fresh.get(key)
        if fresh is not None and _valid_answer(method, fresh):  # unknown extra keys are ignored (MR-09)
            self.answers[key] = fresh
            return True, fresh
        request: dict[str, Any] = {"method": method}
        if params is not None:
            request["params"] = params
        self.asked[key] = request
        return False, None

    def result(self) -> dict[str, Any]:
        """The InputRequiredResult for what is still missing (MR-03, MR-04)."""
        state = self._sealer.seal({"answers": self.answers}, bind=self._bind)
        return {"resultType": "input_required", "inputRequests": dict(self.asked), "requestState": state}
