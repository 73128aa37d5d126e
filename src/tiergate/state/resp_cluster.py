"""The pipelined RESP client (state/resp.py) on a Redis Cluster: the hot path of
`state.cluster: true` for redis:// URLs.

One RespClient per primary, a slot -> primary table read with CLUSTER SLOTS,
and each command sent to the primary of its key's slot. Redirections are
followed: MOVED (the slot has a new owner: the table entry is updated, the
command re-sent there, and the whole table re-read before the next call) and
ASK (a slot being migrated: ASKING plus the command to the target, once). Both
mean the command did not run, so following them cannot apply anything twice.
A connection failure or timeout raises StateUnavailable as on one server and is
never re-sent; it marks the table stale, so after a failover the next call
finds the promoted replica. Commands for several primaries in one `pipeline`
go out concurrently; RespClient batches the ones for the same primary into one
write per loop turn.

Why not redis-py's cluster client on the hot path: it costs ~125 us of CPU per
call and a split commit makes several calls per request (bench/bench_cluster.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

import hiredis
from redis.crc import key_slot

from tiergate.state.base import StateUnavailable
from tiergate.state.resp import Arg, RespClient, Script, check, pack

SLOTS = 16384
MAX_REDIRECTS = 5
_KEYLESS = {"PING"}


def command_slot(args: Sequence[Arg]) -> int | None:
    """The slot of a command's first key; None for a keyless command."""
    name = str(args[0]).upper()
    if name in ("EVALSHA", "EVAL"):
        return _slot(args[3]) if int(args[2]) > 0 else None
    if name in _KEYLESS or len(args) < 2:
        return None
    return _slot(args[1])


def _slot(key: Arg) -> int:
    raw = key if isinstance(key, bytes) else str(key).encode()
    return int(key_slot(raw))


