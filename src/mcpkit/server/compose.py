"""Composition: how a child's names read in a parent, and ``Server.include`` (a static copy).

Names (docs/composition.md):

* tools and prompts: ``{prefix}{separator}{name}``, separator ``_`` by default, because the
  tool names hosts accept are ``^[a-zA-Z0-9_-]{1,64}$`` (the Anthropic and OpenAI APIs): a
  ``.`` or ``/`` would be refused there although MCP allows ``.`` (TL-06);
* resource URIs and URI templates: the prefix becomes the first path segment after the scheme
  and authority marker, ``scheme://{prefix}/rest`` for ``scheme://rest`` and
  ``scheme:{prefix}/rest`` for ``scheme:rest``. That keeps every URI a URI of the same scheme
  (RS-02), keeps template variables where they were, and is reversible: :meth:`Names.uri_back`
  gives the child's URI back. ``prefix_uris=False`` keeps the child's URIs as they are
  (then they must not clash with the parent's).

``Server.mount`` (live, through the child's own pipeline) lives in mcpkit.proxy; this module
has what needs no connection.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .resources import ResourceTemplate
from .tools import validate_tool_name

if TYPE_CHECKING:
    from .server import Server

__all__ = ["Names", "include"]

log = logging.getLogger("mcpkit")


class Names:
    """The parent's name of each of a child's items, and back."""

    __slots__ = ("prefix", "separator", "prefix_uris")

    def __init__(self, prefix: str | None, separator: str = "_", prefix_uris: bool = True) -> None:
        if prefix is not None:
            if not isinstance(prefix, str) or not prefix:
                raise ValueError("a prefix is a non-empty string (or None for none)")
            try:
                validate_tool_name(prefix + separator + "x")  # the prefix must make valid tool names
            except ValueError as exc:
                raise ValueError(f"prefix {prefix!r} would make invalid tool names ({exc})") from None
            if "/" in prefix or ":" in prefix:
                raise ValueError(f"prefix {prefix!r}: '/' and ':' would make its URIs ambiguous")
        self.prefix = prefix
        self.separator = separator
        self.prefix_uris = prefix_uris and prefix is not None

    def name(self, name: str) -> str:
        """A tool's or prompt's name in the parent."""
        return name if self.prefix is None else f"{self.prefix}{self.separator}{name}"

    def name_back(self, name: str) -> str | None:
        if self.prefix is None:
            return name
        head = self.prefix + self.separator
        return name[len(head):] if name.startswith(head) and len(name) > len(head) else None

    def uri(self, uri: str) -> str:
        """A resource URI (or URI template) in the parent."""
        if not self.prefix_uris:
            return uri
        scheme, colon, rest = uri.partition(":")
        if not colon:
            return f"{self.prefix}/{uri}"
        if rest.startswith("//"):
            return f"{scheme}://{self.prefix}/{rest[2:]}"
        return f"{scheme}:{self.prefix}/{rest}"

    def uri_back(self, uri: str) -> str | None:
        """The child's URI for a parent URI, or None when the URI is not one of the child's."""
        if not self.prefix_uris:
            return uri
        scheme, colon, rest = uri.partition(":")
        if not colon:
            head = f"{self.prefix}/"
            return uri[len(head):] if uri.startswith(head) else None
        if rest.startswith("//"):
            head = f"//{self.prefix}/"
            return f"{scheme}://{rest[len(head):]}" if rest.startswith(head) else None
        head = f"{self.prefix}/"
        return f"{scheme}:{rest[len(head):]}" if rest.startswith(head) else None


def include(parent: Server, child: Server, prefix: str | None, *, separator: str = "_",
            prefix_uris: bool = True) -> None:
    """Copy the child's items into ``parent`` under the prefixed names (``Server.include``).

    Each item keeps its handler, schemas, annotations, scopes and its own per-tool policy options
    (rate limit, timeout, bridges); the parent's server-wide policy applies to the copies, the
    child's does not (mount keeps that). Everything is checked before anything is copied, so a
    clash changes nothing.
    """
    names = Names(prefix, separator, prefix_uris)
    tools = {names.name(n): t for n, t in child._tools.items()}
    resources = {names.uri(u): r for u, r in child._resources.items()}
    templates = {names.uri(t.uri_template): t for t in child._templates}
    prompts = {names.name(n): p for n, p in child._prompts.items()}
    clashes = [n for n in tools if n in parent._tools] + [u for u in resources if u in parent._resources]
    clashes += [u for u in templates if any(t.uri_template == u for t in parent._templates)]
    clashes += [n for n in prompts if n in parent._prompts]
    if clashes:
        raise ValueError(f"include: the parent already has {', '.join(map(repr, clashes))}; choose another prefix")
    for name in tools:
        validate_tool_name(name)
    # a copied handler's ctx.call_tool names the child's tools: here they are the prefixed
    # copies, called through the parent's pipeline like any nested call
    calls = names.name if names.prefix is not None else None
    with parent.batch_changes():  # one change: one list_changed per list (TL-13), not one per item
        _copy(parent, tools, resources, templates, prompts, calls)


def _copy(parent: Server, tools: dict[str, Any], resources: dict[str, Any], templates: dict[str, Any],
          prompts: dict[str, Any], calls: Callable[[str], str] | None) -> None:
    for name, tool in tools.items():
        twin = copy.copy(tool)
        twin.name = name
        twin.resolved = None  # resolved again against the parent's policy
        twin.call_names = _then(tool.call_names, calls)
        parent._register_tool(twin, replace=False)
    for uri, resource in resources.items():
        twin = copy.copy(resource)
        twin.uri = uri
        twin.call_names = _then(resource.call_names, calls)
        parent._resources[uri] = twin
    for uri, template in templates.items():
        twin_t = ResourceTemplate(
            uri, template.handler, name=template.name, title=template.title, description=template.description,
            mime_type=template.mime_type, annotations=template.annotations, icons=template.icons,
            meta=template.meta, context_param=template.context_param, completions=template.completions,
        )
        twin_t.scopes, twin_t.ttl_ms, twin_t.cache_scope = template.scopes, template.ttl_ms, template.cache_scope
        twin_t.call_names = _then(template.call_names, calls)
        parent._templates = [*parent._templates, twin_t]
    for name, prompt in prompts.items():
        twin_p = copy.copy(prompt)
        twin_p.name = name
        twin_p.call_names = _then(prompt.call_names, calls)
        parent._prompts[name] = twin_p
    for kind, changed in (("resources", resources), ("resourceTemplates", templates), ("prompts", prompts)):
        if changed:
            parent._changed(kind)


def _then(first: Callable[[str], str] | None, then: Callable[[str], str] | None) -> Callable[[str], str] | None:
    """The names of a copy of a copy: the inner include's prefixing, then the outer's."""
    if first is None or then is None:
        return first or then
    return lambda name: then(first(name))
