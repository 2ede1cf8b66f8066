"""The authorization options of ``mcpkit serve`` and ``mcpkit proxy`` (docs/auth.md).

Each option can also come from an ``MCPKIT_AUTH*`` variable; a message names what the user set,
the option or the variable. An option that does nothing where it is given (``--resource``
without ``--auth``, ``--jwks-uri`` with ``--auth tokens``, any of them on stdio) is refused with
one line naming it and the mode it needs, as ``--json`` without ``--http`` is, never ignored.
:func:`resource_server` turns them into the ResourceServer they describe.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from typing import Any

__all__ = ["add_arguments", "named", "refuse_misplaced", "resource_server"]

MODES = ("tokens", "jwt", "introspection")

#: each option (by dest) and the --auth modes it applies to
APPLIES: dict[str, tuple[str, ...]] = {
    "auth": MODES, "resource": MODES, "authorization_server": MODES, "scope": MODES, "required_scope": MODES,
    "issuer": ("jwt", "introspection"), "audience": ("jwt", "introspection"),
    "jwks_uri": ("jwt",), "jwt_types": ("jwt",),
    "introspection_url": ("introspection",), "client_id": ("introspection",),
}

#: the options read from the environment too (dest -> variable)
ENVIRONMENT = {"auth": "MCPKIT_AUTH", "resource": "MCPKIT_AUTH_RESOURCE", "issuer": "MCPKIT_AUTH_ISSUER",
               "audience": "MCPKIT_AUTH_AUDIENCE", "jwks_uri": "MCPKIT_AUTH_JWKS_URI",
               "jwt_types": "MCPKIT_AUTH_JWT_TYPES", "introspection_url": "MCPKIT_AUTH_INTROSPECTION_URL",
               "client_id": "MCPKIT_AUTH_CLIENT_ID"}

_GIVEN = "given_on_command_line"


class _Option(argparse.Action):
    """Stores the value and remembers that the command line gave it (the default may have come
    from the environment), so that a message can name the one the user wrote."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, self.value(namespace, values))
        setattr(namespace, _GIVEN, {*getattr(namespace, _GIVEN, ()), self.dest})

    def value(self, namespace: argparse.Namespace, values: Any) -> Any:
        return values


class _Repeated(_Option):
    """The same, for a repeatable option: each value is added to the list."""

    def value(self, namespace: argparse.Namespace, values: Any) -> Any:
        return [*(getattr(namespace, self.dest, None) or ()), values]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    auth = parser.add_argument_group("authorization (HTTP only; docs/auth.md; each option also from MCPKIT_AUTH_*)")
    env = os.environ.get

    def option(flag: str, dest: str, *, repeat: bool = False, **kwargs: Any) -> None:
        default = env(ENVIRONMENT[dest]) if dest in ENVIRONMENT else None
        auth.add_argument(flag, dest=dest, action=_Repeated if repeat else _Option, default=default, **kwargs)

    option("--auth", "auth", metavar="MODE",
           help="tokens:FILE (static bearer tokens), tokens (from MCPKIT_AUTH_TOKENS), jwt, or introspection")
    option("--resource", "resource", metavar="URL",
           help="this server's canonical URI, e.g. https://mcp.example.com/mcp")
    option("--authorization-server", "authorization_server", repeat=True, metavar="URL",
           help="an authorization server clients get tokens from (repeatable; default: --issuer)")
    option("--issuer", "issuer", metavar="URL", help="jwt/introspection: the token issuer")
    option("--audience", "audience", metavar="URI", help="jwt/introspection: the expected audience (default: "
           "--resource)")
    option("--jwks-uri", "jwks_uri", metavar="URL",
           help="jwt: the signing keys (default: ISSUER/.well-known/jwks.json)")
    option("--jwt-types", "jwt_types", metavar="TYP[,TYP]",
           help="jwt: the accepted typ headers (default at+jwt, RFC 9068); add JWT for an identity provider that "
           "types access tokens as plain JWT")
    option("--introspection-url", "introspection_url", metavar="URL", help="introspection: the RFC 7662 endpoint")
    option("--client-id", "client_id", metavar="ID",
           help="introspection: this server's client id (secret from MCPKIT_INTROSPECTION_CLIENT_SECRET)")
    option("--scope", "scope", repeat=True, metavar="SCOPE", help="a scope to advertise (repeatable)")
    option("--required-scope", "required_scope", repeat=True, metavar="SCOPE",
           help="a scope every request needs (repeatable)")


def from_environment(args: argparse.Namespace, dest: str) -> bool:
    """Whether the value of ``dest`` came from its environment variable, not the command line."""
    return (dest in ENVIRONMENT and getattr(args, dest, None) is not None
            and dest not in getattr(args, _GIVEN, ()))


def named(args: argparse.Namespace, dest: str, *, value: bool = False) -> str:
    """What the user set: ``--auth`` or ``MCPKIT_AUTH`` (with ``value``: ``--auth jwt`` or
    ``MCPKIT_AUTH=jwt``)."""
    if from_environment(args, dest):
        return ENVIRONMENT[dest] + (f"={getattr(args, dest)}" if value else "")
    return "--" + dest.replace("_", "-") + (f" {getattr(args, dest)}" if value else "")


