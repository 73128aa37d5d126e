"""The Redis backend on a Redis Cluster (or a Valkey cluster): `state.cluster: true`.

A first step, and a deliberate one: every key carries the same hash tag (the
key prefix, `{tg}:...`), so all of tiergate's state lives in one hash slot.
Every multi-key operation the gateway relies on then works unchanged and
atomically on a cluster: MGET of a request's reads, the one-script commit
(guard, pins, tier state and share counters together), WATCH/MULTI
transactions. The client is redis-py's cluster client: it reads the slot map
from any seed node, follows MOVED and ASK redirections (a resharding or a
failover), and reconnects to the slot's new owner.

What this does not do is spread the load: one slot means one primary serves
it (plus its replicas for failover). That is what managed "cluster mode only"
services need to run tiergate at all; spreading sessions over slots needs
per-session hash tags in the key names and a commit split per slot
(docs/deploy.md, "still missing"). The hot path here is redis-py's, not the
pipelined RespClient of state/resp.py, so it costs more CPU per request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, TypeVar, cast

from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from tiergate.config import StateConfig
from tiergate.state.base import TransactFn
from tiergate.state.redis import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_SOCKET_TIMEOUT,
    RedisPyWire,
    RedisStore,
    TransactionConflict,
    _translate,
    ttl_ms,
)
from tiergate.state.resp import Arg, Script

T = TypeVar("T")

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


def slot_prefix(key_prefix: str) -> str:
    """`tg:` -> `{tg}:`: the hash tag that keeps every key in one slot."""
    tag = key_prefix.rstrip(":") or "tg"
    if "{" in tag or "}" in tag:
        raise ValueError("state.key_prefix must not contain { or } with state.cluster")
    return "{" + tag + "}:"


class _ClusterWire(RedisPyWire):
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


class RedisClusterStore(RedisStore):
    """RedisStore whose keys share one hash tag, over redis-py's cluster client."""

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
        self.prefix = slot_prefix(key_prefix)
        cluster: Any = RedisCluster.from_url(
            url,
            socket_connect_timeout=connect_timeout,
            socket_timeout=socket_timeout,
            max_connections=max_connections,
            # MOVED/ASK are followed; a connection error refreshes the slot map and
            # tries once more; a timeout is never re-sent (INCRBYFLOAT must not
            # count twice), as on the single-server backend
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        )
        self._redis = cluster
        self._fast = None
        self._cluster_wire = _ClusterWire(cluster)
        self._wire = self._cluster_wire

    @classmethod
    def from_config(cls, cfg: StateConfig) -> RedisClusterStore:
        return cls(cfg.url, cfg.key_prefix)

    async def transact(self, keys: Sequence[str], fn: TransactFn[T], retries: int = 16) -> T:
        """Read, run `fn`, write only if nothing read has changed; else re-run.

        The cluster client has no WATCH across its pipeline, so the check is a
        script over the one slot every key is in (value-based: a key rewritten to
        the same value between read and write does not count as a conflict).
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
            if await self._wire.evalsha(_CHECKED_WRITES, script_keys, args):
                return cast("T", result)
        raise TransactionConflict(f"transact: {retries} attempts lost to concurrent writers")

    async def delete_prefix(self) -> int:
        await self._cluster_wire.ready()
        return await super().delete_prefix()

    async def ping(self) -> bool:
        """True when the node owning tiergate's slot answers."""
        try:
            await self.get("ping")
        except Exception:  # noqa: BLE001 - any failure means "not reachable"
            return False
        return True
