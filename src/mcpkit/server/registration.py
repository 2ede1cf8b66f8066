"""The registration API of a Server: tools (functions, raw schemas, manager tools), resources,
templates, MCP App views, prompts and completions, added, replaced and removed at any time.

Server inherits it (server.py keeps the lifecycle, listing and running); each change here goes
through ``self._changed``, which sends the matching list_changed (TL-13, RS-09, PM-07).
"""

from __future__ import annotations

import base64
import inspect
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict, TypeVar, Unpack

from ..protocol.errors import INVALID_PARAMS, McpError, clipped
from ..protocol.revisions import Revision
from ..stores.errors import StoreUnavailable
from .context import Context
from .pipeline import policy_layer
from .prompts import Prompt
from .resources import Resource, ResourceTemplate
from .schema import _identity as _identity_bind
from .schema import _is_context, _resolve_hints, function_description, input_spec, output_spec
from .tools import Tool, annotations_from_hints

__all__ = ["Completer", "HostCompatibilityWarning", "Registrations", "ToolPolicyOptions"]

log = logging.getLogger("mcpkit")

F = TypeVar("F", bound=Callable[..., Any])


class Registrations:
    """The decorators and add/remove methods of :class:`~mcpkit.server.server.Server`."""

    # ------------------------------------------------------------------ tools

    def tool(
        self,
        fn: F | str | None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: dict[str, Any] | None = None,
        read_only: bool | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        open_world: bool | None = None,
        structured: bool | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        coerce: bool = False,
        replace: bool = False,
        task: str | None = None,
        task_after_input: bool = False,
        scopes: Sequence[str] = (),
        ui: str | None = None,
        ui_visibility: Sequence[str] | None = None,
        exclusive: Sequence[Sequence[str]] = (),
        depends_on: Mapping[str, str | Sequence[str]] | None = None,
        **policy: Unpack[ToolPolicyOptions],
    ) -> Any:
        """Register a function as a tool: ``@server.tool``, ``@server.tool(name=...)`` or
        ``@server.tool("name")``.

        ``ui="ui://..."`` links the tool to an MCP App registered with :meth:`app`: hosts that
        render apps show its results in that view (``_meta.ui.resourceUri``);
        ``ui_visibility=["app"]`` keeps a tool for the view alone, hidden from the model.

        ``exclusive=[("path", "uid")]``: parameters of which a call gives at most one;
        ``depends_on={"width": "height"}``: a parameter that needs others. Enforced on every
        call after the inputSchema (a -32602, or ``isError`` from 2025-11-25, naming both), and
        said in the description and the parameters' own, not with root combinators most hosts
        refuse (server/validation.py Relations).

        The inputSchema comes from the signature, the description from the
        docstring, the outputSchema from the return annotation (``structured=False``
        turns that off). ``coerce=True`` accepts "5" for an integer parameter.
        ``task="optional"|"required"`` lets 2026-07-28 clients that declare the
        ``io.modelcontextprotocol/tasks`` extension get the call as a task (server/tasks.py).

        Policy (mcpkit.policy; each overrides the server's Policy for this tool): ``read_only``,
        ``destructive`` and ``open_world`` feed the gates; ``contract=True`` wraps results in the
        tool contract envelope (``contract="legacy"``: with the top-level fields of earlier
        contracts); ``rate_limit="10/min"``; ``timeout`` (seconds); ``max_argument_bytes``, ``max_result_bytes``, ``sanitize``; ``requires=bridge`` hides
        the tool while that Bridge is down; ``isolation="process"`` runs each call in a worker
        process that is killed at the deadline (mcpkit.policy.isolation: CPU-bound handlers,
        untrusted input, C extensions that hold the GIL).
        """
        if isinstance(fn, str):  # @server.tool("name"): the name first, as FastMCP and the official SDK take it
            name, fn = _positional_name("tool", fn, name), None
        options = _tool_options(policy)

        if ui is not None:
            from .apps import tool_ui_meta

            meta = {**(meta or {}), "ui": tool_ui_meta(ui, ui_visibility, name or "tool")}

        def deco(func: F) -> F:
            spec = input_spec(func, context_type=Context)
            out_schema = None
            dump = None
            if structured is not False:
                hints = _return_hint(func)
                out = output_spec(hints)
                out_schema, dump = out.schema, out.dump
                if structured is True and out_schema is None:
                    raise ValueError(f"tool {func.__name__!r}: structured=True needs a structured return annotation")
            relations = _relations(name or func.__name__, spec.schema, exclusive, depends_on)
            input_schema = spec.schema if relations is None else relations.advertise(spec.schema)
            _warn_secret_parameters(name or func.__name__, spec.schema)
            if options is not None and options.isolation is not None:
                policy_layer().check_isolated(func, name or func.__name__, spec.context_param)
            tool = Tool(
                name or func.__name__,
                func,
                input_schema=input_schema,
                output_schema=out_schema,
                description=_described(description if description is not None else function_description(func),
                                       relations),
                title=title,
                annotations=annotations_from_hints(
                    annotations, read_only=read_only, destructive=destructive, idempotent=idempotent,
                    open_world=open_world,
                ),
                icons=icons,
                meta=meta,
                bind=spec.bind,
                dump=dump,
                context_param=spec.context_param,
                coerce=coerce,
                trusted_schemas=True,
                task=task,
                task_after_input=task_after_input,
                options=options,
            )
            tool.result_dump = None  # resolved from the return annotation if a contract needs it
            tool.relations = relations
            tool.scopes = _scopes(scopes)
            self._register_tool(tool, replace)
            return func

        if fn is not None:
            return deco(fn)
        return deco

    def add_tool(
        self,
        name: str,
        handler: Callable[..., Any],
        *,
        input_schema: dict[str, Any],
        output_schema: dict[str, Any] | None = None,
        description: str | None = None,
        title: str | None = None,
        annotations: dict[str, Any] | None = None,
        read_only: bool | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        open_world: bool | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        replace: bool = False,
        task: str | None = None,
        scopes: Sequence[str] = (),
        flatten: bool = False,
        action_scopes: Mapping[str, Sequence[str]] | None = None,
        exclusive: Sequence[Sequence[str]] = (),
        depends_on: Mapping[str, str | Sequence[str]] | None = None,
        **policy: Unpack[ToolPolicyOptions],
    ) -> Tool:
        """Register a tool from a raw JSON Schema; ``handler(arguments)`` or ``handler(arguments, ctx)``.

        The schema is listed exactly as given and is what calls are validated against. A schema
        with ``oneOf``/``anyOf``/``allOf`` at its root is refused by the Anthropic API, OpenAI and
        Gemini (mcpkit/hosts.py): registering one warns (HostCompatibilityWarning) naming them;
        ``flatten=True`` lists a flat copy (mcpkit.hosts.flatten) and still validates calls against
        the schema as given. ``read_only``, ``destructive``, ``idempotent``, ``open_world``,
        ``scopes`` and the policy options (``requires=``, ``timeout=``, ...) are those of :meth:`tool`.
        ``action_scopes`` (action name -> scopes), for a tool that forwards to a manager tool
        (mcpkit.proxy does), adds the scopes a call needs when its ``action`` argument names one.
        ``exclusive`` and ``depends_on`` are those of :meth:`tool`; the schema stays as given,
        so the relations are said in the description alone.
        """
        options = _tool_options(policy)
        relations = _relations(name, input_schema, exclusive, depends_on)
        description = _described(description, relations)
        _warn_secret_parameters(name, input_schema)
        advertised = input_schema
        if flatten:
            from ..hosts import flatten as flat_copy

            advertised = flat_copy(input_schema)
        else:
            _warn_root_combinators(name, input_schema)
        if getattr(self, "_host_schemas", None) is None:
            _warn_host_problems(self, name, input_schema)
        takes_ctx = _positional_count(handler) >= 2
        if options is not None and options.isolation is not None:
            policy_layer().check_isolated(handler, name, "ctx" if takes_ctx else None)
        tool = Tool(
            name,
            handler,
            input_schema=advertised,
            output_schema=output_schema,
            description=description,
            title=title,
            annotations=annotations_from_hints(
                annotations, read_only=read_only, destructive=destructive, idempotent=idempotent,
                open_world=open_world,
            ),
            icons=icons,
            meta=meta,
            context_param="ctx" if takes_ctx else None,
            task=task,
            options=options,
            enforced_schema=input_schema if flatten else None,
        )
        tool.relations = relations
        tool.scopes = _scopes(scopes)
        if action_scopes:
            tool.action_scopes = {str(k): _scopes(v) for k, v in action_scopes.items() if v}
        self._register_tool(tool, replace)
        return tool

    def manager(
        self,
        name: str,
        *,
        description: str | None = None,
        title: str | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        replace: bool = False,
        scopes: Sequence[str] = (),
        schema: str = "flat",
        **policy: Unpack[ToolPolicyOptions],
    ) -> Any:
        """A manager tool: one tool with several actions (``@tool.action(...)``), each with its
        own parameters, read-only/destructive/open-world declaration, bridges, timeout and rate
        limit (policy/manager.py). ``schema="flat"`` (default) advertises one object every host
        accepts; ``schema="oneOf"`` the closed per-action branches. Calls are validated against
        their action's closed branch either way."""
        tool = policy_layer().manager_tool(self, name, description=description, title=title, icons=icons, meta=meta,
                                           schema=schema)
        tool.options = _tool_options(policy)
        tool.scopes = _scopes(scopes)
        self._register_tool(tool, replace)
        return tool

    def _register_tool(self, tool: Tool, replace: bool) -> None:
        if tool.name in self._tools and not replace:
            raise ValueError(f"a tool named {tool.name!r} is already registered (pass replace=True to replace it)")
        if self._policy is not None or tool.options is not None or tool.actions is not None:
            self._apply_policy(tool)
        self._watch_bridges(tool)
        self._tools[tool.name] = tool
        self._changed("tools")

    def remove_tool(self, name: str) -> None:
        if self._tools.pop(name, None) is None:
            raise KeyError(f"no tool named {name!r}")
        self._changed("tools")

    @property
    def tools(self) -> dict[str, Tool]:
        return dict(self._tools)

    # ------------------------------------------------------------------ resources

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        replace: bool = False,
        ttl_ms: int | None = None,
        cache_scope: str | None = None,
        scopes: Sequence[str] = (),
    ) -> Callable[[F], F]:
        """Register a function returning the content of the resource at ``uri`` (str, bytes, dicts).

        ``ttl_ms`` and ``cache_scope`` override the server's cache hints for reads of it (CA-01);
        use ``cache_scope="private"`` for content that depends on who asks (CA-05).

        A ``uri`` with ``{variables}`` names many resources, not one (braces cannot stand in a URI,
        RFC 3986 section 2): it is registered as :meth:`resource_template`, each variable an
        argument of ``func``, as other MCP frameworks read the same line.
        """

        _uri_first("resource", uri)

        def deco(func: F) -> F:
            _check_cache(ttl_ms, cache_scope)  # before registering: a refusal leaves nothing behind
            described = dict(name=name or func.__name__, title=title, mime_type=mime_type, annotations=annotations,
                             icons=icons, meta=meta, replace=replace, scopes=scopes,
                             description=description if description is not None else function_description(func))
            # the scopes go in with the item: a read racing the registration never finds it unscoped
            item: Resource | ResourceTemplate
            if _is_template(uri):
                if size is not None:
                    raise ValueError(f"resource {uri!r} is a template (its {{variables}} name many resources): "
                                     "size= describes one resource; drop it")
                item = self.add_resource_template(uri, func, **described)
            else:
                item = self.add_resource(uri, func, size=size, **described)
            item.ttl_ms, item.cache_scope = ttl_ms, cache_scope
            return func

        return deco

    def add_resource(self, uri: str, handler: Callable[..., Any], *, name: str, replace: bool = False,
                     scopes: Sequence[str] = (), **kw: Any) -> Resource:
        if _is_template(uri):
            raise ValueError(f"resource {uri!r} has {{variables}}, so it names many resources: register it with "
                             "add_resource_template (or the resource_template decorator)")
        if uri in self._resources and not replace:
            raise ValueError(f"a resource {uri!r} is already registered (pass replace=True to replace it)")
        item = Resource(uri, handler, name=name, context_param=_context_param(handler), **kw)
        item.scopes = _scopes(scopes)
        self._resources[uri] = item
        self._changed("resources")
        return item

    def remove_resource(self, uri: str) -> None:
        if self._resources.pop(uri, None) is None:
            raise KeyError(f"no resource {uri!r}")
        self._apps.discard(uri)
        self.subscriptions_forget(uri)
        self._changed("resources")

    def app(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        html: str | None = None,
        connect_domains: Sequence[str] | None = None,
        resource_domains: Sequence[str] | None = None,
        frame_domains: Sequence[str] | None = None,
        base_uri_domains: Sequence[str] | None = None,
        permissions: Sequence[str] = (),
        domain: str | None = None,
        prefers_border: bool | None = None,
        scopes: Sequence[str] = (),
    ) -> Any:
        """Register an MCP App view (SEP-1865): ``@server.app("ui://board/view")`` on a function
        returning the HTML document, or ``server.app(uri, html=...)`` for a fixed one.

        The view is a ``ui://`` resource of type ``text/html;profile=mcp-app``; the CSP origins
        (``connect_domains`` and the rest), ``permissions`` (camera, microphone, geolocation,
        clipboard_write), ``domain`` and ``prefers_border`` go to its ``_meta.ui``. Link tools to
        it with ``@server.tool(ui=uri)``; the server then declares the
        ``io.modelcontextprotocol/ui`` extension.
        """
        from .apps import APP_MIME_TYPE, app_reader, check_ui_uri, ui_resource_meta

        check_ui_uri(uri, "server.app")
        ui_meta = ui_resource_meta(
            connect_domains=connect_domains, resource_domains=resource_domains, frame_domains=frame_domains,
            base_uri_domains=base_uri_domains, permissions=permissions, domain=domain,
            prefers_border=prefers_border,
        )

        def register(source: Any, default_name: str, doc: str | None) -> None:
            item = self.add_resource(
                uri, app_reader(source, ui_meta), name=name or default_name, title=title,
                description=description if description is not None else doc,
                mime_type=APP_MIME_TYPE, meta={"ui": ui_meta} if ui_meta else None, scopes=scopes,
            )
            item.context_param = None if isinstance(source, str) else _context_param(source)
            self._apps.add(uri)

        if html is not None:
            register(html, uri.removeprefix("ui://"), None)
            return None

        def deco(func: F) -> F:
            register(func, func.__name__, function_description(func))
            return func

        return deco

    def resource_template(
        self,
        uri_template: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        annotations: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        completions: dict[str, Callable[..., Any]] | None = None,
        replace: bool = False,
        scopes: Sequence[str] = (),
    ) -> Callable[[F], F]:
        """Register a handler for every URI matching an RFC 6570 template; variables become arguments."""
        _uri_first("resource_template", uri_template)

        def deco(func: F) -> F:
            self.add_resource_template(
                uri_template, func, name=name or func.__name__, title=title,
                description=description if description is not None else function_description(func),
                mime_type=mime_type, annotations=annotations, icons=icons, meta=meta, completions=completions,
                replace=replace, scopes=scopes,
            )
            return func

        return deco

    def add_resource_template(
        self,
        uri_template: str,
        handler: Callable[..., Any],
        *,
        name: str,
        completions: dict[str, Callable[..., Any]] | None = None,
        replace: bool = False,
        scopes: Sequence[str] = (),
        **kw: Any,
    ) -> ResourceTemplate:
        """:meth:`resource_template` without the decorator: ``handler(**variables)`` reads a URI
        the template matches (a parameter annotated ``Context`` gets the context)."""
        item = ResourceTemplate(uri_template, handler, name=name, context_param=_context_param(handler),
                                completions=_completers(completions), **kw)
        item.scopes = _scopes(scopes)
        if any(t.uri_template == uri_template for t in self._templates) and not replace:
            raise ValueError(f"a resource template {uri_template!r} is already registered")
        self._templates = [t for t in self._templates if t.uri_template != uri_template] + [item]
        self._changed("resourceTemplates")
        return item

    def remove_resource_template(self, uri_template: str) -> None:
        kept = [t for t in self._templates if t.uri_template != uri_template]
        if len(kept) == len(self._templates):
            raise KeyError(f"no resource template {uri_template!r}")
        self._templates = kept
        self._changed("resourceTemplates")

    def find_resource(self, uri: str) -> tuple[Resource | ResourceTemplate, dict[str, Any]] | None:
        """A static resource first, then the most specific matching template (RS-05)."""
        item = self._resources.get(uri)
        if item is not None:
            return item, {}
        for template in sorted(self._templates, key=lambda t: t.template.specificity):
            found = template.match(uri)
            if found is not None:
                return template, found
        return None

    def not_found(self, uri: str, rev: Revision) -> McpError:
        """RS-08: the revision's resource-not-found code, with the URI in data."""
        uri = clipped(uri)
        return McpError(rev.resource_not_found, f"Resource not found: {uri}", {"uri": uri})

    def notify_resource_updated(self, uri: str) -> None:
        """notifications/resources/updated to the sessions subscribed to ``uri`` or a parent of it
        (RS-10), in this process and, with shared stores, in every other one. With shared
        stores, called on the event loop (an async handler), the delivery runs on the stores'
        threads: each shared session's subscriptions are read from the store first, which must
        not stall the loop."""
        if self.shared and _on_a_loop():
            import asyncio

            asyncio.ensure_future(self.stores.call(self._deliver_updated, uri))
        else:
            self._deliver_updated(uri)
        self._announce("updated", {"uri": uri})

    def _deliver_updated(self, uri: str) -> None:
        for session in list(self._sessions):
            refresh = getattr(session, "refresh_state", None)
            if refresh is not None:  # a shared session: its subscriptions may have changed elsewhere
                try:
                    refresh()
                except Exception as exc:  # noqa: BLE001 - the store is down: match what is known here
                    # an outage is one line; anything else keeps its traceback
                    log.warning("could not refresh a shared session's subscriptions: %s", exc,
                                exc_info=not isinstance(exc, StoreUnavailable))
            if any(uri == s or uri.startswith(s.rstrip("/") + "/") for s in session.subscriptions):
                try:
                    session.notify("notifications/resources/updated", {"uri": uri})
                except Exception:  # noqa: BLE001
                    log.exception("could not notify a session of an update to %s", uri)
        for listener in list(self._listeners):
            try:
                listener.updated(uri)
            except Exception:  # noqa: BLE001
                log.exception("could not notify a listen stream of an update to %s", uri)

    def subscriptions_forget(self, uri: str) -> None:
        for session in list(self._sessions):
            session.subscriptions.discard(uri)

    # ------------------------------------------------------------------ prompts

    def prompt(
        self,
        fn: F | str | None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        completions: dict[str, Callable[..., Any]] | None = None,
        replace: bool = False,
        scopes: Sequence[str] = (),
    ) -> Any:
        """Register a function as a prompt (``@server.prompt``, ``@server.prompt(name=...)`` or
        ``@server.prompt("name")``); its parameters are the prompt's (string) arguments.
        ``scopes``: the OAuth scopes a token needs to get it over authenticated HTTP."""
        if isinstance(fn, str):
            name, fn = _positional_name("prompt", fn, name), None

        def deco(func: F) -> F:
            spec = input_spec(func, context_type=Context)
            props = spec.schema.get("properties", {})
            required = set(spec.schema.get("required", []))
            arguments = []
            for arg_name, prop in props.items():
                arg: dict[str, Any] = {"name": arg_name}
                if "description" in prop:
                    arg["description"] = prop["description"]
                arg["required"] = arg_name in required
                arguments.append(arg)
            typed = any(prop.get("type") != "string" or set(prop) - {"type", "description"}
                        for prop in props.values())
            prompt = Prompt(
                name or func.__name__, func, arguments=arguments, title=title,
                description=description if description is not None else function_description(func),
                icons=icons, meta=meta, context_param=spec.context_param,
                completions={**_choice_completers(spec.schema), **_completers(completions)},
                # plain str parameters take the wire's strings as they are; anything else is converted
                schema=spec.schema if typed else None, bind=spec.bind if typed else None,
            )
            prompt.scopes = _scopes(scopes)
            if not typed and spec.bind is not _identity_bind:
                prompt.bind = spec.bind  # a checking type (SandboxPath) of a str parameter, as for tools
            if prompt.name in self._prompts and not replace:
                raise ValueError(f"a prompt named {prompt.name!r} is already registered (pass replace=True)")
            self._prompts[prompt.name] = prompt
            self._changed("prompts")
            return func

        if fn is not None:
            return deco(fn)
        return deco

    def add_prompt(
        self,
        name: str,
        handler: Callable[..., Any],
        *,
        arguments: Sequence[dict[str, Any]] = (),
        title: str | None = None,
        description: str | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        completions: dict[str, Callable[..., Any]] | None = None,
        replace: bool = False,
        scopes: Sequence[str] = (),
    ) -> Prompt:
        """Register a prompt from raw PromptArgument dicts (``{"name", "description", "required"}``);
        ``handler(**arguments)`` gets the string arguments, and the context in a parameter
        annotated ``Context``. What it returns is shaped as for :meth:`prompt`."""
        prompt = Prompt(
            name, handler, arguments=[dict(a) for a in arguments], title=title, description=description,
            icons=icons, meta=meta, context_param=_context_param(handler), completions=_completers(completions),
        )
        prompt.scopes = _scopes(scopes)
        if name in self._prompts and not replace:
            raise ValueError(f"a prompt named {name!r} is already registered (pass replace=True)")
        self._prompts[name] = prompt
        self._changed("prompts")
        return prompt

    def remove_prompt(self, name: str) -> None:
        if self._prompts.pop(name, None) is None:
            raise KeyError(f"no prompt named {name!r}")
        self._changed("prompts")

    # ------------------------------------------------------------------ completion

    def completion(self, fn: F) -> F:
        """Register the fallback completer: ``fn(ref, argument, value, context) -> list[str] | dict``."""
        self._completer = Completer(fn, fallback=True)
        return fn

    def completion_target(self, ref: dict[str, Any]) -> Prompt | Resource | ResourceTemplate:
        """The prompt, template or resource a completion/complete ``ref`` names (CP-03: -32602
        for an unknown one); its rules (scopes) apply to the completion too (CP-05)."""
        kind = ref.get("type")
        if kind == "ref/prompt":
            name = ref.get("name")
            prompt = self._prompts.get(name) if isinstance(name, str) else None
            if prompt is None:
                raise McpError(INVALID_PARAMS, f"Unknown prompt: {clipped(ref.get('name'))}")  # CP-03
            return prompt
        if kind == "ref/resource":
            uri = ref.get("uri")
            template = next((t for t in self._templates if t.uri_template == uri), None)
            if template is not None:
                return template
            resource = self._resources.get(uri) if isinstance(uri, str) else None
            if resource is None:
                raise McpError(INVALID_PARAMS, f"Unknown resource or template: {clipped(uri)}")
            return resource
        raise McpError(INVALID_PARAMS, f"Unknown completion reference type: {clipped(kind)!r}")

    def completer_for(self, ref: dict[str, Any], argument: str) -> Completer | None:
        """The completer of ``argument`` of what ``ref`` names, else the fallback, else None."""
        target = self.completion_target(ref)
        specific: Completer | None = (getattr(target, "completions", None) or {}).get(argument)
        return specific if specific is not None else self._completer


