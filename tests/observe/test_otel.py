"""OpenTelemetry per the MCP semantic conventions, checked with the SDK's in-memory exporter and
metric reader: span names, kinds, attributes, errors, trace context from params._meta, the
2026-07-28 path, and one trace from mcpkit.Client through the server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcpkit import Client, Context, Server, ToolError
from mcpkit.observe import OpenTelemetry

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry tests need opentelemetry-sdk (the dev extra)")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

SEEN: list[str | None] = []  # the trace ids handlers saw (ctx.trace_id)
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def telemetry():
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield OpenTelemetry(tracer_provider=tracer_provider, meter_provider=meter_provider), exporter, reader


def make_server() -> Server:
    server = Server("weather", "1.0")

    @server.tool
    def forecast(city: str, ctx: Context) -> str:
        SEEN.append(ctx.trace_id)
        return f"sunny in {city}"

    @server.tool
    def broken() -> str:
        raise ToolError("the forecast service is down")

    @server.tool
    async def slow(ms: int) -> str:
        await asyncio.sleep(ms / 1000)
        return "done"

    @server.resource("note://today", mime_type="text/plain")
    def today() -> str:
        return "note"

    @server.prompt
    def greet(name: str) -> str:
        return f"Hello {name}"

    return server


def run(server: Server, body: Any) -> Any:
    async def go() -> Any:
        async with Client(server) as client:
            return await body(client)

    return asyncio.run(go())


def spans_named(exporter: Any, name: str) -> list[Any]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def test_a_tool_call_span_follows_the_conventions(telemetry):
    otel, exporter, reader = telemetry
    server = make_server()
    server.observe(otel)
    run(server, lambda c: c.call_tool("forecast", {"city": "Paris"}))
    [span] = spans_named(exporter, "tools/call forecast")
    assert span.kind is SpanKind.SERVER
    attrs = dict(span.attributes)
    assert attrs["mcp.method.name"] == "tools/call" and attrs["gen_ai.tool.name"] == "forecast"
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["mcp.protocol.version"] == "2025-11-25"
    assert attrs["jsonrpc.request.id"] and "error.type" not in attrs
    assert span.status.status_code is StatusCode.UNSET
    assert SEEN[-1] == format(span.context.trace_id, "032x")  # the handler runs inside the span
    assert [s.name for s in spans_named(exporter, "initialize")] == ["initialize"]
    names = {m.name for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics
             for m in sm.metrics}
    assert "mcp.server.operation.duration" in names


def test_errors_resource_reads_and_prompts(telemetry):
    otel, exporter, _ = telemetry
    server = make_server()
    server.observe(otel)

    async def body(c: Any) -> None:
        await c.call_tool("broken", {})
        await c.read_resource("note://today")
        await c.get_prompt("greet", {"name": "Ada"})
        with pytest.raises(Exception):
            await c.read_resource("note://missing")

    run(server, body)
    [tool] = spans_named(exporter, "tools/call broken")
    assert tool.attributes["error.type"] == "tool_error" and tool.status.status_code is StatusCode.ERROR
    assert "down" in tool.status.description
    read, missing = spans_named(exporter, "resources/read")
    assert read.attributes["mcp.resource.uri"] == "note://today" and "error.type" not in read.attributes
    assert missing.attributes["error.type"] == missing.attributes["rpc.response.status_code"]
    assert missing.attributes["error.type"] in ("-32002", "-32602") and missing.status.status_code is StatusCode.ERROR
    [prompt] = spans_named(exporter, "prompts/get greet")
    assert prompt.attributes["gen_ai.prompt.name"] == "greet"


def test_the_trace_context_in_params_meta_is_the_parent(telemetry):
    otel, exporter, _ = telemetry
    server = make_server()
    server.observe(otel)
    from mcpkit.server.session import ServerSession

    sent: list[Any] = []
    session = ServerSession(server, sent.extend, inline_sync=True)
    session.feed(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
                 b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}')
    session.feed(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    session.feed(('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"forecast","arguments":'
                  '{"city":"Oslo"},"_meta":{"traceparent":"%s"}}}' % TRACEPARENT).encode())
    session.feed(('{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{"_meta":'
                  '{"traceparent":"%s"}}}' % TRACEPARENT).encode())
    session.flush()
    [note] = spans_named(exporter, "notifications/roots/list_changed")  # notifications get spans too
    assert note.kind is SpanKind.SERVER and format(note.parent.span_id, "016x") == "00f067aa0ba902b7"
    [span] = spans_named(exporter, "tools/call forecast")
    assert format(span.context.trace_id, "032x") == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert format(span.parent.span_id, "016x") == "00f067aa0ba902b7" and span.parent.is_remote
    assert span.attributes["network.transport"] == "pipe"
    assert SEEN[-1] == "4bf92f3577b34da6a3ce929d0e0e4736"


def test_async_handlers_and_2026_07_28_requests(telemetry):
    otel, exporter, _ = telemetry
    server = make_server()
    server.observe(otel)

    async def go() -> None:
        async with Client(server, protocol_version="2026-07-28") as client:
            await client.call_tool("slow", {"ms": 20})

    asyncio.run(go())
    [span] = spans_named(exporter, "tools/call slow")
    assert span.attributes["mcp.protocol.version"] == "2026-07-28"
    assert span.end_time - span.start_time >= 15_000_000  # covers the handler's await


def test_no_observer_no_spans_and_off_again(telemetry):
    otel, exporter, _ = telemetry
    server = make_server()
    run(server, lambda c: c.call_tool("forecast", {"city": "Rome"}))
    assert exporter.get_finished_spans() == ()
    server.observe(otel)
    server.observe()
    run(server, lambda c: c.call_tool("forecast", {"city": "Rome"}))
    assert exporter.get_finished_spans() == ()


def test_one_trace_from_mcpkit_client_through_the_server(telemetry):
    otel, exporter, _ = telemetry
    server = make_server()
    server.observe(otel)
    from opentelemetry import trace

    tracer_provider = exporter_provider(exporter)

    async def go() -> None:
        async with Client(server, tracer_provider=tracer_provider) as client:
            with trace.get_tracer("host", tracer_provider=tracer_provider).start_as_current_span("host turn"):
                await client.call_tool("forecast", {"city": "Lima"})

    asyncio.run(go())
    [host] = spans_named(exporter, "host turn")
    client_spans = [s for s in spans_named(exporter, "tools/call forecast") if s.kind is SpanKind.CLIENT]
    server_spans = [s for s in spans_named(exporter, "tools/call forecast") if s.kind is SpanKind.SERVER]
    assert len(client_spans) == 1 and len(server_spans) == 1
    trace_id = host.context.trace_id
    assert client_spans[0].context.trace_id == trace_id == server_spans[0].context.trace_id
    assert client_spans[0].parent.span_id == host.context.span_id
    assert server_spans[0].parent.span_id == client_spans[0].context.span_id  # via params._meta


def exporter_provider(exporter: Any) -> Any:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def test_one_trace_from_the_host_through_a_proxy_to_its_upstream(telemetry):
    """host span -> mcpkit.Client -> proxy (mcpkit proxy's Server) -> its upstream client -> upstream:
    one trace, each span the child of the one before, across both MCP hops."""
    otel, exporter, _ = telemetry
    tracer_provider = exporter_provider(exporter)
    upstream = make_server()
    upstream.observe(otel)
    proxy = Server.proxy(Client(upstream, tracer_provider=tracer_provider), name="front")
    proxy.observe(otel)
    from opentelemetry import trace

    async def go() -> Any:
        async with Client(proxy, tracer_provider=tracer_provider) as client:
            await client.list_tools()
            with trace.get_tracer("host", tracer_provider=tracer_provider).start_as_current_span("host turn"):
                return await client.call_tool("forecast", {"city": "Quito"})

    result = asyncio.run(go())
    assert result["content"][0]["text"] == "sunny in Quito"
    [host] = spans_named(exporter, "host turn")
    chain = [s for s in exporter.get_finished_spans() if s.name == "tools/call forecast"]
    assert len(chain) == 4  # client, proxy server, proxy's upstream client, upstream server
    assert {s.context.trace_id for s in chain} == {host.context.trace_id}
    by_parent = {s.parent.span_id: s for s in chain}
    span, kinds = host, []
    while span.context.span_id in by_parent:
        span = by_parent[span.context.span_id]
        kinds.append(span.kind)
    assert kinds == [SpanKind.CLIENT, SpanKind.SERVER, SpanKind.CLIENT, SpanKind.SERVER]


def test_audit_lines_and_log_records_name_the_trace(telemetry, tmp_path, caplog):
    import json
    import logging

    from mcpkit.policy import AuditLog, Policy
    from mcpkit.policy.chain import CorrelationFilter

    otel, exporter, _ = telemetry
    audit = tmp_path / "audit.log"
    server = Server("audited", policy=Policy(audit=AuditLog(str(audit), flush_interval=0.05)))
    log = logging.getLogger("mcpkit.test.tool")

    @server.tool(read_only=True, open_world=False)
    def lookup(key: str) -> str:
        log.warning("looking up %s", key)
        return key.upper()

    server.observe(otel)
    handler = logging.Handler()
    records: list[logging.LogRecord] = []
    handler.emit = records.append  # type: ignore[method-assign]
    handler.addFilter(CorrelationFilter())
    log.addHandler(handler)
    try:
        run(server, lambda c: c.call_tool("lookup", {"key": "k1"}))
    finally:
        log.removeHandler(handler)
    server.policy.audit.flush()
    [span] = spans_named(exporter, "tools/call lookup")
    trace_id, span_id = format(span.context.trace_id, "032x"), format(span.context.span_id, "016x")
    [line] = [json.loads(x) for x in audit.read_text().splitlines()]
    assert (line["traceId"], line["spanId"]) == (trace_id, span_id)
    [record] = records
    assert record.trace_id == trace_id and f"trace {trace_id}" in record.getMessage()
    assert line["correlationId"] in record.getMessage()


def test_made_up_names_are_one_metric_attribute_and_one_span_name(telemetry):
    otel, exporter, reader = telemetry
    server = make_server()
    server.observe(otel)

    async def body(c: Any) -> None:
        for i in range(5):
            with pytest.raises(Exception):
                await c.call_tool(f"made_up_{i}", {})
            with pytest.raises(Exception):
                await c.get_prompt(f"made_up_{i}", {})
            with pytest.raises(Exception):
                await c.request(f"made/up/{i}", {})
        await c.call_tool("forecast", {"city": "Paris"})

    run(server, body)
    points = [dict(p.attributes) for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics
              for m in sm.metrics if m.name == "mcp.server.operation.duration" for p in m.data.data_points]
    assert not [p for p in points if "made" in repr(p)]
    assert {"mcp.method.name": "tools/call", "gen_ai.tool.name": "other"}.items() <= \
        next(p for p in points if p.get("gen_ai.tool.name") == "other").items()
    assert any(p.get("gen_ai.tool.name") == "forecast" for p in points)
    assert any(p["mcp.method.name"] == "other" for p in points)
    assert len(spans_named(exporter, "tools/call other")) == 5 and len(spans_named(exporter, "other")) == 5
    [span, *_] = spans_named(exporter, "tools/call other")
    assert span.attributes["gen_ai.tool.name"].startswith("made_up_")  # the span keeps what was sent
