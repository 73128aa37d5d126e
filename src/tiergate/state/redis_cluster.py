"""The Redis backend on a Redis Cluster (or a Valkey cluster): `state.cluster: true`.

Keys are spread over the cluster's slots by hash tags (state/cluster_keys.py):
one tag per session, per router and per workspace, and a common tag for the
rest. What has to be atomic stays in one slot, the rest is split per slot:

- get_many: one MGET per slot the keys fall in, sent concurrently, so a
  request's read costs one round trip of latency (the session's slot, its
  router's and its workspace's), each MGET consistent within its slot;
- apply_batch with a guard: the guard check and every write and increment in
  the guard key's slot (the session: tier state and pins) run first as one
  script, atomically; only if the guard held are the other slots' parts (the
  router's and the workspace's share counters, histograms) applied, one script
  per slot, concurrently. A failure after the guarded part is logged and
  counted and the call still returns True: the session write stands and the
  counters under-count (docs/deploy.md, "Consistency of the split commit");
- transact: an optimistic read-then-checked-write script on ONE slot; keys of
  several slots are refused (ValueError), as no script can span slots.

The hot path (redis:// URLs) is the pipelined RESP client on every primary
(state/resp_cluster.py): it reads the slot map from the seed node, follows
MOVED and ASK redirections (a resharding or a failover) and re-reads the map
after a connection failure. redis-py's cluster client, which does the same
at several times the CPU per call, serves the other URLs (rediss://, query
options) and the SCAN of `delete_prefix`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.exceptions import ConnectionError as RedisConnectionError

from tiergate import metrics
from tiergate.config import StateConfig
from tiergate.state.base import Incr, TransactFn, Write
from tiergate.state.cluster_keys import cluster_key, common_prefix
from tiergate.state.redis import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_SOCKET_TIMEOUT,
    RedisPyWire,
    RedisStore,
    TransactionConflict,
    Wire,
    _translate,
    ttl_ms,
)
from tiergate.state.resp import Arg, Script
from tiergate.state.resp_cluster import RespClusterWire

T = TypeVar("T")

log = logging.getLogger(__name__)

# Optimistic transaction on one slot: apply the writes only if every watched key
# still holds what was read. KEYS: watched..., written...; ARGV: n_watched, then per
# watched key (present '1'/'0', value), then per write (op 'set'/'del', value, ttl ms).
_CHECKED_WRITES = Script.of("""
local n = tonumber(ARGV[1])
for i = 1, n do
  local cur = redis.call('GET', KEYS[i])
  if ARGV[2 * i] == '1' then
    if cur ~= ARGV[2 * i + 1] then return 0 end
  elseif cur then
    return 0
  end
end
local a = 2 * n + 2
for k = n + 1, #KEYS do
  if ARGV[a] == 'del' then
    redis.call('DEL', KEYS[k])
  elseif ARGV[a + 2] ~= '' then
    redis.call('SET', KEYS[k], ARGV[a + 1], 'PX', ARGV[a + 2])
  else
    redis.call('SET', KEYS[k], ARGV[a + 1])
  end
  a = a + 3
end
return 1
""")

#: Kept for callers of the first cluster layout: the common slot's prefix.
slot_prefix = common_prefix


def cluster_client(
    url: str,
    *,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
    max_connections: int = 512,
) -> Any:
    """redis-py's cluster client as the state store uses it. MOVED/ASK are
    followed; a connection error refreshes the slot map and tries once more; a
    timeout is never re-sent (INCRBYFLOAT must not count twice), as on the
    single-server backend."""
    return RedisCluster.from_url(
        url,
        socket_connect_timeout=connect_timeout,
        socket_timeout=socket_timeout,
        max_connections=max_connections,
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
    )


class ClusterWire(RedisPyWire):
    """redis-py's cluster client, initialised (slot map read) once before first use:
    concurrent first commands on an uninitialised client race in its connect."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self._lock = asyncio.Lock()
        self._ready = False

    async def ready(self) -> None:
        if self._ready:
            return
        async with self._lock:
            if not self._ready:
                try:
                    await self._redis.initialize()
                except Exception as err:
                    raise _translate(err, "cluster initialize") from err
                self._ready = True

    async def call(self, *args: Arg) -> Any:
        await self.ready()
        return await super().call(*args)

    async def pipeline(self, commands: Sequence[tuple[Arg, ...]]) -> list[Any]:
        await self.ready()
        return await super().pipeline(commands)

    async def evalsha(self, script: Script, keys: Sequence[Arg], args: Sequence[Arg]) -> Any:
        await self.ready()
        return await super().evalsha(script, keys, args)


