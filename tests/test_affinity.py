"""Affinity: pin keys, TTL selection, soft pin validation, and the pin read/write I/O."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from tiergate import metrics
from tiergate.config import AffinityConfig
from tiergate.routing.affinity import (
    DEFAULT_LONG_PIN_SECONDS,
    NO_PINS,
    STRONG_TIER,
    ChannelPin,
    ChannelView,
    DropReason,
    Pins,
    apply_model_pin,
    cache_window,
    channel_pin_drop_reason,
    channel_pin_key,
    decode_channel_pin,
    encode_channel_pin,
    honoured_channel_pin,
    key_fingerprint,
    model_pin_key,
    model_pin_ttl,
    plan_pin_read,
    plan_pin_writes,
    read_pins,
    validate_channel_pin,
    write_pins,
)
from tiergate.routing.session import SessionId, session_scope
from tiergate.state import MemoryStore, StateStore, StateUnavailable, Write

MIN, HOUR, DAY = 60, 3600, 86400


def view(
    name: str = "oa",
    *,
    enabled: bool = True,
    healthy: bool = True,
    weight: float = 1.0,
    keys: Sequence[int] = (0, 1, 2),
    key_ids: tuple[str, ...] = (),
) -> ChannelView:
    return ChannelView(name, "openai", enabled, weight, 0, healthy, frozenset(keys), key_ids)


# ---- keys ------------------------------------------------------------------------


def test_key_names() -> None:
    assert model_pin_key("s", "coding") == "aff:m:s:coding"
    assert model_pin_key("s", "coding", STRONG_TIER) == "aff:m:s:coding:t:strong"
    assert channel_pin_key("s", "openai/gpt-5-mini") == "aff:c:s:openai/gpt-5-mini"


# ---- TTL selection -----------------------------------------------------------------


def test_cache_windows_per_channel_type() -> None:
    cfg = AffinityConfig()
    assert [cache_window(t, cfg) for t in ("openai", "anthropic", "gemini")] == [5 * MIN] * 3
    assert cache_window("deepseek", cfg) == 60 * MIN
    assert cache_window("something-new", cfg) == 5 * MIN  # unmapped default
    custom = AffinityConfig(cache_windows={"openai": 600}, unmapped_window_seconds=120)
    assert cache_window("openai", custom) == 600
    assert cache_window("deepseek", custom) == 120
    assert cache_window("openai", cfg, override=900) == 900  # channel's own setting wins


@pytest.mark.parametrize(
    ("eligible", "redis", "tier", "expected"),
    [
        (True, True, "base", 30 * DAY),  # the only long-pin case
        (False, True, "base", 5 * MIN),  # fingerprint
        (True, False, "base", 5 * MIN),  # in-process memory backend
        (True, True, STRONG_TIER, 5 * MIN),  # strong pins never outlive the tier state
        (False, False, STRONG_TIER, 5 * MIN),
    ],
)
def test_model_pin_ttl(eligible: bool, redis: bool, tier: str, expected: int) -> None:
    assert model_pin_ttl(eligible, redis, tier, 5 * MIN) == expected


def test_model_pin_ttl_uses_the_channel_window_and_configured_long_pin() -> None:
    assert model_pin_ttl(False, True, "base", 60 * MIN) == 60 * MIN
    assert model_pin_ttl(True, True, "base", 60 * MIN, long_pin_seconds=7 * DAY) == 7 * DAY
    assert DEFAULT_LONG_PIN_SECONDS == 30 * DAY


# ---- pin validation: each drop case has a test ------------------------------------------

PIN = ChannelPin("oa", 1)


def test_valid_pin_is_kept() -> None:
    pool = [view("oa"), view("backup")]
    assert validate_channel_pin(PIN, pool) == PIN
    assert validate_channel_pin(PIN, {v.name: v for v in pool}) == PIN  # mapping form
    assert validate_channel_pin(None, pool) is None


def test_disabled_channel_drops_pin() -> None:
    pool = [view("oa", enabled=False), view("backup")]
    assert channel_pin_drop_reason(PIN, pool) == DropReason.DISABLED
    assert validate_channel_pin(PIN, pool) is None


def test_unhealthy_channel_drops_pin() -> None:
    pool = [view("oa", healthy=False), view("backup")]
    assert channel_pin_drop_reason(PIN, pool) == DropReason.UNHEALTHY


def test_channel_gone_from_pool_drops_pin() -> None:
    assert channel_pin_drop_reason(PIN, [view("backup")]) == DropReason.UNKNOWN_CHANNEL


@pytest.mark.parametrize("keys", [(0, 2), (0,), ()])
def test_key_index_not_resolving_to_an_enabled_key_drops_pin(keys: tuple[int, ...]) -> None:
    pool = [view("oa", keys=keys)]
    assert channel_pin_drop_reason(PIN, pool) == DropReason.KEY_UNAVAILABLE
    out_of_range = ChannelPin("oa", 7)
    assert channel_pin_drop_reason(out_of_range, [view("oa")]) == DropReason.KEY_UNAVAILABLE


def test_key_replaced_at_the_same_index_drops_pin() -> None:
    ids = (key_fingerprint("sk-a"), key_fingerprint("sk-b"), key_fingerprint("sk-c"))
    pin = ChannelPin("oa", 1, key_fingerprint("sk-b"))
    assert channel_pin_drop_reason(pin, [view("oa", key_ids=ids)]) is None
    rotated = (ids[0], key_fingerprint("sk-b-new"), ids[2])
    assert channel_pin_drop_reason(pin, [view("oa", key_ids=rotated)]) == DropReason.KEY_ROTATED
    assert channel_pin_drop_reason(PIN, [view("oa", key_ids=rotated)]) is None  # legacy pin


def test_weight_zero_channel_in_mixed_pool_drops_pin() -> None:
    pool = [view("oa", weight=0), view("backup", weight=5)]
    assert channel_pin_drop_reason(PIN, pool) == DropReason.DRAINED


def test_weight_zero_channel_is_kept_when_nothing_weighted_can_serve() -> None:
    """Draining only moves sessions when there is somewhere usable to move them."""
    all_zero = [view("oa", weight=0), view("backup", weight=0)]
    assert validate_channel_pin(PIN, all_zero) == PIN
    weighted_but_down = [view("oa", weight=0), view("backup", weight=5, healthy=False)]
    assert validate_channel_pin(PIN, weighted_but_down) == PIN
    weighted_but_disabled = [view("oa", weight=0), view("backup", weight=5, enabled=False)]
    assert validate_channel_pin(PIN, weighted_but_disabled) == PIN


def test_honoured_channel_pin_counts_drop_reasons() -> None:
    pins = Pins(channels={"m": PIN})
    sample = {"reason": "unhealthy"}
    before = metrics.REGISTRY.get_sample_value("tiergate_affinity_pin_drops_total", sample) or 0
    assert honoured_channel_pin(pins, "m", [view("oa", healthy=False)]) is None
    after = metrics.REGISTRY.get_sample_value("tiergate_affinity_pin_drops_total", sample)
    assert after == before + 1
    assert honoured_channel_pin(pins, "m", [view("oa")]) == PIN
    assert honoured_channel_pin(pins, "other-model", [view("oa")]) is None


# ---- model pin ordering ------------------------------------------------------------------


def test_apply_model_pin_moves_pinned_candidate_first() -> None:
    assert apply_model_pin(["a", "b", "c"], "c") == ["c", "a", "b"]
    assert apply_model_pin(["a", "b"], None) == ["a", "b"]


def test_model_pin_outside_the_candidate_set_is_ignored() -> None:
    """Pins apply inside the tier's candidate set only; they never add a model."""
    assert apply_model_pin(["a", "b"], "strong-model") == ["a", "b"]
    assert apply_model_pin([], "a") == []