class ToolPolicyOptions(TypedDict, total=False):
    """What one tool may set for itself over the server's Policy (mcpkit.policy): ``contract``
    (the tool contract envelope), ``rate_limit`` ("10/min"; None: not limited), ``timeout``
    (seconds; None: none), ``max_argument_bytes``, ``max_result_bytes``, ``sanitize``, and
    ``requires`` (a Bridge, or several, that must be up for the tool to be listed and run)."""

    contract: bool | str
    rate_limit: Any
    timeout: float | None
    max_argument_bytes: int | None
    max_result_bytes: int | None
    sanitize: bool
    requires: Any
    isolation: str | None


def _positional_name(kind: str, given: str, name: str | None) -> str:
    """The name of ``@server.tool("name")`` (or prompt), unless ``name=`` says another."""
    if name is not None and name != given:
        raise TypeError(f"{kind} named twice: {given!r} and name={name!r}; give one of them")
    return given


def _uri_first(kind: str, uri: Any) -> None:
    """``@server.resource`` without its URI would make the decorated name the decorator and
    register nothing: refused at once, naming the fix."""
    if not isinstance(uri, str):
        what = getattr(uri, "__name__", type(uri).__name__)
        raise TypeError(f"@server.{kind} takes the URI first: write @server.{kind}(\"scheme://...\") above "
                        f"{what}, not @server.{kind} alone")


