"""Profiles: several curated MCP endpoints served by one ``mcpkit proxy --http``.

A profile is a named subset of what the upstreams offer (tools, resources, prompts and skills,
chosen by upstream key and glob of the upstream's own names or skill paths), with guard rails and
credentials of its own, served at ``/p/NAME/mcp``. The ``profiles`` object of the ``--config`` file
describes them::

    {"mcpServers": {"files": {...}, "tickets": {...}},
     "profiles": {
        "support": {"tools": {"tickets": ["*"], "files": ["read_*"]}, "read_only": true,
                    "tokens": "/etc/mcp/support.tokens"},
        "admin":   {"tools": {"*": ["*"]}, "resources": {"*": ["*"]}, "prompts": {"*": ["*"]},
                    "tokens": "/etc/mcp/admin.tokens", "audit": "/var/log/mcp-admin.log"}}}

How. The upstreams are mirrored once, into the proxy's own Server (the *hub*, never served itself
while profiles are configured): one connection per upstream, whatever the number of profiles. Each
profile is a Server of its own, with its own Policy, that mounts the hub in memory
(:class:`_View`, an :class:`~mcpkit.proxy.upstream.Upstream` of a Server target) and mirrors only
the items its selection names. So every call of a profile passes that profile's pipeline (its
gates, scopes, rate limits, audit) and then the hub's (the proxy-wide options, if any) on its way
to the one upstream connection; an item outside the selection is not registered in the profile's
Server at all, so it is neither listed nor callable there.

Why ``/p/NAME/...``: each profile is a complete mcpkit HTTP app with every route under one prefix
(``/p/NAME/mcp``, the legacy ``/p/NAME/sse`` and ``/p/NAME/messages/``, the Server Card), its own
session table (a session id of one profile is unknown to another) and, for OAuth, its own RFC 9728
path-aware metadata at ``/.well-known/oauth-protected-resource/p/NAME/mcp``; one prefix match routes
a request, and no name of one profile can collide with another's route.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .config import ConfigError
from .upstream import Upstream, upstreams_of

__all__ = ["Profile", "ProfilesApp", "load_profiles", "guard_policy", "build_profiles"]

_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
_KINDS = ("tools", "resources", "prompts", "skills")
_FLAGS = ("read_only", "deny_destructive", "deny_open_world")
_KEYS = frozenset({*_KINDS, *_FLAGS, "rate_limit", "audit", "tokens", "required_scopes", "resource", "tool_search"})
#: a profile that says nothing of tool search takes the proxy's (--tool-search, the file's top level)
_INHERIT = "inherit"
#: RFC 9728 §3.1: the path-aware metadata of /p/NAME/mcp lives under this, outside /p/NAME
_WELL_KNOWN = "/.well-known/oauth-protected-resource"


@dataclass
class Profile:
    """One endpoint: what it serves (kind -> upstream key or ``*`` -> globs of the upstream's own
    names or URIs), its guard rails and its credentials."""

    name: str
    select: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    read_only: bool = False
    deny_destructive: bool = False
    deny_open_world: bool = False
    rate_limit: str | None = None
    audit: str | None = None
    #: a tokens file of its own (the format of --auth tokens:FILE); None: the proxy's --auth
    tokens: str | None = None
    required_scopes: list[str] = field(default_factory=list)
    #: this endpoint's canonical URI, for OAuth metadata and audiences (default: from the Host)
    resource: str | None = None
    #: its ToolSearch (server/toolsearch.py), None for none, or "inherit": the proxy's
    tool_search: Any = _INHERIT

    @property
    def path(self) -> str:
        return f"/p/{self.name}/mcp"

    def chosen(self, kind: str, upstream: str, name: str) -> bool:
        """Whether the upstream ``upstream``'s own item ``name`` of ``kind`` is in this profile."""
        globs = self.select.get(kind, {})
        return any(fnmatch.fnmatchcase(name, g) for g in [*globs.get(upstream, ()), *globs.get("*", ())])


