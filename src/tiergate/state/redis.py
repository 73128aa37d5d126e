"""Redis state backend: shared state for a fleet of gateway processes.

One round trip per call: MGET for get_many, a non-transactional pipeline for
set_many, small Lua scripts for incr (INCRBYFLOAT + PEXPIRE), compare_and_set
and apply_batch, WATCH/MULTI/EXEC with a bounded retry loop for transact.

Two clients. The hot-path operations (get, get_many, set, set_many, delete,
incr, compare_and_set, apply_batch, ping) go through RespClient (state/resp.py):
commands pipelined on one connection, hiredis-parsed, several times cheaper in
CPU than redis-py. transact (WATCH needs a connection of its own) and
delete_prefix (SCAN) stay on redis-py, as does everything for URLs RespClient
does not speak (rediss://, query options other than a unix:// URL's db).

Timeouts are short on purpose: state here is soft (pins, tier memory, counters)
and must never stall a request. Every connection failure or timeout surfaces as
StateUnavailable so callers can degrade, and both clients reconnect by
themselves on the next call once the server is back. A command is never re-sent
once written (a re-sent INCRBYFLOAT would double-count): a call in flight when
the connection breaks fails; redis-py's one immediate retry on connection errors
only replaces a pooled connection that went stale while Redis restarted.
Scripts run by EVALSHA fall back to EVAL after a restart or SCRIPT FLUSH.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar, cast

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError, ResponseError, WatchError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tiergate.config import StateConfig
from tiergate.state.base import Incr, StateUnavailable, TransactFn, Write
from tiergate.state.resp import UNAVAILABLE_PREFIXES, Arg, ReplyError, RespClient, Script

T = TypeVar("T")

DEFAULT_CONNECT_TIMEOUT = 0.5
DEFAULT_SOCKET_TIMEOUT = 0.5

# KEYS[1] counter; ARGV[1] amount; ARGV[2] ttl in ms or "" to keep the current expiry.
_INCR = Script.of("""
local v = redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])
if ARGV[2] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return v
""")

# KEYS[1]; ARGV: expected_present ('1'/'0'), expected, write ('set'/'del'), value, ttl ms or ''.
_CAS = Script.of("""
local cur = redis.call('GET', KEYS[1])
if ARGV[1] == '1' then
  if cur ~= ARGV[2] then return 0 end
elseif cur then
  return 0
end
if ARGV[3] == 'del' then
  redis.call('DEL', KEYS[1])
elseif ARGV[5] ~= '' then
  redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[5])
else
  redis.call('SET', KEYS[1], ARGV[4])
end
return 1
""")


# One round trip for a whole commit. KEYS: [guard key?], write keys..., incr keys...
# ARGV: has_guard, expected_present, expected, n_writes, n_incrs, then per write
# (op 'set'/'del', value, ttl ms or ''), then per incr (amount, ttl ms or '').
_BATCH = Script.of("""
local k, a = 1, 6
if ARGV[1] == '1' then
  local cur = redis.call('GET', KEYS[1])
  if ARGV[2] == '1' then
    if cur ~= ARGV[3] then return 0 end
  elseif cur then
    return 0
  end
  k = 2
end
for _ = 1, tonumber(ARGV[4]) do
  if ARGV[a] == 'del' then
    redis.call('DEL', KEYS[k])
  elseif ARGV[a + 2] ~= '' then
    redis.call('SET', KEYS[k], ARGV[a + 1], 'PX', ARGV[a + 2])
  else
    redis.call('SET', KEYS[k], ARGV[a + 1])
  end
  k, a = k + 1, a + 3
end
for _ = 1, tonumber(ARGV[5]) do
  redis.call('INCRBYFLOAT', KEYS[k], ARGV[a])
  if ARGV[a + 1] ~= '' then redis.call('PEXPIRE', KEYS[k], ARGV[a + 1]) end
  k, a = k + 1, a + 2
