"""The state store on a real Redis Cluster (three primaries started here; Valkey
too when its binary is there): the whole StateStore contract, and MOVED followed
after a resharding of the common slot and of a session's slot. Spreading over
the primaries: test_state_redis_cluster_spread.py; the gateway on the cluster:
test_cluster_gateway.py (docs/deploy.md)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from redis.crc import key_slot

from redis_cluster_support import (
    begin_migration,
    cli,
    move_slot,
    owner_of,
    start_node,
    stop_node,
)
from test_state_batch import (  # the same contract, on the cluster backend
    test_batch_applies_writes_deletes_and_increments,
    test_guard_blocks_everything_when_the_value_moved,
    test_guard_on_an_absent_key,
)
from test_state_contract import (
    test_compare_and_set,
    test_get_many_order_and_missing,
    test_get_set_delete,
    test_incr_counts_and_expires,
    test_incr_on_non_number_is_value_error,
    test_incr_without_ttl_keeps_existing_expiry,
    test_nonpositive_ttl_deletes,
    test_ping_and_close,
    test_set_many_with_delete_and_ttl,
    test_set_without_ttl_clears_previous_ttl,
    test_transact_concurrent_increments_are_not_lost,
    test_transact_reads_fresh_values_and_applies_writes,
    test_transact_without_writes_returns_result,
    test_ttl_expiry,
)
from tiergate.routing.affinity import model_pin_key
from tiergate.routing.caps import share_incrs
from tiergate.routing.tier_state import tier_state_key
from tiergate.state.base import StateUnavailable, Write
from tiergate.state.cluster_migrate import migrate
from tiergate.state.redis_cluster import RedisClusterStore, slot_prefix

__all__ = [
    "test_batch_applies_writes_deletes_and_increments",
    "test_compare_and_set",
    "test_get_many_order_and_missing",
    "test_get_set_delete",
    "test_guard_blocks_everything_when_the_value_moved",
    "test_guard_on_an_absent_key",
    "test_incr_counts_and_expires",
    "test_incr_on_non_number_is_value_error",
    "test_incr_without_ttl_keeps_existing_expiry",
    "test_nonpositive_ttl_deletes",
    "test_ping_and_close",
    "test_set_many_with_delete_and_ttl",
    "test_set_without_ttl_clears_previous_ttl",
    "test_transact_concurrent_increments_are_not_lost",
    "test_transact_reads_fresh_values_and_applies_writes",
    "test_transact_without_writes_returns_result",
    "test_ttl_expiry",
]


@pytest.fixture
async def any_store(cluster: list[int]) -> AsyncIterator[RedisClusterStore]:
    """Overrides conftest's: the contract tests imported above run on the cluster."""
    store = RedisClusterStore(f"redis://127.0.0.1:{cluster[1]}", f"t{uuid.uuid4().hex[:8]}:")
    try:
        yield store
    finally:
        await store.delete_prefix()
        await store.close()


def test_untagged_keys_share_the_prefix_hash_tag() -> None:
    prefix = slot_prefix("tg:")
    assert prefix == "{tg}:"
    assert len({key_slot((prefix + k).encode()) for k in ("config:version", "bandit:a")}) == 1
    with pytest.raises(ValueError):
        slot_prefix("t{x}:")


async def test_a_resharded_slot_is_followed(
    any_store: RedisClusterStore, cluster: list[int]
) -> None:
    """MOVED: the store keeps working after its common slot moved to another primary."""
    await any_store.set("k", b"before")
    slot = any_store.slot_of("k")
    source = owner_of(cluster, slot)
    target = next(p for p in cluster if p != source)
    move_slot(cluster, slot, target)
    assert owner_of(cluster, slot) == target
    assert await any_store.get("k") == b"before"
    assert await any_store.apply_batch([], [], guard=("k", b"before"))
    assert await any_store.incr("n", 2) == 2.0
    assert cli(target, "DBSIZE").strip() != "0"


