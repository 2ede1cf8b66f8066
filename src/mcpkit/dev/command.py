"""The ``mcpkit dev`` subcommand (filled in by dev/)."""
from __future__ import annotations
from typing import Any

def add_parser(sub: Any) -> None:
    pass
