"""THE revision table: every difference between protocol revisions is a field here.

Code elsewhere asks ``rev.batching`` or ``rev.tool_keys``, never compares version
strings. Adding a revision means adding a row.
"""

from __future__ import annotations

__all__ = [
    "Revision",
    "REVISIONS",
    "HANDSHAKE_VERSIONS",
    "MODERN_VERSIONS",
    "SUPPORTED_VERSIONS",
    "LATEST_HANDSHAKE",
    "LOG_LEVELS",
    "negotiate",
    "get",
]

#: LG-04: RFC 5424 severities, in order.
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

#: MT-04: the reserved request and result _meta keys of the modern era.
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"

#: SEP-2640 defines its methods for every revision (the extension travels in capabilities.extensions
#: of ``initialize`` and of ``server/discover``); only its results' cache hints are 2026-07-28's
_SKILLS_METHODS = ("skills/list", "skills/get", "resources/directory/read")
_HANDSHAKE_METHODS = frozenset(
    {
        "initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/templates/list",
        "resources/read", "resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get",
        "logging/setLevel", "completion/complete",
        # the io.modelcontextprotocol/skills extension (SEP-2640): answered only by a server that serves skills
        *_SKILLS_METHODS,
    }
)
#: §14: 2026-07-28 removes the handshake, ping, setLevel and resources/(un)subscribe.
_MODERN_METHODS = frozenset(
    {
        "server/discover", "tools/list", "tools/call", "resources/list", "resources/templates/list",
        "resources/read", "prompts/list", "prompts/get", "completion/complete", "subscriptions/listen",
        # the io.modelcontextprotocol/tasks extension (TX-04)
        "tasks/get", "tasks/update", "tasks/cancel",
        *_SKILLS_METHODS,
    }
)

_CONTENT_2024 = frozenset({"text", "image", "resource"})
_CONTENT_2025_03 = _CONTENT_2024 | {"audio"}
_CONTENT_2025_06 = _CONTENT_2025_03 | {"resource_link"}

_BASE = frozenset({"name", "description", "inputSchema"})
_ANN_2024 = frozenset({"audience", "priority"})
_ANN_2025_06 = _ANN_2024 | {"lastModified"}


class Revision:
    """One row of the table. Read-only by convention; built once at import."""

    version: str
    #: "handshake" (initialize / sessions) or "modern" (per-request _meta, 2026-07-28)
    era: str
    #: BP-13: JSON-RPC batches are accepted only in 2025-03-26.
    batching: bool
    #: RS-08: the resource-not-found code.
    resource_not_found: int
    #: TL-10: arguments failing inputSchema are a tool error (isError) rather than -32602 (SEP-1303).
    invalid_arguments_as_tool_error: bool
    #: CP-01: a ``completions`` capability exists.
    completions_capability: bool
    #: TL-07: structuredContent / outputSchema exist.
    structured_content: bool
    #: EL-01: elicitation exists, and which modes.
    elicitation: bool
    elicitation_url: bool
    #: EL-02: multi-select (array) and titled (oneOf/anyOf) enums in elicitation forms (SEP-1330).
    elicitation_rich_enums: bool
    #: LC-01 / IC-03: the keys Implementation (serverInfo) may carry.
    implementation_keys: frozenset[str]
    #: TL-05: the keys a Tool may carry.
    tool_keys: frozenset[str]
    #: RS-03: Resource / ResourceTemplate keys.
    resource_keys: frozenset[str]
    template_keys: frozenset[str]
    #: PM-03: Prompt and PromptArgument keys.
    prompt_keys: frozenset[str]
    prompt_argument_keys: frozenset[str]
    #: TL-09: the content block types that exist.
    content_types: frozenset[str]
    #: RS-11: the keys an ``Annotations`` object may carry (lastModified from 2025-06-18).
    annotation_keys: frozenset[str]
    #: PR-01: ``message`` on progress notifications.
    progress_message: bool
    #: ``_meta`` allowed on tools/resources/prompts (2025-06-18+).
    item_meta: bool
    #: Sampling with tools (SA-02) and the ``context`` sub-capability (2025-11-25+).
    sampling_tools: bool
    #: BP-10: every result carries resultType; MT-06: results carry serverInfo in _meta.
    result_type: bool
    #: CA-01: list, read and discover results carry ttlMs and cacheScope.
    cache_hints: bool
    #: §14: the client->server methods that exist in this revision.
    methods: frozenset[str]

    def __init__(self, **fields: object) -> None:
        missing = set(self.__annotations__) - set(fields)
        if missing:
            raise TypeError(f"Revision row lacks {sorted(missing)}")
        self.__dict__.update(fields)
        #: anything the newest revision has that this one lacks (results need shaping down)
        self.downgrades = not (
            self.structured_content and self.item_meta and "lastModified" in self.annotation_keys
            and "resource_link" in self.content_types
        )

    def __repr__(self) -> str:
        return f"Revision({self.version!r})"