def _scopes(scopes: Sequence[str] | str) -> tuple[str, ...]:
    if isinstance(scopes, str):
        scopes = scopes.split()
    for scope in scopes:
        if not isinstance(scope, str) or not scope or any(c in scope for c in ' "\\'):
            raise ValueError(f"invalid OAuth scope {scope!r}: a scope is a non-empty token without spaces or quotes")
    return tuple(scopes)


def _relations(name: str, schema: dict[str, Any], exclusive: Any, depends_on: Any) -> Any:
    """The tool's declared parameter relations (validation.Relations), checked against its
    schema now; None when it declares none."""
    if not exclusive and not depends_on:
        return None
    from .validation import Relations

    relations = Relations(exclusive, depends_on)
    relations.check_schema(schema, f"tool {name!r}")
    return relations


def _described(description: str | None, relations: Any) -> str | None:
    """The description with the relations said at its end, for the model that reads it."""
    if relations is None:
        return description
    return f"{description.rstrip()} {relations.sentence()}" if description else relations.sentence()


def _tool_options(policy: dict[str, Any]) -> Any:
    unknown = sorted(set(policy) - ToolPolicyOptions.__annotations__.keys())
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) {', '.join(unknown)}; a tool's policy options are "
                        f"{', '.join(ToolPolicyOptions.__annotations__)}")
    if not policy:
        return None  # the common case imports nothing of the policy package
    return policy_layer().tool_options(policy)  # what is not given is INHERIT: the server's policy decides


