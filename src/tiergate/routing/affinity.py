"""Session affinity: keep a conversation on one model and one API key.

Provider prompt caches are keyed per API key, so a model pin alone still
cold-reads whenever the balancer rotates keys. Two pins therefore exist:

- model pin   `aff:m:{scope}:{router}` (base tier) or `aff:m:{scope}:{router}:t:strong`
              -> the exposed model name. Only the base tier may pin long (30 days on a
              shared Redis backend, for an explicit session id), for request-format
              continuity; a strong pin must not outlive the tier state that justified it.
- channel pin `aff:c:{scope}:{model}` -> {channel, key_index}, for the provider's cache
              window of that channel type (5 min OpenAI/Anthropic/Gemini, 60 min DeepSeek).

Pins are soft: they reorder choices inside the candidate set and are dropped,
never enforced, when the pinned channel is disabled, unhealthy, drained (weight 0
while a weighted alternative is available) or its key no longer resolves to a
usable key. A store outage turns reads into "no pins" and skips writes.

Pure decision functions come first; `read_pins` / `write_pins` are the only I/O,
one MGET and one pipeline per request. `plan_pin_read` exposes the keys so a
caller can fold them into a larger MGET together with tier state.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import orjson

from tiergate import metrics
from tiergate.config import AffinityConfig
from tiergate.state.base import StateStore, StateUnavailable, Write

log = logging.getLogger(__name__)

BASE_TIER = "base"
STRONG_TIER = "strong"
DEFAULT_LONG_PIN_SECONDS = 30 * 24 * 3600


# ---- data --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChannelPin:
    """Where the session's cache lives: a channel and the index of its API key.

    `key_id` (optional, see `key_fingerprint`) detects a key replaced in place at
    the same index, whose cache is cold even though the index still resolves.
    """

    channel: str
    key_index: int
    key_id: str | None = None


@dataclass(frozen=True, slots=True)
class ChannelView:
    """What pin validation needs to know about one channel serving the model.

    The distributor builds one per serving channel, e.g. from its runtime state:
    `ChannelView(ch.name, ch.config.type, ch.config.enabled, ch.config.weight,
    ch.config.priority, ch.healthy(now), frozenset(ch.usable_keys(now)))`.
    `enabled_key_indices` should hold keys that are enabled and not cooling down.
    """

    name: str
    type: str
    enabled: bool
    weight: float
    priority: int
    healthy: bool
    enabled_key_indices: frozenset[int]
    key_ids: tuple[str, ...] = ()  # key_fingerprint per index; empty = not checked


class DropReason(StrEnum):
    """Why a stored channel pin was not honoured (metric label values)."""

    UNKNOWN_CHANNEL = "unknown_channel"  # removed, renamed, or no longer serves the model
    DISABLED = "disabled"
    UNHEALTHY = "unhealthy"
    DRAINED = "drained"  # weight 0 while a weighted, usable alternative exists
    KEY_UNAVAILABLE = "key_unavailable"  # index out of range, disabled or cooling down
    KEY_ROTATED = "key_rotated"  # a different key now sits at that index


@dataclass(frozen=True, slots=True)
class Pins:
    """The pins found for one request. Empty when none, unresolvable or degraded."""

    model: str | None = None
    channels: Mapping[str, ChannelPin] = field(default_factory=dict)
    degraded: bool = False  # the store was unavailable: skip the write-back too

    def channel_for(self, model: str) -> ChannelPin | None:
        return self.channels.get(model)


NO_PINS = Pins()


# ---- keys and TTLs (pure) ----------------------------------------------------


def model_pin_key(scope: str, router: str, tier: str = BASE_TIER) -> str:
    """The base tier keeps the legacy key; other tiers get a `:t:<tier>` suffix."""
    base = f"aff:m:{scope}:{router}"
    return base if tier == BASE_TIER else f"{base}:t:{tier}"


def channel_pin_key(scope: str, model: str) -> str:
    return f"aff:c:{scope}:{model}"


def key_fingerprint(api_key: str) -> str:
    """A short, irreversible id of an API key, stored in channel pins instead of the key."""
    digest = hashlib.sha256(b"tiergate-key-v1\x00" + api_key.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:12]


def cache_window(channel_type: str, cfg: AffinityConfig, override: int | None = None) -> int:
    """The provider's prompt-cache lifetime in seconds for a channel type.

    A channel's own `cache_window_seconds` (passed as `override`) wins over the type map.
    """
    if override is not None:
        return override
    return cfg.cache_windows.get(channel_type, cfg.unmapped_window_seconds)


def model_pin_ttl(
    long_pin_eligible: bool,
    backend_is_redis: bool,
    tier: str,
    channel_type_window: float,
    long_pin_seconds: float = DEFAULT_LONG_PIN_SECONDS,
) -> float:
    """Long (format continuity) only for a base-tier pin of an explicit session id on a
    shared backend; otherwise the provider cache window (in-process memory would only
    hoard month-long pins that a restart drops anyway)."""
    if tier == BASE_TIER and long_pin_eligible and backend_is_redis:
        return long_pin_seconds
    return channel_type_window


# ---- pin decisions (pure) ----------------------------------------------------


def _as_views(channels: Mapping[str, ChannelView] | Iterable[ChannelView]) -> list[ChannelView]:
    return list(channels.values()) if isinstance(channels, Mapping) else list(channels)


def channel_pin_drop_reason(
    pin: ChannelPin, channels: Mapping[str, ChannelView] | Iterable[ChannelView]
) -> DropReason | None:
    """None when the pin may be honoured; otherwise why it must be dropped.

    `channels` is every channel that serves the pinned model (the pool).
    """
    views = _as_views(channels)
    view = next((v for v in views if v.name == pin.channel), None)
    if view is None:
        return DropReason.UNKNOWN_CHANNEL
    if not view.enabled:
        return DropReason.DISABLED
    if not view.healthy:
        return DropReason.UNHEALTHY
    if view.weight <= 0 and any(
        v.weight > 0 and v.enabled and v.healthy and v.enabled_key_indices
        for v in views
        if v.name != view.name
    ):
        return DropReason.DRAINED
    if pin.key_index not in view.enabled_key_indices:
        return DropReason.KEY_UNAVAILABLE
    if (
        pin.key_id is not None
        and view.key_ids
        and (pin.key_index >= len(view.key_ids) or view.key_ids[pin.key_index] != pin.key_id)
    ):
        return DropReason.KEY_ROTATED
    return None


def validate_channel_pin(
    pin: ChannelPin | None, channels: Mapping[str, ChannelView] | Iterable[ChannelView]
) -> ChannelPin | None:
    """The pin if it may be honoured, else None (fall back to balanced selection)."""
    if pin is None:
        return None
    return pin if channel_pin_drop_reason(pin, channels) is None else None


def apply_model_pin(candidates: Sequence[str], pin: str | None) -> list[str]:
    """Move the pinned model first, only if it is a candidate (pins never widen the set)."""
    ordered = list(candidates)
    if pin is None or pin not in ordered:
        return ordered
    ordered.remove(pin)
    return [pin, *ordered]


# ---- encoding (pure) ---------------------------------------------------------


def encode_channel_pin(pin: ChannelPin) -> bytes:
    data: dict[str, str | int] = {"c": pin.channel, "k": pin.key_index}
    if pin.key_id is not None:
        data["h"] = pin.key_id
    return orjson.dumps(data)


def decode_channel_pin(raw: bytes | None) -> ChannelPin | None:
    """A stored pin, or None for absent or malformed values (pins are soft)."""
    if raw is None:
        return None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    channel, index, key_id = data.get("c"), data.get("k"), data.get("h")
    if not isinstance(channel, str) or isinstance(index, bool) or not isinstance(index, int):
        return None
    return ChannelPin(channel, index, key_id if isinstance(key_id, str) else None)


def _decode_model(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    try:
        return raw.decode("utf-8") or None
    except UnicodeDecodeError:
        return None


@dataclass(frozen=True, slots=True)
class PinRead:
    """The keys one request's pin read needs, and how to decode their values."""

    model_key: str | None
    channel_keys: tuple[tuple[str, str], ...]  # (model, key)

    def keys(self) -> list[str]:
        head = [self.model_key] if self.model_key is not None else []
        return head + [key for _, key in self.channel_keys]

    def decode(self, values: Sequence[bytes | None]) -> Pins:
        """Values in `keys()` order."""
        offset = 1 if self.model_key is not None else 0
        model = _decode_model(values[0]) if offset else None
        channels = {}
        for (name, _), raw in zip(self.channel_keys, values[offset:], strict=True):
            pin = decode_channel_pin(raw)
            if pin is not None:
                channels[name] = pin
        return Pins(model=model, channels=channels)