def load_profiles(path: str, upstreams: list[str]) -> list[Profile]:
    """The ``profiles`` of the --config file at ``path`` ([] when it has none); ``upstreams``:
    the keys its selections may name. Raises ConfigError naming the entry and the fix."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return []  # load_mcp_servers has said what is wrong with the file already
    raw = data.get("profiles") if isinstance(data, dict) else None
    if raw is None:
        return []
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f'{path}: "profiles" must be an object of profiles, {{"NAME": {{"tools": {{...}}}}}}')
    return [_profile(name, entry, f"{path}: profiles.{name}", upstreams) for name, entry in raw.items()]


def _profile(name: str, entry: Any, at: str, upstreams: list[str]) -> Profile:
    if not _NAME.fullmatch(name):
        raise ConfigError(f"{at}: a profile name is 1-40 characters from A-Z a-z 0-9 _ - (it is in its URL /p/NAME/mcp)")
    if not isinstance(entry, dict):
        raise ConfigError(f'{at} must be an object, e.g. {{"tools": {{"UPSTREAM": ["GLOB"]}}}}')
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise ConfigError(f"{at}: unknown key(s) {', '.join(unknown)}; a profile takes {', '.join(sorted(_KEYS))}")
    profile = Profile(name)
    for kind in _KINDS:
        chosen = entry.get(kind, {})
        if not isinstance(chosen, dict) or not all(
                isinstance(v, list) and all(isinstance(g, str) and g for g in v) for v in chosen.values()):
            raise ConfigError(f'{at}.{kind} must map an upstream key (or "*") to a list of globs of its own names, '
                              f'e.g. {{"files": ["read_*"]}}')
        strangers = sorted(k for k in chosen if k != "*" and k not in upstreams)
        if strangers:
            raise ConfigError(f"{at}.{kind} names upstream(s) {', '.join(strangers)}, which the proxy does not have; "
                              f"its upstreams are {', '.join(upstreams)}")
        profile.select[kind] = {k: list(v) for k, v in chosen.items()}
    for flag in _FLAGS:
        value = entry.get(flag, False)
        if not isinstance(value, bool):
            raise ConfigError(f"{at}.{flag} must be true or false, got {value!r}")
        setattr(profile, flag, value)
    for key in ("rate_limit", "audit", "tokens", "resource"):
        value = entry.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigError(f"{at}.{key} must be a string, got {value!r}")
        setattr(profile, key, value)
    scopes = entry.get("required_scopes", [])
    if not isinstance(scopes, list) or not all(isinstance(s, str) and s for s in scopes):
        raise ConfigError(f'{at}.required_scopes must be a list of scopes, e.g. ["tickets"]')
    profile.required_scopes = list(scopes)
    if "tool_search" in entry:
        from .searchcli import parse_setting

        profile.tool_search = parse_setting(entry["tool_search"], f"{at}.tool_search")
    return profile


def guard_policy(*, read_only: bool, deny_destructive: bool, deny_open_world: bool, audit: str | None,
                 rate_limit: str | None, switches: tuple[tuple[str, str], ...]) -> Any:
    """The Policy of the proxy's guard rails (the command line's, or a profile's), None when none
    is asked for. ``switches`` names, for each gate, what the user would change. Raises OSError
    (an audit file that cannot be written) or ValueError (a bad rate)."""
    if not (read_only or deny_destructive or deny_open_world or audit or rate_limit):
        return None
    from ..policy.audit import AuditLog
    from ..policy.config import Policy
    from ..policy.gates import Gates
    from ..policy.ratelimit import RateLimiter

    log = AuditLog(audit) if audit else None
    if log is not None:
        log.open()
    limiter = RateLimiter(rate_limit) if rate_limit else None
    gates = Gates(read_only=read_only, allow_destructive=not deny_destructive, allow_open_world=not deny_open_world,
                  switches=switches, declared_in="--tool-policy")
    return Policy(gates=gates, audit=log, rate_limiter=limiter, redact_logs=True)


class _View(Upstream):
    """The hub mounted in a profile's Server: only what the profile selects is mirrored."""

    def __init__(self, server: Any, hub: Any, profile: Profile, keys: dict[int, str]) -> None:
        self.profile = profile
        self.hub = hub
        self.keys = keys  # id(upstream of the hub) -> its key in the selections
        super().__init__(server, hub, name=f"profile {profile.name}", timeout=None)

    def _origin(self, kind: str, listed: str) -> tuple[str, str] | None:
        """(upstream key, its own name or URI) of an item the hub lists as ``listed``."""
        for upstream in upstreams_of(self.hub):
            key = self.keys.get(id(upstream))
            if key is None:
                continue
            if kind == "tools" and listed in upstream._tools:
                return key, upstream._tools[listed][0]
            if kind == "prompts" and listed in upstream._prompts:
                return key, upstream._prompts[listed]["name"]
            if kind == "resources" and listed in upstream._resources:
                return key, upstream._resources[listed]["uri"]
            if kind == "resources" and listed in upstream._templates:
                return key, upstream._templates[listed]["uriTemplate"]
            if kind == "skills" and listed in upstream._relayed_skills:
                # the skill's path in its upstream: skill://PATH/SKILL.md, as the upstream lists it
                return key, upstream._relayed_skills[listed].sources["SKILL.md"][len("skill://"):-len("/SKILL.md")]
        return None

    def _keep(self, kind: str, items: list[Any], field_name: str) -> list[dict[str, Any]]:
        out = []
        for item in items:
            listed = item.get(field_name) if isinstance(item, dict) else None
            origin = self._origin(kind, listed) if isinstance(listed, str) else None
            if origin is not None and self.profile.chosen(kind, *origin):
                out.append(item)
        return out

    def _declared(self, kinds: frozenset[str]) -> frozenset[str]:
        return frozenset(k for k in kinds if any(self.profile.select.get(k, {}).values()))

    def _apply_tools(self, items: list[dict[str, Any]]) -> None:
        super()._apply_tools(self._keep("tools", items, "name"))

    def _apply_prompts(self, items: list[dict[str, Any]]) -> None:
        super()._apply_prompts(self._keep("prompts", items, "name"))

    def _apply_resources(self, resources: list[dict[str, Any]], templates: list[dict[str, Any]]) -> None:
        super()._apply_resources(self._keep("resources", resources, "uri"),
                                 self._keep("resources", templates, "uriTemplate"))

    def _apply_skills(self, settings: dict[str, Any] | None, entries: list[Any]) -> None:
        # a selected skill comes with its files, whatever "resources" selects
        super()._apply_skills(settings, self._keep("skills", entries, "uri"))