def _result_spec(annotation: Any) -> tuple[dict[str, Any] | None, Callable[[Any], Any]]:
    """The schema and dump of a tool's own value inside a contract envelope (no result wrapper)."""
    out = output_spec(annotation)
    if out.schema is None:
        from .schema import _to_json

        return None, _to_json
    if not out.wrapped:
        return out.schema, out.dump
    inner = dict(out.schema["properties"]["result"])
    if "$defs" in out.schema:
        inner["$defs"] = out.schema["$defs"]
    dump = out.dump
    probe = object()
    try:
        passes_through = dump(probe)["result"] is probe  # plain JSON values: no conversion
    except Exception:  # noqa: BLE001 - a converting dump cannot take a bare object
        passes_through = False
    if passes_through:
        return inner, _identity
    return inner, lambda value: dump(value)["result"]


def _identity(value: Any) -> Any:
    return value


def _warn_secret_parameters(tool: str, schema: dict[str, Any]) -> None:
    props = schema.get("properties") if isinstance(schema, dict) else None
    if props:
        policy_layer().warn_secret_parameters(tool, props)


class HostCompatibilityWarning(UserWarning):
    """A tool's schema is one that some hosts refuse (mcpkit/hosts.py)."""


def _warn_root_combinators(tool: str, schema: Any) -> None:
    if not isinstance(schema, dict) or not any(k in schema for k in ("oneOf", "anyOf", "allOf", "not", "if")):
        return
    from ..hosts import hosts_rejecting_root, root_combinators

    rejecting = hosts_rejecting_root(schema)
    if not rejecting:
        return
    import warnings

    from ..hosts import HOSTS

    message = (f"tool {tool!r}: inputSchema has {', '.join(root_combinators(schema))} at its root, which "
               f"{'; '.join(HOSTS[h].name for h in rejecting)} refuse (the whole session fails, not only this "
               f"tool). Fix: pass flatten=True to list a flat copy (calls are still validated against this "
               f"schema), or express the alternatives inside properties.")
    log.warning("%s", message)
    warnings.warn(message, HostCompatibilityWarning, stacklevel=3)


