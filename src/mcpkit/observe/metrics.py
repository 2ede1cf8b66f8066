"""A Prometheus page for servers without an OpenTelemetry collector: ``mcpkit serve --http ...
--metrics`` (or ``server.observe(PrometheusMetrics())`` and ``http_app(metrics=True)``) serves
``GET /metrics`` in the Prometheus text format.

Built on ``prometheus-client`` (``pip install 'mcpkit[metrics]'``): one small pure-Python
package, where the OpenTelemetry route would need the SDK and its Prometheus exporter on top of
the API. Each server gets a registry of its own, so several servers in one process do not mix.

    mcp_server_requests_total{method, tool, outcome}     outcome: ok, error, tool_error, cancelled
    mcp_server_operation_duration_seconds{method}       a histogram
    mcp_server_notifications_total{method}
    mcp_server_active_sessions
    mcp_server_rate_limited_total{tool}                 calls refused with E_RATE_LIMITED
    mcp_server_bridge_up{bridge}                        1 while a bridge a tool requires is up
    mcp_proxy_redactions_total{upstream, kind, direction, action}   secrets masked or refused in transit

A method, tool or notification name the server does not know is counted as ``other``
(observe/labels.py): the series stay bounded by what the server defines, whatever clients send.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from .labels import method_label, notification_label, tool_label

__all__ = ["PrometheusMetrics"]

_RATE_LIMITED = "E_RATE_LIMITED"
_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _State:
    __slots__ = ("method", "tool", "started")

    def __init__(self, method: str, tool: str, started: float) -> None:
        self.method = method
        self.tool = tool
        self.started = started


class PrometheusMetrics:
    """Counts and times every request of the server it observes."""

    def __init__(self) -> None:
        from .._extras import needs

        with needs("metrics", "PrometheusMetrics (--metrics)"):
            from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("mcp_server_requests", "MCP requests answered, by method, tool and outcome.",
                                ["method", "tool", "outcome"], registry=self.registry)
        self.duration = Histogram("mcp_server_operation_duration_seconds",
                                  "Time from receiving an MCP request to sending its answer.", ["method"],
                                  buckets=_BUCKETS, registry=self.registry)
        self.notifications = Counter("mcp_server_notifications", "MCP notifications received, by method.",
                                     ["method"], registry=self.registry)
        self.sessions = Gauge("mcp_server_active_sessions", "MCP sessions open now.", registry=self.registry)
        self.rate_limited = Counter("mcp_server_rate_limited", "Tool calls refused by a rate limit.", ["tool"],
                                    registry=self.registry)
        self.redactions = Counter("mcp_proxy_redactions", "Secrets a proxy masked or refused in transit.",
                                  ["upstream", "kind", "direction", "action"], registry=self.registry)
        self._server: Any = None
        self._open: set[int] = set()
        registry = self.registry

        class _Bridges:  # read at scrape time: bridge state is whatever it is now
            def collect(inner) -> Iterator[Any]:  # noqa: N805 - a collector protocol method
                with needs("metrics", "PrometheusMetrics (--metrics)"):
                    from prometheus_client.core import GaugeMetricFamily

                family = GaugeMetricFamily("mcp_server_bridge_up", "1 while the bridge is up, else 0.",
                                           labels=["bridge"])
                for bridge in self._bridges():
                    family.add_metric([str(getattr(bridge, "name", "bridge"))], 1.0 if bridge.up else 0.0)
                yield family

        registry.register(_Bridges())

    def attach(self, server: Any) -> PrometheusMetrics:
        """Observe ``server`` (alongside whatever already observes it)."""
        self._server = server
        current = server.observer
        if current is None:
            server.observe(self)
        else:
            others = getattr(current, "observers", [current])
            server.observe(*others, self)
        return self

    def _bridges(self) -> list[Any]:
        server = self._server
        if server is None:
            return []
        seen: dict[int, Any] = {}
        for tool in list(server._tools.values()):
            for bridge in tool.bridges:  # a manager's actions' bridges too
                seen.setdefault(id(bridge), bridge)
        return list(seen.values())

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        from .._extras import needs

        with needs("metrics", "PrometheusMetrics (--metrics)"):
            from prometheus_client import generate_latest

        return bytes(generate_latest(self.registry))

    # ------------------------------------------------------------------ the observer protocol

    def start(self, session: Any, request: Any) -> _State:
        if id(session) not in self._open:
            self._open.add(id(session))
            self.sessions.inc()
        method = method_label(session, request.method, request.revision)
        params = request.params
        tool = ""
        if method == "tools/call":
            tool = tool_label(session, params.get("name") if isinstance(params, dict) else None)
        return _State(method, tool, time.perf_counter())

    def enter(self, state: Any) -> None:
        return None

    def exit(self, state: Any, token: Any) -> None:
        return None

    def bind_fn(self, state: Any, fn: Any) -> Any:
        return fn

    def bind_coro(self, state: Any, coro: Any) -> Any:
        return coro

    def end(self, state: _State, result: dict[str, Any] | None, error: Any) -> None:
        if error is not None:
            outcome = "error"
        elif result is None:
            outcome = "cancelled"
        elif result.get("isError") is True:
            outcome = "tool_error"
            if _error_code(result) == _RATE_LIMITED:
                self.rate_limited.labels(state.tool).inc()
        else:
            outcome = "ok"
        self.requests.labels(state.method, state.tool, outcome).inc()
        self.duration.labels(state.method).observe(time.perf_counter() - state.started)

    def redacted(self, upstream: str, kind: str, direction: str, action: str) -> None:
        """One secret the proxy masked or refused (proxy/redaction.py): the labels are its
        upstreams' names and fixed words, so the series stay bounded."""
        self.redactions.labels(upstream, kind, direction, action).inc()

    def notification(self, session: Any, method: str, params: Any) -> None:
        self.notifications.labels(notification_label(session, method)).inc()

    def session_started(self, session: Any, version: str) -> None:
        if id(session) not in self._open:
            self._open.add(id(session))
            self.sessions.inc()

    def session_closed(self, session: Any) -> None:
        if id(session) in self._open:
            self._open.discard(id(session))
            self.sessions.dec()


def _error_code(result: dict[str, Any]) -> str | None:
    """The E_* code of a failed tool result: in the contract envelope, or in _meta without it."""
    structured = result.get("structuredContent")
    if isinstance(structured, dict) and isinstance(structured.get("error"), dict):
        return structured["error"].get("code")
    meta = result.get("_meta")
    if isinstance(meta, dict) and isinstance(meta.get("dev.mcpkit/error"), dict):
        return meta["dev.mcpkit/error"].get("code")
    return None
