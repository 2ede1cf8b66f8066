#!/usr/bin/env python3
"""Dispatch CPU per tools/call with telemetry on, against the same call unobserved.

Four servers in this process, each on a stdio-style ServerSession fed the same pre-encoded
`tools/call` frames (no transport, no system calls), rounds rotated so drift spreads over all:

  plain        nobody observes the server
  otel-api     OpenTelemetry() with only opentelemetry-api: no SDK configured, every call a no-op
  otel-sdk     OpenTelemetry() on an SDK TracerProvider + MeterProvider, spans to an in-memory exporter
  prometheus   PrometheusMetrics() (counters and a histogram per call)

    python bench/observe_overhead.py [--calls 20000] [--rounds 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from policy_overhead import build, frames, run_round, session_for  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="write the numbers here too")
    args = parser.parse_args()
    from opentelemetry.metrics import NoOpMeterProvider
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import NoOpTracerProvider

    from mcpkit.observe import OpenTelemetry, PrometheusMetrics

    servers = {name: build(None) for name in ("plain", "otel-api", "otel-sdk", "prometheus")}
    servers["otel-api"].observe(OpenTelemetry(tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider()))
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    servers["otel-sdk"].observe(OpenTelemetry(tracer_provider=tracer_provider,
                                              meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()])))
    PrometheusMetrics().attach(servers["prometheus"])
    sessions = {name: session_for(server) for name, server in servers.items()}
    batch = frames(args.calls)
    for session, sent in sessions.values():
        run_round(session, sent, batch[:2000])  # warm-up
    results: dict[str, list[float]] = {name: [] for name in servers}
    names = list(servers)
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            exporter.clear()
            session, sent = sessions[name]
            results[name].append(run_round(session, sent, batch))
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"dispatch CPU per tools/call (no transport), {args.rounds} rounds x {args.calls} calls, medians [min-max]:")
    for name, values in results.items():
        print(f"  {name:10s} {med[name]:6.1f} us  [{min(values):.1f}-{max(values):.1f}]  "
              f"+{med[name] - med['plain']:.1f} us over plain")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"calls": args.calls, "rounds": args.rounds, "us_per_call": results, "median_us": med}, fh,
                      indent=2)


if __name__ == "__main__":
    main()
