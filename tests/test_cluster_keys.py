"""Hash tags on a Redis Cluster (state/cluster_keys.py), pure: every key family the
gateway writes is tagged as intended, from the very functions that name the keys,
so a renamed family fails here instead of silently landing in the common slot."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from tiergate.gateway.limits import budget_key, month_budget_key, rpm_key
from tiergate.routing.affinity import BASE_TIER, STRONG_TIER, channel_pin_key, model_pin_key
from tiergate.routing.caps import router_share_keys, share_incrs, workspace_share_keys
from tiergate.routing.linucb import BanditStore
from tiergate.routing.percentile import histogram_keys, score_incr
from tiergate.routing.session import SessionId, session_scope
from tiergate.routing.tier_state import session_hash, tier_state_key
from tiergate.state.cluster_keys import cluster_key, common_prefix, key_tag, session_tag
from tiergate.state.memory import MemoryStore

NOW = 1_767_225_600.0  # 2026-01-01
SCOPE = session_scope("ws1", SessionId("sess-1", "header", True))


def test_the_session_tag_is_the_tier_state_session_hash() -> None:
    for scope in (SCOPE, "x", "default:session-1"):
        assert session_tag(scope) == "s:" + session_hash(scope)


def test_every_key_of_a_session_shares_its_tag() -> None:
    keys = [
        model_pin_key(SCOPE, "coding", BASE_TIER),
        model_pin_key(SCOPE, "coding", STRONG_TIER),
        channel_pin_key(SCOPE, "openai/gpt-5-mini"),
        tier_state_key(SCOPE, "coding"),
        tier_state_key(SCOPE, "other:router"),
    ]
    assert {key_tag(k) for k in keys} == {session_tag(SCOPE)}
    assert len({key_slot(cluster_key("tg:", k).encode()) for k in keys}) == 1


def test_sessions_spread_over_slots() -> None:
    scopes = [session_scope("ws1", SessionId(f"s{i}", "header", True)) for i in range(200)]
    slots = {key_slot(cluster_key("tg:", tier_state_key(s, "coding")).encode()) for s in scopes}
    assert len(slots) > 190


def test_router_and_workspace_counters_have_their_own_tags() -> None:
    router_keys = [
        *router_share_keys("coding", NOW, 2),
        *histogram_keys("coding", NOW),
        *histogram_keys("coding", NOW, prefix="band:pct"),
        score_incr("coding", 0.5, NOW).key,
    ]
    assert {key_tag(k) for k in router_keys} == {"r:coding"}
    assert {key_tag(k) for k in workspace_share_keys("w1", NOW, 2)} == {"w:w1"}
    incrs = share_incrs("coding", "w1", NOW, 2, strong=True, cost=0.5)
    assert {key_tag(i.key) for i in incrs} == {"r:coding", "w:w1"}
    limits = [rpm_key("w1", NOW), budget_key("w1", NOW), month_budget_key("w1", NOW)]
    assert {key_tag(k) for k in limits} == {"w:w1"}
    assert key_tag(month_budget_key("vk_0123456789abcdef", NOW)) == "w:vk_0123456789abcdef"


def test_router_names_with_colons_and_braces() -> None:
    assert key_tag(router_share_keys("a:b", NOW, 1)[0]) == "r:a:b"
    tag = key_tag(router_share_keys("x{y}", NOW, 1)[0])
    assert tag is not None and "{" not in tag and "}" not in tag
    assert key_tag(tier_state_key(SCOPE, "x{y}")) == session_tag(SCOPE)


def test_other_keys_stay_in_the_common_slot() -> None:
    bandit = BanditStore(MemoryStore())
    for key in (
        "config:version",
        bandit.key("coding", "openai/gpt-5"),
        "bandit:pending:ws:req-1",
        "aff:m:not-a-scope",
        "esc:tier:short:coding",
        "esc:share:nodayfield",
        "k",
    ):
        assert key_tag(key) is None, key
        assert cluster_key("tg:", key) == "{tg}:" + key


def test_physical_names() -> None:
    assert common_prefix("tg:") == "{tg}:"
    assert common_prefix("prod:tg:") == "{prod:tg}:"
    assert cluster_key("tg:", "esc:share:coding:20260101:req") == (
        "tg:{r:coding}:esc:share:coding:20260101:req"
    )
    with pytest.raises(ValueError):
        common_prefix("t{x}:")
