"""Client spans and trace context for mcpkit.Client, per the OpenTelemetry semantic conventions
for MCP: a CLIENT span ``{method} {target}`` per request, its context injected into
``params._meta`` (``traceparent``, ``tracestate``, ``baggage``, unprefixed as the conventions
say), so the server's span is its child and host -> server -> upstream is one trace.

Used only when OpenTelemetry is already imported in the process (something configured it);
otherwise the client sends exactly what it sent before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .._extras import needs
from .errors import RpcError

__all__ = ["traced"]


async def traced(
    client: Any, method: str, params: dict[str, Any] | None, send: Callable[[dict[str, Any] | None], Awaitable[Any]],
) -> Any:
    with needs("otel", "mcpkit.Client(tracer_provider=...)"):
        from opentelemetry import propagate, trace

    tracer = trace.get_tracer("mcpkit", tracer_provider=client.tracer_provider)
    attributes: dict[str, Any] = {"mcp.method.name": method, "mcp.protocol.version": client.requested_version}
    target = None
    if isinstance(params, dict):
        name = params.get("name")
        if method == "tools/call" and isinstance(name, str):
            target = attributes["gen_ai.tool.name"] = name
            attributes["gen_ai.operation.name"] = "execute_tool"
        elif method == "prompts/get" and isinstance(name, str):
            target = attributes["gen_ai.prompt.name"] = name
        elif method.startswith("resources/") and isinstance(params.get("uri"), str):
            attributes["mcp.resource.uri"] = params["uri"]
    session_id = getattr(client, "session_id", None)
    if session_id:
        attributes["mcp.session.id"] = session_id
    span = tracer.start_span(f"{method} {target}" if target else method, kind=trace.SpanKind.CLIENT,
                             attributes=attributes)
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    if carrier:
        params = dict(params or {})
        params["_meta"] = {**(params.get("_meta") or {}), **carrier}
    try:
        with trace.use_span(span, end_on_exit=False):
            result = await send(params)
    except RpcError as exc:
        span.set_attribute("error.type", str(exc.code))
        span.set_attribute("rpc.response.status_code", str(exc.code))
        span.set_status(trace.Status(trace.StatusCode.ERROR, exc.message))
        span.end()
        raise
    except BaseException as exc:
        span.set_attribute("error.type", type(exc).__name__)
        span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)))
        span.end()
        raise
    if method == "tools/call" and isinstance(result, dict) and result.get("isError") is True:
        span.set_attribute("error.type", "tool_error")
        span.set_status(trace.Status(trace.StatusCode.ERROR, "tool error"))
    span.end()
    return result
