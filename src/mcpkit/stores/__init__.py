"""State stores: memory (the embedded default); one small interface per kind of state."""
