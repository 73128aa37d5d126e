"""Key names on a Redis Cluster: which hash slot each of tiergate's keys lives in.

Pure (no I/O). The callers keep their logical key names (`aff:m:<scope>:...`,
`esc:tier:<session hash>:...`, `esc:share:<router>:...`); on a cluster the
store prepends a hash tag picked from the key's family, so

- every key of one session (model and channel pins, tier state with its
  strikes) carries the session's tag `{s:<session hash>}`: one request's session
  reads are one MGET on one slot and its guarded commit one script on that slot,
  while different sessions spread over all slots and so over every primary;
- a router's counters (share day buckets, escalation and band histograms) carry
  `{r:<router>}` and a workspace's (share buckets, rate limit, budgets)
  `{w:<workspace or virtual key id>}`: each in its own slot, not the session's;
- any other key (bandit arms and their pending feedback, the config version)
  keeps the single common tag of the key prefix (`{tg}:...`, the earlier
  layout), so the multi-key transactions over those keys stay in one slot.

The session tag of a pin key is computed from the scope the way
`routing.tier_state.session_hash` names the session in the tier-state key, so
pins and tier state share a slot (tests/test_cluster_keys.py holds the two equal).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

#: Families whose third field is the session scope (32 hex chars): affinity pins.
_SCOPE_FAMILIES = ("aff:m:", "aff:c:")
#: The tier state: `esc:tier:<session hash, 24 hex>:<router>`.
_TIER_FAMILY = "esc:tier:"
#: `<family><router>:<day>:<field or bucket>`: per-router counters.
_ROUTER_FAMILIES = ("esc:share:", "esc:pct:", "band:pct:")
#: `<family><workspace or key id>:<day, minute or month>[:<field>]`.
_WORKSPACE_FAMILIES = {"esc:wshare:": 2, "lim:rpm:": 1, "lim:usd:": 1, "lim:usdm:": 1}

SCOPE_LEN = 32
SESSION_HASH_LEN = 24


def session_tag(scope: str) -> str:
    """The session's hash tag, from its scope (== routing.tier_state.session_hash)."""
    return "s:" + hashlib.blake2b(scope.encode(), digest_size=12).hexdigest()


def _safe(tag: str) -> str:
    """A tag must not hold braces (they would end it early): hash such names."""
    if "{" in tag or "}" in tag:
        return "h:" + hashlib.blake2b(tag.encode(), digest_size=8).hexdigest()
    return tag


def key_tag(key: str) -> str | None:
    """The hash tag of a logical key; None for the common slot."""
    for family in _SCOPE_FAMILIES:
        if key.startswith(family):
            scope, sep, _rest = key[len(family) :].partition(":")
            return session_tag(scope) if len(scope) == SCOPE_LEN and sep else None
    if key.startswith(_TIER_FAMILY):
        shash, sep, _router = key[len(_TIER_FAMILY) :].partition(":")
        return "s:" + shash if len(shash) == SESSION_HASH_LEN and sep else None
    for family in _ROUTER_FAMILIES:
        if key.startswith(family):
            parts = key[len(family) :].rsplit(":", 2)
            return _safe("r:" + parts[0]) if len(parts) == 3 and parts[0] else None
    for family, tail in _WORKSPACE_FAMILIES.items():
        if key.startswith(family):
            parts = key[len(family) :].rsplit(":", tail)
            return _safe("w:" + parts[0]) if len(parts) == tail + 1 and parts[0] else None
    return None


def common_prefix(key_prefix: str) -> str:
    """`tg:` -> `{tg}:`: the prefix of keys in the common slot (the earlier layout)."""
    tag = key_prefix.rstrip(":") or "tg"
    if "{" in tag or "}" in tag:
        raise ValueError("state.key_prefix must not contain { or } with state.cluster")
    return "{" + tag + "}:"


@lru_cache(maxsize=65536)
def cluster_key(key_prefix: str, key: str) -> str:
    """The physical name of a logical key on a cluster.

    Tagged: `tg:{s:<hash>}:aff:m:...`; untagged: `{tg}:config:version`.
    """
    tag = key_tag(key)
    if tag is None:
        return common_prefix(key_prefix) + key
    return f"{key_prefix}{{{tag}}}:{key}"
