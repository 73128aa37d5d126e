"""Shared gateway state behind one protocol; `make_store` picks the backend.

memory (default): in-process, single gateway process, lost on restart.
redis: shared by every gateway process, wrapped in ResilientStore so an outage
degrades stateful features instead of failing requests.
"""

from __future__ import annotations

from tiergate.config import StateConfig
from tiergate.state.base import StateStore, StateUnavailable, TransactFn, Write
from tiergate.state.memory import MemoryStore
from tiergate.state.redis import RedisStore, TransactionConflict
from tiergate.state.resilient import ResilientStore, try_get_many, try_set_many

__all__ = [
    "MemoryStore",
    "RedisStore",
    "ResilientStore",
    "StateStore",
    "StateUnavailable",
    "TransactFn",
    "TransactionConflict",
    "Write",
    "is_shared_backend",
    "make_store",
    "try_get_many",
    "try_set_many",
]


def make_store(cfg: StateConfig) -> StateStore:
    """Build the configured backend. No I/O: Redis connects lazily on first use."""
    if cfg.backend == "redis" and cfg.cluster:
        from tiergate.state.redis_cluster import RedisClusterStore

        return ResilientStore(RedisClusterStore.from_config(cfg))
    if cfg.backend == "redis":
        return ResilientStore(RedisStore.from_config(cfg))
    return MemoryStore()


def is_shared_backend(store: StateStore) -> bool:
    """True when state outlives the process and is shared by a fleet (long pins allowed)."""
    return store.name == "redis"
