"""Upstream: one MCP server mirrored into an mcpkit Server, kept in step, and forwarded to.

What the upstream lists (tools, resources, templates, prompts) is registered in the Server under
the names of :class:`mcpkit.server.compose.Names`, and re-listed whenever the upstream says its
lists changed, so the Server's own ``list_changed`` reaches its clients. Every tool call, read,
prompt get and completion is forwarded with the upstream's raw schemas kept and enforced as
advertised, progress and log messages relayed back, and cancellation passed on. What the
upstream asks of its client (sampling, elicitation, roots) is asked of the real client: the
downstream session whose request it belongs to (relay.py says how that is known).
An upstream's skills (the Skills extension) are relayed too: skills.py.

The connection is a :class:`mcpkit.policy.Bridge`: while the upstream is down its tools are
hidden and refused with a retryable error, its resources and prompts are withdrawn, and the
bridge reconnects with backoff (a command is started again); on the way back everything is
listed afresh. Because every mirrored tool passes through the Server's policy chain, the gates,
scopes, rate limits, timeouts and audit apply to a server we did not write; a
:class:`~mcpkit.proxy.toolpolicy.ToolPolicy` says what to believe about its tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from ..client import Client, ClientError, RpcError
from ..policy.bridge import Bridge
from ..protocol.errors import INTERNAL_ERROR, McpError
from ..server.compose import Names
from ..server.context import Context
from ..server.pipeline import policy_layer
from .forwarding import Forwarding
from .hub import batched, changing, hub_of, upstreams_of
from .loop import upstream_loop
from .mirroring import done_now, has_root_combinator, is_server, label, register
from .relay import Call, served
from .skills import SkillRelay
from .tasks import TaskOwners
from .toolpolicy import ToolPolicy, toml_key

__all__ = ["Upstream", "proxy_server", "upstreams_of"]

log = logging.getLogger("mcpkit.proxy")

#: seconds: an upstream's list_changed sets off a listing at once, then at most one per interval
RELIST_INTERVAL = 0.5

#: what a withheld tool is registered with: never listed, and refused before its arguments are read
_HELD: dict[str, Any] = {"inputSchema": {"type": "object"}}
_FOREVER = 10.0**9  # seconds: a listen stream has no answer to wait for

_KINDS = {"notifications/tools/list_changed": "tools", "notifications/resources/list_changed": "resources",
          "notifications/prompts/list_changed": "prompts"}


class Upstream(Forwarding, SkillRelay):
    """One upstream server mirrored into ``server``; see the module docstring.

    ``target``: a command line (a string or an argv list; stdio), an http(s) URL (Streamable
    HTTP; ``transport="sse"`` for legacy SSE), a Server (driven in memory: ``Server.mount``), or
    an unconnected :class:`mcpkit.Client` (used as given; it cannot be reconnected).

    Options: ``prefix``/``separator``/``prefix_uris`` name the mirrored items (compose.Names);
    ``tool_policy`` (a ToolPolicy, a TOML path or a dict) overrides what the upstream's tools
    claim; ``headers``, ``env``, ``inherit_env`` (mcpkit.client.environment), ``cwd``, ``sandbox``
    (mcpkit.client.sandbox: every start of the command is confined), ``transport``,
    ``protocol_version`` build the Client; ``timeout`` bounds each upstream request (seconds, None:
    unbounded); ``probe_interval`` is how often the link is pinged; ``connect_timeout`` bounds one
    connection attempt; ``pin`` (a :class:`mcpkit.proxy.pin.Pin`) withholds what changed since it
    was pinned; ``redact`` (a mode or settings, proxy/redaction.py) masks or refuses secrets in transit.
    ``max_response_bytes`` fails a call whose answer is larger (sizecap.py).
    """

    def __init__(
        self,
        server: Any,
        target: Any,
        *,
        prefix: str | None = None,
        separator: str = "_",
        prefix_uris: bool = True,
        name: str | None = None,
        tool_policy: Any = None,
        transport: str = "auto",
        protocol_version: str | None = None,
        headers: dict[str, str] | None = None,
        env: dict[str, str | None] | None = None,
        inherit_env: bool | list[str] | None = None,
        cwd: str | None = None,
        sandbox: Any = None,
        timeout: float | None = 300.0,
        probe_interval: float = 5.0,
        connect_timeout: float = 30.0,
        flatten_schemas: bool = False,
        pin: Any = None,
        redact: Any = None,
        max_response_bytes: int | None = None,
    ) -> None:
        self.server = server
        self.target = target
        #: list an upstream tool whose inputSchema has a root oneOf/anyOf/allOf as a flat copy
        #: that every host accepts, still validating calls against the original (mcpkit.hosts)
        self.flatten_schemas = flatten_schemas
        #: a proxy.pin.Pin: what drifted from the lockfile is withheld, screened once per listing
        self.pin = pin
        if pin is not None and pin.audit is None and server.policy is not None:
            pin.audit = server.policy.audit
        self.names = Names(prefix, separator, prefix_uris)
        if prefix is not None:
            for other in upstreams_of(server):
                if (other.names.prefix, other.names.separator) == (prefix, separator):
                    # every name would clash with the first mount's: nothing would be mirrored
                    raise ValueError(f"prefix {prefix!r} is already mounted (upstream {other.name}); "
                                     "choose another prefix")
        self.name = name or prefix or label(target)
        if tool_policy is None or isinstance(tool_policy, ToolPolicy):
            self.tool_policy = tool_policy
        elif isinstance(tool_policy, dict):
            self.tool_policy = ToolPolicy.from_dict(tool_policy)
        else:
            self.tool_policy = ToolPolicy.from_file(tool_policy)
        self._client_options = {"transport": transport, "protocol_version": protocol_version,
                                "headers": headers, "env": env, "inherit_env": inherit_env, "cwd": cwd,
                                "sandbox": sandbox,
                                "max_message_bytes": max_response_bytes}  # sizecap.py
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._given = target if isinstance(target, Client) else None
        self._loop = upstream_loop()
        self._client: Client | None = None
        #: parent name/URI -> what was registered for it (to tell changes from no-ops)
        self._tools: dict[str, Any] = {}
        self._resources: dict[str, Any] = {}
        self._templates: dict[str, Any] = {}
        self._prompts: dict[str, Any] = {}
        self._relayed_skills: dict[str, Any] = {}  # SKILL.md URI here -> RelayedSkill (skills.py)
        self._owned: set[int] = set()  # ids of the Resource/ResourceTemplate objects registered here
        self._subscribed: set[str] = set()
        self._calls: list[Call] = []
        self._tasks = TaskOwners()  # the tasks this upstream created, and for whom (tasks.py)
        self._dirty: set[str] = set()
        #: the upstream's last tool and prompt lists, kept to match them again when another
        #: upstream is mounted or closed (whose prefix a shared tool policy's rules may name)
        self._tool_items: list[dict[str, Any]] = []
        self._prompt_items: list[dict[str, Any]] = []
        #: what was warned of, once each: (kind, name) under another upstream's prefix, and
        #: ("rule", pattern NUL name) read as another upstream's names
        self._warned: set[tuple[str, str]] = set()
        self._syncing: asyncio.Task[Any] | None = None
        self._listed_at = -RELIST_INTERVAL  # when a list_changed last set off a listing (loop time)
        self._listening: asyncio.Task[Any] | None = None
        #: the upstream's serverInfo and instructions, from the last connection
        self.server_info: dict[str, Any] = {}
        self.instructions: str | None = None
        self.connect_error: str | None = None
        self.bridge = Bridge(
            f"upstream {self.name}", self._connect, probe=self._probe, close=self._close,
            probe_interval=probe_interval, backoff_initial=0.5, backoff_max=10.0, failure_threshold=1,
            reset_timeout=1.0, call_errors=(ClientError,),
        )
        self.bridge.on_change(self._on_bridge)
        self.redaction: Any = None  # the RedactPolicy whose guard wraps _forward (only when on)
        if redact is not None:
            from .redaction import guard

            guard(self, redact)
        with changing(server) as hub:
            hub.upstreams.append(self)
            for other in hub.upstreams[:-1]:
                other._refresh()  # its names under this prefix are this upstream's now

    @property
    def head(self) -> str:
        """What every name of this upstream begins with in the server: prefix and separator."""
        return "" if self.names.prefix is None else self.names.prefix + self.names.separator

    # ------------------------------------------------------------------ lifecycle

    @property
    def up(self) -> bool:
        return self.bridge.up

    @property
    def reconnects(self) -> bool:
        """A command or URL is connected again after it drops; a Server or a given Client is not."""
        return self._given is None and not is_server(self.target)

    def start(self) -> Upstream:
        """Connect now (so the mirrored items are there from the first list), then keep the link
        supervised. A failed first attempt is not an error: the upstream stays down (its
        ``last_error`` says why) and is retried with backoff."""
        self.bridge.step()
        if not self.bridge.up:
            log.warning("upstream %s is not reachable yet: %s", self.name, self.bridge.last_error)
            if self.reconnects:
                # what it serves is unknown until it is up; a session opened meanwhile is held to
                # the capabilities its initialize declared (LC-06), so declare them now, or that
                # session never sees the tools when the upstream comes back (as Server.mirror does)
                self.server._advertise = self.server._advertise | {"tools", "resources", "prompts"}
        if self.reconnects:
            self.bridge.start()
        return self

    def close(self) -> None:
        """Stop supervising and close the connection; the mirrored items are withdrawn."""
        hub = hub_of(self.server)
        with batched(self.server):  # down, then withdrawn: one list_changed per kind
            self.bridge.stop()
            with hub.lock:
                self._withdraw(tools=True)
                if self in hub.upstreams:
                    hub.upstreams.remove(self)
                    for other in hub.upstreams:
                        other._refresh()  # a shared policy's rules, and which names are whose, may read otherwise now

    @property
    def last_error(self) -> str | None:
        return self.bridge.last_error

    def _new_client(self) -> Client:
        if self._given is not None:
            if self._given._started:
                raise ConnectionError(f"upstream {self.name}: a given Client cannot be connected again")
            client = self._given
            client.sampling_handler = self._relay("sampling/createMessage")
            client.elicitation_handler = self._relay("elicitation/create")
            client.roots = self._roots
            client.on_notification = self._on_notification
            client.on_log = self._on_log
            client.capabilities.update(_CLIENT_CAPS)
            client.keep_messages = 0  # what it receives is relayed, not kept: memory stays flat
            return client
        options = {k: v for k, v in self._client_options.items() if v is not None}
        return Client(
            self.target, timeout=self.timeout, capabilities=dict(_CLIENT_CAPS),
            sampling_handler=self._relay("sampling/createMessage"),
            elicitation_handler=self._relay("elicitation/create"), roots=self._roots,
            on_notification=self._on_notification, on_log=self._on_log, keep_messages=0, **options,
        )

    def _connect(self) -> Client:
        """The bridge's connect (on its thread, or start()'s): connect, then list everything."""
        client = self._new_client()
        try:
            self._loop.run(self._open(client), self.connect_timeout)
        except BaseException as exc:
            if self._client is client:
                self._client = None
            with contextlib.suppress(Exception):
                self._loop.run(client.close(), 5.0)
            if isinstance(exc, ClientError) and str(exc):
                detail = str(exc)  # says it all: "the server exited with code 3; stderr: ..."
            else:
                detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            stderr = (client.stderr or "").strip()
            if stderr and stderr[-100:] not in detail:
                detail += f" (its stderr ends: {stderr[-300:]})"
            #: why the last connection attempt failed, without the bridge's wrapping
            self.connect_error = detail
            raise ConnectionError(f"upstream {self.name}: {detail}") from None
        return client

    async def _open(self, client: Client) -> None:
        await client.connect()
        if is_server(self.target):
            client.transport.session.outer = self  # type: ignore[attr-defined]
        self.server_info = dict(client.server_info or {})
        self.instructions = client.instructions
        if "logging" in client.server_capabilities and not client.modern:
            # everything comes here; each downstream session's own level filters it (LG-02)
            with contextlib.suppress(RpcError):
                await client.set_log_level("debug")
        # what the upstream declares is served here even while it lists none of it (all its
        # tools may wait for a bridge of its own): a session opened meanwhile is held to the
        # capabilities it was told (LC-06) and would never list them once they come
        declared = self._declared(frozenset(k for k in ("tools", "resources", "prompts")
                                            if k in client.server_capabilities))
        if not declared <= self.server._advertise:
            self.server._advertise = self.server._advertise | declared
        self._client = client
        self._subscribed.clear()
        for kind in ("tools", "resources", "prompts"):
            await self._sync(client, kind)
        if client.modern:
            self._listening = asyncio.get_running_loop().create_task(self._listen(client))

    async def _listen(self, client: Client) -> None:
        """2026-07-28 sends list changes only on a subscriptions/listen stream (SB-01): keep one
        open while this connection lasts."""
        wants = {"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True}
        while self._client is client and client._lost is None:
            try:
                await client.request("subscriptions/listen", {"notifications": wants}, timeout=_FOREVER)
            except asyncio.CancelledError:
                raise
            except (ClientError, RpcError) as exc:
                if self._client is not client or client._lost is not None:
                    return
                log.debug("upstream %s: the listen stream ended (%s); opening another", self.name, exc)
            await asyncio.sleep(1.0)

    def _probe(self, client: Client) -> bool:
        if client._lost is not None:
            return False
        # 2026-07-28 has no ping; server/discover is as cheap and answered by every server of it
        probe = client.request("server/discover") if client.modern else client.ping()
        self._loop.run(probe, min(10.0, max(2.0, self.bridge._probe_interval * 2)))
        return True

    def _close(self, client: Client) -> None:
        if self._client is client:
            self._client = None
        listening = self._listening
        if listening is not None:
            self._loop.loop.call_soon_threadsafe(listening.cancel)
        with contextlib.suppress(Exception):
            self._loop.run(client.close(), 10.0)

    def _on_bridge(self, up: bool) -> None:
        if not up:
            # its tools stay registered, hidden and refused by the bridge; what else it offered goes
            self._withdraw(tools=False)

    def _withdraw(self, *, tools: bool) -> None:
        with changing(self.server):
            self._withdraw_locked(tools)

    def _withdraw_locked(self, tools: bool) -> None:
        server = self.server
        self._prompt_items = []  # listed again when the upstream is back
        for uri in list(self._resources):
            self._resources.pop(uri, None)
            with contextlib.suppress(KeyError):
                server.remove_resource(uri)
        for uri in list(self._templates):
            self._templates.pop(uri, None)
            with contextlib.suppress(KeyError):
                server.remove_resource_template(uri)
        for name in list(self._prompts):
            self._prompts.pop(name, None)
            with contextlib.suppress(KeyError):
                server.remove_prompt(name)
        # a closed upstream's extension goes with it; a down one's stays declared (LC-06)
        self._withdraw_skills(declared=not tools)
        if tools:
            self._tool_items = []
            for name in list(self._tools):
                self._tools.pop(name, None)
                with contextlib.suppress(KeyError):
                    server.remove_tool(name)
        self._owned.clear()

    # ------------------------------------------------------------------ keeping in step

    def _on_notification(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        kind = _KINDS.get(str(method))
        if kind is not None:
            self._mark_dirty(kind)
        elif method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
            if self.relays_skill_file(self._client, params):
                # a relayed skill's file changed: its entry (digest) is listed again, and the
                # registry announces each file whose digest changed (server/skills.py)
                self._mark_dirty("resources")
            else:
                self.server.notify_resource_updated(self.names.uri(params["uri"]))

    def _mark_dirty(self, kind: str) -> None:
        """List ``kind`` again soon (on the upstream's loop): _sync_dirty says how soon."""
        self._dirty.add(kind)
        if self._syncing is None or self._syncing.done():
            self._syncing = asyncio.get_running_loop().create_task(self._sync_dirty())

    async def _sync_dirty(self) -> None:
        loop = asyncio.get_running_loop()
        while self._dirty:
            # an upstream that says list_changed over and over (each one a listing here and a
            # list_changed to every client) is listed at most once per RELIST_INTERVAL: what it
            # says meanwhile is one listing of each kind it named, at the end of the interval
            wait = self._listed_at + RELIST_INTERVAL - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            client = self._client
            if client is None:
                return
            self._listed_at = loop.time()
            kinds, self._dirty = self._dirty, set()
            for kind in sorted(kinds):
                before = self._mirrored(kind)
                try:
                    await self._sync(client, kind)
                except (ClientError, RpcError) as exc:
                    log.warning("upstream %s: could not list its %s again: %s", self.name, kind, exc)
                    continue
                if self._mirrored(kind) == before:
                    # the list changed and changed back (or only in what is not mirrored): the
                    # upstream said so, and its clients' caches are this server's clients' caches
                    self.server._changed(kind)

    def _mirrored(self, kind: str) -> Any:
        if kind == "tools":
            return dict(self._tools)
        if kind == "resources":
            skills = {uri: (s.frontmatter, s.items) for uri, s in self._relayed_skills.items()}
            return dict(self._resources), dict(self._templates), skills
        return dict(self._prompts)

    async def _sync(self, client: Client, kind: str) -> None:
        caps = client.server_capabilities
        if kind == "tools":
            # the whole catalog of a server with tool search: its tools are mirrored one by one, so
            # each call takes this server's pipeline as that tool (server/toolsearch.py)
            self._apply_tools(await client.list_tools(full=True) if "tools" in caps else [])
        elif kind == "resources":
            resources = await client.list_resources() if "resources" in caps else []
            templates = await self._list_templates(client) if "resources" in caps else []
            settings, skills = await self._list_skills(client)  # their files are resources (SEP-2640)
            with batched(self.server):
                self._apply_resources([d for d in resources if not self.relays_skill_file(client, d)], templates)
                self._apply_skills(settings, skills)
        else:
            self._apply_prompts(await client.list_prompts() if "prompts" in caps else [])

    async def _list_templates(self, client: Client) -> list[dict[str, Any]]:
        try:
            return await client.list_resource_templates()
        except RpcError as exc:
            if exc.code != -32601:
                raise
            # a server older than templates has none: its resources are still served (an error
            # here left the whole upstream unreachable)
            return []

    def _taken(self, name: str, mine: dict[str, Any], theirs: Any) -> bool:
        if name in mine or name not in theirs:
            return False
        log.warning("upstream %s: %r is already served by something else; not mirrored (use %s prefix)",
                    self.name, name, "a" if self.names.prefix is None else "another")
        return True

    def _refresh(self) -> None:
        """Match the last lists again: another upstream was mounted or closed, which changes what
        a shared tool policy's rules name and which names are this upstream's."""
        self._apply_tools(self._tool_items)
        self._apply_prompts(self._prompt_items)

    def _refuse(self, kind: str, name: str) -> bool:
        """Whether ``name`` lies under the prefix of another upstream that is longer than this
        one's (upstream ``a``'s ``b_c`` and upstream ``a_b``'s ``c`` both read ``a_b_c``): it
        is that upstream's name, whoever lists it first, so this upstream's tool or prompt is
        not mirrored. Otherwise an upstream could shadow another's tool, and take its rules."""
        owner = hub_of(self.server).owner(self, name)
        key = (kind, name)
        if owner is None:
            self._warned.discard(key)
            return False
        if key not in self._warned:
            self._warned.add(key)
            log.warning("upstream %s: %s %r is not mirrored: %r is a name under the prefix %r of upstream %s; "
                        "give one of them a prefix that does not begin with the other's", self.name, kind,
                        self.names.name_back(name) or name, name, owner.names.prefix, owner.name)
        return True

    def _passed_over(self, patterns: list[str], name: str) -> None:
        for pattern in patterns:
            key = ("rule", f"{pattern}\0{name}")
            if key not in self._warned:
                self._warned.add(key)
                log.warning("upstream %s: the tool policy's [tools.%s] could name another upstream's tools, so "
                            "it is read as listed names and does not apply to this upstream's own %r; name that "
                            "one [tools.%s]", self.name, toml_key(pattern), self.names.name_back(name) or name,
                            toml_key(name))

    def _apply_tools(self, items: list[dict[str, Any]]) -> None:
        with changing(self.server):  # the other upstreams: a mount or close changes them
            self._apply_tools_locked(items)

    def _apply_tools_locked(self, items: list[dict[str, Any]]) -> None:
        wanted: dict[str, tuple[str, dict[str, Any], dict[str, Any], Any, Any, Any]] = {}
        items = [d for d in items if isinstance(d, dict) and isinstance(d.get("name"), str)]
        self._tool_items = items
        held: dict[str, Any] = {}
        if self.pin is not None:
            items, held = self.pin.screen("tools", items)
        for upstream_name, (why, fields) in held.items():  # registered behind a Hold: unlisted, refused
            name = self.names.name(upstream_name)
            if not self._refuse("tool", name):
                wanted[name] = (upstream_name, _HELD, {}, (), None, self.pin.hold(name, why, fields))
        served = [(self.names.name(d["name"]), d) for d in items]
        served = [(name, d) for name, d in served if not self._refuse("tool", name)]
        resolve = None
        if self.tool_policy is not None:
            # a rule naming a listed tool is that tool's only, never also an upstream's own name;
            # nor is one that may name a tool under the prefix of another upstream sharing the
            # policy (whatever that one lists, and while it lists nothing: toolpolicy.py)
            others = [u.head for u in hub_of(self.server).sharing(self)]
            resolve = self.tool_policy.resolver([name for name, _ in served], others)
        for name, desc in served:
            upstream_name = desc["name"]
            settings = resolve(name, upstream_name) if resolve is not None else {}
            if resolve is not None:
                self._passed_over(resolve.passed_over(name, upstream_name), name)
            if not settings.get("hidden"):
                # a Server child's own scopes (the tool's, its actions') are part of what is
                # mirrored: a tool registered again with other scopes is registered again here
                wanted[name] = (upstream_name, desc, settings, self._scopes("tool", upstream_name),
                                self._action_scopes(upstream_name), None)
        for name in [n for n in self._tools if n not in wanted]:
            del self._tools[name]
            with contextlib.suppress(KeyError):
                self.server.remove_tool(name)
        registered = self.server.tools
        for name, spec in wanted.items():
            if self._tools.get(name) == spec or self._taken(name, self._tools, registered):
                continue
            try:
                self._add_tool(name, *spec)
            except (ValueError, TypeError) as exc:
                log.warning("upstream %s: tool %r cannot be served: %s", self.name, spec[0], exc)
                if name in self._tools:
                    del self._tools[name]
                    with contextlib.suppress(KeyError):
                        self.server.remove_tool(name)
                continue
            self._tools[name] = spec

    def _add_tool(self, name: str, upstream_name: str, desc: dict[str, Any], settings: dict[str, Any],
                  own_scopes: tuple[str, ...] = (), action_scopes: dict[str, tuple[str, ...]] | None = None,
                  hold: Any = None) -> None:
        options: dict[str, Any] = {"requires": self.bridge if hold is None else (self.bridge, hold)}
        if "rate_limit" in settings:
            options["rate_limit"] = settings["rate_limit"] or None
        if "timeout" in settings:
            options["timeout"] = settings["timeout"] or None
        annotations = ToolPolicy.annotate(desc.get("annotations"), settings)

        async def call(arguments: dict[str, Any], ctx: Context) -> Any:
            return await self._forward(ctx, "tools/call", {"name": upstream_name, "arguments": arguments}, tool=True)

        kwargs = dict(
            input_schema=desc.get("inputSchema"), output_schema=desc.get("outputSchema"),
            description=desc.get("description"), title=desc.get("title"), annotations=annotations,
            replace=True, scopes=tuple(dict.fromkeys([*own_scopes, *settings.get("scopes", ())])),
            action_scopes=action_scopes, **options,
        )
        if self.flatten_schemas and has_root_combinator(desc.get("inputSchema")):
            kwargs["flatten"] = True
        register(lambda **extra: self.server.add_tool(name, call, **kwargs, **extra), desc)

    def _apply_resources(self, resources: list[dict[str, Any]], templates: list[dict[str, Any]]) -> None:
        server = self.server
        # a {variable} URI listed as a resource is a template in the wrong list (servers written
        # before templates do it): served as the template it is, where add_resource refuses it
        braced = [d for d in resources if isinstance(d, dict) and isinstance(d.get("uri"), str)
                  and "{" in d["uri"] and "}" in d["uri"]]
        if braced:
            resources = [d for d in resources if not any(d is b for b in braced)]
            templates = [*templates, *({"uriTemplate": d["uri"], **{k: v for k, v in d.items() if k != "uri"}}
                                       for d in braced)]
        if self.pin is not None:  # a drifted template is not mirrored (pin.py)
            templates = self.pin.screen("resourceTemplates", [d for d in templates if isinstance(d, dict)])[0]
        wanted = {self.names.uri(d["uri"]): d for d in resources if isinstance(d, dict) and isinstance(d.get("uri"), str)}
        for uri in [u for u in self._resources if u not in wanted]:
            del self._resources[uri]
            with contextlib.suppress(KeyError):
                server.remove_resource(uri)
        known = set(server._resources)
        for uri, desc in wanted.items():
            if self._resources.get(uri) == desc or self._taken(uri, self._resources, known):
                continue
            try:
                item = self._add_resource(uri, desc)
            except (ValueError, TypeError) as exc:
                log.warning("upstream %s: resource %r cannot be served: %s", self.name, desc["uri"], exc)
                continue
            self._owned.add(id(item))
            self._resources[uri] = desc
        wanted_t = {self.names.uri(d["uriTemplate"]): d for d in templates
                    if isinstance(d, dict) and isinstance(d.get("uriTemplate"), str)}
        for uri in [u for u in self._templates if u not in wanted_t]:
            del self._templates[uri]
            with contextlib.suppress(KeyError):
                server.remove_resource_template(uri)
        known_t = {t.uri_template for t in server._templates}
        for uri, desc in wanted_t.items():
            if self._templates.get(uri) == desc or self._taken(uri, self._templates, known_t):
                continue
            try:
                item = self._add_template(uri, desc)
            except (ValueError, TypeError) as exc:
                log.warning("upstream %s: resource template %r cannot be served: %s", self.name,
                            desc["uriTemplate"], exc)
                continue
            self._owned.add(id(item))
            self._templates[uri] = desc

    def _add_resource(self, uri: str, desc: dict[str, Any]) -> Any:
        upstream_uri = desc["uri"]

        async def read(ctx: Context) -> Any:
            return await self._read(ctx, upstream_uri)

        return register(lambda **extra: self.server.add_resource(
            uri, read, name=str(desc.get("name") or upstream_uri), title=desc.get("title"),
            description=desc.get("description"), mime_type=desc.get("mimeType"), size=desc.get("size"),
            annotations=desc.get("annotations"), replace=True, scopes=self._scopes("resource", upstream_uri),
            **extra), desc)

    def _add_template(self, uri_template: str, desc: dict[str, Any]) -> Any:
        from ..server.uritemplate import UriTemplate

        upstream_template = desc["uriTemplate"]

        async def read(ctx: Context, **variables: Any) -> Any:
            requested = (ctx._request.params or {}).get("uri", "")
            upstream_uri = self.names.uri_back(requested)
            return await self._read(ctx, upstream_uri if upstream_uri is not None else requested)

        ref = {"type": "ref/resource", "uri": upstream_template}
        completions = {v: self._completer(ref, v) for v in UriTemplate(uri_template).variables}
        return register(lambda **extra: self.server.add_resource_template(
            uri_template, read, name=str(desc.get("name") or upstream_template), title=desc.get("title"),
            description=desc.get("description"), mime_type=desc.get("mimeType"),
            annotations=desc.get("annotations"), completions=completions, replace=True,
            scopes=self._scopes("template", upstream_template), **extra), desc)

    async def _read(self, ctx: Context, upstream_uri: str) -> Any:
        result = await self._forward(ctx, "resources/read", {"uri": upstream_uri})
        contents = result.get("contents") if isinstance(result, dict) else None
        if not isinstance(contents, list):
            raise McpError(INTERNAL_ERROR, f"upstream {self.name} answered resources/read without contents")
        out = []
        for item in contents:
            if isinstance(item, dict) and isinstance(item.get("uri"), str):
                item = {**item, "uri": self.names.uri(item["uri"])}
            out.append(item)
        return out

    def _apply_prompts(self, items: list[dict[str, Any]]) -> None:
        with changing(self.server):
            self._apply_prompts_locked(items)

    def _apply_prompts_locked(self, items: list[dict[str, Any]]) -> None:
        server = self.server
        self._prompt_items = items
        if self.pin is not None:  # a drifted prompt is not mirrored (pin.py)
            items = self.pin.screen("prompts", [d for d in items if isinstance(d, dict)])[0]
        wanted = {self.names.name(d["name"]): d for d in items if isinstance(d, dict) and isinstance(d.get("name"), str)}
        wanted = {name: d for name, d in wanted.items() if not self._refuse("prompt", name)}
        for name in [n for n in self._prompts if n not in wanted]:
            del self._prompts[name]
            with contextlib.suppress(KeyError):
                server.remove_prompt(name)
        known = set(server._prompts)
        for name, desc in wanted.items():
            if self._prompts.get(name) == desc or self._taken(name, self._prompts, known):
                continue
            try:
                self._add_prompt(name, desc)
            except (ValueError, TypeError) as exc:
                log.warning("upstream %s: prompt %r cannot be served: %s", self.name, desc["name"], exc)
                continue
            self._prompts[name] = desc

    def _add_prompt(self, name: str, desc: dict[str, Any]) -> None:
        upstream_name = desc["name"]
        arguments = [a for a in desc.get("arguments") or () if isinstance(a, dict) and isinstance(a.get("name"), str)]

        async def get(ctx: Context, **values: str) -> Any:
            params: dict[str, Any] = {"name": upstream_name}
            if values:
                params["arguments"] = values
            result = await self._forward(ctx, "prompts/get", params)
            if not isinstance(result, dict) or not isinstance(result.get("messages"), list):
                raise McpError(INTERNAL_ERROR, f"upstream {self.name} answered prompts/get without messages")
            return result

        ref = {"type": "ref/prompt", "name": upstream_name}
        completions = {a["name"]: self._completer(ref, a["name"]) for a in arguments}
        register(lambda **extra: self.server.add_prompt(
            name, get, arguments=arguments, title=desc.get("title"), description=desc.get("description"),
            completions=completions, replace=True, scopes=self._scopes("prompt", upstream_name), **extra), desc)

    def _completer(self, ref: dict[str, Any], argument: str) -> Callable[..., Any]:
        # ctx: the caller's, whom a mounted Server's completion rate limit counts, not "anonymous"
        async def complete(value: str, context: dict[str, Any], ctx: Context) -> Any:
            client = self._client
            if client is None or "completions" not in client.server_capabilities:
                return []
            params: dict[str, Any] = {"ref": ref, "argument": {"name": argument, "value": value}}
            if context:
                params["context"] = {"arguments": context}
            result = await self._forward(ctx, "completion/complete", params)
            completion = result.get("completion") if isinstance(result, dict) else None
            return completion if isinstance(completion, dict) else []

        return complete

    def nested(self, ctx: Context, name: str, arguments: Any, want_async: bool) -> Any:
        """``ctx.call_tool(name)`` inside a mounted Server's tool: the parent's nested call of
        the parent's name for it, on the parent's loop, on behalf of the parent's call that this
        child call serves. Without that call (a task that outlived it) the call is refused."""
        from ..server.dispatch import call_nested

        call = served(self)
        if call is None or call.ctx is None or call not in self._calls:
            refusal = {"content": [{"type": "text", "text": f"Tool {name!r} cannot be called here: this server is "
                                    "mounted, and no call of the parent's is in flight to call it for."}],
                       "isError": True}
            return done_now(refusal) if want_async else refusal
        parent_ctx = call.ctx

        async def run() -> Any:
            out = call_nested(parent_ctx, self.names.name(name), arguments, want_async=True)
            return await out

        future = asyncio.run_coroutine_threadsafe(run(), call.loop)
        if want_async:
            return asyncio.wrap_future(future)
        return future.result()

    def calling_context(self) -> Any:
        """The parent's Context of the call the mounted Server's current request serves; None
        outside one. The child's audit lines and rate limits name its session's caller
        (server/session.caller_of), and its tools see that caller in ``ctx.principal`` and
        ``ctx.access_token`` (server/context.calling_request), not one "anonymous" for every
        caller of the parent: also in a task that outlives the call that created it, and in a
        Server mounted in a mounted Server (relay.served)."""
        call = served(self)
        return call.ctx if call is not None else None

    def _action_scopes(self, upstream_name: str) -> dict[str, tuple[str, ...]] | None:
        """A mounted Server's manager tool is mirrored as a plain tool: the scopes each of its
        actions needs (those of the tool registered with the same function, as the child's own
        action step would add) go with it, for the parent's pipeline to check on the ``action``
        argument; the child, driven without the caller's token, cannot."""
        child = self.target
        tool = child._tools.get(upstream_name) if is_server(child) else None
        if tool is None or getattr(tool, "actions", None) is None:
            return None
        return policy_layer().action_scopes(child, tool) or None

    def _scopes(self, kind: str, key: str) -> tuple[str, ...]:
        """The OAuth scopes of a mounted Server's own item (``scopes=``): the child is driven in
        memory, without the caller's token, so it cannot check them; the parent's pipeline does."""
        child = self.target
        if not is_server(child):
            return ()
        if kind == "tool":
            item = child._tools.get(key)
        elif kind == "resource":
            item = child._resources.get(key)
        elif kind == "prompt":
            item = child._prompts.get(key)
        else:
            item = next((t for t in child._templates if t.uri_template == key), None)
        return tuple(getattr(item, "scopes", ()) or ())

    def _declared(self, kinds: frozenset[str]) -> frozenset[str]:
        """Of the kinds the upstream declares, those this mount serves (a profile's view: what
        it selects any of)."""
        return kinds


#: what the proxy declares upstream: it can ask the real client for all of these
_CLIENT_CAPS: dict[str, Any] = {"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": True}}


def proxy_server(cls: type, target: Any, *, name: str | None = None, policy: Any = None, **options: Any) -> Any:
    """``Server.proxy``: a Server mirroring one upstream, named after it unless ``name`` is given."""
    server = cls(name or "mcpkit-proxy", policy=policy)
    upstream = Upstream(server, target, **options).start()
    info = upstream.server_info
    if name is None and isinstance(info.get("name"), str):
        server.name = info["name"]
        if isinstance(info.get("version"), str):
            server.version = info["version"]
        if isinstance(info.get("title"), str):
            server.title = info["title"]
    if upstream.instructions:
        server.instructions = upstream.instructions
    return server
