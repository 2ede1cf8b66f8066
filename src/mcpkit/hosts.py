"""What the hosts that consume MCP servers accept: a table of each host's limits on tools.

A schema that is valid MCP is not always one a host can use. The Anthropic API answers
``input_schema does not support oneOf, allOf, or anyOf at the top level`` and fails the whole
request, not just the one tool; OpenAI refuses names with a dot; Cursor sends only the first
tools it gets. Each entry below says what one host refuses or silently drops, and cites the
public source it was learned from (an API document or a public issue showing the host's own
error). Where a source shows a behaviour that may have changed since, or shows it for one
client of the API only, the entry says so (``confirmed=False``) rather than guessing.

    from mcpkit.hosts import tool_problems
    for p in tool_problems(tool_dict, ["claude", "openai", "gemini"]):
        print(p.host, p.tool, p.message, p.source)

``mcpkit check --hosts claude,openai,gemini`` runs the same checks against a live server
(check/rules/hosts.py); ``server.manager(...)`` generates schemas that pass them by default.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "HOSTS",
    "DEFAULT_HOSTS",
    "GEMINI_OPENAPI_KEYWORDS",
    "Host",
    "Limit",
    "OPENAI_STRICT_FORMATS",
    "OPENAI_STRICT_KEYWORDS",
    "OPENAI_STRICT_SIZES",
    "Problem",
    "ROOT_COMBINATORS",
    "flatten",
    "hosts_rejecting_root",
    "parse_hosts",
    "registration_problems",
    "root_combinators",
    "server_problems",
    "tool_problems",
]

#: keywords that make a schema's root something other than one plain object
ROOT_COMBINATORS = ("oneOf", "anyOf", "allOf", "not", "if", "then", "else")

#: the hosts ``mcpkit check`` looks at by default
DEFAULT_HOSTS = ("claude", "openai", "gemini")

REJECTS = "rejects"
IGNORES = "ignores"

_Test = Callable[[Mapping[str, Any], "_Ctx"], "str | None"]


@dataclass(frozen=True)
class Limit:
    """One thing a host refuses (the request fails) or ignores (the host drops it silently)."""

    #: root-combinator, ref, format, pattern, numeric-bounds, additional-properties, dialect,
    #: name, description-length, tool-count, type-array, strict-required, keyword, size
    feature: str
    effect: str
    #: what the host does, in one sentence
    detail: str
    #: the public page or issue it was learned from
    source: str
    #: False when the source shows it for one client, one model or one date only
    confirmed: bool = True
    test: _Test | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Host:
    id: str
    name: str
    limits: tuple[Limit, ...]


@dataclass(frozen=True)
class Problem:
    """Why ``host`` would reject or drop ``tool`` (tool None: the server as a whole)."""

    host: str
    tool: str | None
    feature: str
    effect: str
    message: str
    source: str
    confirmed: bool = True

    def __str__(self) -> str:
        who = f"tool {self.tool!r}" if self.tool is not None else "the server"
        verb = "rejects" if self.effect == REJECTS else "silently drops part of"
        note = "" if self.confirmed else " (reported, not confirmed for every version)"
        return f"{HOSTS[self.host].name} {verb} {who}: {self.message}{note} [{self.source}]"


@dataclass
class _Ctx:
    server_name: str | None = None
    tool_count: int = 0


# ------------------------------------------------------------------ schema walking


def _nodes(schema: Any, path: str = "") -> Iterable[tuple[str, dict[str, Any]]]:
    """Every subschema with its JSON pointer (properties, items, combinators, $defs)."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key in ("properties", "$defs", "definitions", "patternProperties"):
        sub = schema.get(key)
        if isinstance(sub, dict):
            for name, value in sub.items():
                yield from _nodes(value, f"{path}/{key}/{name}")
    for key in ("items", "additionalProperties", "not", "if", "then", "else", "contains"):
        sub = schema.get(key)
        if isinstance(sub, dict):
            yield from _nodes(sub, f"{path}/{key}")
        elif key == "items" and isinstance(sub, list):
            for i, value in enumerate(sub):
                yield from _nodes(value, f"{path}/items/{i}")
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        sub = schema.get(key)
        if isinstance(sub, list):
            for i, value in enumerate(sub):
                yield from _nodes(value, f"{path}/{key}/{i}")