def _warn_host_problems(server: Any, tool: str, schema: Any) -> None:
    """A raw tool (a proxy's upstream, a bridge's mirror, add_tool) whose name or $ref a default host
    refuses, said once per tool and problem: nothing else tells the user before the host fails."""
    from ..hosts import registration_problems

    problems = registration_problems(tool, schema)
    if not problems:
        return
    warned: set[tuple[str, str]] = server.__dict__.setdefault("_host_warned", set())
    key = (tool, "; ".join(sorted({p.message for p in problems})))
    if key in warned:
        return  # a mirror registers its tools again at every change
    warned.add(key)
    hosts = ", ".join(dict.fromkeys(p.host for p in problems))
    log.warning("tool %r: the hosts %s would refuse it (%s). Fix: Server(..., host_schemas=\"auto\") or mcpkit proxy "
                "--host-schemas auto lists each host a copy it accepts (docs/hosts.md)",
                tool, hosts, "; ".join(dict.fromkeys(p.message.split(": ")[0] for p in problems)))


def _is_template(uri: str) -> bool:
    """An RFC 6570 expression in a resource's URI: braces are not URI characters (RFC 3986)."""
    return "{" in uri and "}" in uri


def _check_cache(ttl_ms: Any, scope: Any) -> None:
    if ttl_ms is not None and (not isinstance(ttl_ms, int) or isinstance(ttl_ms, bool) or ttl_ms < 0):
        raise ValueError("cache ttl_ms must be an integer >= 0 (CA-02)")
    if scope is not None and scope not in ("public", "private"):
        raise ValueError("cache_scope must be 'public' or 'private' (CA-01)")