def build_profiles(hub: Any, profiles: list[Profile], keys: dict[int, str], auth: Any,
                   options: dict[str, Any], tool_search: Any = None) -> dict[str, Any]:
    """{profile name: its HTTP app at /p/NAME/mcp}: a Server per profile mounting ``hub``
    (:class:`_View`), with its own policy and credentials (``auth``, the proxy's --auth, for a
    profile without a tokens file); ``options`` are the proxy's http_app options; ``tool_search``
    the proxy's, for a profile that sets none. Raises ValueError or OSError with a message naming
    the profile."""
    from ..server.server import Server

    apps = {}
    for profile in profiles:
        at = f"profile {profile.name!r}"
        switches = tuple((flag if flag == "read_only" else "allow_" + flag[5:], f"{flag} of {at}") for flag in _FLAGS)
        try:
            policy = guard_policy(read_only=profile.read_only, deny_destructive=profile.deny_destructive,
                                  deny_open_world=profile.deny_open_world, audit=profile.audit,
                                  rate_limit=profile.rate_limit, switches=switches)
        except OSError as exc:
            raise OSError(f"{at}: {exc.strerror or exc}") from None
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{at}: {exc}") from None
        server = Server(f"{hub.name}-{profile.name}", hub.version, policy=policy)
        server.instructions = hub.instructions
        _View(server, hub, profile, keys).start()
        try:  # after the view: a tool of the profile named as the search tool is named in the refusal
            server.tool_search = tool_search if profile.tool_search == _INHERIT else profile.tool_search
        except ValueError as exc:
            raise ValueError(f"{at}: {exc}") from None
        apps[profile.name] = server.http_app(**options, **_paths(profile), auth=_auth_of(profile, auth, at),
                                             health=False)
    return apps


def _paths(profile: Profile) -> dict[str, str]:
    base = f"/p/{profile.name}"
    return {"path": base + "/mcp", "sse_path": base + "/sse", "messages_path": base + "/messages/"}


def _auth_of(profile: Profile, auth: Any, at: str) -> Any:
    """The profile's ResourceServer: over its own tokens file, or over the proxy's verifier with
    the profile's required scopes (a token of one profile's file is unknown to another's)."""
    if profile.tokens is None and auth is None:
        if profile.required_scopes:
            raise ValueError(f"{at}: required_scopes need credentials: give the profile a \"tokens\" file or the "
                             "proxy --auth")
        return None
    from ..auth import StaticTokens
    from ..auth.resource import ResourceServer

    if profile.tokens is not None:
        try:
            verifier = StaticTokens.from_file(profile.tokens)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{at}: {getattr(exc, 'strerror', None) or exc}") from None
        return ResourceServer(verifier, resource=profile.resource, required_scopes=profile.required_scopes)
    return ResourceServer(auth.verifier, resource=profile.resource or auth.resource,
                          authorization_servers=auth.authorization_servers, scopes_supported=auth.scopes_supported,
                          required_scopes=profile.required_scopes or auth.required_scopes)


class ProfilesApp:
    """The ASGI app of a proxy with profiles: ``/p/NAME/...`` (and ``NAME``'s path-aware OAuth
    metadata) goes to that profile's app, anything else is 404; the lifespan reaches every app."""

    def __init__(self, apps: dict[str, Any]) -> None:
        self.apps = apps
        self.path = "/p/{profile}/mcp"  # what the start-up line shows (cli.app_path)

    def _app_of(self, path: str) -> Any:
        for prefix in ("/p/", _WELL_KNOWN + "/p/"):
            if path.startswith(prefix):
                name = path[len(prefix):].partition("/")[0]
                return self.apps.get(name)
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        from ..transports.mount import route_path

        app = self._app_of(route_path(scope)) if scope["type"] == "http" else None
        if app is None:
            from .. import _json

            # as the MCP app's own 404; the profiles' names are not listed to whoever asks
            body = _json.dumps({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Not found."}})
            await send({"type": "http.response.start", "status": 404,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        """Each profile's app gets the startup and the shutdown (it starts its sweeper, and at
        shutdown ends its sessions and tasks), each through a queue of its own."""
        queues = {name: asyncio.Queue[dict[str, Any]]() for name in self.apps}
        answers: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        runs = [asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0"}}, queues[name].get,
                                          answers.put)) for name, app in self.apps.items()]
        try:
            while True:
                message = await receive()
                for queue in queues.values():
                    queue.put_nowait(message)
                for _ in runs:
                    await answers.get()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        finally:
            for run in runs:
                run.cancel()
