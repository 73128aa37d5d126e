"""The state store on a real Redis Cluster (three primaries started here):
the whole StateStore contract, keys in one hash slot, MOVED followed after a
resharding, and a gateway serving with `state.cluster: true` (docs/deploy.md)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from redis.crc import key_slot

from redis_cluster_support import cli, move_slot, owner_of, redis_cluster
from servers import TOKEN, ServerThread, gateway_config
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
from tiergate.app import create_app
from tiergate.config import parse_config
from tiergate.sim.app import create_sim_app
from tiergate.state.redis_cluster import RedisClusterStore, slot_prefix

HELLO = {"role": "user", "content": "Hi"}

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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[int]]:
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as ports:
        yield ports


@pytest.fixture
async def any_store(cluster: list[int]) -> AsyncIterator[RedisClusterStore]:
    """Overrides conftest's: the contract tests imported above run on the cluster."""
    store = RedisClusterStore(f"redis://127.0.0.1:{cluster[1]}", f"t{uuid.uuid4().hex[:8]}:")
    try:
        yield store
    finally:
        await store.delete_prefix()
        await store.close()


def test_every_key_shares_the_prefix_hash_tag() -> None:
    prefix = slot_prefix("tg:")
    assert prefix == "{tg}:"
    assert len({key_slot((prefix + k).encode()) for k in ("pin:a", "tier:b", "lim:c")}) == 1
    with pytest.raises(ValueError):
        slot_prefix("t{x}:")


async def test_a_resharded_slot_is_followed(
    any_store: RedisClusterStore, cluster: list[int]
) -> None:
    """MOVED: the store keeps working after its slot moved to another primary."""
    await any_store.set("k", b"before")
    slot = key_slot(any_store.prefix.encode())
    source = owner_of(cluster, slot)
    target = next(p for p in cluster if p != source)
    move_slot(cluster, slot, target)
    assert owner_of(cluster, slot) == target
    assert await any_store.get("k") == b"before"
    assert await any_store.apply_batch([], [], guard=("k", b"before"))
    assert await any_store.incr("n", 2) == 2.0
    assert cli(target, "DBSIZE").strip() != "0"


def test_a_gateway_serves_on_the_cluster(cluster: list[int]) -> None:
    prefix = f"gw{uuid.uuid4().hex[:8]}:"
    state = {"backend": "redis", "cluster": True, "url": f"redis://127.0.0.1:{cluster[0]}"}
    with ServerThread(create_sim_app()) as sim:
        cfg = parse_config(gateway_config(sim.url, state={**state, "key_prefix": prefix}))
        with ServerThread(create_app(cfg)) as gw:
            assert httpx.get(f"{gw.url}/readyz", timeout=5).json()["checks"]["state"] == "ok"
            for _ in range(2):
                r = httpx.post(
                    f"{gw.url}/v1/chat/completions",
                    headers={"authorization": f"Bearer {TOKEN}", "x-orcarouter-session-id": "s1"},
                    json={
                        "model": "orcarouter/coding",
                        "messages": [{"role": "user", "content": "Hi"}],
                    },
                    timeout=10,
                )
                assert r.status_code == 200, r.text
    slot = key_slot(slot_prefix(prefix).encode())
    owner = owner_of(cluster, slot)
    assert int(cli(owner, "CLUSTER", "COUNTKEYSINSLOT", str(slot))) > 0  # pins were written