# ---- encoding ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw", [None, b"", b"not json", b"[1,2]", b'{"c": 1, "k": 0}', b'{"c": "oa", "k": true}']
)
def test_malformed_channel_pins_decode_to_none(raw: bytes | None) -> None:
    assert decode_channel_pin(raw) is None


def test_channel_pin_round_trip() -> None:
    for pin in (ChannelPin("oa", 2), ChannelPin("oa", 0, key_fingerprint("sk"))):
        assert decode_channel_pin(encode_channel_pin(pin)) == pin
    assert b"sk-secret" not in encode_channel_pin(ChannelPin("oa", 0, key_fingerprint("sk-secret")))


# ---- read / write through the store --------------------------------------------------------

SCOPE = session_scope("ws", SessionId("s-1", "header:x-session-id", True))


async def _pin(store: StateStore, scope: str, **kw: object) -> None:
    args: dict[str, object] = {
        "router": "coding",
        "tier": "base",
        "model": "openai/gpt-5-mini",
        "channel_pin": ChannelPin("oa", 2),
        "channel_window": 300,
        "long_pin_eligible": True,
        "backend_is_redis": store.name == "redis",
    }
    args.update(kw)
    assert await write_pins(store, plan_pin_writes(scope, **args))  # type: ignore[arg-type]