_REVS = [
    Revision(
        version="2024-11-05",
        era="handshake",
        batching=False,
        resource_not_found=-32002,
        invalid_arguments_as_tool_error=False,
        completions_capability=False,
        structured_content=False,
        elicitation=False,
        elicitation_url=False,
        elicitation_rich_enums=False,
        implementation_keys=frozenset({"name", "version"}),
        tool_keys=_BASE,
        resource_keys=frozenset({"uri", "name", "description", "mimeType", "annotations", "size"}),
        template_keys=frozenset({"uriTemplate", "name", "description", "mimeType", "annotations"}),
        prompt_keys=frozenset({"name", "description", "arguments"}),
        prompt_argument_keys=frozenset({"name", "description", "required"}),
        content_types=_CONTENT_2024,
        annotation_keys=_ANN_2024,
        progress_message=False,
        item_meta=False,
        sampling_tools=False,
        result_type=False,
        cache_hints=False,
        methods=_HANDSHAKE_METHODS,
    ),
    Revision(
        version="2025-03-26",
        era="handshake",
        batching=True,
        resource_not_found=-32002,
        invalid_arguments_as_tool_error=False,
        completions_capability=True,
        structured_content=False,
        elicitation=False,
        elicitation_url=False,
        elicitation_rich_enums=False,
        implementation_keys=frozenset({"name", "version"}),
        tool_keys=_BASE | {"annotations"},
        resource_keys=frozenset({"uri", "name", "description", "mimeType", "annotations", "size"}),
        template_keys=frozenset({"uriTemplate", "name", "description", "mimeType", "annotations"}),
        prompt_keys=frozenset({"name", "description", "arguments"}),
        prompt_argument_keys=frozenset({"name", "description", "required"}),
        content_types=_CONTENT_2025_03,
        annotation_keys=_ANN_2024,
        progress_message=True,
        item_meta=False,
        sampling_tools=False,
        result_type=False,
        cache_hints=False,
        methods=_HANDSHAKE_METHODS,
    ),
    Revision(
        version="2025-06-18",
        era="handshake",
        batching=False,
        resource_not_found=-32002,
        invalid_arguments_as_tool_error=False,
        completions_capability=True,
        structured_content=True,
        elicitation=True,
        elicitation_url=False,
        elicitation_rich_enums=False,
        implementation_keys=frozenset({"name", "version", "title"}),
        tool_keys=_BASE | {"annotations", "title", "outputSchema", "_meta"},
        resource_keys=frozenset({"uri", "name", "title", "description", "mimeType", "annotations", "size", "_meta"}),
        template_keys=frozenset({"uriTemplate", "name", "title", "description", "mimeType", "annotations", "_meta"}),
        prompt_keys=frozenset({"name", "title", "description", "arguments", "_meta"}),
        prompt_argument_keys=frozenset({"name", "title", "description", "required"}),
        content_types=_CONTENT_2025_06,
        annotation_keys=_ANN_2025_06,
        progress_message=True,
        item_meta=True,
        sampling_tools=False,
        result_type=False,
        cache_hints=False,
        methods=_HANDSHAKE_METHODS,
    ),
    Revision(
        version="2025-11-25",
        era="handshake",
        batching=False,
        resource_not_found=-32002,
        invalid_arguments_as_tool_error=True,
        completions_capability=True,
        structured_content=True,
        elicitation=True,
        elicitation_url=True,
        elicitation_rich_enums=True,
        implementation_keys=frozenset({"name", "version", "title", "description", "icons", "websiteUrl"}),
        tool_keys=_BASE | {"annotations", "title", "outputSchema", "_meta", "icons", "execution"},
        resource_keys=frozenset(
            {"uri", "name", "title", "description", "mimeType", "annotations", "size", "_meta", "icons"}
        ),
        template_keys=frozenset(
            {"uriTemplate", "name", "title", "description", "mimeType", "annotations", "_meta", "icons"}
        ),
        prompt_keys=frozenset({"name", "title", "description", "arguments", "_meta", "icons"}),
        prompt_argument_keys=frozenset({"name", "title", "description", "required"}),
        content_types=_CONTENT_2025_06,
        annotation_keys=_ANN_2025_06,
        progress_message=True,
        item_meta=True,
        sampling_tools=True,
        result_type=False,
        cache_hints=False,
        methods=_HANDSHAKE_METHODS,
    ),
    Revision(
        version="2026-07-28",
        era="modern",
        batching=False,
        resource_not_found=-32602,  # RS-08 (SEP-2164), with data.uri
        invalid_arguments_as_tool_error=True,
        completions_capability=True,
        structured_content=True,
        elicitation=True,
        elicitation_url=True,
        elicitation_rich_enums=True,
        implementation_keys=frozenset({"name", "version", "title", "description", "icons", "websiteUrl"}),
        tool_keys=_BASE | {"annotations", "title", "outputSchema", "_meta", "icons"},
        resource_keys=frozenset(
            {"uri", "name", "title", "description", "mimeType", "annotations", "size", "_meta", "icons"}
        ),
        template_keys=frozenset(
            {"uriTemplate", "name", "title", "description", "mimeType", "annotations", "_meta", "icons"}
        ),
        prompt_keys=frozenset({"name", "title", "description", "arguments", "_meta", "icons"}),
        prompt_argument_keys=frozenset({"name", "title", "description", "required"}),
        content_types=_CONTENT_2025_06,
        annotation_keys=_ANN_2025_06,
        progress_message=True,
        item_meta=True,
        sampling_tools=True,
        result_type=True,
        cache_hints=True,
        methods=_MODERN_METHODS,
    ),
]

REVISIONS: dict[str, Revision] = {r.version: r for r in _REVS}
HANDSHAKE_VERSIONS: tuple[str, ...] = tuple(r.version for r in _REVS if r.era == "handshake")
MODERN_VERSIONS: tuple[str, ...] = tuple(r.version for r in _REVS if r.era == "modern")
SUPPORTED_VERSIONS: tuple[str, ...] = HANDSHAKE_VERSIONS + MODERN_VERSIONS
LATEST_HANDSHAKE: str = HANDSHAKE_VERSIONS[-1]


def get(version: str) -> Revision:
    return REVISIONS[version]


def negotiate(requested: object, supported: tuple[str, ...] = HANDSHAKE_VERSIONS) -> Revision:
    """LC-02: answer the client's version when supported, otherwise our latest."""
    if isinstance(requested, str) and requested in supported:
        return REVISIONS[requested]
    return REVISIONS[supported[-1]]