def root_combinators(schema: Any, keywords: Sequence[str] = ROOT_COMBINATORS) -> list[str]:
    """The combinator keywords at the root of ``schema``, in ``keywords`` order."""
    if not isinstance(schema, dict):
        return []
    return [k for k in keywords if k in schema]


def _schema(tool: Mapping[str, Any]) -> dict[str, Any]:
    schema = tool.get("inputSchema")
    return schema if isinstance(schema, dict) else {}


# ------------------------------------------------------------------ the tests


def _root(keywords: tuple[str, ...]) -> _Test:
    def test(tool: Mapping[str, Any], ctx: _Ctx) -> str | None:
        schema = _schema(tool)
        found = root_combinators(schema, keywords)
        if found:
            return f"inputSchema has {', '.join(found)} at its root"
        if schema.get("type") != "object":
            return f"inputSchema's root type is {schema.get('type')!r}, not \"object\""
        return None

    return test


def _name(pattern: str, limit: int, prefixed: bool = False) -> _Test:
    rx = re.compile(pattern)

    def test(tool: Mapping[str, Any], ctx: _Ctx) -> str | None:
        name = str(tool.get("name", ""))
        if prefixed:
            shown = f"mcp__{ctx.server_name}__{name}"
            if ctx.server_name and rx.fullmatch(name) and len(shown) > limit:
                return f"name as shown to the model, {shown!r}, is {len(shown)} characters (at most {limit})"
            return None
        if not rx.fullmatch(name):
            return f"name {name!r} does not match {pattern}"
        if len(name) > limit:
            return f"name {name!r} is {len(name)} characters (at most {limit})"
        return None

    return test


def _description(most: int | None, least: int = 0) -> _Test:
    def test(tool: Mapping[str, Any], ctx: _Ctx) -> str | None:
        text = tool.get("description") or ""
        if most is not None and len(text) > most:
            return f"description is {len(text)} characters (at most {most})"
        if len(text) < least:
            return "description is empty"
        return None

    return test


def _gemini_ref(tool: Mapping[str, Any], ctx: _Ctx) -> str | None:
    """The two forms of $ref the Gemini API refuses in parametersJsonSchema."""
    for path, node in _nodes(_schema(tool)):
        for key in ("anyOf", "oneOf"):
            for i, branch in enumerate(node.get(key) or ()):
                if isinstance(branch, dict) and "$ref" in branch:
                    return f"{path or ''}/{key}/{i} is a $ref inside {key}"
        if "$ref" in node:
            extra = sorted(set(node) - {"$ref", "description", "default"})
            if extra:
                return f"{path or '(root)'} has $ref next to {', '.join(extra)}"
    return None


def _any_ref(tool: Mapping[str, Any], ctx: _Ctx) -> str | None:
    for path, node in _nodes(_schema(tool)):
        if "$ref" in node:
            return f"{path or '(root)'} uses $ref"
    return None


def _keyword(names: tuple[str, ...], what: str, allowed: Callable[[Any], bool] | None = None) -> _Test:
    def test(tool: Mapping[str, Any], ctx: _Ctx) -> str | None:
        for path, node in _nodes(_schema(tool)):
            for key in names:
                if key in node and not (allowed is not None and allowed(node[key])):
                    return f"{path or '(root)'} uses {key} ({what})"
        return None

    return test


def _type_array(tool: Mapping[str, Any], ctx: _Ctx) -> str | None:
    for path, node in _nodes(_schema(tool)):
        if isinstance(node.get("type"), list):
            return f"{path or '(root)'} has a list of types {node['type']}"
    return None


def _nested_combinator(tool: Mapping[str, Any], ctx: _Ctx) -> str | None:
    for path, node in _nodes(_schema(tool)):
        for key in ("anyOf", "oneOf", "allOf"):
            if key in node:
                return f"{path or '(root)'} uses {key}"
    return None


def _strict(tool: Mapping[str, Any], ctx: _Ctx) -> str | None:
    for path, node in _nodes(_schema(tool)):
        props = node.get("properties")
        if node.get("type") == "object" or isinstance(props, dict):
            if node.get("additionalProperties") is not False:
                return f"{path or '(root)'} does not set additionalProperties: false"
            missing = [k for k in (props or {}) if k not in (node.get("required") or ())]
            if missing:
                return f"{path or '(root)'} leaves {', '.join(missing)} optional (strict mode needs every property required)"
    return None


