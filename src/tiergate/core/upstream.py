"""Upstream attempt types shared by routing, providers and the gateway.

A `Target` is one upstream attempt (model, channel, key); `ChannelState` and
`KeyState` are the live health the distributor keeps per channel and key.
They live here, below routing and providers, so that provider adapters can
name the attempt they serve without importing the routing layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tiergate.config import ChannelConfig, ModelConfig
from tiergate.routing.outlier import Health


@dataclass(slots=True)
class KeyState:
    enabled: bool = True
    cooldown_until: float = 0.0
    consecutive_failures: int = 0
    last_status: int = 0
    probe_at: float = 0.0  # disabled by a 401/403: when to probe it next (clock time)
    probe_backoff: float = 0.0  # the current wait between probes; 0 = not auth-disabled
    outlier: Health = field(default_factory=Health)  # ejection state (routing/outlier.py)

    def status(self, operator_disabled: bool, now: float) -> str:
        """What the admin API, the dashboard and the metrics call this key: ok,
        cooling_down (a rate limit, or ejected by outlier detection until its
        trial succeeds), auth_failed (a 401/403, probed) or disabled (by the operator)."""
        if operator_disabled:
            return "disabled"
        if not self.enabled:
            return "auth_failed"
        if self.cooldown_until > now or self.outlier.ejected:
            return "cooling_down"
        return "ok"

    def out_until(self, now: float) -> float:
        """Seconds until ordinary traffic may use the key again (0 = it may now; an
        ejected key past its ejection time waits for its trial, counted as 0)."""
        until = self.cooldown_until
        if self.outlier.ejected:
            until = max(until, self.outlier.ejected_until)
        return max(until - now, 0.0)


@dataclass(slots=True)
class ChannelState:
    """Runtime view of one configured channel."""

    index: int
    config: ChannelConfig
    keys: list[KeyState]
    cooldown_until: float = 0.0

    @property
    def name(self) -> str:
        return self.config.name

    def key_usable(self, i: int, now: float) -> bool:
        if i < 0 or i >= len(self.keys):
            return False
        k = self.keys[i]
        return k.enabled and k.cooldown_until <= now and not k.outlier.ejected

    def usable_keys(self, now: float) -> list[int]:
        return [i for i in range(len(self.keys)) if self.key_usable(i, now)]

    def enabled_keys(self) -> list[int]:
        return [i for i, k in enumerate(self.keys) if k.enabled]

    def healthy(self, now: float) -> bool:
        return self.config.enabled and self.cooldown_until <= now and bool(self.usable_keys(now))


@dataclass(frozen=True, slots=True)
class Target:
    """One upstream attempt: which exposed model, on which channel, with which key."""

    model: str
    channel: ChannelState
    key_index: int

    @property
    def model_config(self) -> ModelConfig:
        return self.channel.config.models[self.model]

    @property
    def upstream_model(self) -> str:
        return self.model_config.upstream or self.model.split("/", 1)[-1]

    @property
    def api_key(self) -> str:
        return self.channel.config.keys[self.key_index]
