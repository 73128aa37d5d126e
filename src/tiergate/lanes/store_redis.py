"""Lane store on Redis, shared by several gateway instances.

Each compare-and-swap is one Lua script, so it is atomic per lane on the
server: read the etag (an expired lane counts as absent), compare, enforce the
live-lane cap, write. A lane is a hash {etag, exp, data} with a Redis TTL as a
safety net; a sorted set of scope -> expiry counts live lanes for the cap
(10,000 by default, like the other adapters). Expiry decisions use the
caller's clock (`now`), the same as memory and SQLite. The script touches two
keys (the lane and the live index); on a Redis Cluster (`state.cluster: true`,
`for_cluster`) both carry one hash tag, so every lane lives in one slot: the
lane store runs on a cluster but does not spread over its primaries (the cap
is one sorted set; spreading it needs a sharded cap).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Awaitable
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from tiergate.lanes.errors import CapacityExhausted, StorageUnavailable
from tiergate.lanes.record import LaneRecord
from tiergate.lanes.store_base import DEFAULT_CAPACITY, Versioned
from tiergate.state.base import StateUnavailable
from tiergate.state.redis import RedisPyWire, Wire, open_wire, redis_py_client
from tiergate.state.redis_cluster import cluster_client, open_cluster_wire, slot_prefix
from tiergate.state.resp import ReplyError, RespClient, Script
from tiergate.state.resp_cluster import RespClusterWire

# KEYS: lane hash, live index. ARGV: expected etag ('' = absent), new etag
# ('' = delete), data, now, expires_at, ttl ms, capacity, scope.
# Returns 1 written, 0 version mismatch, -1 at capacity.
_SWAP = """
local cur = redis.call('HMGET', KEYS[1], 'etag', 'exp')
local etag = cur[1]
if etag and tonumber(cur[2]) <= tonumber(ARGV[4]) then etag = false end
if ARGV[1] == '' then
  if etag then return 0 end
elseif etag ~= ARGV[1] then
  return 0
end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[8])
  return 1
end
if not etag then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[4])
  if not redis.call('ZSCORE', KEYS[2], ARGV[8])
     and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[7]) then
    return -1
  end
end
redis.call('HSET', KEYS[1], 'etag', ARGV[2], 'exp', ARGV[5], 'data', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[8])
return 1
"""


_SWAP_SCRIPT = Script.of(_SWAP)


class RedisLaneStore:
    """Commands go through the state store's wire (state/redis.py `open_wire`):
    the same timeouts, the same lazy reconnect after a restart, and no command is
    ever re-sent once written. A re-sent swap whose first copy had run would find
    its own lease and report a conflict, leaving the lane busy until its TTL."""

    name = "redis"

    def __init__(
        self,
        client: Redis,
        key_prefix: str = "tg:lanes:",
        capacity: int = DEFAULT_CAPACITY,
        wire: Wire | None = None,
    ) -> None:
        self.client = client  # redis-py: scans in tests and tooling; the wire otherwise
        self.prefix = key_prefix
        self.capacity = capacity
        self._index = f"{key_prefix}live"
        self._wire: Wire = wire if wire is not None else RedisPyWire(client)

    @classmethod
    def from_url(
        cls,
        url: str,
        key_prefix: str = "tg:lanes:",
        capacity: int = DEFAULT_CAPACITY,
        timeout: float = 1.0,
    ) -> RedisLaneStore:
        """Bounded timeouts: a hung Redis must become a prompt 503, not a stuck request."""
        client = redis_py_client(url, connect_timeout=timeout, socket_timeout=timeout)
        wire = open_wire(url, client, connect_timeout=timeout, socket_timeout=timeout)
        return cls(client, key_prefix=key_prefix, capacity=capacity, wire=wire)

    @classmethod
    def for_cluster(
        cls,
        url: str,
        key_prefix: str = "tg:lanes:",
        capacity: int = DEFAULT_CAPACITY,
        timeout: float = 1.0,
    ) -> RedisLaneStore:
        """On a Redis Cluster: the state store's cluster wire (MOVED/ASK followed),
        every key under the one hash tag of the prefix (`tg:lanes:` -> `{tg:lanes}:`)."""
        client = cluster_client(url, connect_timeout=timeout, socket_timeout=timeout)
        wire = open_cluster_wire(url, client, connect_timeout=timeout, socket_timeout=timeout)
        return cls(client, key_prefix=slot_prefix(key_prefix), capacity=capacity, wire=wire)

    def _key(self, scope: str) -> str:
        return f"{self.prefix}lane:{scope}"

    async def _run(self, call: Awaitable[Any]) -> Any:
        try:
            return await call
        except StateUnavailable as err:
            raise StorageUnavailable(f"redis lane store: {err}") from err
        except (RedisError, ReplyError) as err:
            raise StorageUnavailable(f"redis lane store: {type(err).__name__}") from err

    async def load(self, scope: str, now: float) -> Versioned | None:
        etag, exp, data = await self._run(
            self._wire.call("HMGET", self._key(scope), "etag", "exp", "data")
        )
        if etag is None or data is None or exp is None or float(exp) <= now:
            return None
        return Versioned(LaneRecord.from_json(data), _text(etag))

    async def swap(
        self, scope: str, expected: str | None, record: LaneRecord | None, now: float
    ) -> bool:
        if record is None:
            args: list[Any] = [expected or "", "", "", now, 0, 1, self.capacity, scope]
        else:
            ttl_ms = max(1, math.ceil((record.expires_at - now) * 1000))
            args = [
                expected or "",
                uuid.uuid4().hex,
                record.to_json(),
                repr(now),
                repr(record.expires_at),
                ttl_ms,
                self.capacity,
                scope,
            ]
        result = await self._run(
            self._wire.evalsha(_SWAP_SCRIPT, [self._key(scope), self._index], args)
        )
        if result == -1:
            raise CapacityExhausted()
        return bool(result == 1)

    async def live_count(self, now: float) -> int:
        return int(await self._run(self._wire.call("ZCOUNT", self._index, f"({now!r}", "+inf")))

    async def ping(self) -> bool:
        try:
            await self._run(self._wire.call("PING"))
        except StorageUnavailable:
            return False
        return True

    async def close(self) -> None:
        if isinstance(self._wire, RespClient | RespClusterWire):
            await self._wire.close()
        await self.client.aclose()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
