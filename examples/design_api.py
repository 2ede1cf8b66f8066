"""A design-API server: an MCP server in front of a SaaS design API, with the caller's API key.

    DESIGN_API_URL=https://api.example.com/v1 python examples/design_api.py --port 8080
    # clients send X-API-Key: <their key for the design API> with every request
    DESIGN_API_KEY=<your key> python examples/design_api.py     # stdio: the key from the environment
    mcpkit install claude-desktop examples/design_api.py --env DESIGN_API_KEY=<your key> --write

Each caller uses their own key: the server does not hold one. ``ApiKeyAuth(passthrough=True)``
requires the header over HTTP (401 naming it otherwise, no OAuth metadata), or DESIGN_API_KEY in
the environment over stdio (one line and exit 2 without it), and hands the key to the handlers,
which read it with ``api_key(ctx)`` on both transports; :class:`Upstream` sends it on, waits out
the API's 429s (``Retry-After``), retries its 5xx with backoff, stops calling it for a while when
it keeps failing, and turns its 404/403/429 into E_NOT_FOUND / E_PERMISSION_DENIED /
E_RATE_LIMITED. Calls are rate-limited per caller
(``DESIGN_RATE_LIMIT``, 120/min; exports 10/min). Resources: the template catalogue and each
design by id; a prompt drafts a social-media post design. Results are contract envelopes of the
legacy shape the design API's clients read (``files``: an export's download URL); a size is
``width`` and ``height`` together, and a template brings its own.
"""

from __future__ import annotations

import json
import os
import sys

from mcpkit import Context, Server
from mcpkit.auth import ApiKeyAuth, api_key
from mcpkit.bridge import Upstream
from mcpkit.policy import Policy
from mcpkit.policy.ratelimit import RateLimiter
from mcpkit.protocol.errors import E_NOT_FOUND, INTERNAL_ERROR, McpError, ToolError
from mcpkit.protocol.revisions import get as revision

api = Upstream(os.environ.get("DESIGN_API_URL", "https://api.canvelete.example/v1"), name="Design API",
               auth_header="X-API-Key", auth_scheme=None, retries=int(os.environ.get("DESIGN_API_RETRIES", "3")),
               max_retry_after=float(os.environ.get("DESIGN_API_MAX_WAIT", "20")))
auth = ApiKeyAuth(passthrough=True, header="X-API-Key", env="DESIGN_API_KEY")
server = Server("design-api", "1.0.0", instructions="Create, inspect and export designs of the caller's account.",
                auth=auth, policy=Policy(rate_limiter=RateLimiter(os.environ.get("DESIGN_RATE_LIMIT", "120/min")),
                                         contract="legacy"))


@server.tool(read_only=True)
async def list_designs(ctx: Context, page: int = 1, query: str | None = None) -> dict:
    """The caller's designs, newest first (20 a page)."""
    return await api.get("/designs", key=api_key(ctx), params={"page": page, **({"q": query} if query else {})})


@server.tool(read_only=True)
async def get_design(design_id: str, ctx: Context) -> dict:
    """One design: its size, pages and elements."""
    return await api.get(f"/designs/{design_id}", key=api_key(ctx))


@server.tool(destructive=False, exclusive=[("template_id", "width"), ("template_id", "height")],
             depends_on={"width": "height", "height": "width"})
async def create_design(title: str, ctx: Context, template_id: str | None = None, width: int | None = None,
                        height: int | None = None) -> dict:
    """Create a design, blank (1080 x 1080 unless sized) or from a template."""
    if template_id:
        body = {"title": title, "templateId": template_id}
    else:
        body = {"title": title, "width": width or 1080, "height": height or 1080}
    return await api.post("/designs", key=api_key(ctx), json=body)


@server.tool(destructive=False, idempotent=True, rate_limit="10/min", timeout=120)
async def export_design(design_id: str, ctx: Context, format: str = "png") -> dict:  # noqa: A002
    """Render a design to png, jpg, pdf or svg; returns a download URL."""
    exported = await api.post(f"/designs/{design_id}/export", key=api_key(ctx), json={"format": format})
    if isinstance(exported, dict) and exported.get("url"):
        ctx.add_file(exported["url"])  # the legacy envelope's files
    return exported


@server.tool(destructive=True)
async def delete_design(design_id: str, ctx: Context) -> dict:
    """Delete a design for good."""
    await api.delete(f"/designs/{design_id}", key=api_key(ctx))
    return {"deleted": design_id}


@server.resource("design://templates", mime_type="application/json", cache_scope="private")
async def templates(ctx: Context) -> str:
    """The template catalogue of the caller's plan."""
    return json.dumps(await api.get("/templates", key=api_key(ctx)))


@server.resource_template("design://designs/{design_id}", mime_type="application/json")
async def design(design_id: str, ctx: Context) -> str:
    """A design by id."""
    try:
        return json.dumps(await api.get(f"/designs/{design_id}", key=api_key(ctx)))
    except ToolError as exc:  # RS-08: a design that does not exist is a resource that does not
        if exc.code != E_NOT_FOUND:
            raise McpError(INTERNAL_ERROR, exc.message) from None
        raise ctx.server.not_found(f"design://designs/{design_id}", revision(ctx.protocol_version)) from None


@server.prompt
def social_post(topic: str, platform: str = "instagram") -> str:
    """Draft a social-media post design about a topic."""
    return (f"Create a {platform} post design about {topic}: pick a template from design://templates, "
            f"create_design from it, adjust the title text, then export_design as png.")


if __name__ == "__main__":
    if "--port" in sys.argv:
        server.run("http", port=int(sys.argv[sys.argv.index("--port") + 1]))  # the X-API-Key header
    else:
        server.run()  # stdio: DESIGN_API_KEY