def open_cluster_wire(
    url: str,
    client: Any,
    *,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
) -> Wire:
    """The cluster's command path for `url`: the pipelined RESP cluster wire for
    redis:// URLs, else `client` (redis-py's cluster client)."""
    fast = RespClusterWire.from_url(
        url, connect_timeout=connect_timeout, socket_timeout=socket_timeout
    )
    return fast if fast is not None else ClusterWire(client)


@dataclass(slots=True)
class _SlotPart:
    """The writes and increments of one batch that fall in one slot."""

    writes: list[Write] = field(default_factory=list)
    incrs: list[Incr] = field(default_factory=list)


class RedisClusterStore(RedisStore):
    """RedisStore on a cluster: keys spread by hash tags, the commit split per slot."""

    name = "redis"  # shared by a fleet, like the single-server backend

    def __init__(
        self,
        url: str = "redis://127.0.0.1:7000",
        key_prefix: str = "tg:",
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
        max_connections: int = 512,
    ) -> None:
        self.url = url
        self.key_prefix = key_prefix
        #: The common slot's prefix (`{tg}:`); tagged keys are `tg:{<tag>}:<key>`.
        self.prefix = common_prefix(key_prefix)
        self._redis = cluster_client(
            url,
            connect_timeout=connect_timeout,
            socket_timeout=socket_timeout,
            max_connections=max_connections,
        )
        self._fast = None
        self._cluster_wire = ClusterWire(self._redis)  # SCAN in delete_prefix
        self._wire = open_cluster_wire(
            url, self._redis, connect_timeout=connect_timeout, socket_timeout=socket_timeout
        )

    @classmethod
    def from_config(cls, cfg: StateConfig) -> RedisClusterStore:
        return cls(cfg.url, cfg.key_prefix)

    def _k(self, key: str) -> str:
        return cluster_key(self.key_prefix, key)

    def slot_of(self, key: str) -> int:
        """The hash slot a logical key lives in."""
        return cast("int", key_slot(self._k(key).encode()))

    # ---- reads ---------------------------------------------------------------

    async def get(self, key: str) -> bytes | None:
        return cast("bytes | None", await self._wire.call("GET", self._k(key)))

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """One MGET per slot, concurrently; values in the order of `keys`."""
        if not keys:
            return []
        physical = [self._k(k) for k in keys]
        by_slot: dict[int, list[int]] = {}
        for i, pk in enumerate(physical):
            by_slot.setdefault(key_slot(pk.encode()), []).append(i)
        if len(by_slot) == 1:
            return cast("list[bytes | None]", await self._wire.call("MGET", *physical))
        groups = list(by_slot.values())
        replies = await self._wire.pipeline([("MGET", *[physical[i] for i in g]) for g in groups])
        out: list[bytes | None] = [None] * len(keys)
        for g, values in zip(groups, replies, strict=True):
            for i, v in zip(g, values, strict=True):
                out[i] = v
        return out

    # ---- the split commit ------------------------------------------------------

    async def apply_batch(
        self,
        writes: Sequence[Write],
        incrs: Sequence[Incr] = (),
        guard: tuple[str, bytes | None] | None = None,
    ) -> bool:
        """The guard's slot first and atomically, then every other slot's part.

        False (nothing applied) when the guard no longer holds. Without a guard
        every slot's part is applied concurrently and a failure is raised.
        """
        parts: dict[int, _SlotPart] = {}
        for w in writes:
            parts.setdefault(self.slot_of(w.key), _SlotPart()).writes.append(w)
        for inc in incrs:
            if inc.ttl is not None and inc.ttl <= 0:
                raise ValueError("incr ttl must be positive or None")
            parts.setdefault(self.slot_of(inc.key), _SlotPart()).incrs.append(inc)
        if guard is not None:
            first = parts.pop(self.slot_of(guard[0]), _SlotPart())
            if not await super().apply_batch(first.writes, first.incrs, guard=guard):
                return False
        if not parts:
            return True
        results = await asyncio.gather(
            *(
                super(RedisClusterStore, self).apply_batch(p.writes, p.incrs)
                for p in parts.values()
            ),
            return_exceptions=True,
        )
        failed = [r for r in results if isinstance(r, BaseException)]
        if not failed:
            return True
        if guard is None:
            raise failed[0]
        # The guarded session write has landed; its counters in other slots did
        # not. Never re-sent (an increment must not count twice): they are lost.
        metrics.STATE_STORE_ERRORS_TOTAL.labels(backend="redis", op="apply_batch_rest").inc()
        log.warning(
            "cluster commit: %d of %d other-slot parts not applied after the guarded write: %s",
            len(failed),
            len(results),
            failed[0],
        )
        return True

    async def transact(self, keys: Sequence[str], fn: TransactFn[T], retries: int = 16) -> T:
        """Read, run `fn`, write only if nothing read has changed; else re-run.

        The cluster client has no WATCH across its pipeline, so the check is a
        script over the one slot every key must be in (value-based: a key
        rewritten to the same value between read and write is no conflict).
        """
        for _ in range(max(1, retries)):
            current = await self.get_many(keys) if keys else []
            writes, result = fn(current)
            if not writes:
                return result
            script_keys: list[Arg] = [self._k(k) for k in keys]
            args: list[Arg] = [len(keys)]
            for value in current:
                args += ["0", b""] if value is None else ["1", value]
            for w in writes:
                script_keys.append(self._k(w.key))
                if w.value is None or (w.ttl is not None and w.ttl <= 0):
                    args += ["del", b"", ""]
                else:
                    args += ["set", w.value, "" if w.ttl is None else ttl_ms(w.ttl)]
            slots = {key_slot(cast("str", k).encode()) for k in script_keys}
            if len(slots) > 1:
                raise ValueError(f"transact over {len(slots)} cluster slots: {list(keys)}")
            if await self._wire.evalsha(_CHECKED_WRITES, script_keys, args):
                return cast("T", result)
        raise TransactionConflict(f"transact: {retries} attempts lost to concurrent writers")

    # ---- tooling -------------------------------------------------------------

    async def delete_prefix(self) -> int:
        """Delete every key of this store on every primary: the common slot's
        (`{tg}:*`) and the tagged ones (`tg:{*`)."""
        await self._cluster_wire.ready()
        deleted = 0
        patterns = [self.prefix, self.key_prefix + "{"]
        async with self._guard("delete_prefix"):
            for pattern in patterns:
                keys = [
                    k async for k in self._redis.scan_iter(match=self._escape_glob(pattern) + "*")
                ]
                for i in range(0, len(keys), 500):
                    deleted += await self._redis.unlink(*keys[i : i + 500])
        return deleted

    async def close(self) -> None:
        """Close the hot-path wire and redis-py's cluster client."""
        if isinstance(self._wire, RespClusterWire):
            await self._wire.close()
        await self._redis.aclose()

    async def ping_nodes(self) -> dict[str, bool]:
        """Every primary's PING, concurrently (`/readyz`): `host:port` -> answered.
        A primary down is named, not only the one holding the common slot."""
        if isinstance(self._wire, RespClusterWire):
            return await self._wire.ping_primaries()
        try:  # redis-py's cluster client (rediss://, URLs with options)
            await self._cluster_wire.ready()
        except Exception:  # noqa: BLE001 - no node answered the slot map
            seed = urlsplit(self.url)
            return {f"{seed.hostname}:{seed.port or 6379}": False}
        nodes = cast("RedisCluster", self._redis).get_primaries()
        replies = await asyncio.gather(
            *(node.execute_command("PING") for node in nodes), return_exceptions=True
        )
        return {
            node.name: not isinstance(reply, BaseException)
            for node, reply in zip(nodes, replies, strict=True)
        }

    async def ping(self) -> bool:
        """True when the node owning the common slot answers."""
        try:
            await self.get("ping")
        except Exception:  # noqa: BLE001 - any failure (StateUnavailable or other) = not reachable
            return False
        return True
