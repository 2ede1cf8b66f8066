"""Context: what a handler may ask of the protocol while it runs.

A handler gets one by declaring a parameter annotated ``Context``. Progress and
log calls work from async and sync handlers alike, in any thread (the session
is thread-safe). Requests to the client (sampling, elicitation, roots) are
awaitable in async handlers and block the calling thread in sync handlers.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ..protocol.revisions import LOG_LEVELS


if TYPE_CHECKING:
    from ..protocol.engine import RequestReceived
    from .session import ServerSession

__all__ = ["Context", "ClientCapabilityError", "ClientRequestError", "ClientTimeoutError", "LOG_LEVELS",
           "SamplingMessagesError"]

_LEVEL_RANK = {name: i for i, name in enumerate(LOG_LEVELS)}


def calling_request(session: Any, request: Any) -> tuple[Any, Any]:
    """The session and request whose caller ``request`` serves: themselves, or for the session
    that drives a mounted Server for its parent (``outer``), the parent's call being served,
    up through every mount. A mounted child's ``ctx.principal`` and ``ctx.access_token`` are
    its parent's caller's, so a tool that keys data by them keeps each caller's apart."""
    while session.principal is None:
        outer = getattr(session, "outer", None)
        parent = outer.calling_context() if outer is not None else None
        if parent is None:
            break
        session, request = parent._session, parent._request
    return session, request


def access_token_of(session: Any, request: Any) -> Any:
    """The verified token ``request`` is judged by: the one its transport fed it with (each
    request of an authenticated HTTP session), else the session's (one set by hand)."""
    token = getattr(request, "access_token", None)  # set only where a transport gave one
    return session.access_token if token is None else token


class ClientCapabilityError(RuntimeError):
    """The client did not declare the capability a request to it needs (SA-01, EL-01, RT-01)."""


class SamplingMessagesError(ClientCapabilityError, ValueError):
    """The messages of a sampling request break the tool_use/tool_result pairing (SA-05); the
    request was not sent. Refused like a form the client cannot be asked (EL-02), and a ValueError
    for the handler that built them."""


class ClientRequestError(Exception):
    """The client answered a request of ours (sampling, elicitation, roots, ping) with an error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"the client answered with error {code}: {message}")
        self.code = code
        self.message = message
        self.data = data


class ClientTimeoutError(TimeoutError):
    """The client did not answer a request of ours in time (LC-10)."""


class _Answer:
    """An input of a 2026-07-28 request: awaiting it gives the answer, or stops the handler."""

    __slots__ = ("ok", "answer")

    def __init__(self, ok: bool, answer: Any) -> None:
        self.ok = ok
        self.answer = answer

    def __await__(self) -> Any:
        if not self.ok:
            from .rounds import InputRequired

            raise InputRequired()
        return self.answer
        yield  # makes __await__ a generator, hence awaitable


class _Done:
    """A finished awaitable, so ``await ctx.info(...)`` and ``ctx.info(...)`` both work.

    Awaited, it gives the loop one turn (as ``asyncio.sleep(0)`` does): a handler that logs or
    reports progress in a loop would otherwise never let the loop write what it sent, answer
    other clients, or deliver the cancellation of a shutdown's deadline."""

    __slots__ = ()

    def __await__(self) -> Any:
        yield


_DONE = _Done()


