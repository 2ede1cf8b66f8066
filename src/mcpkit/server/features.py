"""Which capability each method and each change notification belongs to (LC-06, HM-13)."""

from __future__ import annotations

__all__ = ["FEATURES", "FEATURE_OF_METHOD", "FEATURE_OF_KIND"]

#: the server features a capability declares and ``Server(advertise=...)`` may name
FEATURES = frozenset({"tools", "resources", "prompts", "completions"})

#: a request whose feature the session was not told of is answered -32601 (HM-13: "a method gated
#: behind a server capability that is not advertised")
FEATURE_OF_METHOD = {
    "tools/list": "tools",
    "tools/call": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resources",
    "resources/read": "resources",
    "resources/subscribe": "resources",
    "resources/unsubscribe": "resources",
    "prompts/list": "prompts",
    "prompts/get": "prompts",
    "completion/complete": "completions",
}

#: registry kinds (Server._changed) and their capability
FEATURE_OF_KIND = {"tools": "tools", "resources": "resources", "resourceTemplates": "resources", "prompts": "prompts"}
