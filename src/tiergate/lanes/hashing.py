"""One-way identifiers: the only form in which identities reach lane storage.

A lane's key hashes the authenticated principal with the caller's session id
and lane, so the same session id under another principal is another lane and
storage never holds either in the clear. Tool-call ids are hashed with the
lane scope as salt, so equal ids in different lanes do not correlate. Every
hash is domain-separated and length-prefixed, so ("ab", "c") != ("a", "bc").
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

_SCOPE = b"tiergate/session-tier/scope/v1"
_TOOL = b"tiergate/session-tier/tool/v1"
_REVISION = b"tiergate/session-tier/revision/v1"
_TURN = b"tiergate/session-tier/turn/v1"

#: Hex characters kept of a tool-id hash: 128 bits is ample for at most 128 ids.
TOOL_HASH_CHARS = 32


def _digest(domain: bytes, *parts: str) -> str:
    h = hashlib.sha256(domain)
    for part in parts:
        raw = part.encode("utf-8", "surrogatepass")
        h.update(len(raw).to_bytes(8, "big"))
        h.update(raw)
    return h.hexdigest()


def scope_hash(kind: str, principal: str, session: str, lane: str) -> str:
    """hash(principal, session, lane), separated by request kind (managed/public)."""
    return _digest(_SCOPE, kind, principal, session, lane)


def tool_id_hash(scope: str, tool_call_id: str) -> str:
    return _digest(_TOOL, scope, tool_call_id)[:TOOL_HASH_CHARS]


def turn_hash(scope: str, *texts: str) -> str:
    """A one-way mark of a user turn (its text and the reply it follows), salted
    with the lane scope: tells a new user turn from a repeat without keeping text."""
    return _digest(_TURN, scope, *texts)[:TOOL_HASH_CHARS]


def revision_hash(revision: str) -> str:
    """The policy revision as stored: hashed again, so storage reveals nothing of it."""
    return _digest(_REVISION, revision)


def policy_revision(config: Any) -> str:
    """A revision id of the reviewed router and catalogue config.

    It covers routers and each channel's identity and model catalogue (upstream
    names, quality tiers, prices, limits) and excludes API keys, weights and
    priorities, so rotating a key or rebalancing traffic does not invalidate
    lanes while changing what a model name or tier means does.
    """
    catalogue = [
        {
            "name": ch.name,
            "type": ch.type,
            "base_url": ch.base_url,
            "enabled": ch.enabled,
            "models": {name: m.model_dump(mode="json") for name, m in ch.models.items()},
        }
        for ch in config.channels
    ]
    routers = [r.model_dump(mode="json") for r in config.routers]
    blob = orjson.dumps({"catalogue": catalogue, "routers": routers}, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()