def plan_pin_read(
    scope: str, router: str | None, models: Iterable[str], tier: str = BASE_TIER
) -> PinRead:
    """Keys for the tier's model pin (when routing through a router) and the channel pin
    of every candidate model (the model is not known until the model pin is read)."""
    unique = list(dict.fromkeys(models))
    return PinRead(
        model_key=model_pin_key(scope, router, tier) if router is not None else None,
        channel_keys=tuple((m, channel_pin_key(scope, m)) for m in unique),
    )


def plan_pin_writes(
    scope: str | None,
    *,
    router: str | None,
    tier: str,
    model: str,
    channel_pin: ChannelPin | None,
    channel_window: float,
    long_pin_eligible: bool,
    backend_is_redis: bool,
    long_pin_seconds: float = DEFAULT_LONG_PIN_SECONDS,
) -> list[Write]:
    """The writes that (re)pin the session to what just served it, refreshing TTLs.

    `channel_window` is `cache_window(...)` of the serving channel. No scope (no
    session) means no writes; no router means no model pin (a concrete model).
    """
    if scope is None:
        return []
    writes: list[Write] = []
    if router is not None:
        ttl = model_pin_ttl(
            long_pin_eligible, backend_is_redis, tier, channel_window, long_pin_seconds
        )
        writes.append(Write(model_pin_key(scope, router, tier), model.encode(), ttl))
    if channel_pin is not None:
        writes.append(
            Write(channel_pin_key(scope, model), encode_channel_pin(channel_pin), channel_window)
        )
    return writes


