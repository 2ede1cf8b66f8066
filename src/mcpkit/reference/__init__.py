"""The bundled reference server: the official conformance contract plus a few demo tools.

``mcpkit serve`` runs it. Names, arguments, URIs, MIME types and texts follow
the conformance suite's contract exactly (suite 0.1.16, section 2).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Annotated, Any

from .. import __version__
from ..protocol.errors import MISSING_REQUIRED_CLIENT_CAPABILITY, McpError, ToolError
from ..server.content import Content, audio, image, resource, text
from ..server.context import Context
from ..server.server import Server

__all__ = ["server", "PNG_1X1", "WAV_MIN"]

PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV_MIN = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

server = Server(
    "mcpkit-reference",
    __version__,
    title="mcpkit reference server",
    description="Every MCP server feature, as the official conformance suite expects it.",
    instructions="A test server: the test_* tools, resources and prompts follow the MCP conformance contract.",
    website_url="https://pypi.org/project/mcpkit/",
)

# ---------------------------------------------------------------------------- tools (contract §2.2)


@server.tool
def test_simple_text() -> str:
    """Returns a simple text response."""
    return "This is a simple text response for testing."


@server.tool
def test_image_content() -> Content:
    """Returns a 1x1 PNG image."""
    return image(PNG_1X1, "image/png")


@server.tool
def test_audio_content() -> Content:
    """Returns a minimal WAV clip."""
    return audio(WAV_MIN, "audio/wav")


@server.tool
def test_embedded_resource() -> Content:
    """Returns an embedded text resource."""
    return resource("test://embedded-resource", text="This is an embedded resource content.", mime_type="text/plain")


@server.tool
def test_multiple_content_types() -> list[Content]:
    """Returns text, an image and an embedded resource."""
    return [
        text("Multiple content types test:"),
        image(PNG_1X1, "image/png"),
        resource(
            "test://mixed-content-resource",
            text=json.dumps({"test": "data", "value": 123}, separators=(",", ":")),
            mime_type="application/json",
        ),
    ]


@server.tool
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three info log messages while it runs."""
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@server.tool
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 out of 100 on the request's progress token."""
    for step, value in enumerate((0, 50, 100)):
        if step:
            await asyncio.sleep(0.05)
        await ctx.report_progress(value, 100, f"Completed step {value} of 100")
    return str(ctx.progress_token) if ctx.progress_token is not None else "Progress complete"


@server.tool
def test_error_handling() -> str:
    """Always fails, as a tool error (isError), not a protocol error."""
    raise ToolError("This tool intentionally returns an error for testing")


@server.tool
async def test_sampling(prompt: Annotated[str, "The prompt to send to the client's model"], ctx: Context) -> str:
    """Asks the client's model (sampling/createMessage) and returns its answer."""
    result = await ctx.sample(prompt, max_tokens=100)
    content = result.get("content") if isinstance(result, dict) else None
    if isinstance(content, list):
        content = next((c for c in content if c.get("type") == "text"), content[0] if content else None)
    answer = content.get("text", "") if isinstance(content, dict) else ""
    return f"LLM response: {answer}"


@server.tool
async def test_elicitation(message: Annotated[str, "The message to show the user"], ctx: Context) -> str:
    """Asks the user for a username and an email (elicitation/create)."""
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    result = await ctx.elicit(message, schema)
    return f"User response: <action: {result.get('action')}, content: {json.dumps(result.get('content'))}>"


@server.tool
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicits five fields that all carry defaults (SEP-1034)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        },
        "required": [],
    }
    result = await ctx.elicit("Please review and update the form fields with defaults", schema)
    return f"Elicitation completed: action={result.get('action')}, content={json.dumps(result.get('content'))}"


@server.tool
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicits the five enum shapes of SEP-1330."""
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
        "required": [],
    }
    result = await ctx.elicit("Please choose from the enum options", schema)
    return f"Elicitation completed: action={result.get('action')}, content={json.dumps(result.get('content'))}"


# A raw schema is listed exactly as given: $schema, $defs and $ref stay (JS-01, JS-04).
server.add_tool(
    "json_schema_2020_12_tool",
    lambda arguments: f"Received: {json.dumps(arguments, sort_keys=True)}",
    description="Tool with JSON Schema 2020-12 features",
    input_schema={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            }
        },
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "additionalProperties": False,
    },
)


@server.tool
async def test_reconnection() -> str:
    """Runs briefly, so a client can drop and resume the stream mid-call (SEP-1699)."""
    await asyncio.sleep(0.2)
    return "Reconnection test completed successfully"


# ---------------------------------------------------------------------------- demo tools


@server.tool(read_only=True, idempotent=True, open_world=False)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(read_only=True, idempotent=True, open_world=False)
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool(read_only=True, open_world=False)
async def countdown(seconds: Annotated[int, "How many seconds to count down"], ctx: Context) -> str:
    """Counts down, reporting progress every second; cancel it to stop early."""
    for done in range(seconds):
        await ctx.report_progress(done, seconds, f"{seconds - done} s left")
        await asyncio.sleep(1)
    return "Lift-off"


@server.tool(read_only=True, open_world=False)
def sleep(seconds: Annotated[float, "How long to block, in seconds (at most 60)"]) -> str:
    """Blocks a worker for a while (a sync tool): other calls and ping are not delayed by it."""
    time.sleep(max(0.0, min(seconds, 60.0)))
    return f"Slept {seconds} s"


@server.tool(read_only=True, open_world=False)
async def list_roots(ctx: Context) -> str:
    """Asks the client for its roots (roots/list) and lists them."""
    result = await ctx.roots()
    roots = result.get("roots", []) if isinstance(result, dict) else []
    return "\n".join(f"{r.get('name') or ''} {r.get('uri')}".strip() for r in roots) or "(no roots)"


@server.tool
def test_trigger_tool_change() -> str:
    """Adds, then removes, the tool test_dynamic_tool: clients see two tools/list_changed."""
    server.add_tool(
        "test_dynamic_tool",
        lambda arguments: "dynamic",
        input_schema={"type": "object", "properties": {}},
        description="A tool that exists only for a moment",
        replace=True,
    )
    server.remove_tool("test_dynamic_tool")
    return "tool list changed"


@server.tool
def test_trigger_prompt_change() -> str:
    """Adds, then removes, the prompt test_dynamic_prompt: clients see two prompts/list_changed."""
    server.prompt(lambda: "dynamic", name="test_dynamic_prompt", description="A passing prompt", replace=True)
    server.remove_prompt("test_dynamic_prompt")
    return "prompt list changed"


@server.tool
def test_trigger_resource_update(
    uri: Annotated[str, "The resource that changed"] = "test://watched-resource",
) -> str:
    """Sends notifications/resources/updated for the URI to the sessions subscribed to it."""
    server.notify_resource_updated(uri)
    return f"updated {uri}"


# ---------------------------------------------------------------------------- 2026-07-28 diagnostics
# (the conformance suite 0.2.0-alpha.12, CONTRACT-2026 §2.3)


@server.tool
def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability, declared on this very request (MT-08)."""
    if "sampling" not in ctx.client_capabilities:
        raise McpError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            "This tool needs the sampling capability.",
            {"requiredCapabilities": {"sampling": {}}},
        )
    return "Client declared sampling capability; proceeding."


@server.tool
async def test_streaming_elicitation(ctx: Context) -> str:
    """Answers on its own stream without asking the client anything (no server requests, HM-05)."""
    await ctx.report_progress(1, 1, "working")
    return "Streaming complete"


@server.tool
async def test_logging_tool(ctx: Context) -> str:
    """Logs at info, which reaches only clients whose request asked for a log level (LG-03)."""
    await ctx.info("Logging evaluated")
    return "Logging evaluated"


server.add_tool(
    "test_x_mcp_header",
    lambda arguments: f"region={arguments.get('region', '<none>')}",
    description="Mirrors its region argument into the Mcp-Param-Region header (HM-19)",
    input_schema={
        "type": "object",
        "properties": {
            "region": {
                "type": "string",
                "default": "<none>",
                "description": "Mirrored into the Mcp-Param-Region header",
                "x-mcp-header": "Region",
            }
        },
    },
)


# ---------------------------------------------------------------------------- multi-round-trip inputs
# (CONTRACT-2026 §2.4). In 2026-07-28 each ask becomes an InputRequiredResult entry under its key;
# in the handshake era the same code sends real requests to the client.

_NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
_CONFIRM_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def _text_of(sampled: Any) -> str:
    content = sampled.get("content") if isinstance(sampled, dict) else None
    if isinstance(content, list):
        content = content[0] if content else None
    return content.get("text", "") if isinstance(content, dict) else ""


@server.tool
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks the user for a name (one round trip)."""
    answer = await ctx.elicit("What is your name?", _NAME_SCHEMA, key="user_name")
    return f"Hello, {(answer.get('content') or {}).get('name', 'stranger')}!"


@server.tool
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's model a question (one round trip)."""
    answer = await ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    return f"Model said: {_text_of(answer)}"


@server.tool
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Asks the client for its roots (one round trip)."""
    answer = await ctx.roots(key="client_roots")
    return f"Client exposed {len(answer.get('roots', []))} root(s)."


@server.tool
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Asks for a confirmation; the retry brings it with the sealed requestState."""
    answer = await ctx.elicit("Please confirm", _CONFIRM_SCHEMA, key="confirm")
    return "state-ok: confirmation received" if answer.get("action") == "accept" else "state-ok: declined"


@server.tool
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks for a name, a generated greeting and the roots, all in one round."""
    await asyncio.gather(
        ctx.elicit("What is your name?", _NAME_SCHEMA, key="user_name"),
        ctx.sample("Generate a greeting", max_tokens=50, key="greeting"),
        ctx.roots(key="client_roots"),
    )
    return "All inputs received."


@server.tool
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Two rounds: a name, then a favorite color."""
    first = await ctx.elicit("Step 1: What is your name?", _NAME_SCHEMA, key="step1")
    name = (first.get("content") or {}).get("name", "someone")
    second = await ctx.elicit(
        "Step 2: What is your favorite color?",
        {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
        key="step2",
    )
    return f"{name} likes {(second.get('content') or {}).get('color', 'nothing')}."


@server.tool
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Asks for a confirmation; a retry with a forged requestState is refused."""
    await ctx.elicit("Please confirm", _CONFIRM_SCHEMA, key="confirm")
    return "confirmed"


@server.tool
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only for what this request's client declared (MR-05)."""
    caps = ctx.client_capabilities
    asks = []
    if "sampling" in caps:
        asks.append(ctx.sample("Say hello", max_tokens=50, key="sample"))
    if "elicitation" in caps:
        asks.append(ctx.elicit("What is your name?", _NAME_SCHEMA, key="ask"))
    await asyncio.gather(*asks)
    return "Capability-gated inputs received."


# ---------------------------------------------------------------------------- resources (contract §2.3)


@server.resource("test://static-text", name="static-text", description="A static text resource", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", description="A static binary resource (1x1 PNG)", mime_type="image/png")
def static_binary() -> dict[str, Any]:
    return {"blob": PNG_1X1}


@server.resource_template(
    "test://template/{id}/data",
    name="template-data",
    description="JSON data for any id",
    mime_type="application/json",
    completions={"id": lambda value: [str(i) for i in range(1, 6) if str(i).startswith(value)]},
)
def template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":"))


@server.resource("test://watched-resource", name="watched-resource", description="A resource to subscribe to", mime_type="text/plain")
def watched_resource() -> str:
    return "Watched resource content"


# ---------------------------------------------------------------------------- prompts (contract §2.4)


@server.prompt
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@server.prompt(completions={"arg1": lambda value: [v for v in ("paris", "park", "party") if v.startswith(value)]})
def test_prompt_with_arguments(
    arg1: Annotated[str, "First test argument"], arg2: Annotated[str, "Second test argument"]
) -> str:
    """A prompt with two required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt
def test_prompt_with_embedded_resource(resourceUri: Annotated[str, "URI of the resource to embed"]) -> list[Any]:  # noqa: N803
    """A prompt that embeds a resource."""
    return [
        {"role": "user", "content": resource(resourceUri, text="Embedded resource content for testing.", mime_type="text/plain")},
        {"role": "user", "content": text("Please process the embedded resource above.")},
    ]


@server.prompt
def test_prompt_with_image() -> list[Any]:
    """A prompt with an image."""
    return [
        {"role": "user", "content": image(PNG_1X1, "image/png")},
        {"role": "user", "content": text("Please analyze the image above.")},
    ]


# A prompt that asks for input first (CONTRACT-2026 §2.4); listed after the 0.1.16 prompts.


@server.prompt
async def test_input_required_result_prompt(ctx: Context) -> str:
    """A prompt that asks the user for context first."""
    answer = await ctx.elicit(
        "What context should the prompt use?",
        {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]},
        key="user_context",
    )
    return f"Use the following context: {(answer.get('content') or {}).get('context', '')}"


from . import tasks as _tasks  # noqa: E402,F401  the tasks fixtures (CONTRACT-2026 §2.5)
from . import skills as _skills  # noqa: E402  the skills (SEP-2640 scenarios)

_skills.register(server)
