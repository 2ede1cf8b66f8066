"""Watching a server in production: OpenTelemetry traces and metrics per the MCP semantic
conventions (:class:`OpenTelemetry`), and a Prometheus page for those without a collector
(:class:`PrometheusMetrics`). ``server.observe(...)`` turns them on; each imports its library
only when it is made."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .metrics import PrometheusMetrics
    from .otel import OpenTelemetry

__all__ = ["OpenTelemetry", "PrometheusMetrics"]


def __getattr__(name: str) -> Any:
    if name == "OpenTelemetry":
        from .otel import OpenTelemetry

        return OpenTelemetry
    if name == "PrometheusMetrics":
        from .metrics import PrometheusMetrics

        return PrometheusMetrics
    raise AttributeError(f"module 'mcpkit.observe' has no attribute {name!r}")
