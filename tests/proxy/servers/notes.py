"""An upstream for the profile and size-cap tests: a read tool and a write tool, a resource, a
prompt, and ``blob(size)``, whose answer is about ``size`` bytes long. With ``NOTES_STARTS=FILE``
it appends its pid to FILE as it starts."""

import os

from mcpkit import Server

if os.environ.get("NOTES_STARTS"):  # one line per process started: how many connections were opened
    with open(os.environ["NOTES_STARTS"], "a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()}\n")

server = Server("notes", "1.0")
NOTES: dict[str, str] = {"welcome": "hello"}


@server.tool(read_only=True, open_world=False)
def read_note(name: str) -> str:
    """A note's text."""
    return NOTES.get(name, "")


@server.tool(read_only=False, destructive=False, open_world=False)
def write_note(name: str, text: str) -> str:
    """Write a note."""
    NOTES[name] = text
    return "written"


@server.tool(read_only=True, open_world=False)
def blob(size: int) -> str:
    """About ``size`` bytes of text."""
    return "x" * size


@server.resource("notes://welcome")
def welcome() -> str:
    return NOTES["welcome"]


@server.prompt()
def summarize(name: str) -> str:
    """Summarize a note."""
    return f"Summarize the note {name}."
