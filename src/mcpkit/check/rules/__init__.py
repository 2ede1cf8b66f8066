"""The rule families of ``mcpkit check``; importing this package registers every rule."""

from . import (  # noqa: F401 - each module registers its rules
    caching,
    capabilities,
    conformance,
    discovery,
    errors,
    hosts,
    http,
    lifecycle,
    pagination,
    poisoning,
    resources,
    schema,
    security,
    skills,
    stdio,
    tasks,
    tools,
    wire,
)
