"""The session-tier flow as the pipeline drives it: extract, prepare, observe, finalize."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tiergate.config_load import parse_config
from tiergate.core.model import (
    Message,
    StreamEnd,
    StreamEvent,
    StreamStart,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from tiergate.lanes import (
    MemoryLaneStore,
    RouteCandidate,
    SessionTierError,
    SessionTiers,
    SessionTierSettings,
    ToolCallObserver,
    TurnOutcome,
    observe_events,
    policy_revision,
    release_on_failure,
)

T0 = 1_900_000_000.0
TTL = 60


class Clock:
    now = T0

    def __call__(self) -> float:
        return self.now


def make(store: MemoryLaneStore | None = None) -> tuple[SessionTiers, MemoryLaneStore]:
    store = store or MemoryLaneStore()
    return SessionTiers(SessionTierSettings(True, TTL), store, "rev", clock=Clock()), store


def public_body(model: str = "opencode:glm-5.3-flash", tier: int = 1) -> dict[str, Any]:
    return {
        "model": "roleplay:intelligence",
        "session_id": "rp-session",
        "messages": [{"role": "user", "content": "Continue."}],
        "routing": {
            "session_tier": {"lane": "main", "approved_model": model, "approved_tier": tier}
        },
    }


ROLEPLAY = [
    RouteCandidate("opencode/glm", "glm-5.3-flash", 1, "opencode"),
    RouteCandidate("fireworks/glm", "glm-5.3-flash", 3, "fireworks"),
    RouteCandidate("fireworks/glm-alias", "accounts/fireworks/glm-5p3-flash", 1, "fireworks"),
]


def user(text: str = "hi") -> Message:
    return Message(role="user", content=[TextPart(text)])


async def test_public_turn_falls_back_to_identical_native_name_and_remembers_it() -> None:
    tiers, _ = make()
    body, turn = tiers.extract(public_body())
    assert turn is not None and "routing" not in body and "session_id" not in body
    # the approved provider is cooling down: admission beats stickiness
    p = await tiers.prepare(
        "ws1", turn, [user()], ROLEPLAY, admit=lambda c: c.provider != "opencode"
    )
    assert [c.route_id for c in p.candidates] == ["fireworks/glm"]  # never the alias
    assert await tiers.finalize(p, TurnOutcome(True, "fireworks/glm", ()))
    # next turn: the recorded fallback first, the approval itself unchanged
    p = await tiers.prepare("ws1", turn, [user(), user()], ROLEPLAY)
    assert [c.route_id for c in p.candidates] == ["fireworks/glm", "opencode/glm"]
    assert (p.approved_model, p.approved_tier) == ("opencode:glm-5.3-flash", 1)


async def test_unservable_approval_is_503_and_takes_no_lease() -> None:
    tiers, store = make()
    _, turn = tiers.extract(public_body(model="opencode:unknown-model"))
    assert turn is not None
    with pytest.raises(SessionTierError) as info:
        await tiers.prepare("ws1", turn, [user()], ROLEPLAY)
    assert (info.value.status, info.value.code) == (503, "session_tier_route_unavailable")
    assert await store.live_count(T0) == 0


async def test_tool_limit_is_400_before_any_lease() -> None:
    tiers, store = make()
    _, turn = tiers.extract(public_body())
    assert turn is not None
    long_id = [user(), Message(role="assistant", tool_calls=[ToolCall("x" * 201, "f", "{}")])]
    with pytest.raises(SessionTierError) as info:
        await tiers.prepare("ws1", turn, long_id, ROLEPLAY)
    assert (info.value.status, info.value.code) == (400, "session_tier_tool_limit")
    assert await store.live_count(T0) == 0


async def test_streamed_tool_calls_are_observed_and_gate_the_boundary() -> None:
    tiers, _ = make()
    _, turn = tiers.extract(public_body())
    _, change = tiers.extract(public_body(tier=2))
    assert turn is not None and change is not None
    p = await tiers.prepare("ws1", turn, [user()], ROLEPLAY)

    async def upstream() -> AsyncIterator[StreamEvent]:
        yield StreamStart("r1", "glm-5.3-flash")
        yield ToolCallStart(0, "call_1", "search")
        yield ToolCallDelta(0, '{"q": 1}')
        yield StreamEnd("tool_calls", Usage(5, 5))

    observer = ToolCallObserver()
    relayed = [e async for e in observe_events(upstream(), observer)]
    assert len(relayed) == 4
    assert await tiers.finalize(p, TurnOutcome(True, "opencode/glm", observer.result()))

    answered = [
        user(),
        Message(role="assistant", tool_calls=[ToolCall("call_1", "search", '{"q": 1}')]),
        Message(role="tool", content=[TextPart("found")], tool_call_id="call_1"),
    ]
    p = await tiers.prepare("ws1", change, answered, ROLEPLAY)  # continuation: no boundary
    assert p.approval_deferred and p.approved_tier == 1
    assert await tiers.finalize(p, TurnOutcome(True, "opencode/glm", ()))
    nxt = [*answered, Message(role="assistant", content=[TextPart("done")]), user("next")]
    p = await tiers.prepare("ws1", change, nxt, ROLEPLAY)
    assert p.approval_changed and p.approved_tier == 2


async def test_release_on_failure_frees_the_lane_without_opening_a_boundary() -> None:
    tiers, store = make()
    _, turn = tiers.extract(public_body())
    assert turn is not None
    p = await tiers.prepare("ws1", turn, [user()], ROLEPLAY)
    assert await release_on_failure(store, p.lease, ttl=TTL, now=T0 + 1, tools_unknown=True)
    v = await store.load(p.lease.scope, T0 + 1)
    assert v is not None and v.record.lease_id is None
    assert not v.record.last_turn_ok and v.record.tools_unknown


def test_policy_revision_tracks_the_reviewed_catalogue_not_keys() -> None:
    base: dict[str, Any] = {
        "channels": [
            {
                "name": "oa",
                "type": "openai",
                "keys": ["k1"],
                "models": {"openai/m1": {"upstream": "m1", "quality_tier": 1}},
            }
        ],
        "routers": [{"name": "coding", "allowed_models": ["openai/*"]}],
    }
    rev = policy_revision(parse_config(base))
    rotated = {**base, "channels": [{**base["channels"][0], "keys": ["k2"], "weight": 5}]}
    assert policy_revision(parse_config(rotated)) == rev
    retiered = {
        **base,
        "channels": [
            {**base["channels"][0], "models": {"openai/m1": {"upstream": "m1", "quality_tier": 2}}}
        ],
    }
    assert policy_revision(parse_config(retiered)) != rev
    rerouted = {**base, "routers": [{"name": "coding", "allowed_models": ["*"]}]}
    assert policy_revision(parse_config(rerouted)) != rev


async def test_disabled_feature_touches_no_storage() -> None:
    store = MemoryLaneStore()
    tiers = SessionTiers(SessionTierSettings(False, TTL), store, "rev")
    body = public_body()
    cleaned, turn = tiers.extract(body)
    assert turn is None and "session_tier" not in (cleaned.get("routing") or {})
    assert await store.live_count(0) == 0