async def test_pins_round_trip_in_one_read(any_store: StateStore) -> None:
    await _pin(any_store, SCOPE)
    pins = await read_pins(any_store, SCOPE, "coding", ["anthropic/x", "openai/gpt-5-mini"])
    assert pins.model == "openai/gpt-5-mini"
    assert pins.channel_for("openai/gpt-5-mini") == ChannelPin("oa", 2)
    assert pins.channel_for("anthropic/x") is None
    assert not pins.degraded


async def test_strong_tier_pin_is_separate_and_leaves_the_base_pin_alone(
    any_store: StateStore,
) -> None:
    await _pin(any_store, SCOPE)
    await _pin(any_store, SCOPE, tier=STRONG_TIER, model="anthropic/claude", channel_pin=None)
    base = await read_pins(any_store, SCOPE, "coding", ["openai/gpt-5-mini"])
    strong = await read_pins(any_store, SCOPE, "coding", ["anthropic/claude"], tier=STRONG_TIER)
    assert base.model == "openai/gpt-5-mini"
    assert strong.model == "anthropic/claude"


async def test_two_workspaces_with_the_same_session_id_never_share_pins(
    any_store: StateStore,
) -> None:
    session = SessionId("same-id", "header:x-session-id", True)
    one, two = session_scope("ws-one", session), session_scope("ws-two", session)
    await _pin(any_store, one)
    pins = await read_pins(any_store, two, "coding", ["openai/gpt-5-mini"])
    assert pins == Pins()


async def test_pins_expire_with_their_windows(any_store: StateStore) -> None:
    await _pin(any_store, SCOPE, channel_window=0.05, long_pin_eligible=False)
    await asyncio.sleep(0.12)
    assert await read_pins(any_store, SCOPE, "coding", ["openai/gpt-5-mini"]) == Pins()


def test_write_plan_ttls() -> None:
    writes = plan_pin_writes(
        "sc",
        router="coding",
        tier="base",
        model="m",
        channel_pin=ChannelPin("oa", 0),
        channel_window=300,
        long_pin_eligible=True,
        backend_is_redis=True,
    )
    assert [(w.key, w.ttl) for w in writes] == [("aff:m:sc:coding", 30 * DAY), ("aff:c:sc:m", 300)]
    strong = plan_pin_writes(
        "sc",
        router="coding",
        tier=STRONG_TIER,
        model="m",
        channel_pin=None,
        channel_window=300,
        long_pin_eligible=True,
        backend_is_redis=True,
    )
    assert [(w.key, w.ttl) for w in strong] == [("aff:m:sc:coding:t:strong", 300)]


def test_no_session_or_no_router_plans() -> None:
    kw: dict[str, object] = {
        "tier": "base",
        "model": "m",
        "channel_pin": ChannelPin("oa", 0),
        "channel_window": 300,
        "long_pin_eligible": True,
        "backend_is_redis": True,
    }
    assert plan_pin_writes(None, router="coding", **kw) == []  # type: ignore[arg-type]
    concrete = plan_pin_writes("sc", router=None, **kw)  # type: ignore[arg-type]
    assert [w.key for w in concrete] == ["aff:c:sc:m"]  # a concrete model: channel pin only
    assert plan_pin_read("sc", None, ["m", "m"]).keys() == ["aff:c:sc:m"]


async def test_no_session_is_a_no_op() -> None:
    class Exploding(MemoryStore):
        async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
            raise AssertionError("no session must not touch the store")

    assert await read_pins(Exploding(), None, "coding", ["m"]) is NO_PINS


class DownStore(MemoryStore):
    """A store whose backend is unreachable."""

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        raise StateUnavailable("down")

    async def set_many(self, writes: Sequence[Write]) -> None:
        raise StateUnavailable("down")


async def test_unavailable_store_reads_no_pins_and_skips_writes() -> None:
    def degraded(op: str) -> float:
        value = metrics.REGISTRY.get_sample_value("tiergate_affinity_degraded_total", {"op": op})
        return value or 0.0

    reads, writes = degraded("read"), degraded("write")
    pins = await read_pins(DownStore(), SCOPE, "coding", ["m"])
    assert pins.model is None and not pins.channels and pins.degraded
    assert await write_pins(DownStore(), [Write("k", b"v")]) is False
    assert degraded("read") == reads + 1
    assert degraded("write") == writes + 1