async def test_a_resharded_session_slot_is_followed(
    any_store: RedisClusterStore, cluster: list[int]
) -> None:
    """A session's slot moves mid-session: its multi-slot read and split commit
    follow MOVED to the new owner."""
    scope = "0123456789abcdef" * 2
    tier, pin = tier_state_key(scope, "coding"), model_pin_key(scope, "coding")
    incrs = share_incrs("coding", "w1", 0.0, 2, strong=False, cost=0.0)
    assert await any_store.apply_batch([Write(tier, b"t1"), Write(pin, b"m")], incrs, (tier, None))
    slot = any_store.slot_of(tier)
    target = next(p for p in cluster if p != owner_of(cluster, slot))
    move_slot(cluster, slot, target)
    keys = [tier, pin, incrs[0].key]
    assert await any_store.get_many(keys) == [b"t1", b"m", b"1"]
    assert await any_store.apply_batch([Write(tier, b"t2")], incrs, (tier, b"t1"))
    assert await any_store.get_many(keys) == [b"t2", b"m", b"2"]
    assert owner_of(cluster, slot) == target


async def test_a_slot_being_migrated_is_followed_with_ask(
    any_store: RedisClusterStore, cluster: list[int]
) -> None:
    """ASK: mid-migration, a key already moved is read from the target (ASKING),
    one not yet moved from the source; then the migration completes."""
    scope = "fedcba9876543210" * 2
    moved, stays = tier_state_key(scope, "a"), tier_state_key(scope, "b")
    await any_store.set_many([Write(moved, b"m"), Write(stays, b"s")])
    slot = any_store.slot_of(moved)
    target = next(p for p in cluster if p != owner_of(cluster, slot))
    begin_migration(cluster, slot, target, [any_store._k(moved)])
    assert await any_store.get(moved) == b"m"  # ASK -> ASKING + GET on the target
    assert await any_store.get(stays) == b"s"  # still on the source
    assert await any_store.compare_and_set(moved, b"m", b"m2")
    move_slot(cluster, slot, target)  # the rest of the keys, then the slot itself
    assert await any_store.get_many([moved, stays]) == [b"m2", b"s"]


async def test_a_primary_restart_is_unavailable_then_recovers(
    any_store: RedisClusterStore, cluster: list[int]
) -> None:
    """A primary killed: calls for its slots raise StateUnavailable (the gateway
    degrades), nothing is re-sent; once it is back the store finds it again."""
    scope = "00112233445566778899aabbccddeeff"
    key = tier_state_key(scope, "coding")
    await any_store.set(key, b"v")
    port = owner_of(cluster, any_store.slot_of(key))
    stop_node(port)
    try:
        with pytest.raises(StateUnavailable):
            await any_store.incr(key + ":n", 1)
    finally:
        start_node(port)
    assert await any_store.incr(tier_state_key(scope, "n"), 1) == 1.0  # no double count
    assert await any_store.get(key) is None  # no persistence here: the node came back empty


async def test_migrating_from_the_single_slot_layout(cluster: list[int]) -> None:
    """Keys written under the earlier layout ({tg}:<key>) move to their tags, with
    their TTLs; keys that keep their name stay; a key already written under its
    new name is not overwritten."""
    prefix = f"m{uuid.uuid4().hex[:8]}:"
    url = f"redis://127.0.0.1:{cluster[0]}"
    store = RedisClusterStore(url, prefix)
    old = {
        tier_state_key("ab" * 16, "coding"): b"tier",
        model_pin_key("ab" * 16, "coding"): b"openai/gpt-5-mini",
        "lim:usdm:w1:202601": b"12.5",
        "esc:share:coding:20260101:req": b"40",
        "config:version": b"7",
    }
    try:
        await store.set(model_pin_key("ab" * 16, "coding"), b"newer")
        common = store.prefix
        raw = store._redis
        await store._cluster_wire.ready()
        for k, v in old.items():
            await raw.set(common + k, v, px=600_000)
        result = await migrate(url, prefix)
        assert (result.moved, result.kept, result.skipped) == (3, 1, 1)
        got = await store.get_many(list(old))
        assert got == [b"tier", b"newer", b"12.5", b"40", b"7"]
        assert 0 < await raw.pttl(store._k("lim:usdm:w1:202601")) <= 600_000
        assert await raw.exists(common + "lim:usdm:w1:202601") == 0
    finally:
        await store.delete_prefix()
        await store.close()