def _dialect(tool: Mapping[str, Any], ctx: _Ctx) -> str | None:
    schema = _schema(tool)
    if not schema:
        return None
    from .server.validation import compile_schema

    as_2020 = {k: v for k, v in schema.items() if k != "$schema"}
    try:
        compile_schema(as_2020, "inputSchema")
    except ValueError as exc:
        return f"inputSchema is not valid JSON Schema 2020-12: {str(exc).splitlines()[0]}"
    return None


OPENAI_STRICT_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})

#: the keywords OpenAI's strict mode takes (structured-outputs#supported-schemas); any other one is refused
#: ("In context=('properties', 'x'), 'default' is not permitted")
OPENAI_STRICT_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "anyOf", "enum", "const", "description",
    "title", "$defs", "definitions", "$ref", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "minItems", "maxItems"})
#: strict mode's size limits: nesting levels, object properties in all, enum values in all
OPENAI_STRICT_SIZES = (10, 5000, 1000)

#: the fields of the Schema object of Gemini's legacy ``parameters`` (an OpenAPI 3.0 subset) that every API
#: version reads; any other keyword fails the request ("Unknown name ...: Cannot find field"). Later versions
#: added some (default, title, anyOf...), older ones refuse them: a schema for every client keeps to these.
GEMINI_OPENAPI_KEYWORDS = frozenset({
    "type", "format", "description", "nullable", "enum", "properties", "required", "items", "minItems",
    "maxItems", "minimum", "maximum", "minLength", "maxLength", "pattern", "propertyOrdering",
    # reported by their own rules below (refs, combinators, additionalProperties), not twice
    "$ref", "$defs", "definitions", "anyOf", "oneOf", "allOf", "additionalProperties"})


def _unknown_keywords(known: frozenset[str], what: str) -> _Test:
    def test(tool: Mapping[str, Any], ctx: _Ctx) -> str | None:
        for path, node in _nodes(_schema(tool)):
            extra = sorted(k for k in node if k not in known)
            if extra:
                return f"{path or '(root)'} uses {', '.join(extra)} ({what})"
        return None

    return test


def _depth(schema: Any) -> int:
    """How many objects deep ``schema`` nests (the root object is 1), through properties and items."""
    if not isinstance(schema, dict):
        return 0
    below = [_depth(v) for v in (schema.get("properties") or {}).values()]
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            below.append(_depth(schema[key]))
    for key in ("anyOf", "oneOf", "allOf"):
        below.extend(_depth(b) for b in schema.get(key) or () if isinstance(b, dict))
    for defs in ("$defs", "definitions"):
        below.extend(_depth(b) - 1 for b in (schema.get(defs) or {}).values())
    own = 1 if schema.get("type") == "object" or "properties" in schema else 0
    return own + max(below, default=0)


def _strict_size(tool: Mapping[str, Any], ctx: _Ctx) -> str | None:
    levels, most_props, most_enum = OPENAI_STRICT_SIZES
    schema = _schema(tool)
    depth = _depth(schema)
    if depth > levels:
        return f"inputSchema nests {depth} objects deep (at most {levels})"
    nodes = [node for _, node in _nodes(schema)]
    props = sum(len(n.get("properties") or {}) for n in nodes)
    if props > most_props:
        return f"inputSchema has {props} properties in all (at most {most_props})"
    enums = sum(len(n.get("enum") or ()) for n in nodes)
    if enums > most_enum:
        return f"inputSchema has {enums} enum values in all (at most {most_enum})"
    return None


def _dialect_uri(tool: Mapping[str, Any], ctx: _Ctx) -> str | None:
    uri = _schema(tool).get("$schema")
    if uri is not None and "draft-07" not in str(uri):
        return f"inputSchema declares $schema {uri!r}"
    return None

# ------------------------------------------------------------------ the table

_ANTHROPIC_ROOT = Limit(
    "root-combinator", REJECTS,
    "the Messages API answers 400 'input_schema does not support oneOf, allOf, or anyOf at the top level' and "
    "fails every request that lists the tool, not only calls to it",
    "https://github.com/anthropics/claude-code/issues/657", test=_root(("oneOf", "anyOf", "allOf")))
