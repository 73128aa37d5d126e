"""Virtual keys live in their own table, apart from the config document.

Why: a key an admin issues is data, not configuration. While keys lived in the
shared config document, a restart with an edited YAML stored the file as a new
version and silently deleted every key. Here no seed can touch them, as
LiteLLM keeps its keys in the database apart from its config file.

Every write bumps the `virtual_keys` counter in `tiergate_meta` in the same
transaction and stamps the row with the new value (`seq`). Each instance reads
the counter every `POLL_SECONDS` and, when it moved, loads only the rows written
since: a revocation reaches every instance within about 100 ms, on SQLite and on
PostgreSQL, and the request path itself does no I/O for it (docs/virtual-keys.md).
Without a database the keys live in this process only.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
from dataclasses import dataclass, replace
from typing import Any, Protocol

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from tiergate.db import meta_table, virtual_keys_table
from tiergate.gateway.limits import WorkspaceLimits

log = logging.getLogger(__name__)

COUNTER = "virtual_keys"
#: How often every instance reads the keys counter: the revocation delay's bound
#: is this plus one read.
POLL_SECONDS = 0.05


@dataclass(frozen=True, slots=True)
class VirtualKey:
    id: str
    workspace: str
    token_hash: str  # hex HMAC-SHA256(server secret, SHA-256(token))
    name: str = ""
    prefix: str = ""
    created: float = 0.0
    revoked: float | None = None
    rate_limit_rpm: int | None = None
    budget_usd_per_day: float | None = None
    budget_usd_per_month: float | None = None
    seq: int = 0

    @property
    def limits(self) -> WorkspaceLimits:
        return WorkspaceLimits(
            self.rate_limit_rpm, self.budget_usd_per_day, self.budget_usd_per_month
        )

    def row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "workspace": self.workspace,
            "name": self.name,
            "token_hash": self.token_hash,
            "prefix": self.prefix,
            "created": self.created,
            "revoked": self.revoked,
            "rate_limit_rpm": self.rate_limit_rpm,
            "budget_usd_per_day": self.budget_usd_per_day,
            "budget_usd_per_month": self.budget_usd_per_month,
            "seq": self.seq,
        }


def token_digest(key: bytes, token: str) -> str:
    """The stored form of a token: keyed, so a database reader cannot test guesses."""
    inner = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
    return legacy_digest(key, inner)


def legacy_digest(key: bytes, sha256: bytes) -> str:
    """The stored form of a key known only by its old unsalted SHA-256 (migration)."""
    return hmac.new(key, sha256, hashlib.sha256).hexdigest()


# ---- repositories ------------------------------------------------------------------


class KeyRepository(Protocol):
    persistent: bool

    async def counter(self) -> int: ...

    async def changed_since(self, seq: int) -> list[VirtualKey]: ...

    async def create(self, key: VirtualKey) -> VirtualKey: ...

    async def revoke(self, key_id: str, now: float) -> VirtualKey | None: ...

    async def import_keys(self, keys: list[VirtualKey]) -> int:
        """Insert the keys whose id is not stored yet; how many were new."""
        ...


class MemoryKeyRepository:
    """No database: the keys of this process, lost on restart."""

    persistent = False

    def __init__(self) -> None:
        self.keys: dict[str, VirtualKey] = {}
        self.seq = 0

    async def counter(self) -> int:
        return self.seq

    async def changed_since(self, seq: int) -> list[VirtualKey]:
        return sorted((k for k in self.keys.values() if k.seq > seq), key=lambda k: k.seq)

    async def create(self, key: VirtualKey) -> VirtualKey:
        self.seq += 1
        self.keys[key.id] = made = replace(key, seq=self.seq)
        return made

    async def revoke(self, key_id: str, now: float) -> VirtualKey | None:
        key = self.keys.get(key_id)
        if key is None or key.revoked is not None:
            return key
        self.seq += 1
        self.keys[key_id] = done = replace(key, revoked=now, seq=self.seq)
        return done

    async def import_keys(self, keys: list[VirtualKey]) -> int:
        new = [k for k in keys if k.id not in self.keys]
        for k in new:
            await self.create(k)
        return len(new)


class SqlKeyRepository:
    """The `virtual_keys` table and its counter row (SQLite or PostgreSQL)."""

    persistent = True

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.t = virtual_keys_table
        self.m = meta_table

    async def counter(self) -> int:
        q = select(self.m.c.counter).where(self.m.c.name == COUNTER)
        async with self.engine.connect() as conn:
            value = (await conn.execute(q)).scalar()
        return int(value or 0)

    async def changed_since(self, seq: int) -> list[VirtualKey]:
        q = select(self.t).where(self.t.c.seq > seq).order_by(self.t.c.seq)
        async with self.engine.connect() as conn:
            return [_key(r) for r in await conn.execute(q)]

    async def _bump(self, conn: AsyncConnection) -> int:
        """The next counter value; the row lock orders concurrent writers."""
        bumped = await conn.execute(
            update(self.m).where(self.m.c.name == COUNTER).values(counter=self.m.c.counter + 1)
        )
        if bumped.rowcount == 0:
            await conn.execute(self.m.insert(), {"name": COUNTER, "counter": 1})
            return 1
        q = select(self.m.c.counter).where(self.m.c.name == COUNTER)
        return int((await conn.execute(q)).scalar_one())

    async def create(self, key: VirtualKey) -> VirtualKey:
        for attempt in range(2):  # the first write of all may race another's counter row
            try:
                async with self.engine.begin() as conn:
                    made = replace(key, seq=await self._bump(conn))
                    await conn.execute(self.t.insert(), made.row())
                return made
            except IntegrityError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def revoke(self, key_id: str, now: float) -> VirtualKey | None:
        async with self.engine.begin() as conn:
            r = (await conn.execute(select(self.t).where(self.t.c.id == key_id))).first()
            if r is None:
                return None
            key = _key(r)
            if key.revoked is not None:
                return key
            done = replace(key, revoked=now, seq=await self._bump(conn))
            await conn.execute(
                update(self.t)
                .where(self.t.c.id == key_id)
                .values(revoked=done.revoked, seq=done.seq)
            )
        return done

    async def insert_in(self, conn: AsyncConnection, key: VirtualKey) -> int:
        """Insert `key` inside the caller's transaction unless its id is stored; 1 if new."""
        if (await conn.execute(select(self.t.c.id).where(self.t.c.id == key.id))).first():
            return 0
        await conn.execute(self.t.insert(), replace(key, seq=await self._bump(conn)).row())
        return 1

    async def import_keys(self, keys: list[VirtualKey]) -> int:
        added = 0
        for key in keys:
            async with self.engine.connect() as conn:
                q = select(self.t.c.id).where(self.t.c.id == key.id)
                if (await conn.execute(q)).first() is not None:
                    continue
            with contextlib.suppress(IntegrityError):  # another instance imported it
                await self.create(key)
                added += 1
        return added


