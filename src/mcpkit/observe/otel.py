"""OpenTelemetry for MCP servers, following the OpenTelemetry semantic conventions for the Model
Context Protocol (open-telemetry/semantic-conventions-genai, docs/gen-ai/mcp.md, status
"Development"; attribute names as of semantic conventions v1.41).

Per request and per client notification (initialize included; ping, answered inside the protocol
engine, has none), a SERVER span named ``{mcp.method.name} {target}``
(the tool or prompt name when there is one; resource URIs stay out of span names, they are
high-cardinality) whose parent is the trace context the client put in ``params._meta``
(``traceparent``, ``tracestate``, ``baggage``). Attributes: ``mcp.method.name``,
``mcp.protocol.version``, ``mcp.session.id``, ``jsonrpc.request.id``, ``gen_ai.tool.name`` /
``gen_ai.operation.name=execute_tool``, ``gen_ai.prompt.name``, ``mcp.resource.uri``,
``network.transport`` (``pipe`` for stdio, ``tcp`` for HTTP). A JSON-RPC error sets
``error.type`` and ``rpc.response.status_code`` to its code and the span status to ERROR with its
message; a tool result with ``isError`` sets ``error.type=tool_error``. Metrics:
``mcp.server.operation.duration`` and ``mcp.server.session.duration`` (histograms, seconds).
In metric attributes and span names, a method, tool or prompt name the server does not know is
``other`` (observe/labels.py), so made-up names cannot add series without limit; the span's
attributes keep the name as sent.

Only ``opentelemetry-api`` is needed (``pip install 'mcpkit[otel]'``), and it is imported when an
:class:`OpenTelemetry` is made: with no SDK configured every call is the API's no-op.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .labels import method_label, notification_label, prompt_label, tool_label

__all__ = ["OpenTelemetry", "SEMCONV_SOURCE", "console_provider", "sdk_configured"]

SEMCONV_SOURCE = "OpenTelemetry semantic conventions for MCP (semantic-conventions-genai, docs/gen-ai/mcp.md)"
_SCOPE = "mcpkit"
#: durations are histograms in seconds; these boundaries are the conventions' advice for MCP
_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]
_CARRIER_KEYS = ("traceparent", "tracestate", "baggage")


class _State:
    __slots__ = ("span", "started", "attributes", "context", "tool", "labels")

    def __init__(self, span: Any, started: float, attributes: dict[str, Any], context: Any, tool: bool,
                 labels: dict[str, str]) -> None:
        self.span = span
        self.started = started
        self.attributes = attributes
        self.context = context
        self.tool = tool
        #: the bounded values metric attributes take instead of the client's names
        self.labels = labels


class OpenTelemetry:
    """Spans and metrics for every request: ``server.observe(OpenTelemetry())``.

    ``tracer_provider`` / ``meter_provider`` default to the global ones (what the OpenTelemetry
    SDK or auto-instrumentation configured)."""

    def __init__(self, *, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        from .._extras import needs

        with needs("otel", "OpenTelemetry"):
            from opentelemetry import context, metrics, propagate, trace
        self._context = context
        self._propagate = propagate
        self._trace = trace
        self._tracer = trace.get_tracer(_SCOPE, _version(), tracer_provider=tracer_provider)
        meter = metrics.get_meter(_SCOPE, _version(), meter_provider=meter_provider)
        self._operation = meter.create_histogram(
            "mcp.server.operation.duration", unit="s",
            description="MCP request or notification duration as observed on the receiver from the time it was "
                        "received until the result or ack is sent.",
            explicit_bucket_boundaries_advisory=_BUCKETS)
        self._session = meter.create_histogram(
            "mcp.server.session.duration", unit="s", description="The duration of the MCP session as observed on "
            "the MCP server.", explicit_bucket_boundaries_advisory=_BUCKETS)
        self._sessions: dict[int, tuple[float, dict[str, Any]]] = {}
        self._server_kind = trace.SpanKind.SERVER

    # ------------------------------------------------------------------ requests

    def _begin(self, session: Any, method: str, params: Any, request_id: Any, version: str | None) -> _State:
        attributes: dict[str, Any] = {"mcp.method.name": method,
                                      "network.transport": "pipe" if session.inline_sync else "tcp"}
        if version:
            attributes["mcp.protocol.version"] = version
        if session.session_id:
            attributes["mcp.session.id"] = session.session_id
        if request_id is not None:
            attributes["jsonrpc.request.id"] = str(request_id)
        label = notification_label(session, method) if method.startswith("notifications/") \
            else method_label(session, method)
        labels = {"mcp.method.name": label}
        target = None
        tool = False
        if isinstance(params, dict):
            if method == "tools/call" and isinstance(params.get("name"), str):
                attributes["gen_ai.tool.name"] = params["name"]
                target = labels["gen_ai.tool.name"] = tool_label(session, params["name"])
                attributes["gen_ai.operation.name"] = "execute_tool"
                tool = True
            elif method == "prompts/get" and isinstance(params.get("name"), str):
                attributes["gen_ai.prompt.name"] = params["name"]
                target = labels["gen_ai.prompt.name"] = prompt_label(session, params["name"])
            elif method in ("resources/read", "resources/subscribe", "resources/unsubscribe",
                            "notifications/resources/updated") and isinstance(params.get("uri"), str):
                attributes["mcp.resource.uri"] = params["uri"]
            meta = params.get("_meta")
            carrier = {k: meta[k] for k in _CARRIER_KEYS if isinstance(meta, dict) and isinstance(meta.get(k), str)}
        else:
            carrier = {}
        if id(session) not in self._sessions:
            self._sessions[id(session)] = (time.perf_counter(), {
                k: v for k, v in attributes.items() if k in ("network.transport", "mcp.protocol.version")})
        parent = self._propagate.extract(carrier) if carrier else None
        span = self._tracer.start_span(f"{label} {target}" if target else label, context=parent,
                                       kind=self._server_kind, attributes=attributes)
        return _State(span, time.perf_counter(), attributes, self._trace.set_span_in_context(span, parent), tool,
                      labels)

    def start(self, session: Any, request: Any) -> _State:
        return self._begin(session, request.method, request.params, request.id, request.revision.version)

    def enter(self, state: _State) -> Any:
        return self._context.attach(state.context)

    def exit(self, state: _State, token: Any) -> None:
        self._context.detach(token)

    def bind_fn(self, state: _State | None, fn: Callable[[], Any]) -> Callable[[], Any]:
        if state is None:
            return fn
        attach, detach, ctx = self._context.attach, self._context.detach, state.context

        def run() -> Any:
            token = attach(ctx)
            try:
                return fn()
            finally:
                detach(token)

        return run

    def bind_coro(self, state: _State | None, coro: Any) -> Any:
        if state is None:
            return coro
        attach, detach, ctx = self._context.attach, self._context.detach, state.context

        async def run() -> Any:
            token = attach(ctx)
            try:
                return await coro
            finally:
                detach(token)

        return run()

    def end(self, state: _State, result: dict[str, Any] | None, error: Any) -> None:
        span = state.span
        attributes = state.attributes
        error_type = None
        if error is not None:
            error_type = str(error.code)
            span.set_attribute("rpc.response.status_code", error_type)
            attributes["rpc.response.status_code"] = error_type
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, error.message))
        elif result is None:
            error_type = "cancelled"
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, "cancelled"))
        elif state.tool and result.get("isError") is True:
            error_type = "tool_error"  # the conventions' value for a CallToolResult with isError
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, _first_text(result)))
        if error_type is not None:
            span.set_attribute("error.type", error_type)
            attributes["error.type"] = error_type
        span.end()
        labels = state.labels
        self._operation.record(time.perf_counter() - state.started,
                               {k: labels.get(k, v) for k, v in attributes.items() if k not in _HIGH_CARDINALITY})

    def notification(self, session: Any, method: str, params: Any) -> None:
        state = self._begin(session, method, params, None, None)
        self.end(state, {}, None)

    def session_started(self, session: Any, version: str) -> None:
        # initialize is answered inside the protocol engine: its span is the moment it was
        state = self._begin(session, "initialize", None, None, version)
        self.end(state, {}, None)

    def session_closed(self, session: Any) -> None:
        begun = self._sessions.pop(id(session), None)
        if begun is not None:
            self._session.record(time.perf_counter() - begun[0], begun[1])


#: attributes that would make a metric series per request, per session or per resource
_HIGH_CARDINALITY = frozenset({"jsonrpc.request.id", "mcp.session.id", "mcp.resource.uri"})


def _first_text(result: dict[str, Any]) -> str:
    for block in result.get("content") or ():
        if isinstance(block, dict) and block.get("type") == "text":
            return str(block.get("text", ""))[:200]
    return "tool error"


def _version() -> str:
    from .. import __version__

    return __version__


def sdk_configured() -> bool:
    """Whether a real tracer provider is set globally (the SDK, or auto-instrumentation): with
    the API alone, the global one is the API's proxy, and every span is a no-op."""
    from .._extras import needs

    with needs("otel", "OpenTelemetry"):
        from opentelemetry import trace

    return type(trace.get_tracer_provider()).__name__ not in ("ProxyTracerProvider", "NoOpTracerProvider")


def console_provider(service_name: str) -> Any:
    """Set the SDK's tracer provider globally, printing each finished span as one JSON line on
    stderr (never stdout: on stdio that is the protocol's); returns it."""
    import sys

    from .._extras import needs

    with needs("otel-sdk", "--otel-console"):
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    exporter = ConsoleSpanExporter(out=sys.stderr, formatter=lambda span: span.to_json(indent=None) + "\n")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider
