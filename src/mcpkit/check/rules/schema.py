"""JSON Schema: every inputSchema and outputSchema is a valid schema with an object root."""

from __future__ import annotations

from typing import Any

from ...server.validation import compile_schema
from ..context import CheckContext
from ..model import Finding
from ..registry import rule

DRAFT_07 = "http://json-schema.org/draft-07/schema#"


def schema_problem(schema: Any, label: str, *, default_2020: bool, object_root: bool) -> str | None:
    """Why ``schema`` is not acceptable, or None.

    JS-01: without ``$schema`` it is 2020-12 from 2025-11-25 on; before, the dialect was unspecified
    (draft-07 in practice), so a schema valid as draft-07 passes there.
    """
    if not isinstance(schema, dict):
        return f"{label} is {'missing' if schema is None else 'not an object'}"
    try:
        compile_schema(schema, label)
    except ValueError as exc:
        message = str(exc).split("\n", 1)[0]
        if default_2020 or "$schema" in schema:
            return message
        try:
            compile_schema({**schema, "$schema": DRAFT_07}, label)
        except ValueError:
            return message
    if object_root and schema.get("type") != "object":
        return f"{label} has type {schema.get('type')!r} at its root; it must be \"object\""
    return None


@rule(
    "schema.input-valid", example="invalid_schema",
    keyword="MUST", requirements=("TL-05", "JS-01", "JS-02", "JS-04"),
    quote="inputSchema: JSON Schema defining expected parameters [...] MUST be a valid JSON Schema object "
    "(not null). Schemas MUST be valid according to their declared or default dialect. (The schema requires "
    "type: \"object\" at the root.)",
    source="server/tools#tool, basic/index#json-schema-usage",
    fixes={
        "mcpkit": "built in: schemas are generated from the signature and checked at registration",
        "sdk": "built in for typed functions; check a hand-written inputSchema against its meta-schema",
        "fastmcp": "built in for typed functions",
        "ts": "built in for zod shapes; check a hand-written JSON Schema against its meta-schema",
    },
    title="every tool's inputSchema is a valid JSON Schema (2020-12 unless $schema says otherwise) "
    "with type \"object\" at the root",
    fix="publish an inputSchema like {\"type\": \"object\", \"properties\": {...}, \"required\": [...]} "
    "that validates against its dialect's meta-schema",
)
async def check_input_schemas(ctx: CheckContext) -> list[Finding]:
    tools = await ctx.tools()
    out: list[Finding] = []
    for tool in tools:
        name = tool.get("name")
        problem = schema_problem(
            tool.get("inputSchema"), f"tool {name!r} inputSchema",
            default_2020=ctx.since("2025-11-25"), object_root=True,
        )
        if problem:
            out.append(ctx.fail(problem, tool=name))
    return out or [ctx.ok(f"{len(tools)} inputSchema(s) valid")]


@rule(
    "schema.output-valid", example="invalid_output_schema",
    keyword="MUST", requirements=("TL-07", "JS-01", "JS-04"),
    revisions=("2025-06-18", "2025-11-25", "2026-07-28"),
    quote="outputSchema: Optional JSON Schema defining expected output structure [...] Schemas MUST be valid "
    "according to their declared or default dialect. (Before 2026-07-28 the schema requires type: "
    "\"object\" at the root.)",
    source="server/tools#tool, basic/index#json-schema-usage",
    fixes={
        "mcpkit": "built in",
        "sdk": "built in: return a pydantic model, TypedDict or dict-typed value",
        "fastmcp": "built in",
        "ts": "pass an object zod shape as outputSchema",
    },
    title="every outputSchema is a valid JSON Schema (an object root before 2026-07-28)",
    fix="publish an outputSchema that validates against its dialect's meta-schema, with type \"object\" "
    "at the root for clients before 2026-07-28",
)
async def check_output_schemas(ctx: CheckContext) -> list[Finding]:
    tools = await ctx.tools()
    declared = [t for t in tools if "outputSchema" in t]
    if not declared:
        raise ctx.skip("no tool declares an outputSchema")
    out: list[Finding] = []
    for tool in declared:
        name = tool.get("name")
        problem = schema_problem(
            tool.get("outputSchema"), f"tool {name!r} outputSchema",
            default_2020=ctx.since("2025-11-25"), object_root=not ctx.modern,
        )
        if problem:
            out.append(ctx.fail(problem, tool=name))
    return out or [ctx.ok(f"{len(declared)} outputSchema(s) valid")]