class RespClusterWire:
    """The Wire API (call, pipeline, evalsha) over every primary of a cluster."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        username: str | None = None,
        password: str | None = None,
        connect_timeout: float = 0.5,
        socket_timeout: float = 0.5,
    ) -> None:
        self._username, self._password = username, password
        self._connect_timeout, self._socket_timeout = connect_timeout, socket_timeout
        self._seed = (host, port)
        self._nodes: dict[tuple[str, int], RespClient] = {}
        self._slots: list[RespClient | None] = [None] * SLOTS
        self._primaries: list[RespClient] = []  # of the last map read, for readiness
        self._stale = True
        self._refreshing: asyncio.Task[None] | None = None

    @classmethod
    def from_url(cls, url: str, **kw: Any) -> RespClusterWire | None:
        """For `redis://[[user]:password@]host[:port]`; None for anything else
        (rediss://, unix://, query options), which stays on redis-py's client."""
        parts = urlsplit(url)
        if parts.scheme != "redis" or parts.query or parts.path.strip("/") not in ("", "0"):
            return None
        return cls(
            parts.hostname or "127.0.0.1",
            parts.port or 6379,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password is not None else None,
            **kw,
        )

    # ---- the Wire API --------------------------------------------------------

    async def call(self, *args: Arg) -> Any:
        return check(await self._run(command_slot(args), pack(args)))

    async def pipeline(self, commands: Sequence[tuple[Arg, ...]]) -> list[Any]:
        """Every command to its slot's primary at once; waits for every reply, then
        raises the first error (as RespClient.pipeline does)."""
        if len(commands) == 1:
            return [await self.call(*commands[0])]
        replies = await asyncio.gather(
            *(self._run(command_slot(c), pack(c)) for c in commands), return_exceptions=True
        )
        for r in replies:
            if isinstance(r, BaseException):
                raise r
        return [check(r) for r in replies]

    async def evalsha(self, script: Script, keys: Sequence[Arg], args: Sequence[Arg]) -> Any:
        """EVALSHA on the keys' slot, EVAL once on NOSCRIPT (that primary never saw
        the script, or restarted: nothing ran, so the retry cannot double-apply)."""
        slot = _slot(keys[0]) if keys else None
        tail = (len(keys), *keys, *args)
        reply = await self._run(slot, pack(("EVALSHA", script.sha, *tail)))
        if isinstance(reply, hiredis.ReplyError) and str(reply).startswith("NOSCRIPT"):
            reply = await self._run(slot, pack(("EVAL", script.source, *tail)))
        return check(reply)

    async def ping_primaries(self) -> dict[str, bool]:
        """PING every primary of the slot map at once (readiness): `host:port` ->
        answered. One PING per primary, plus CLUSTER SLOTS when the map is stale; a
        primary that fails marks the map stale, as any failed call does. When no
        node answers CLUSTER SLOTS, every node known (the seed at least) is down."""
        try:
            if self._stale:
                await self._refresh()
        except StateUnavailable:
            self._client(f"{self._seed[0]}:{self._seed[1]}", None)
            return {f"{n.host}:{n.port}": False for n in self._nodes.values()}
        primaries = self._primaries
        replies = await asyncio.gather(
            *(n.send_raw(pack(("PING",))) for n in primaries), return_exceptions=True
        )
        health = {
            f"{n.host}:{n.port}": not isinstance(r, BaseException | hiredis.ReplyError)
            for n, r in zip(primaries, replies, strict=True)
        }
        if not all(health.values()):
            self._stale = True
        return health

    async def close(self) -> None:
        nodes, self._nodes = list(self._nodes.values()), {}
        self._slots, self._primaries = [None] * SLOTS, []
        self._stale = True
        await asyncio.gather(*(n.close() for n in nodes))

    # ---- routing ---------------------------------------------------------------

    async def _run(self, slot: int | None, payload: bytes) -> Any:
        """Send to the slot's primary, following redirections; the raw reply."""
        node = await self._node(slot)
        for _ in range(MAX_REDIRECTS):
            try:
                reply = await node.send_raw(payload)
            except StateUnavailable:
                self._stale = True  # maybe a failover: re-read the slot map next time
                raise
            if not isinstance(reply, hiredis.ReplyError):
                return reply
            msg = str(reply)
            if msg.startswith("MOVED "):
                _, moved, addr = msg.split(" ", 2)
                node = self._client(addr, node)
                self._slots[int(moved)] = node
                self._stale = True
                continue
            if msg.startswith("ASK "):
                _, _, addr = msg.split(" ", 2)
                target = self._client(addr, node)
                try:
                    _asking, reply = await target.send_raw(pack(("ASKING",)) + payload, 2)
                except StateUnavailable:
                    self._stale = True
                    raise
                return reply
            if msg.startswith("TRYAGAIN"):  # a multi-key call during a slot migration
                raise StateUnavailable(f"redis cluster: {msg}")
            return reply
        raise StateUnavailable(f"redis cluster: more than {MAX_REDIRECTS} redirections")

    async def _node(self, slot: int | None) -> RespClient:
        if self._stale:
            await self._refresh()
        node = self._slots[slot if slot is not None else 0]
        if node is None:
            raise StateUnavailable(f"redis cluster: slot {slot} is not served")
        return node

    def _client(self, addr: str, asked: RespClient | None) -> RespClient:
        """The client for `host:port` (an empty host: the node that answered)."""
        host, _, port = addr.rpartition(":")
        key = (host or (asked.host if asked else self._seed[0]), int(port.split("@")[0]))
        client = self._nodes.get(key)
        if client is None:
            client = self._nodes[key] = RespClient(
                key[0],
                key[1],
                username=self._username,
                password=self._password,
                connect_timeout=self._connect_timeout,
                socket_timeout=self._socket_timeout,
            )
        return client

    async def _refresh(self) -> None:
        """Re-read the slot map once for every caller waiting on it."""
        task = self._refreshing
        if task is None or task.get_loop() is not asyncio.get_running_loop():
            task = self._refreshing = asyncio.get_running_loop().create_task(self._read_map())
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        try:
            await asyncio.shield(task)
        finally:
            if self._refreshing is task and task.done():
                self._refreshing = None

    async def _read_map(self) -> None:
        seed = self._client(f"{self._seed[0]}:{self._seed[1]}", None)
        candidates = [seed, *(n for n in self._nodes.values() if n is not seed)]
        last: Exception | None = None
        for node in candidates:
            try:
                ranges = check(await node.send_raw(pack(("CLUSTER", "SLOTS"))))
            except Exception as err:  # noqa: BLE001 - try the next node
                last = err
                continue
            table: list[RespClient | None] = [None] * SLOTS
            primaries: dict[int, RespClient] = {}
            for entry in ranges:
                lo, hi, primary = int(entry[0]), int(entry[1]), entry[2]
                host = primary[0].decode() if isinstance(primary[0], bytes) else str(primary[0])
                client = self._client(f"{host}:{int(primary[1])}", node)
                table[lo : hi + 1] = [client] * (hi - lo + 1)
                primaries[id(client)] = client
            self._slots, self._primaries = table, list(primaries.values())
            self._stale = False
            return
        raise StateUnavailable(f"redis cluster: no node answered CLUSTER SLOTS: {last}")
