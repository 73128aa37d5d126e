"""The policy revision of one lane: what its route depends on, nothing else.

The spec invalidates "only the affected lane" on a policy change. One hash of
every router and channel (hashing.policy_revision) unbound every lane of every
principal when an unrelated router was added. A lane's revision covers its
router and the catalogue entries, with their channels, of the models that router
may route to (the approved model is one of them). Keys, weights and priorities
are excluded, as in `policy_revision`, so rotating a key or rebalancing traffic
invalidates nothing.
"""

from __future__ import annotations

import fnmatch
import hashlib
from typing import Any

import orjson


def lane_revision(config: Any, router: str) -> str:
    """The revision of the lanes of `router`: the router itself and the catalogue
    entries, with their channels, of every model it may route to (its allowed
    models and default model). It does not depend on the approval a request
    carries: a lane bound to one approval must keep its revision when the next
    request asks for another (which then waits for a safe boundary)."""
    found = [r for r in config.routers if r.name == router]
    allowed = [p for r in found for p in r.allowed_models]
    defaults = {r.default_model for r in found if r.default_model}
    entries = [
        {
            "channel": ch.name,
            "type": ch.type,
            "base_url": ch.base_url,
            "enabled": ch.enabled,
            "name": name,
            "model": m.model_dump(mode="json"),
        }
        for ch in config.channels
        for name, m in ch.models.items()
        if name in defaults or any(fnmatch.fnmatchcase(name, p) for p in allowed)
    ]
    routers = [r.model_dump(mode="json") for r in found]
    blob = orjson.dumps({"router": routers, "catalogue": entries}, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()


class LaneRevisions:
    """lane_revision per router, memoised for one config (the hot path pays a dict
    lookup); build a new one when the config changes."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self._memo: dict[str, str] = {}

    def get(self, router: str) -> str:
        found = self._memo.get(router)
        if found is None:
            found = self._memo[router] = lane_revision(self.config, router)
        return found