_ANTHROPIC_NAME = Limit(
    "name", REJECTS,
    "tool names must match ^[a-zA-Z0-9_-]{1,64}$ (no dots, spaces or slashes), as the Messages API's tool "
    "definition documents; the whole request fails ('tools.15.custom.name: String should match pattern', "
    "anthropics/claude-code#985; Claude Desktop checks the same pattern before any request, evoila/meho#2745)",
    "https://docs.anthropic.com/en/docs/build-with-claude/tool-use/overview", test=_name(r"[a-zA-Z0-9_-]{1,64}", 64))
_ANTHROPIC_DIALECT = Limit(
    "dialect", REJECTS,
    "input_schema must be valid JSON Schema draft 2020-12, whatever its $schema says; the whole request fails",
    "https://github.com/anthropics/claude-code/issues/7365", test=_dialect)

HOSTS: dict[str, Host] = {
    h.id: h
    for h in (
        Host("claude", "Claude (Anthropic API, Claude Code, Claude Desktop)", (
            _ANTHROPIC_ROOT, _ANTHROPIC_NAME, _ANTHROPIC_DIALECT,
            Limit("name", REJECTS,
                  "Claude Code shows an MCP tool to the model as mcp__<server>__<tool>, and that whole name must "
                  "fit the API's 64 characters (the server's name is the user's, assumed here to be serverInfo's)",
                  "https://github.com/anthropics/claude-code/issues/96152", confirmed=False,
                  test=_name(r"[a-zA-Z0-9_-]{1,64}", 64, prefixed=True)),
        )),
        Host("bedrock", "Claude on Amazon Bedrock", (
            Limit("root-combinator", REJECTS,
                  "the same Claude models behind the Converse API; the root-combinator refusal is reported through "
                  "Bedrock-backed Claude Code sessions",
                  "https://github.com/anthropics/claude-code/issues/5973", confirmed=False,
                  test=_root(("oneOf", "anyOf", "allOf"))),
            Limit("dialect", REJECTS, "input_schema must be valid JSON Schema draft 2020-12 (seen through Bedrock)",
                  "https://github.com/acomagu/vscode-as-mcp-server/issues/6", test=_dialect),
            Limit("description-length", REJECTS,
                  "toolSpec.description must have at least 1 character: a tool without a description fails the "
                  "request", "https://github.com/danny-avila/LibreChat/issues/13209", test=_description(None, 1)),
            Limit("name", REJECTS, "tool names must match ^[a-zA-Z0-9_-]{1,64}$ (the Claude pattern with Bedrock's "
                  "64-character bound; not confirmed from an AWS document)",
                  "https://github.com/apify/tester-mcp-client/issues/11", confirmed=False,
                  test=_name(r"[a-zA-Z0-9_-]{1,64}", 64)),
        )),
        Host("vertex", "Claude on Google Vertex AI", (
            Limit("root-combinator", REJECTS,
                  "the same Claude Messages API on Vertex; assumed to refuse the same root combinators (the issue "
                  "template lists Vertex, no report seen for it alone)",
                  "https://github.com/anthropics/claude-code/issues/5973", confirmed=False,
                  test=_root(("oneOf", "anyOf", "allOf"))),
            Limit("name", REJECTS, "tool names as on the Anthropic API", _ANTHROPIC_NAME.source, confirmed=False,
                  test=_ANTHROPIC_NAME.test),
        )),
        Host("openai", "OpenAI and Azure OpenAI function calling", (
            Limit("root-combinator", REJECTS,
                  "'schema must have type object and not have oneOf/anyOf/allOf/enum/not at the top level' "
                  "(invalid_function_parameters, 400)", "https://github.com/nspady/google-calendar-mcp/issues/39",
                  test=_root(("oneOf", "anyOf", "allOf", "enum", "not"))),
            Limit("name", REJECTS, "function names must match ^[a-zA-Z0-9_-]{1,64}$",
                  "https://github.com/packit/ai-workflows/pull/619", test=_name(r"[a-zA-Z0-9_-]{1,64}", 64)),
            Limit("description-length", REJECTS,
                  "function.description longer than 1024 characters is refused (string_above_max_length), also on "
                  "Azure OpenAI (langchain-ai/open_deep_research#80); reported lifted for newer OpenAI models in "
                  "May 2025 (run-llama/llama_index#18784)",
                  "https://github.com/getsentry/sentry-mcp/issues/106", confirmed=False, test=_description(1024)),
            Limit("tool-count", REJECTS, "at most 128 tools per request ('You may not include more than 128 tools "
                  "in your request', the API's error as relayed by Copilot Chat)",
                  "https://github.com/microsoft/vscode-copilot-release/issues/13065", confirmed=False),
        )),
        Host("openai-strict", "OpenAI function calling with strict: true (Structured Outputs)", (
            Limit("root-combinator", REJECTS, "as without strict mode",
                  "https://github.com/nspady/google-calendar-mcp/issues/39",
                  test=_root(("oneOf", "anyOf", "allOf", "enum", "not"))),
            Limit("strict-required", REJECTS,
                  "every object needs additionalProperties: false and every property listed in required",
                  "https://github.com/langchain-ai/langchain/pull/34599", test=_strict),
            Limit("format", REJECTS, "only a subset of formats and of validation keywords is accepted in strict mode; "
                  "pattern, format and bounds broke requests for some models",
                  "https://github.com/openai/openai-python/pull/2734", confirmed=False,
                  test=_keyword(("format",), "a format outside the strict subset",
                                lambda v: v in OPENAI_STRICT_FORMATS)),
            Limit("name", REJECTS, "function names must match ^[a-zA-Z0-9_-]{1,64}$",
                  "https://github.com/packit/ai-workflows/pull/619", test=_name(r"[a-zA-Z0-9_-]{1,64}", 64)),
            Limit("keyword", REJECTS,
                  "strict mode takes only the keywords its supported-schemas list names; any other one fails the "
                  "request, e.g. \"In context=('properties', 'location'), 'default' is not permitted\" "
                  "(livekit/agents#1987, and MCP tools through dotnet/extensions#6266)",
                  "https://platform.openai.com/docs/guides/structured-outputs#supported-schemas",
                  test=_unknown_keywords(OPENAI_STRICT_KEYWORDS, "not a keyword strict mode supports")),
            Limit("size", REJECTS,
                  "at most 10 levels of nesting, 5000 object properties and 1000 enum values in all (earlier models "
                  "refused a sixth level: '6 levels of nesting exceeds limit of 5', tidyverse/ellmer#671)",
                  "https://platform.openai.com/docs/guides/structured-outputs#supported-schemas", test=_strict_size),
        )),
        Host("gemini", "Google Gemini (Gemini CLI and the google-genai SDKs: parametersJsonSchema)", (
            Limit("root-combinator", REJECTS,
                  "parametersJsonSchema must describe an object whose properties are the function's parameters",
                  "https://cloud.google.com/vertex-ai/docs/reference/rest/v1beta1/FunctionDeclaration",
                  test=_root(ROOT_COMBINATORS)),
            Limit("name", REJECTS,
                  "names must start with a letter or an underscore and contain only a-z, A-Z, 0-9, underscores, "
                  "dots, colons and dashes, at most 64 characters",
                  "https://cloud.google.com/vertex-ai/docs/reference/rest/v1beta1/FunctionDeclaration",
                  test=_name(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}", 64)),
            Limit("ref", REJECTS,
                  "a $ref inside anyOf/oneOf fails with 'reference to undefined schema' (400 INVALID_ARGUMENT), "
                  "and a $ref next to any keyword but description and default with 'was set alongside unsupported "
                  "fields' (anomalyco/opencode#12295); Gemini CLI 0.15 also skipped tools whose $defs it could not "
                  "resolve (gemini-cli#13142, #13201): host_schemas=\"gemini\" lists them with every $ref inlined",
                  "https://github.com/google-gemini/gemini-cli/issues/13326", test=_gemini_ref),
            Limit("dialect", REJECTS,
                  "Gemini CLI validates calls with a draft-07 validator: a tool whose $schema names another "
                  "dialect fails its call (\"no schema with key or ref https://json-schema.org/draft/2020-12/schema\")",
                  "https://github.com/google-gemini/gemini-cli/issues/17235", confirmed=False, test=_dialect_uri),
        )),
        Host("gemini-openapi", "Google Gemini, legacy OpenAPI-subset 'parameters' (older clients, gateways)", (
            Limit("root-combinator", REJECTS, "the OpenAPI 3.0 subset has no root combinators",
                  "https://cloud.google.com/vertex-ai/docs/reference/rest/v1beta1/FunctionDeclaration",
                  test=_root(ROOT_COMBINATORS)),
            Limit("ref", REJECTS, "no $ref/$defs: references are not resolved",
                  "https://github.com/DEEIX-AI/DEEIX-Chat/issues/546", test=_any_ref),
            Limit("type-array", REJECTS, "'type' must be one value; a list fails with 'Proto field is not repeating'",
                  "https://github.com/zed-industries/zed/issues/44875", test=_type_array),
            Limit("root-combinator", REJECTS, "anyOf/oneOf/allOf inside properties are refused or mis-read",
                  "https://github.com/agno-agi/agno/issues/3298", confirmed=False, test=_nested_combinator),
            Limit("additional-properties", REJECTS,
                  "additionalProperties is not a field of the subset's Schema: the request fails with 400 unless the "
                  "client strips it first (as gemini-cli#22210 and karthink/gptel#827 do)",
                  "https://github.com/karthink/gptel/pull/827",
                  test=_keyword(("additionalProperties",), "not in the OpenAPI subset")),
            Limit("keyword", REJECTS,
                  "a keyword that is not a field of the subset's Schema ($schema, default, title, const, examples, "
                  "uniqueItems...) fails the request: 'Invalid JSON payload received. Unknown name \"uniqueItems\": "
                  "Cannot find field' (default and title are fields of the newer API versions only)",
                  "https://github.com/decolua/9router/pull/3018",
                  test=_unknown_keywords(GEMINI_OPENAPI_KEYWORDS, "not a field of the OpenAPI subset")),
            Limit("format", IGNORES, "format, pattern and numeric/length bounds are dropped, not enforced",
                  "https://typia.io/api/types/_samchon_openapi.IGeminiSchema-1.html", confirmed=False,
                  test=_keyword(("pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                 "minLength", "maxLength"), "dropped by the subset")),
        )),
        Host("cursor", "Cursor", (
            Limit("tool-count", IGNORES,
                  "only the first 40 tools (across all servers) are sent to the agent; later versions warn above 80",
                  "https://github.com/getsentry/sentry-mcp-stdio/issues/3"),
        )),
        Host("vscode", "VS Code (GitHub Copilot Chat)", (
            Limit("tool-count", REJECTS, "'Cannot have more than 128 tools per request' (across all servers)",
                  "https://github.com/microsoft/vscode/issues/258890"),
        )),
    )
}

_TOOL_COUNTS = {"openai": 128, "cursor": 40, "vscode": 128}


def parse_hosts(spec: str | Sequence[str] | None) -> tuple[str, ...]:
    """``"claude,openai"`` (or a list) -> host ids; ValueError naming the known ones."""
    if spec is None:
        return DEFAULT_HOSTS
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for item in (i.strip().lower() for i in items):
        if not item:
            continue
        if item == "all":
            out.extend(h for h in HOSTS if h not in out)
            continue
        if item not in HOSTS:
            raise ValueError(f"unknown host {item!r}; known: {', '.join(HOSTS)} (or 'all')")
        if item not in out:
            out.append(item)
    return tuple(out) or DEFAULT_HOSTS


def tool_problems(tool: Mapping[str, Any], hosts: Sequence[str] = DEFAULT_HOSTS, *,
                  server_name: str | None = None) -> list[Problem]:
    """What each of ``hosts`` would reject or drop in one tool (a tools/list entry)."""
    ctx = _Ctx(server_name=server_name)
    out: list[Problem] = []
    name = str(tool.get("name", ""))
    for host_id in hosts:
        for limit in HOSTS[host_id].limits:
            if limit.test is None:
                continue
            why = limit.test(tool, ctx)
            if why is not None:
                out.append(Problem(host_id, name, limit.feature, limit.effect, f"{why}: {limit.detail}",
                                   limit.source, limit.confirmed))
    return out


def server_problems(tools: Sequence[Mapping[str, Any]], hosts: Sequence[str] = DEFAULT_HOSTS, *,
                    server_name: str | None = None) -> list[Problem]:
    """Every tool's problems, plus the server-wide ones (how many tools it lists)."""
    out: list[Problem] = []
    for tool in tools:
        out.extend(tool_problems(tool, hosts, server_name=server_name))
    for host_id in hosts:
        most = _TOOL_COUNTS.get(host_id)
        if most is not None and len(tools) > most:
            limit = next(li for li in HOSTS[host_id].limits if li.feature == "tool-count")
            out.append(Problem(host_id, None, "tool-count", limit.effect,
                               f"{len(tools)} tools listed (at most {most}, counting every server the user has on): "
                               f"{limit.detail}", limit.source, limit.confirmed))
    return out


def registration_problems(name: str, schema: Any) -> list[Problem]:
    """The default hosts' refusals of a tool's name and $refs: cheap enough to run at every raw
    registration (no schema compiled), for the warning a mirrored schema would otherwise not get."""
    tool = {"name": name, "inputSchema": schema}
    out: list[Problem] = []
    for host_id in DEFAULT_HOSTS:
        for limit in HOSTS[host_id].limits:
            if limit.feature in ("name", "ref") and limit.effect == REJECTS and limit.test is not None:
                why = limit.test(tool, _Ctx())
                if why is not None:
                    out.append(Problem(host_id, name, limit.feature, limit.effect, why, limit.source, limit.confirmed))
    return out


def hosts_rejecting_root(schema: Any) -> list[str]:
    """The hosts that refuse ``schema`` as an inputSchema because of its root (a registration warning)."""
    tool = {"name": "t", "inputSchema": schema}
    return [h.id for h in HOSTS.values()
            if any(li.feature == "root-combinator" and li.effect == REJECTS and li.test is not None
                   and li.test(tool, _Ctx()) is not None for li in h.limits)]


# ------------------------------------------------------------------ flatten


def flatten(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A host-compatible copy of an object schema whose root is a oneOf/anyOf of object branches:
    one object with the union of the branches' properties, ``required`` only for what every
    branch requires, each property's description naming the branches it belongs to, and no
    combinator at the root. What the branches excluded is no longer expressed: validate calls
    against the original, as ``server.add_tool(..., input_schema=s, flatten=True)`` does.

    A schema without a root combinator is returned unchanged (as a copy)."""
    out = {k: v for k, v in schema.items()}
    branches: list[dict[str, Any]] = []
    for key in ("oneOf", "anyOf", "allOf"):
        value = out.pop(key, None)
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(b, dict) for b in value):
            raise ValueError(f"flatten: {key} must be a list of object schemas")
        branches.extend(({**b, "__kind": key, "__index": i} for i, b in enumerate(value)))
    for key in ("not", "if", "then", "else"):
        if key in out:
            raise ValueError(f"flatten: a root {key!r} cannot be expressed as one object; rewrite it by hand")
    if not branches:
        return out
    props: dict[str, Any] = dict(out.get("properties") or {})
    owners: dict[str, list[str]] = {}
    required_sets: list[set[str]] = []
    all_of_required: set[str] = set()
    for branch in branches:
        kind = branch["__kind"]
        label = _branch_label(branch)
        for name, sub in (branch.get("properties") or {}).items():
            if "const" in (sub if isinstance(sub, dict) else {}) and name in props:
                owners.setdefault(name, [])
                continue
            if name not in props:
                props[name] = dict(sub) if isinstance(sub, dict) else sub
            owners.setdefault(name, []).append(label)
        req = set(branch.get("required") or ())
        if kind == "allOf":
            all_of_required |= req
        else:
            required_sets.append(req)
    for name, labels in owners.items():
        if labels and isinstance(props.get(name), dict) and len(labels) < len(branches):
            prop = props[name]
            used = f"Used by: {', '.join(labels)}."
            prop["description"] = f"{prop['description']} {used}" if prop.get("description") else used
    required = list(dict.fromkeys([*(out.get("required") or ()), *sorted(all_of_required),
                                   *sorted(set.intersection(*required_sets) if required_sets else set())]))
    out["type"] = "object"
    out["properties"] = props
    if required:
        out["required"] = required
    else:
        out.pop("required", None)
    return out


def _branch_label(branch: Mapping[str, Any]) -> str:
    for name, sub in (branch.get("properties") or {}).items():
        if isinstance(sub, dict) and "const" in sub:
            return f"{name}={sub['const']}"
    return branch.get("title") or f"{branch['__kind']}[{branch['__index']}]"
