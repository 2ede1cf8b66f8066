"""pytest plugins of mcpkit's own test suite."""
