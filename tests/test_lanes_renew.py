"""The background renewal of in-flight leases (lanes/renew.py), on the real clock.

The store contract (test_lanes_contract.py) checks renew() itself on every
backend with a fake clock; this checks the task that calls it: it keeps a lease
alive past its first lifetime, stops at finalize, when an operator releases the
lane, and at shutdown. A one-second lease keeps each test near a second.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tiergate.core.model import Message, TextPart
from tiergate.lanes import (
    MemoryLaneStore,
    PreparedTurn,
    RouteCandidate,
    SessionTierError,
    SessionTiers,
    SessionTierSettings,
    TierTurn,
    TurnOutcome,
)
from tiergate.lanes.operator import lane_refs, release_lane

LEASE = 1
CANDIDATES = [RouteCandidate("openai/m1", "m1", 1, "openai")]
TURN = TierTurn("managed", "coding", "main", "openai:m1", 1, session="s-renew")


def tiers(store: MemoryLaneStore) -> SessionTiers:
    return SessionTiers(SessionTierSettings(True, 60, LEASE), store, "rev")


async def prepare(t: SessionTiers, request_id: str | None = None) -> PreparedTurn:
    user = Message(role="user", content=[TextPart("go")])
    return await t.prepare("ws", TURN, [user], CANDIDATES, request_id=request_id)


async def busy(t: SessionTiers) -> bool:
    try:
        await prepare(t)
    except SessionTierError as err:
        assert err.code == "session_tier_busy"
        return True
    return False


async def test_the_holder_renews_its_lease_while_the_turn_runs() -> None:
    store = MemoryLaneStore()
    t = tiers(store)
    held = await prepare(t, request_id="req-42")
    assert len(t.renewals) == 1
    await asyncio.sleep(LEASE * 1.5)  # past the lease's first lifetime
    found = await store.load(held.lease.scope, time.time())
    assert found is not None and found.record.lease_expires_at is not None
    assert found.record.lease_expires_at > held.lease.expires_at  # renewed
    assert found.record.lease_owner == f"{t.instance}/req-42"
    assert await busy(t)
    assert await t.finalize(held, TurnOutcome(True, "openai/m1", ()))
    await asyncio.sleep(0)
    assert len(t.renewals) == 0
    assert not await busy(t)
    await t.close()


async def test_renewal_ends_when_an_operator_releases_the_lane() -> None:
    store = MemoryLaneStore()
    t = tiers(store)
    held = await prepare(t)
    (ref,) = lane_refs("ws", "s-renew", lanes=("main",), kinds=("managed",))
    released = await release_lane(store, ref, time.time())
    assert released is not None and released.was_leased
    await asyncio.sleep(t.renewals.interval * 1.5)
    assert len(t.renewals) == 0  # the renewal found the lease gone and ended
    assert not await t.finalize(held, TurnOutcome(True))  # the released turn is void
    await t.close()


async def test_a_dead_holders_lease_lapses_within_one_lifetime() -> None:
    store = MemoryLaneStore()
    dead, survivor = tiers(store), tiers(store)
    held = await prepare(dead)
    await dead.close()  # the process is gone: no renewal, no finalize
    started = time.monotonic()
    while await busy(survivor):
        assert time.monotonic() - started < LEASE + 0.5, "the lease never lapsed"
        await asyncio.sleep(0.05)
    assert not await dead.finalize(held, TurnOutcome(True))
    await survivor.close()


@pytest.mark.parametrize("lease", [1, 3600])
def test_the_lease_is_never_longer_than_the_lane(lease: int) -> None:
    settings = SessionTierSettings(True, 60, lease)
    assert settings.lease == min(lease, 60)