class Context:
    __slots__ = (
        "_session", "_request", "request_id", "method", "correlation_id", "cancelled", "_rounds", "_task", "_announce",
        "_names", "_report",
    )

    def __init__(self, session: ServerSession, request: RequestReceived, correlation_id: str) -> None:
        self._session = session
        self._request = request
        self.request_id = request.id
        self.method = request.method
        self.correlation_id = correlation_id
        self._rounds: Any = None  # 2026-07-28: the inputs of this request (server/rounds.py)
        self._task: Any = None  # (TaskManager, TaskRecord) once this call runs as a task (server/tasks.py)
        self._announce: Any = None  # a future start_task() resolves with the CreateTaskResult
        #: the served item's ``call_names`` (a copy made by ``include``): ``call_tool`` names read
        #: as the child's, which are prefixed in this server; None: as given
        self._names: Any = None
        #: where a contract of the legacy shape collects this call's logs, warnings, files and
        #: details (mcpkit.policy.envelope.Report); None: nothing collects them
        self._report: Any = None
        #: set when the client cancelled this request (CN-01); sync handlers can poll it
        self.cancelled = threading.Event()

    # ------------------------------------------------------------------ facts about the peer

    @property
    def protocol_version(self) -> str:
        return self._request.revision.version

    @property
    def client_info(self) -> dict[str, Any]:
        """Self-reported (MT-07): never a basis for security decisions."""
        return self._request.client_info or {}

    @property
    def trace_id(self) -> str | None:
        """The OpenTelemetry trace id (32 hex digits) this request runs under, when the server
        is observed with mcpkit.observe.OpenTelemetry and a tracer provider is configured."""
        from .observer import current_trace_ids

        ids = current_trace_ids()
        return ids[0] if ids else None

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """What the client declared: at initialize, or (2026-07-28) in this very request (MT-08)."""
        return self._request.capabilities

    @property
    def principal(self) -> str | None:
        """Who is calling: the subject of the verified bearer token on an authenticated HTTP
        server (mcpkit.auth), else None (stdio, or HTTP without auth). In a mounted Server,
        the parent's caller."""
        return calling_request(self._session, self._request)[0].principal

    @property
    def access_token(self) -> Any:
        """The caller's verified mcpkit.auth.AccessToken (subject, client_id, scopes, claims),
        or None. Never a token to pass on to other services (AU-07). In a mounted Server, the
        parent's caller's."""
        return access_token_of(*calling_request(self._session, self._request))

    @property
    def progress_token(self) -> Any:
        return self._session.engine.progress_token(self.request_id)

    @property
    def server(self) -> Any:
        return self._session.server

    @property
    def lifespan_context(self) -> Any:
        """What the server's ``lifespan=`` context manager yielded (server/lifespan.py); None
        without one."""
        lifespan = self._session.server.lifespan
        return lifespan.state if lifespan is not None else None

    @property
    def task_id(self) -> str | None:
        """The id of the task this call runs as (tasks extension), else None."""
        return self._task[1].task_id if self._task is not None else None

    def start_task(self) -> Any:
        """For a tool registered with ``task_after_input=True``: the inputs asked so far were
        multi-round-trip rounds; from here on the call is a task and the client gets its
        CreateTaskResult (TX-03). A no-op when the client did not declare the extension.
        Await it: with a shared store the task is stored off the event loop."""
        if self._task is None and self._announce is not None:
            manager = self._session.server.tasks
            if manager.offloaded():
                return self._task_started(manager)
            self._started(manager, manager.create(self._session))
        return _DONE

    async def _task_started(self, manager: Any) -> None:
        record = await manager.create_async(self._session)
        if self._task is None:  # not started meanwhile by another start_task() of this handler
            self._started(manager, record)
        else:
            manager.cancel(record)  # two start_task() of one handler at once: the second task ends at once

    def _started(self, manager: Any, record: Any) -> None:
        import asyncio

        record.future, record.loop = asyncio.current_task(), self._session.loop
        self.cancelled = record.cancel_event
        self._task = (manager, record)
        if not self._announce.done():
            self._announce.set_result(record.created())

    # ------------------------------------------------------------------ other tools

    def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call another tool of this server from a sync tool (a batch or meta tool) and get
        its CallToolResult. The call takes the same pipeline as a call from the client:
        scopes, gates, rate limits, validation, middleware and audit apply (its audit line
        names this call's correlation id as parent)."""
        from .dispatch import call_nested

        result: dict[str, Any] = call_nested(self, name, arguments, want_async=False)
        return result

    async def call_tool_async(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """:meth:`call_tool` from an async tool; the callee may be sync or async."""
        from .dispatch import call_nested

        result: dict[str, Any] = await call_nested(self, name, arguments, want_async=True)
        return result

    # ------------------------------------------------------------------ notifications

    def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> _Done:
        """notifications/progress on this request's token; nothing when the client sent none (PR-01)."""
        if self._task is not None:
            return _DONE  # TX-06: a task's request is answered; nothing may follow it
        self._session.send_progress(self.request_id, progress, total, message)
        return _DONE

    def log(self, level: str, data: Any, logger: str | None = None) -> _Done:
        """notifications/message at ``level``, filtered by the client's logging/setLevel (LG-02)."""
        if level not in _LEVEL_RANK:
            # FastMCP's log takes (message, level): say the order here, where its callers land
            raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}: the level comes "
                             "first, ctx.log('info', data), or use ctx.info(data)")
        if self._report is not None:
            self._report.log(level, data)  # whatever the client's log level: it is the result's
        req = self._request
        if self._task is not None:
            return _DONE  # TX-06
        if req.revision.era == "modern":
            if req.log_level is None:
                return _DONE  # LG-03: no log messages for a request that did not ask for them
            self._session.send_log(level, data, logger, self.request_id, req.log_level)
        else:
            self._session.send_log(level, data, logger, self.request_id)
        return _DONE

    def debug(self, data: Any, logger: str | None = None) -> _Done:
        return self.log("debug", data, logger)

    def info(self, data: Any, logger: str | None = None) -> _Done:
        return self.log("info", data, logger)

    def warning(self, data: Any, logger: str | None = None) -> _Done:
        return self.log("warning", data, logger)

    def error(self, data: Any, logger: str | None = None) -> _Done:
        return self.log("error", data, logger)

    def add_file(self, path: str) -> None:
        """Name a file (or URI) this call wrote or produced: the ``files`` of a legacy-shape
        contract envelope (docs/policy.md); nothing under another shape."""
        if self._report is not None:
            self._report.files.append(str(path))

    def add_details(self, **fields: Any) -> None:
        """Add to the ``details`` object of a legacy-shape contract envelope; nothing under
        another shape."""
        if self._report is not None:
            self._report.details.update(fields)

    # ------------------------------------------------------------------ requests to the client

    def _ask(self, method: str, params: dict[str, Any] | None, timeout: float | None, key: str | None = None) -> Any:
        session = self._session
        if self._task is not None:
            return self._ask_in_task(method, params, key)
        if self._request.revision.era == "modern":
            return self._ask_in_rounds(method, params, key)
        if method != "ping" and not session.engine.initialized:
            # LC-03: no requests to the client before it sent notifications/initialized
            raise ClientCapabilityError(f"the client has not finished initialization, so {method} cannot be sent yet")
        coro = session.request_client(method, params, related=self.request_id, timeout=timeout)
        if session._on_loop_thread():
            return coro
        # a sync handler: block this thread, never the loop; a reader thread hands off reading first
        if session.before_block is not None:
            session.before_block()
        import asyncio

        return asyncio.run_coroutine_threadsafe(coro, session.loop).result()

    def _ask_in_rounds(self, method: str, params: dict[str, Any] | None, key: str | None) -> Any:
        """MR-01: no request goes to the client; the answer comes with the client's retry."""
        if self._request.method not in ("tools/call", "prompts/get", "resources/read"):  # MR-02
            raise ClientCapabilityError(f"{self._request.method} cannot ask the client for input")
        rounds = self.rounds()
        ok, answer = rounds.ask(rounds.key(method, key), method, params)
        if self._session._on_loop_thread():
            return _Answer(ok, answer)
        if ok:
            return answer
        from .rounds import InputRequired

        raise InputRequired()

    def _ask_in_task(self, method: str, params: dict[str, Any] | None, key: str | None) -> Any:
        """TX-04: the task turns input_required until tasks/update brings the answer."""
        if method == "ping":
            raise ClientCapabilityError("a task cannot ping the client")
        manager, record = self._task
        fut = manager.ask(record, method, params, key)
        if self._session._on_loop_thread():
            import asyncio

            return asyncio.wrap_future(fut)
        return fut.result()

    def rounds(self) -> Any:
        if self._rounds is None:
            from .rounds import Rounds

            req = self._request
            self._rounds = Rounds(req.method, req.params or {}, self._session.server.sealer, self._session.principal)
        return self._rounds

    def _require(self, *path: str) -> None:
        caps: Any = self.client_capabilities
        for key in path:
            if not isinstance(caps, dict) or key not in caps:
                raise ClientCapabilityError(
                    f"the client did not declare the {'.'.join(path)!r} capability, so this server cannot ask it for that"
                )
            caps = caps[key]

    def sample(
        self,
        messages: str | list[dict[str, Any]],
        *,
        max_tokens: int = 1000,
        system_prompt: str | None = None,
        temperature: float | None = None,
        stop_sequences: list[str] | None = None,
        model_preferences: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        timeout: float | None = None,
        key: str | None = None,
    ) -> Any:
        """sampling/createMessage (SA-01..SA-04). Returns the client's CreateMessageResult dict.

        ``key`` names the input in a 2026-07-28 InputRequiredResult (default ``sample_N``).
        Messages replaying a tool loop must pair every assistant ``tool_use`` with a user
        ``tool_result`` right after it (SA-05); otherwise :class:`SamplingMessagesError` is raised
        and nothing is sent."""
        self._require("sampling")
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        else:
            from ..protocol.sampling import pairing_problem

            problem = pairing_problem(messages)
            if problem is not None:
                raise SamplingMessagesError(f"invalid sampling messages (SA-05): {problem}")
        params: dict[str, Any] = {"messages": messages, "maxTokens": max_tokens}
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        if temperature is not None:
            params["temperature"] = temperature
        if stop_sequences:
            params["stopSequences"] = stop_sequences
        if model_preferences:
            params["modelPreferences"] = model_preferences
        if metadata:
            params["metadata"] = metadata
        if tools is not None or tool_choice is not None:
            rev = self._request.revision
            if not rev.sampling_tools:
                raise ClientCapabilityError("tools in sampling need protocol 2025-11-25 or later (SA-02)")
            self._require("sampling", "tools")
            if tools is not None:
                params["tools"] = tools
            if tool_choice is not None:
                params["toolChoice"] = tool_choice
        return self._ask("sampling/createMessage", params, timeout, key)

    def elicit(
        self, message: str, schema: dict[str, Any] | type, *, timeout: float | None = None, key: str | None = None
    ) -> Any:
        """elicitation/create in form mode (EL-01, EL-02). Returns the ElicitResult dict
        ({"action": "accept"|"decline"|"cancel", "content": {...}})."""
        rev = self._request.revision
        if not rev.elicitation:
            raise ClientCapabilityError(f"elicitation does not exist in protocol {self.protocol_version}")
        self._require("elicitation")
        if not isinstance(schema, dict):
            from .schema import type_schema

            schema = type_schema(schema)
        _check_form(schema, rev)
        params: dict[str, Any] = {"message": message, "requestedSchema": schema}
        if rev.elicitation_url:
            params["mode"] = "form"
        return self._ask("elicitation/create", params, timeout, key)

    def elicit_url(self, message: str, url: str, elicitation_id: str, *, timeout: float | None = None) -> Any:
        """elicitation/create in URL mode (EL-04; 2025-11-25, needs ``elicitation.url``)."""
        rev = self._request.revision
        if not rev.elicitation_url:
            raise ClientCapabilityError(f"URL elicitation does not exist in protocol {self.protocol_version}")
        self._require("elicitation", "url")
        params = {"mode": "url", "message": message, "url": url, "elicitationId": elicitation_id}
        return self._ask("elicitation/create", params, timeout)

    def ping(self, *, timeout: float | None = None) -> Any:
        """Ping the client (PG-01: either side may ping); raises TimeoutError when it does not answer."""
        return self._ask("ping", None, timeout)

    def roots(self, *, timeout: float | None = None, key: str | None = None) -> Any:
        """roots/list (RT-01). Returns the ListRootsResult dict ({"roots": [...]})."""
        self._require("roots")
        return self._ask("roots/list", None, timeout, key)