end
return 1
""")


class TransactionConflict(StateUnavailable):
    """transact gave up after `retries` concurrent modifications of its keys.

    A subclass of StateUnavailable so callers that degrade on an unreachable
    store also degrade here; ResilientStore does not treat it as an outage.
    """


def ttl_ms(ttl: float) -> int:
    """Seconds to whole milliseconds, rounding up so a tiny positive TTL still lives."""
    return max(1, math.ceil(ttl * 1000))


def _is_unavailable(err: BaseException) -> bool:
    if isinstance(err, RedisConnectionError | RedisTimeoutError | OSError | asyncio.TimeoutError):
        return True
    if isinstance(err, ReadOnlyError):
        return True
    return isinstance(err, ResponseError) and str(err).startswith(UNAVAILABLE_PREFIXES)


class Wire(Protocol):
    """What RedisStore's one-round-trip operations need from a client (RespClient's API)."""

    async def call(self, *args: Arg) -> Any: ...

    async def pipeline(self, commands: Sequence[tuple[Arg, ...]]) -> list[Any]: ...

    async def evalsha(self, script: Script, keys: Sequence[Arg], args: Sequence[Arg]) -> Any: ...


class RedisPyWire:
    """The RespClient API on redis-py, for URLs the fast client does not speak
    (rediss://, query options). Errors are translated the same way."""

    def __init__(self, client: aioredis.Redis) -> None:
        self._redis = client
        self._scripts: dict[str, AsyncScript] = {}

    async def call(self, *args: Arg) -> Any:
        try:
            return await self._redis.execute_command(*args)
        except Exception as err:
            raise _translate(err, str(args[0])) from err

    async def pipeline(self, commands: Sequence[tuple[Arg, ...]]) -> list[Any]:
        pipe = self._redis.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        try:
            return cast("list[Any]", await pipe.execute())
        except Exception as err:
            raise _translate(err, "pipeline") from err

    async def evalsha(self, script: Script, keys: Sequence[Arg], args: Sequence[Arg]) -> Any:
        registered = self._scripts.get(script.sha)
        if registered is None:
            registered = self._scripts[script.sha] = self._redis.register_script(script.source)
        try:
            return await registered(keys=cast("list[Any]", list(keys)), args=list(args))
        except Exception as err:
            raise _translate(err, "evalsha") from err


def open_wire(
    url: str,
    client: aioredis.Redis,
    *,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
) -> Wire:
    """The state store's command path for `url`: RespClient for redis:// and unix:// URLs, else
    `client` (redis-py). Other Redis users (the lane store) take it too, so every
    part of the gateway fails, fails fast and reconnects the same way, and never
    re-sends a command it already wrote."""
    fast = RespClient.from_url(url, connect_timeout=connect_timeout, socket_timeout=socket_timeout)
    return fast if fast is not None else RedisPyWire(client)


def redis_py_client(
    url: str,
    *,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
    max_connections: int = 512,
) -> aioredis.Redis:
    """redis-py configured as the state store uses it: short timeouts and one
    immediate retry on connection errors only, which replaces a stale pooled
    connection after a Redis restart and never re-sends after a timeout (the
    command may have run; a re-sent INCRBYFLOAT would double-count)."""
    return aioredis.from_url(
        url,
        socket_connect_timeout=connect_timeout,
        socket_timeout=socket_timeout,
        max_connections=max_connections,
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
    )


def _translate(err: Exception, op: str) -> Exception:
    """redis-py's exceptions as RespClient raises them: StateUnavailable or ReplyError."""
    if _is_unavailable(err):
        return StateUnavailable(f"redis {op}: {type(err).__name__}: {err}")
    if isinstance(err, ResponseError):
        return ReplyError(str(err))
    return err


class RedisStore:
    """StateStore on Redis. Keys are namespaced with `key_prefix`."""

    name = "redis"

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        key_prefix: str = "tg:",
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
        max_connections: int = 512,
    ) -> None:
        self.url = url
        self.prefix = key_prefix
        self._redis: aioredis.Redis = redis_py_client(
            url,
            connect_timeout=connect_timeout,
            socket_timeout=socket_timeout,
            max_connections=max_connections,
        )
        #: The hot path's client: pipelined RESP on one connection (redis:// URLs only).
        self._wire: Wire = open_wire(
            url, self._redis, connect_timeout=connect_timeout, socket_timeout=socket_timeout
        )
        self._fast = self._wire if isinstance(self._wire, RespClient) else None

    @classmethod
    def from_config(cls, cfg: StateConfig) -> RedisStore:
        return cls(cfg.url, cfg.key_prefix)

    def _k(self, key: str) -> str:
        return self.prefix + key

    @asynccontextmanager
    async def _guard(self, op: str) -> AsyncIterator[None]:
        """Translate redis-py transport failures into StateUnavailable (never CancelledError)."""
        try:
            yield
        except WatchError:
            raise
        except Exception as err:
            if _is_unavailable(err):
                raise StateUnavailable(f"redis {op}: {type(err).__name__}: {err}") from err
            raise

    # ---- StateStore ----------------------------------------------------------

    async def get(self, key: str) -> bytes | None:
        return cast("bytes | None", await self._wire.call("GET", self.prefix + key))

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        prefix = self.prefix
        values = await self._wire.call("MGET", *[prefix + k for k in keys])
        return cast("list[bytes | None]", values)

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        await self.set_many([Write(key, value, ttl)])

    async def set_many(self, writes: Sequence[Write]) -> None:
        """One write of every command (pipelined, not transactional), one wait for the replies."""
        if not writes:
            return
        await self._wire.pipeline([self._write_command(w) for w in writes])

    def _write_command(self, w: Write) -> tuple[Arg, ...]:
        """The command for one Write. A TTL <= 0 means "already expired": delete."""
        if w.value is None or (w.ttl is not None and w.ttl <= 0):
            return ("DEL", self._k(w.key))
        if w.ttl is None:
            return ("SET", self._k(w.key), w.value)
        return ("SET", self._k(w.key), w.value, "PX", ttl_ms(w.ttl))

    async def delete(self, key: str) -> None:
        await self._wire.call("DEL", self._k(key))

    async def incr(self, key: str, amount: float = 1.0, ttl: float | None = None) -> float:
        """INCRBYFLOAT + PEXPIRE atomically; ttl None keeps the current expiry."""
        if ttl is not None and ttl <= 0:
            raise ValueError("incr ttl must be positive or None")
        args: list[Arg] = [repr(float(amount)), "" if ttl is None else ttl_ms(ttl)]
        try:
            raw = await self._wire.evalsha(_INCR, [self._k(key)], args)
        except ReplyError as err:
            raise ValueError(f"incr {key!r}: {err}") from None
        return float(raw)

    async def compare_and_set(
        self, key: str, expected: bytes | None, value: bytes | None, ttl: float | None = None
    ) -> bool:
        deleting = value is None or (ttl is not None and ttl <= 0)
        args: list[Arg] = [
            "0" if expected is None else "1",
            b"" if expected is None else expected,
            "del" if deleting else "set",
            b"" if value is None else value,
            "" if deleting or ttl is None else ttl_ms(ttl),
        ]
        return bool(await self._wire.evalsha(_CAS, [self._k(key)], args))

    async def transact(self, keys: Sequence[str], fn: TransactFn[T], retries: int = 16) -> T:
        """WATCH the keys, read them, run `fn`, EXEC its writes; re-run on conflict.

        Raises TransactionConflict after `retries` attempts lost to concurrent writers.
        """
        pkeys = [self._k(k) for k in keys]
        async with self._guard("transact"), self._redis.pipeline(transaction=True) as pipe:
            for _ in range(max(1, retries)):
                try:
                    if pkeys:
                        await pipe.watch(*pkeys)
                        current = cast("list[bytes | None]", await pipe.mget(pkeys))
                    else:
                        current = []
                    writes, result = fn(current)
                    if not writes:
                        await pipe.reset()  # reads came from one MGET: consistent
                        return result
                    pipe.multi()
                    for w in writes:
                        pipe.execute_command(*self._write_command(w))
                    await pipe.execute()
                    return result
                except WatchError:
                    continue
        raise TransactionConflict(f"transact: {retries} attempts lost to concurrent writers")

    async def apply_batch(
        self,
        writes: Sequence[Write],
        incrs: Sequence[Incr] = (),
        guard: tuple[str, bytes | None] | None = None,
    ) -> bool:
        """One EVALSHA: the guard check, every write and every increment, atomically."""
        if not writes and not incrs and guard is None:
            return True
        keys: list[Arg] = []
        args: list[Arg] = []
        if guard is not None:
            keys.append(self._k(guard[0]))
            args += ["1", "0" if guard[1] is None else "1", guard[1] or b""]
        else:
            args += ["0", "0", b""]
        args += [len(writes), len(incrs)]
        for w in writes:
            if w.ttl is not None and w.ttl <= 0:
                w = Write(w.key, None)  # a non-positive TTL deletes, as in set_many
            keys.append(self._k(w.key))
            ttl = "" if w.ttl is None else ttl_ms(w.ttl)
            args += ["del", b"", ""] if w.value is None else ["set", w.value, ttl]
        for inc in incrs:
            if inc.ttl is not None and inc.ttl <= 0:
                raise ValueError("incr ttl must be positive or None")
            keys.append(self._k(inc.key))
            args += [repr(float(inc.amount)), "" if inc.ttl is None else ttl_ms(inc.ttl)]
        try:
            return bool(await self._wire.evalsha(_BATCH, keys, args))
        except ReplyError as err:
            raise ValueError(f"apply_batch: {err}") from None

    async def ping(self) -> bool:
        """True when Redis answers; False (not an exception) when it cannot be reached."""
        try:
            await self._wire.call("PING")
        except StateUnavailable:
            return False
        return True

    async def close(self) -> None:
        """Close both clients (the fast one and redis-py's pool)."""
        if self._fast is not None:
            await self._fast.close()
        await self._redis.aclose()

    async def delete_prefix(self) -> int:
        """Delete every key under this store's prefix (tests and `reset` tooling)."""
        deleted = 0
        async with self._guard("delete_prefix"):
            batch: list[str] = []
            async for key in self._redis.scan_iter(match=self._escape_glob(self.prefix) + "*"):
                batch.append(key)
                if len(batch) >= 500:
                    deleted += await self._redis.unlink(*batch)
                    batch.clear()
            if batch:
                deleted += await self._redis.unlink(*batch)
        return deleted

    @staticmethod
    def _escape_glob(text: str) -> str:
        return "".join("\\" + c if c in "*?[]\\" else c for c in text)
