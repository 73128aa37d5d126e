"""Tier metadata: exact shapes, 400 invalid_session_tier, removal, eligibility."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tiergate.lanes import SessionTierError, SessionTiers, SessionTierSettings
from tiergate.lanes.metadata import extract_session_tier

SECRET_SESSION = "sess-7f3a-very-private"


def managed(**overrides: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "session": SECRET_SESSION,
        "lane": "main",
        "approved_model": "openai:reviewed-model",
        "approved_tier": 2,
    }
    meta.update(overrides)
    return {
        "model": "auto:intelligence",
        "messages": [{"role": "user", "content": "Continue the task."}],
        "session_tier": meta,
    }


def public(**overrides: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "lane": "main",
        "approved_model": "opencode:glm-5.3-flash",
        "approved_tier": 1,
    }
    meta.update(overrides)
    return {
        "model": "roleplay:intelligence",
        "session_id": SECRET_SESSION,
        "messages": [{"role": "user", "content": "Continue."}],
        "routing": {"session_tier": meta},
    }


def reject(body: dict[str, Any], code: str = "invalid_session_tier") -> SessionTierError:
    with pytest.raises(SessionTierError) as info:
        extract_session_tier(body)
    assert info.value.status == 400
    assert info.value.code == code
    assert SECRET_SESSION not in str(info.value)
    return info.value


def test_managed_metadata_is_removed_and_parsed() -> None:
    body = managed()
    original = copy.deepcopy(body)
    cleaned, turn = extract_session_tier(body)
    assert "session_tier" not in cleaned
    assert cleaned == {k: v for k, v in original.items() if k != "session_tier"}
    assert body == original  # the caller's dict is not mutated
    assert turn is not None
    assert (turn.kind, turn.router, turn.lane) == ("managed", "intelligence", "main")
    assert (turn.approved_model, turn.approved_tier) == ("openai:reviewed-model", 2)
    assert turn.session == SECRET_SESSION
    assert SECRET_SESSION not in repr(turn)


@pytest.mark.parametrize("model", ["auto:x", "orcarouter/x", "router/x"])
def test_router_models_are_managed(model: str) -> None:
    body = managed()
    body["model"] = model
    _, turn = extract_session_tier(body)
    assert turn is not None and turn.kind == "managed"


def test_public_metadata_is_removed_and_parsed() -> None:
    body = public()
    body["routing"]["temperature_hint"] = "keep"
    cleaned, turn = extract_session_tier(body)
    assert "session_id" not in cleaned
    assert cleaned["routing"] == {"temperature_hint": "keep"}
    assert turn is not None
    assert (turn.kind, turn.router, turn.lane, turn.approved_tier) == (
        "public",
        "intelligence",
        "main",
        1,
    )
    assert turn.session == SECRET_SESSION


def test_public_routing_emptied_is_dropped() -> None:
    cleaned, _ = extract_session_tier(public())
    assert "routing" not in cleaned
    assert SECRET_SESSION not in json.dumps(cleaned)


@pytest.mark.parametrize("lane", ["main", "delegation", "aux"])
def test_every_lane_accepted(lane: str) -> None:
    assert extract_session_tier(managed(lane=lane))[1] is not None
    assert extract_session_tier(public(lane=lane))[1] is not None


def test_no_metadata_returns_the_same_object() -> None:
    body = {"model": "auto:x", "messages": [], "routing": {"mode": "auto"}}
    cleaned, turn = extract_session_tier(body)
    assert cleaned is body and turn is None


@pytest.mark.parametrize("tier", [0, 100])
def test_tier_bounds_accepted(tier: int) -> None:
    assert extract_session_tier(managed(approved_tier=tier))[1] is not None


@pytest.mark.parametrize(
    "overrides",
    [
        {"approved_tier": -1},
        {"approved_tier": 101},
        {"approved_tier": 2.0},
        {"approved_tier": "2"},
        {"approved_tier": True},
        {"approved_tier": None},
        {"lane": "Main"},
        {"lane": "worker"},
        {"lane": 1},
        {"approved_model": ""},
        {"approved_model": "has space"},
        {"approved_model": 7},
        {"approved_model": "m" * 257},
        {"session": ""},
        {"session": 12},
        {"session": "s" * 513},
        {"extra": 1},
    ],
)
def test_managed_invalid_values(overrides: dict[str, Any]) -> None:
    reject(managed(**overrides))


@pytest.mark.parametrize("missing", ["session", "lane", "approved_model", "approved_tier"])
def test_managed_missing_key(missing: str) -> None:
    body = managed()
    del body["session_tier"][missing]
    reject(body)


@pytest.mark.parametrize("meta", [None, [], "main", 3])
def test_managed_not_an_object(meta: object) -> None:
    body = managed()
    body["session_tier"] = meta
    reject(body)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b.pop("session_id"),
        lambda b: b.update(session_id=""),
        lambda b: b.update(session_id=5),
        lambda b: b["routing"]["session_tier"].update(session="x"),  # session goes top-level
        lambda b: b["routing"]["session_tier"].pop("lane"),
        lambda b: b["routing"]["session_tier"].update(approved_tier=1000),
    ],
)
def test_public_invalid(mutate: Any) -> None:
    body = public()
    mutate(body)
    reject(body)


def test_both_shapes_at_once_rejected() -> None:
    body = managed()
    body["routing"] = {"session_tier": public()["routing"]["session_tier"]}
    reject(body)


def test_shape_must_match_the_model_kind() -> None:
    body = managed()
    body["model"] = "roleplay:intelligence"
    reject(body)
    body = public()
    body["model"] = "auto:intelligence"
    reject(body)


@pytest.mark.parametrize("model", ["gpt-5-mini", "openai/gpt-5-mini", "auto:", "roleplay:"])
def test_concrete_model_strips_but_never_binds(model: str) -> None:
    for body in (managed(), public()):
        body["model"] = model
        cleaned, turn = extract_session_tier(body)
        assert turn is None
        assert "session_tier" not in json.dumps(cleaned)


def test_concrete_model_with_malformed_metadata_is_still_400() -> None:
    body = managed(approved_tier=500)
    body["model"] = "gpt-5-mini"
    reject(body)


def test_pinned_routing_mode_never_binds() -> None:
    body = public()
    body["routing"]["mode"] = "pinned"
    cleaned, turn = extract_session_tier(body)
    assert turn is None
    assert cleaned["routing"] == {"mode": "pinned"}
    body = managed()
    body["routing"] = {"mode": "pinned"}
    assert extract_session_tier(body)[1] is None
    assert extract_session_tier(managed(), pinned=True)[1] is None


def test_model_argument_overrides_body_model() -> None:
    body = managed()
    assert extract_session_tier(body, "gpt-5-mini")[1] is None


def test_disabled_feature_strips_the_metadata_unvalidated() -> None:
    """Off, the metadata is removed (a provider rejects it; it holds the raw
    session id) without being validated, and everything else is left as sent."""
    tiers = SessionTiers(SessionTierSettings(enabled=False), store=None, revision="r1")
    for body in (managed(), public(), managed(approved_tier="not even valid")):
        before = json.loads(json.dumps(body))
        cleaned, turn = tiers.extract(body)
        assert turn is None and "session_tier" not in cleaned
        assert "session_tier" not in (cleaned.get("routing") or {})
        assert SECRET_SESSION not in json.dumps(cleaned)  # nor the roleplay session_id
        assert body == before  # the caller's dict is not modified
        public_shape = "session_tier" in (before.get("routing") or {})
        dropped = {"session_tier", "session_id"} if public_shape else {"session_tier"}
        expected = {k: v for k, v in before.items() if k not in dropped}
        routing = {k: v for k, v in (before.get("routing") or {}).items() if k != "session_tier"}
        expected.pop("routing", None)
        if routing:
            expected["routing"] = routing
        assert cleaned == expected
    plain = {"model": "auto:coding", "messages": []}
    assert tiers.extract(plain)[0] is plain
    # a session_id without the roleplay shape is not tier metadata: left as sent
    other = {"model": "auto:coding", "messages": [], "session_id": "kept"}
    assert tiers.extract(other)[0] is other


def test_enabled_facade_extracts() -> None:
    tiers = SessionTiers(SessionTierSettings(enabled=True), store=None, revision="r1")
    cleaned, turn = tiers.extract(managed())
    assert turn is not None and "session_tier" not in cleaned
