"""A notes-and-tasks server listed as a search/call pair (docs/tool-search.md).

    mcpkit serve examples/tool_search.py

``tools/list`` shows ``help``, ``search_tools`` and ``call_tool``; the other tools are found by
``search_tools`` and called through ``call_tool``. The guard rails of ``Policy.secure`` apply to
every call through the pair as to a direct one: ``delete_note`` is destructive, so it is neither
found nor callable unless ``MCPKIT_ALLOW_DESTRUCTIVE=1``, and each call is audited under the
tool's own name (``MCPKIT_AUDIT_LOG``, or the ``mcpkit.audit`` logger on stderr).
"""

from __future__ import annotations

from mcpkit import Server, ToolSearch
from mcpkit.policy import Policy

server = Server("notes", "1.0", tool_search=ToolSearch(pinned=["help"]), policy=Policy.secure())
NOTES: dict[str, str] = {"groceries": "milk, eggs"}
TASKS: list[dict[str, object]] = []


@server.tool(read_only=True, open_world=False)
def help() -> str:
    """What this server does and how to find its tools."""
    return "Notes and tasks. Find a tool with search_tools, then run it with call_tool."


@server.tool(read_only=True, open_world=False)
def list_notes() -> list[str]:
    """List the titles of all notes."""
    return sorted(NOTES)


@server.tool(read_only=True, open_world=False)
def read_note(title: str) -> str:
    """Read the text of a note by its title."""
    return NOTES.get(title, "")


@server.tool(destructive=False, idempotent=True, open_world=False)
def write_note(title: str, text: str) -> str:
    """Create a note, or replace the text of an existing one."""
    NOTES[title] = text
    return f"saved {title}"


@server.tool(destructive=True, open_world=False)
def delete_note(title: str) -> str:
    """Delete a note permanently."""
    NOTES.pop(title, None)
    return f"deleted {title}"


@server.tool(read_only=True, open_world=False)
def search_notes(words: str) -> list[str]:
    """Find the notes whose text contains the given words."""
    return [t for t, body in NOTES.items() if words.lower() in body.lower()]


@server.tool(destructive=False, open_world=False)
def add_task(description: str, due: str | None = None) -> int:
    """Add a task to the to-do list, with an optional due date (YYYY-MM-DD)."""
    TASKS.append({"description": description, "due": due, "done": False})
    return len(TASKS)


@server.tool(read_only=True, open_world=False)
def list_tasks(include_done: bool = False) -> list[dict[str, object]]:
    """List the tasks of the to-do list."""
    return [t for t in TASKS if include_done or not t["done"]]


@server.tool(destructive=False, idempotent=True, open_world=False)
def complete_task(number: int) -> str:
    """Mark a task of the to-do list as done."""
    TASKS[number - 1]["done"] = True
    return f"task {number} done"


@server.tool(read_only=True, open_world=False)
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


if __name__ == "__main__":
    server.run()
