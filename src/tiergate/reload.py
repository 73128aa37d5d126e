"""Live reload of the channel table without forgetting what the fleet learned.

A new config builds a new Distributor, but the runtime health of keys that
survive the change must carry over: a key cooling down after a 429 is still
rate limited, a key ejected by outlier detection (its `outlier` state) stays
ejected until its trial succeeds, and a key disabled after a 401/403 stays disabled "until an
operator re-enables it" or a background probe finds it answering again
(routing.distributor). A key survives when the same
channel name still lists the same key string, at any index, so removing or
reordering keys keeps every other key's health. The very KeyState objects are
shared, so requests still in flight on the old table report into the new one.
"""

from __future__ import annotations

from collections.abc import Collection

from tiergate.config import GatewayConfig
from tiergate.core.upstream import ChannelState, KeyState
from tiergate.routing.affinity import key_fingerprint
from tiergate.routing.distributor import Distributor
from tiergate.routing.outlier import Health


def _auth_disabled(ch: ChannelState, index: int) -> bool:
    """Disabled at runtime (401/403), not by the operator's `disabled_keys`."""
    return not ch.keys[index].enabled and index not in ch.config.disabled_keys


def rebuild_distributor(
    cfg: GatewayConfig,
    old: Distributor,
    reenabled: Collection[tuple[str, str]] = (),
) -> Distributor:
    """A distributor for `cfg` that keeps the health of surviving channels and keys.

    `reenabled` holds (channel name, key fingerprint) pairs an operator enabled
    explicitly: their auth-failure flag and cooldown are cleared.
    """
    new = Distributor.from_config(cfg, clock=old.clock, rng=old.rng)
    before = {ch.name: ch for ch in old.channels}
    for ch in new.channels:
        prev = before.get(ch.name)
        if prev is None:
            continue
        ch.cooldown_until = prev.cooldown_until
        unused = list(range(len(prev.keys)))
        for j, key in enumerate(ch.config.keys):
            i = next((i for i in unused if prev.config.keys[i] == key), None)
            if i is None:
                continue  # a new key starts healthy
            unused.remove(i)
            state: KeyState = prev.keys[i]
            blocked = _auth_disabled(prev, i)
            if (ch.name, key_fingerprint(key)) in reenabled:
                blocked = False
                state.cooldown_until = 0.0
                state.consecutive_failures = 0
                state.outlier = Health()
                state.probe_backoff = 0.0
            state.enabled = j not in ch.config.disabled_keys and not blocked
            ch.keys[j] = state
    return new
