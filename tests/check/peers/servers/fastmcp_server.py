"""Typical FastMCP servers (PyPI ``fastmcp`` 4.x), written the way its documentation shows, for the
poisoning scan's count of false alarms (test_scan_peers.py): ``python fastmcp_server.py tracker``
is an issue tracker with an API token in its configuration, ``python fastmcp_server.py assistant``
a writing assistant whose tools call a language model (a ``system_prompt`` and ``max_tokens`` of
its own, which ask the model for nothing of its context). ``... tracker --http PORT`` serves
Streamable HTTP on 127.0.0.1:PORT/mcp. The corpus of tests/check/peers runs ``mcpkit check`` on them.
"""

import sys
from typing import Annotated, Literal

from fastmcp import Context, FastMCP
from pydantic import BaseModel, Field


def tracker() -> FastMCP:
    mcp = FastMCP("tracker", instructions="Issues of the demo project.")

    class Issue(BaseModel):
        title: str = Field(description="A short summary of the problem")
        body: str = Field("", description="What happened, what was expected, and how to reproduce it")
        labels: list[str] = Field(default_factory=list, description="Labels such as bug or enhancement")

    @mcp.tool(annotations={"readOnlyHint": True})
    def search_issues(query: Annotated[str, Field(description="Words to look for in titles and bodies")],
                      state: Literal["open", "closed", "all"] = "open", limit: int = 20,
                      page_token: str | None = None) -> list[dict]:
        """Search the project's issues. Returns at most `limit` issues, newest first, and a token for
        the next page. Ignore case when matching words."""
        return []

    @mcp.tool
    def create_issue(issue: Issue) -> dict:
        """Open a new issue. Before calling this tool, search_issues can tell whether it exists already."""
        return {"number": 1}

    @mcp.tool
    def comment(number: int, text: str, ctx: Context) -> str:
        """Add a comment to an issue and notify its subscribers."""
        return "ok"

    @mcp.tool(annotations={"destructiveHint": True})
    def close_issue(number: int, reason: Literal["completed", "not_planned"] = "completed") -> str:
        """Close an issue. Do not use this to delete an issue: closed issues stay searchable."""
        return "closed"

    @mcp.tool
    def send_digest(email: str, since_days: int = 7) -> str:
        """Send a digest of the week's issues to an email address (the user's own, from their profile)."""
        return "sent"

    @mcp.resource("tracker://issues/{number}")
    def issue(number: int) -> str:
        """One issue as JSON."""
        return "{}"

    @mcp.prompt
    def triage(number: int) -> str:
        """Triage an issue: label it and suggest who should look at it."""
        return f"Triage issue {number}."

    return mcp


def assistant() -> FastMCP:
    mcp = FastMCP("assistant")

    @mcp.tool
    async def rewrite(text: str, tone: Literal["formal", "casual", "concise"] = "concise",
                      system_prompt: Annotated[str, Field(description="Instructions for the rewriting model")] = "",
                      max_tokens: int = 512, ctx: Context | None = None) -> str:
        """Rewrite a text in another tone with a language model (sampling)."""
        return text

    @mcp.tool
    def check_password_strength(password: str) -> dict:
        """A password strength checker: rates a password from 0 to 4 and says why. The password is not
        stored or sent anywhere."""
        return {"score": 3}

    @mcp.tool
    def count_tokens(text: str, model: str = "gpt-4o") -> int:
        """Count the tokens a text takes for a model's tokenizer."""
        return len(text.split())

    @mcp.tool
    def translate(text: str, target: Annotated[str, Field(description="A language code such as de or ja")]) -> str:
        """Translate a text. Keeps Markdown, code blocks and emoji (👍, 👨‍👩‍👧) as they are."""
        return text

    @mcp.prompt
    def summarize(text: str, audience: str = "a general reader") -> str:
        """Summarize a text for an audience."""
        return f"Summarize for {audience}: {text}"

    return mcp


if __name__ == "__main__":
    server = {"tracker": tracker, "assistant": assistant}[sys.argv[1]]()
    if sys.argv[2:3] == ["--http"]:  # Streamable HTTP on 127.0.0.1:PORT/mcp, as the documentation runs it
        server.run(transport="http", host="127.0.0.1", port=int(sys.argv[3]), show_banner=False, log_level="WARNING")
    else:
        server.run(show_banner=False, log_level="WARNING")