def _drop(args: argparse.Namespace, dest: str) -> str:
    return f"unset {ENVIRONMENT[dest]}" if from_environment(args, dest) else f"drop {named(args, dest)}"


def _modes(modes: Sequence[str]) -> str:
    if tuple(modes) == MODES:
        return "--auth (tokens, jwt or introspection)"
    return "--auth " + " or ".join(modes)


def refuse_misplaced(args: argparse.Namespace) -> None:
    """An authorization option where it does nothing is refused, naming it and what it needs."""
    given = [dest for dest in APPLIES if getattr(args, dest, None)]
    if not given:
        return
    if args.http is None:
        dest = "auth" if "auth" in given else given[0]
        raise SystemExit(f"mcpkit: {named(args, dest)} is for --http; a stdio server takes its credentials from the "
                         f"environment (AU-01): {_drop(args, dest)}, or add --http HOST:PORT")
    mode = args.auth.partition(":")[0] if args.auth else None
    if mode is not None and mode not in MODES:
        return  # resource_server() names the unknown mode
    for dest in given:
        modes = APPLIES[dest]
        if mode is None:
            add = "--auth MODE" if tuple(modes) == MODES else f"--auth {modes[0]}"
            raise SystemExit(f"mcpkit: {named(args, dest)} needs {_modes(modes)}, and no --auth is given: "
                             f"add {add}, or {_drop(args, dest)}")
        if mode not in modes:
            chosen = named(args, "auth") + ("=" if from_environment(args, "auth") else " ") + mode
            raise SystemExit(f"mcpkit: {named(args, dest)} needs {_modes(modes)}, not {chosen}: {_drop(args, dest)}")


def resource_server(args: argparse.Namespace, *, warn: bool = True) -> Any:
    """The ResourceServer the --auth options describe (docs/auth.md), or None; ``warn``: say
    what is weaker than it could be (introspection without an audience) on stderr."""
    from .switches import claim

    # read here, or refused by refuse_misplaced where they would do nothing (the secrets below
    # are claimed only by the mode that reads them)
    claim(*ENVIRONMENT.values())
    if not args.auth:
        return None
    from .auth import IntrospectionVerifier, JWTVerifier, StaticTokens
    from .auth.resource import ResourceServer

    mode, _, argument = args.auth.partition(":")
    audience: Any = args.audience
    if audience is None and args.resource:
        from .auth.resource import canonical_uri

        # AU-15: the canonical form, and the same with a trailing slash, which some providers add
        canonical = canonical_uri(args.resource)
        audience = [canonical, canonical + "/"]
    auth = named(args, "auth", value=True)
    if mode == "tokens":
        if not argument:
            claim("MCPKIT_AUTH_TOKENS")
        verifier: Any = StaticTokens.from_file(argument) if argument else StaticTokens.from_env("MCPKIT_AUTH_TOKENS")
    elif mode == "jwt":
        if not args.issuer or not audience:
            raise SystemExit(f"mcpkit: {auth} needs --issuer and --resource (or --audience)")
        jwks = args.jwks_uri or args.issuer.rstrip("/") + "/.well-known/jwks.json"
        types = [t.strip() for t in (args.jwt_types or "at+jwt").split(",") if t.strip()]
        try:
            verifier = JWTVerifier(args.issuer, audience, jwks_uri=jwks, token_types=types)
        except ValueError as exc:  # name the option that gave the bad value
            text = str(exc)
            dest = ("jwt_types" if "token_types" in text else
                    ("jwks_uri" if args.jwks_uri else "issuer") if "jwks_uri" in text else None)
            hint = " (the keys are read from ISSUER/.well-known/jwks.json unless --jwks-uri is given)" \
                if dest == "issuer" else ""
            raise SystemExit(f"mcpkit: {named(args, dest) if dest else auth}: {exc}{hint}") from None
    elif mode == "introspection":
        if not args.introspection_url:
            raise SystemExit(f"mcpkit: {auth} needs --introspection-url")
        if audience is None and warn:
            # a warning, not a refusal: RFC 7662 §4 lets the authorization server judge the audience
            # (docs/auth.md), and one whose answers carry no "aud" would have every token refused
            from .startup import announce

            announce(f"mcpkit: warning: {auth} without --resource or --audience: a token's audience is checked by "
                     "the authorization server only, not here (AU-05); give --resource URL (this server's URI) "
                     "or --audience URI")
        claim("MCPKIT_INTROSPECTION_CLIENT_SECRET")
        quiet = logging.getLogger("mcpkit.auth")
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # the verifier's own warning says the same, without the fix
        try:
            verifier = IntrospectionVerifier(
                args.introspection_url, client_id=args.client_id,
                client_secret=os.environ.get("MCPKIT_INTROSPECTION_CLIENT_SECRET"), audience=audience,
                issuer=args.issuer,
            )
        finally:
            quiet.setLevel(level)
    else:
        raise SystemExit(f"mcpkit: unknown {named(args, 'auth')} {mode!r}: use tokens:FILE, tokens "
                         "(MCPKIT_AUTH_TOKENS), jwt or introspection")
    servers = args.authorization_server or ([args.issuer] if args.issuer else [])
    return ResourceServer(verifier, resource=args.resource, authorization_servers=servers,
                          scopes_supported=args.scope or (), required_scopes=args.required_scope or ())
