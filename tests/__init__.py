"""mcpkit's test suite (a package, so that ``tests.plugins`` and ``tests.wire`` import)."""
