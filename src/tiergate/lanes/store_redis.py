"""Lane store on Redis, shared by several gateway instances.

Each compare-and-swap is one Lua script, so it is atomic per lane on the
server: read the etag (an expired lane counts as absent), compare, enforce the
live-lane cap, write. A lane is a hash {etag, exp, data} with a Redis TTL as a
safety net; a sorted set of scope -> expiry counts live lanes for the cap
(10,000 by default, like the other adapters). Expiry decisions use the
caller's clock (`now`), the same as memory and SQLite. The script touches two
keys, so use a standalone or replicated Redis, not a sharded cluster.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from tiergate.lanes.errors import CapacityExhausted, StorageUnavailable
from tiergate.lanes.record import LaneRecord
from tiergate.lanes.store_base import DEFAULT_CAPACITY, Versioned

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


class RedisLaneStore:
    name = "redis"

    def __init__(
        self,
        client: Redis,
        key_prefix: str = "tg:lanes:",
        capacity: int = DEFAULT_CAPACITY,
    ) -> None:
        self.client = client
        self.prefix = key_prefix
        self.capacity = capacity
        self._index = f"{key_prefix}live"
        self._swap = client.register_script(_SWAP)

    @classmethod
    def from_url(
        cls,
        url: str,
        key_prefix: str = "tg:lanes:",
        capacity: int = DEFAULT_CAPACITY,
        timeout: float = 2.0,
    ) -> RedisLaneStore:
        """Bounded timeouts: a hung Redis must become a prompt 503, not a stuck request."""
        client = Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        return cls(client, key_prefix=key_prefix, capacity=capacity)

    def _key(self, scope: str) -> str:
        return f"{self.prefix}lane:{scope}"

    async def load(self, scope: str, now: float) -> Versioned | None:
        try:
            etag, exp, data = await self.client.hmget(self._key(scope), ["etag", "exp", "data"])
        except RedisError as err:
            raise StorageUnavailable(f"redis lane store: {type(err).__name__}") from err
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
        try:
            result = await self._swap(keys=[self._key(scope), self._index], args=args)
        except RedisError as err:
            raise StorageUnavailable(f"redis lane store: {type(err).__name__}") from err
        if result == -1:
            raise CapacityExhausted()
        return bool(result == 1)

    async def live_count(self, now: float) -> int:
        try:
            return int(await self.client.zcount(self._index, f"({now!r}", "+inf"))
        except RedisError as err:
            raise StorageUnavailable(f"redis lane store: {type(err).__name__}") from err

    async def ping(self) -> bool:
        try:
            return bool(await self.client.ping())
        except RedisError:
            return False

    async def close(self) -> None:
        await self.client.aclose()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