def _encode_cursor(kind: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{offset}".encode()).decode().rstrip("=")


def _decode_cursor(kind: str, cursor: Any) -> int:
    """PA-02: anything that is not a cursor we minted for this list is -32602."""
    try:
        if not isinstance(cursor, str):
            raise ValueError
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        prefix, _, number = raw.partition(":")
        if prefix != kind or not number.isdigit():
            raise ValueError
        return int(number)
    except ValueError:
        raise McpError(INVALID_PARAMS, "Invalid or expired cursor.", {"cursor": cursor}) from None


def _return_hint(func: Callable[..., Any]) -> Any:
    import typing

    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable annotations: no structured output
        return inspect.Signature.empty
    hint = hints.get("return", inspect.Signature.empty)
    if getattr(typing.get_origin(hint) or hint, "__mcp_outcome__", False):
        # Outcome[T] (mcpkit.policy.envelope): the value inside is a T; a bare Outcome is untyped
        args = typing.get_args(hint)
        return args[0] if args else inspect.Signature.empty
    return hint


def _context_param(fn: Callable[..., Any]) -> str | None:
    """The parameter that gets the request's Context, found as a tool's is (schema.input_spec):
    ``Context``, ``Context | None``, a subclass, ``Annotated[Context, ...]``, or ``"Context"``
    imported only under TYPE_CHECKING. One rule for every kind of handler."""
    try:
        hints = _resolve_hints(fn, Context)
    except Exception:  # noqa: BLE001 - unresolvable annotations: no Context parameter
        return None
    for name, hint in hints.items():
        if name != "return" and _is_context(hint, Context):
            return name
    return None


def _positional_count(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


class Completer:
    """A completion handler with its signature read once, when it is registered, so that a
    completion (asked for at each keystroke) costs no signature inspection.

    A per-argument completer takes ``(value)`` or ``(value, context)``; the fallback
    (``@server.completion``) takes ``(ref, argument, value, context)``. Either may also declare
    a parameter annotated ``Context``, found as for resource and prompt handlers: it gets the
    request's context by name (``ctx.principal``, ``ctx.access_token``, ...)."""

    __slots__ = ("_span", "context_param", "fn", "is_async")

    def __init__(self, fn: Callable[..., Any], *, fallback: bool = False) -> None:
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)
        self.context_param = _context_param(fn)
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            params = []
        positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        others = [n for n in positional if n != self.context_param]
        given = 4 if fallback else 2 if len(others) >= 2 else 1
        if any(p.name == self.context_param and p.kind is p.POSITIONAL_ONLY for p in params):
            raise TypeError(f"completer {getattr(fn, '__qualname__', fn)!r}: its Context parameter "
                            f"{self.context_param!r} is positional-only, and the context is passed by name: "
                            "move it after the '/' or make it keyword-only")
        if self.context_param in positional[:given]:
            # the value would land in the Context parameter and the context be passed twice
            what = "(ref, argument, value, context)" if fallback else "value" if given == 1 else "(value, context)"
            raise TypeError(f"completer {getattr(fn, '__qualname__', fn)!r}: its Context parameter "
                            f"{self.context_param!r} must come after {what}, or be keyword-only")
        # which of (ref, argument, value, context) it is given
        self._span = slice(0, 4) if fallback else slice(2, 2 + given)

    def arguments(self, ref: dict[str, Any], argument: str, value: str, context: dict[str, Any]) -> tuple[Any, ...]:
        given: tuple[Any, ...] = (ref, argument, value, context)
        return given[self._span]


def _completers(completions: Mapping[str, Callable[..., Any]] | None) -> dict[str, Completer]:
    return {name: Completer(fn) for name, fn in (completions or {}).items()}


def _choice_completers(schema: dict[str, Any]) -> dict[str, Completer]:
    """A completer for each prompt argument typed by its choices (a ``Literal``, an ``Enum``):
    prompts/list carries no schema, so completion (CP-01) is how a client learns the values it
    may send; a completer given for the argument replaces it."""
    defs = schema.get("$defs") or {}
    out: dict[str, Completer] = {}
    for name, prop in (schema.get("properties") or {}).items():
        choices = _choices(prop, defs)
        if choices:
            out[name] = Completer(_offering(choices))
    return out


def _choices(prop: Any, defs: dict[str, Any]) -> list[str] | None:
    if not isinstance(prop, dict):
        return None
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _choices(defs.get(ref[len("#/$defs/"):]), defs)
    if isinstance(prop.get("enum"), list):
        return [v if isinstance(v, str) else json.dumps(v) for v in prop["enum"] if v is not None]
    if "const" in prop and prop["const"] is not None:
        return [prop["const"] if isinstance(prop["const"], str) else json.dumps(prop["const"])]
    for alternative in prop.get("anyOf") or ():  # Optional[Literal[...]]: the choices, or nothing
        found = _choices(alternative, defs)
        if found:
            return found
    return None


def _offering(choices: list[str]) -> Callable[[str], list[str]]:
    def offer(value: str) -> list[str]:
        return [choice for choice in choices if choice.startswith(value)]

    return offer


def _on_a_loop() -> bool:
    """Whether this thread runs an event loop (a worker thread or stdio's reader does not)."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
