"""Build the configured lane store (`session_tiers.backend`)."""

from __future__ import annotations

from typing import Literal

from tiergate.lanes.store_base import DEFAULT_CAPACITY, LaneStore
from tiergate.lanes.store_memory import MemoryLaneStore
from tiergate.lanes.store_redis import RedisLaneStore
from tiergate.lanes.store_sqlite import SqliteLaneStore


def open_lane_store(
    backend: Literal["memory", "sqlite", "redis"],
    *,
    sqlite_path: str = "tiergate-session-tiers.db",
    redis_url: str = "redis://127.0.0.1:6379/0",
    key_prefix: str = "tg:lanes:",
    capacity: int = DEFAULT_CAPACITY,
    cluster: bool = False,
) -> LaneStore:
    """No I/O happens here: SQLite and Redis connect on first use, so a missing
    database or unreachable server shows up per request as 503, not at start-up."""
    if backend == "sqlite":
        return SqliteLaneStore(sqlite_path, capacity=capacity)
    if backend == "redis" and cluster:
        return RedisLaneStore.for_cluster(redis_url, key_prefix=key_prefix, capacity=capacity)
    if backend == "redis":
        return RedisLaneStore.from_url(redis_url, key_prefix=key_prefix, capacity=capacity)
    return MemoryLaneStore(capacity=capacity)