# ---- I/O (thin) --------------------------------------------------------------


async def read_pins(
    store: StateStore,
    scope: str | None,
    router: str | None,
    models: Iterable[str],
    tier: str = BASE_TIER,
) -> Pins:
    """All pins for a request in one get_many; empty pins when there is no session or
    the store is unavailable (counted, and flagged so the write-back is skipped)."""
    if scope is None:
        return NO_PINS
    plan = plan_pin_read(scope, router, models, tier)
    keys = plan.keys()
    if not keys:
        return NO_PINS
    try:
        values = await store.get_many(keys)
    except StateUnavailable:
        metrics.AFFINITY_DEGRADED_TOTAL.labels(op="read").inc()
        return Pins(degraded=True)
    return plan.decode(values)


async def write_pins(store: StateStore, writes: Sequence[Write]) -> bool:
    """Apply pin writes in one set_many. False (counted) when the store is unavailable."""
    if not writes:
        return True
    try:
        await store.set_many(writes)
    except StateUnavailable:
        metrics.AFFINITY_DEGRADED_TOTAL.labels(op="write").inc()
        return False
    return True


def honoured_channel_pin(
    pins: Pins, model: str, channels: Mapping[str, ChannelView] | Iterable[ChannelView]
) -> ChannelPin | None:
    """The channel pin for `model` if it may be honoured; counts the drop reason if not."""
    pin = pins.channel_for(model)
    if pin is None:
        return None
    reason = channel_pin_drop_reason(pin, channels)
    if reason is None:
        return pin
    metrics.AFFINITY_PIN_DROPS_TOTAL.labels(reason=reason.value).inc()
    log.debug("channel pin to %s dropped: %s", pin.channel, reason.value)
    return None