_PRIMITIVES = frozenset({"string", "number", "integer", "boolean"})


def _check_form(schema: dict[str, Any], rev: Any) -> None:
    """EL-02: a form is a flat object of primitive properties; multi-select and titled
    enums exist only from 2025-11-25. Refused here, before anything reaches the client."""
    props = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(props, dict):
        raise ClientCapabilityError('an elicitation form needs {"type": "object", "properties": {...}} (EL-02)')
    for name, prop in props.items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        if kind == "array" or "oneOf" in prop or "anyOf" in prop:
            if not rev.elicitation_rich_enums:
                raise ClientCapabilityError(
                    f"form field {name!r} is a multi-select or titled enum, which needs protocol "
                    f"2025-11-25; the client speaks {rev.version}"
                )
            if kind == "array":
                items = prop.get("items")
                if not isinstance(items, dict) or not ("enum" in items or "anyOf" in items or "oneOf" in items):
                    raise ClientCapabilityError(f"form field {name!r}: an array field must be a multi-select enum (EL-02)")
            continue
        if kind not in _PRIMITIVES:
            raise ClientCapabilityError(
                f"form field {name!r} has type {kind!r}: forms take only flat string, number, integer "
                "and boolean fields (EL-02)"
            )


def level_rank(level: str) -> int:
    return _LEVEL_RANK[level]
