"""A tour of what a client does for a server, to try in ``mcpkit dev examples/dev_tour.py``.

Its tools ask the client for input (an elicitation form, a sampled message, the roots), run
slowly with progress (to cancel), take a pydantic model and Literal choices; a resource changes
(to subscribe to), a prompt and a template complete their arguments, skills are served, and one
tool reaches outside the server (open-world) and one action of a manager tool deletes, so under
``--policy`` they are gated.

    mcpkit dev examples/dev_tour.py             # everything listed
    mcpkit dev examples/dev_tour.py --policy    # fetch_page and notes' wipe action gated
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from mcpkit import Context, Server

server = Server("dev-tour", "1.0", instructions="A tour of client features.")
server.skills_from(Path(__file__).parent / "skills")

COUNTER = {"value": 0}
MENUS = ["breakfast", "brunch", "dinner", "lunch"]


class Address(BaseModel):
    street: str
    city: str
    postcode: str | None = None


class Booking(BaseModel):
    guest: str = Field(description="who the table is for")
    size: int = Field(2, ge=1, le=12, description="how many people")
    seating: Literal["inside", "terrace"] = "inside"
    vegetarian: bool = False
    address: Address


@server.tool(destructive=False, open_world=False)
async def book(ctx: Context, booking: Booking) -> str:
    """Book a table: a pydantic model with a nested model, a Literal and a nullable field."""
    where = f"{booking.address.street}, {booking.address.city}"
    return f"table for {booking.size} ({booking.guest}, {booking.seating}) delivered to {where}"


@server.tool(destructive=False, open_world=False)
def greet(name: str | None = None, tone: Literal["warm", "formal"] = "warm") -> str:
    """Greet someone, or everyone when no name is given."""
    who = name or "everyone"
    return f"Hello, {who}!" if tone == "warm" else f"Good day, {who}."


@server.tool(destructive=False, open_world=False)
async def rsvp(ctx: Context, event: str) -> str:
    """Ask the user (elicitation) whether they come and with how many guests."""
    answer = await ctx.elicit(f"Are you coming to {event}?", {
        "type": "object",
        "properties": {
            "coming": {"type": "boolean", "title": "Coming", "default": True},
            "guests": {"type": "integer", "title": "Guests", "minimum": 0, "maximum": 5},
            "meal": {"type": "string", "title": "Meal", "enum": ["meat", "fish", "vegetarian"]},
            "note": {"type": "string", "title": "Note", "description": "anything we should know"},
        },
        "required": ["coming"],
    })
    if answer["action"] != "accept":
        return f"no answer ({answer['action']})"
    content = answer.get("content") or {}
    return f"{event}: coming={content.get('coming')}, guests={content.get('guests', 0)}, meal={content.get('meal', '-')}"


@server.tool(destructive=False, open_world=False)
async def survey(ctx: Context) -> str:
    """Ask with a titled choice and a multi-select (elicitation forms of 2025-11-25 and later)."""
    answer = await ctx.elicit("How was the launch?", {
        "type": "object",
        "properties": {
            "rating": {"title": "Rating", "oneOf": [{"const": "good", "title": "Good, thanks"},
                                                    {"const": "bad", "title": "Could be better"}]},
            "liked": {"type": "array", "title": "What you liked",
                      "items": {"type": "string", "enum": ["talks", "food", "music"]}},
        },
        "required": ["rating"],
    })
    content = answer.get("content") or {}
    return f"{answer['action']}: rating={content.get('rating')}, liked={', '.join(content.get('liked', []))}"


@server.tool(destructive=False, open_world=False)
async def connect_account(ctx: Context) -> str:
    """Send the user to a web page (URL-mode elicitation, 2025-11-25)."""
    answer = await ctx.elicit_url("Sign in to the calendar service.", "https://calendar.example.com/connect?id=42", "42")
    return f"sign-in {answer['action']}"


@server.tool(destructive=False, open_world=False)
async def haiku(ctx: Context, topic: str) -> str:
    """Ask the client's model (sampling) for a haiku."""
    result = await ctx.sample(f"Write a haiku about {topic}.", max_tokens=60, system_prompt="You are a poet.")
    content = result.get("content") or {}
    return content.get("text", "") if isinstance(content, dict) else str(content)


@server.tool(read_only=True, open_world=False)
async def roots(ctx: Context) -> list[str]:
    """The roots the client shares (roots/list)."""
    listed = await ctx.roots()
    return [root["uri"] for root in listed["roots"]]


@server.tool(read_only=True, open_world=False)
async def count_slowly(ctx: Context, steps: int = 20) -> str:
    """Count to `steps`, a step every half second with progress: long enough to cancel."""
    for step in range(1, steps + 1):
        await asyncio.sleep(0.5)
        await ctx.report_progress(step, steps, f"step {step}")
    return f"counted to {steps}"


@server.tool(destructive=False, open_world=False)
def bump() -> int:
    """Add one to tour://counter, which tells its subscribers."""
    COUNTER["value"] += 1
    server.notify_resource_updated("tour://counter")
    return COUNTER["value"]


@server.tool(read_only=True)
def fetch_page(url: str) -> str:
    """Fetch a web page (open-world: gated under --policy unless MCPKIT_ALLOW_OPEN_WORLD=1)."""
    return f"would fetch {url}"


NOTES: list[str] = ["buy bread"]
notes = server.manager("notes", description="Keep notes: one action per operation.")


@notes.action(name="list", read_only=True, open_world=False)
def list_notes() -> list[str]:
    """Every note."""
    return list(NOTES)


@notes.action(name="wipe", destructive=True, open_world=False)
def wipe_notes() -> int:
    """Delete every note (destructive: gated under --policy unless MCPKIT_ALLOW_DESTRUCTIVE=1)."""
    count = len(NOTES)
    NOTES.clear()
    return count


@server.resource("tour://counter", mime_type="text/plain")
def counter() -> str:
    """A counter that `bump` changes: subscribe to it."""
    return f"counter = {COUNTER['value']}"


def _menus(value: str) -> list[str]:
    return [m for m in MENUS if m.startswith(value.lower())]


@server.resource_template("tour://menus/{menu}", mime_type="text/plain", completions={"menu": _menus})
def menu(menu: str) -> str:
    """A menu of the day."""
    return f"The {menu} menu: soup, bread, cake."


def _cuisines(value: str) -> list[str]:
    return [c for c in ("french", "italian", "japanese") if c.startswith(value.lower())]


@server.prompt(completions={"cuisine": _cuisines})
def dinner_plan(cuisine: Literal["french", "italian", "japanese"], guests: str = "2") -> str:
    """Plan a dinner."""
    return f"Plan a {cuisine} dinner for {guests} guests."


if __name__ == "__main__":
    server.run()