def _key(r: Any) -> VirtualKey:
    return VirtualKey(
        id=str(r.id),
        workspace=str(r.workspace),
        token_hash=str(r.token_hash),
        name=str(r.name or ""),
        prefix=str(r.prefix or ""),
        created=float(r.created),
        revoked=None if r.revoked is None else float(r.revoked),
        rate_limit_rpm=r.rate_limit_rpm,
        budget_usd_per_day=r.budget_usd_per_day,
        budget_usd_per_month=r.budget_usd_per_month,
        seq=int(r.seq),
    )


# ---- the live set on one instance ------------------------------------------------------


class VirtualKeys:
    """This instance's copy of every key, refreshed from the repository.

    `lookup` (the request path) reads only memory; the follower task keeps the
    copy within POLL_SECONDS of the table.
    """

    def __init__(
        self,
        repo: KeyRepository,
        secret: bytes,
        *,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.repo = repo
        self.secret = secret
        self.poll_seconds = poll_seconds
        self.by_id: dict[str, VirtualKey] = {}
        self._by_hash: dict[bytes, VirtualKey] = {}
        self.seq = 0
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        self._lock = asyncio.Lock()

    def digest(self, token: str) -> bytes:
        return bytes.fromhex(token_digest(self.secret, token))

    def lookup(self, token: str) -> VirtualKey | None:
        """The active key for `token` (constant-time confirm of the digest match)."""
        h = self.digest(token)
        key = self._by_hash.get(h)
        if key is None or key.revoked is not None:
            return None
        return key if hmac.compare_digest(bytes.fromhex(key.token_hash), h) else None

    def _apply(self, keys: list[VirtualKey]) -> None:
        for key in keys:
            old = self.by_id.get(key.id)
            if old is not None:
                self._by_hash.pop(bytes.fromhex(old.token_hash), None)
            self.by_id[key.id] = key
            self._by_hash[bytes.fromhex(key.token_hash)] = key
            self.seq = max(self.seq, key.seq)

    async def refresh(self) -> bool:
        """Catch up with the table if its counter moved; True when something changed."""
        async with self._lock:
            if await self.repo.counter() <= self.seq:
                return False
            changed = await self.repo.changed_since(self.seq)
            self._apply(changed)
        return bool(changed)

    async def create(self, key: VirtualKey) -> VirtualKey:
        made = await self.repo.create(key)
        async with self._lock:
            self._apply([made])
        return made

    async def revoke(self, key_id: str, now: float) -> VirtualKey | None:
        done = await self.repo.revoke(key_id, now)
        if done is not None:
            async with self._lock:
                self._apply([done])
        return done

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.poll_seconds)
            try:
                await self.refresh()
                if self._failing:
                    log.info("virtual keys: the database answers again")
                self._failing = False
            except Exception as err:  # noqa: BLE001 - keep the last copy through an outage
                if not self._failing:
                    log.warning(
                        "virtual keys not refreshed; serving the last copy",
                        extra={"error": type(err).__name__},
                    )
                self._failing = True

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
