"""The shared config: versions persisted in the database, the newest version
number published in the state store, and every instance following it.

Why: an admin API change (drain a channel, add a key, edit a router) must apply
live to every gateway instance and survive restarts, while the YAML file stays
a valid way to seed the config.

- Each change stores the *whole* shared config as a new row of
  `config_versions` (version = previous + 1; the primary key turns two
  concurrent writers into one winner and one retry on the newer base).
- The writer publishes the version under `config:version` in the state store.
  Every instance polls that key (`server.config_poll_seconds`, default 1 s)
  and, when it moved, loads the newest row and swaps its live config. Every
  `DB_CHECK_EVERY` polls it also asks the database directly, which covers a
  lost publish and fleets on the in-memory state backend.
- Stored documents are the config *before* `${VAR}` expansion, so secrets
  that come from the environment stay references; each instance expands them
  from its own environment. `server`, `state` and `database` are
  instance-local (how to reach the store and the database, ports, tokens):
  they always come from the instance's own file, never from the database.

Start-up precedence: the file is the *seed*; its hash covers the shared
sections. A seed stored before (the same file restarting, or an older file
during a rolling deploy) is older: the newest stored version wins, so admin
changes survive restarts. A seed never stored before (the operator edited the
file) is merged over the newest stored version, object by object
(tiergate.config_merge): what the edit changed wins, what the admin API made
or edited is kept. The seed row keeps the file's own document in
`change["seed_document"]`, the base of the next merge. Virtual keys are not
part of the config at all (tiergate.virtual_keys_store).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import hmac
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import orjson
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from tiergate import metrics
from tiergate.config import ConfigError, GatewayConfig
from tiergate.config_load import parse_config
from tiergate.config_merge import merge_seed
from tiergate.db import config_versions_table
from tiergate.state.base import StateStore, StateUnavailable, Write

log = logging.getLogger(__name__)

CONFIG_VERSION_KEY = "config:version"
#: Sections every instance takes from its own file: they say how to reach the
#: database and the store the shared config lives in, and carry local secrets.
LOCAL_SECTIONS = ("server", "state", "database")
#: Polls between direct database checks (a lost publish, memory-backed fleets).
DB_CHECK_EVERY = 10
#: Attempts when another instance commits a version between our read and write.
CHANGE_RETRIES = 5

#: `change` entries never shown in history: key references, and a seed row's
#: own file document (redacted at rest like every document).
PRIVATE_CHANGE = ("reenable_keys", "seed_document")

T = TypeVar("T")
KeyRef = tuple[str, str]  # (channel name, key fingerprint)
Apply = Callable[[GatewayConfig, frozenset[KeyRef]], None]


@dataclass(frozen=True, slots=True)
class ConfigVersion:
    """One stored version. `change` says what the admin did (op, target, actor
    details) and which runtime-disabled keys the operator re-enabled."""

    version: int
    ts: float
    source: str  # "seed" | "admin"
    seed_hash: str
    document: dict[str, Any]
    actor: str | None = None
    change: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The row without its document (which may hold literal secrets)."""
        return {
            "version": self.version,
            "ts": self.ts,
            "source": self.source,
            "actor": self.actor,
            "change": {k: v for k, v in self.change.items() if k not in PRIVATE_CHANGE},
        }


class ConfigBusy(Exception):
    """Other instances kept committing versions; the change was not applied."""


# ---- pure document helpers -----------------------------------------------------


def shared_document(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a config document every instance shares. Virtual keys a
    document may still carry (an older release kept them here) are not config:
    they are imported into their own table at start-up."""
    out = {k: copy.deepcopy(v) for k, v in doc.items() if k not in LOCAL_SECTIONS}
    for ws in out.get("workspaces") or []:
        if isinstance(ws, dict):
            ws.pop("virtual_keys", None)
    return out


def seed_document(row: ConfigVersion) -> dict[str, Any]:
    """The file a seed row was stored from (older rows: their whole document)."""
    raw = row.change.get("seed_document")
    return dict(raw) if isinstance(raw, dict) else row.document


def effective_document(shared: Mapping[str, Any], seed: Mapping[str, Any]) -> dict[str, Any]:
    """A shared document completed with this instance's local sections."""
    out = shared_document(shared)
    out.update({k: copy.deepcopy(seed[k]) for k in LOCAL_SECTIONS if k in seed})
    return out


def seed_hash(doc: Mapping[str, Any]) -> str:
    """Identity of a seed's shared sections (key order and local sections ignored)."""
    blob = orjson.dumps(shared_document(doc), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()


def keyed_seed_hash(key: bytes | None, plain: str) -> str:
    """A seed hash as stored: keyed with the server secret, because the seed holds
    literal tokens and a plain digest of it would let a database reader test
    guesses of them (tiergate.server_secret). Also how older rows are migrated."""
    if key is None:
        return plain
    return hmac.new(key, bytes.fromhex(plain), hashlib.sha256).hexdigest()


def reenabled_keys(rows: list[ConfigVersion]) -> frozenset[KeyRef]:
    """Keys an operator explicitly re-enabled in any of `rows`."""
    out: set[KeyRef] = set()
    for row in rows:
        for item in row.change.get("reenable_keys") or ():
            out.add((str(item[0]), str(item[1])))
    return frozenset(out)


# ---- repositories --------------------------------------------------------------


class ConfigRepository(Protocol):
    """Where versions live. `persistent` is False for the in-memory fallback."""

    persistent: bool

    async def latest(self) -> ConfigVersion | None: ...

    async def newer_than(self, version: int) -> list[ConfigVersion]: ...

    async def max_version(self) -> int: ...

    async def has_seed(self, seed_hash: str) -> bool: ...

    async def latest_seed(self) -> ConfigVersion | None:
        """The newest row stored from a file."""
        ...

    async def insert(self, row: ConfigVersion) -> bool:
        """False when the version number is already taken (a concurrent writer)."""
        ...

    async def history(self, limit: int) -> list[ConfigVersion]: ...


class MemoryConfigRepository:
    """No database configured: versions live in this process only (one instance)."""

    persistent = False

    def __init__(self) -> None:
        self.rows: list[ConfigVersion] = []

    async def latest(self) -> ConfigVersion | None:
        return self.rows[-1] if self.rows else None

    async def newer_than(self, version: int) -> list[ConfigVersion]:
        return [r for r in self.rows if r.version > version]

    async def max_version(self) -> int:
        return self.rows[-1].version if self.rows else 0

    async def has_seed(self, seed_hash: str) -> bool:
        return any(r.source == "seed" and r.seed_hash == seed_hash for r in self.rows)

    async def latest_seed(self) -> ConfigVersion | None:
        return next((r for r in reversed(self.rows) if r.source == "seed"), None)

    async def insert(self, row: ConfigVersion) -> bool:
        if self.rows and self.rows[-1].version >= row.version:
            return False
        self.rows.append(row)
        return True

    async def history(self, limit: int) -> list[ConfigVersion]:
        return list(reversed(self.rows[-limit:]))


class SqlConfigRepository:
    """Versions in the `config_versions` table (SQLite or PostgreSQL)."""

    persistent = True

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.t = config_versions_table

    @staticmethod
    def _row(r: Any) -> ConfigVersion:
        return ConfigVersion(
            version=int(r.version),
            ts=float(r.ts),
            source=str(r.source),
            seed_hash=str(r.seed_hash),
            document=dict(r.document or {}),
            actor=r.actor,
            change=dict(r.change or {}),
        )

    async def latest(self) -> ConfigVersion | None:
        async with self.engine.connect() as conn:
            r = (
                await conn.execute(select(self.t).order_by(self.t.c.version.desc()).limit(1))
            ).first()
        return self._row(r) if r is not None else None

    async def newer_than(self, version: int) -> list[ConfigVersion]:
        q = select(self.t).where(self.t.c.version > version).order_by(self.t.c.version)
        async with self.engine.connect() as conn:
            return [self._row(r) for r in await conn.execute(q)]

    async def max_version(self) -> int:
        async with self.engine.connect() as conn:
            value = (await conn.execute(select(func.max(self.t.c.version)))).scalar()
        return int(value or 0)

    async def has_seed(self, seed_hash: str) -> bool:
        q = (
            select(self.t.c.version)
            .where(self.t.c.seed_hash == seed_hash, self.t.c.source == "seed")
            .limit(1)
        )
        async with self.engine.connect() as conn:
            return (await conn.execute(q)).first() is not None

    async def latest_seed(self) -> ConfigVersion | None:
        q = (
            select(self.t)
            .where(self.t.c.source == "seed")
            .order_by(self.t.c.version.desc())
            .limit(1)
        )
        async with self.engine.connect() as conn:
            r = (await conn.execute(q)).first()
        return self._row(r) if r is not None else None

    async def insert(self, row: ConfigVersion) -> bool:
        values = {
            "version": row.version,
            "ts": row.ts,
            "source": row.source,
            "seed_hash": row.seed_hash,
            "actor": row.actor,
            "change": row.change,
            "document": row.document,
        }
        try:
            async with self.engine.begin() as conn:
                await conn.execute(self.t.insert(), values)
        except IntegrityError:
            return False
        return True

    async def history(self, limit: int) -> list[ConfigVersion]:
        q = select(self.t).order_by(self.t.c.version.desc()).limit(limit)
        async with self.engine.connect() as conn:
            return [self._row(r) for r in await conn.execute(q)]


# ---- the follower ----------------------------------------------------------------


class ConfigSync:
    """Keeps this instance's live config on the newest stored version.

    `apply(cfg, reenabled)` swaps the live config (synchronously, so no request
    sees half of it); `reenabled` names keys an operator re-enabled, whose
    runtime auth-failure flag must be cleared.
    """

    def __init__(
        self,
        repo: ConfigRepository,
        store: StateStore,
        seed: Mapping[str, Any],
        apply: Apply,
        *,
        poll_seconds: float = 1.0,
        env: dict[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        hash_key: bytes | None = None,
    ) -> None:
        self.repo = repo
        self.hash_key = hash_key
        self.store = store
        self.seed = copy.deepcopy(dict(seed))
        self.apply = apply
        self.poll_seconds = poll_seconds
        self.env = env
        self.clock = clock
        #: The version live here; None until the start-up precedence was resolved.
        self.version: int | None = None
        #: The shared document of the live config.
        self.document: dict[str, Any] = shared_document(self.seed)
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._polls = 0
        self._failed_version: int | None = None
        self._poll_failing = False

    def seed_hash(self, doc: Mapping[str, Any]) -> str:
        return keyed_seed_hash(self.hash_key, seed_hash(doc))

    def parse(self, shared: Mapping[str, Any]) -> GatewayConfig:
        """Validate a shared document as this instance would run it."""
        return parse_config(effective_document(shared, self.seed), self.env)

    # ---- start-up --------------------------------------------------------------

    async def bootstrap(self) -> None:
        """Resolve file-versus-database precedence (see the module docstring)."""
        async with self._lock:
            for _ in range(CHANGE_RETRIES):
                if await self._bootstrap_once():
                    return
            raise ConfigBusy("could not store the seed config: versions keep changing")

    async def _bootstrap_once(self) -> bool:
        latest = await self.repo.latest()
        sh = self.seed_hash(self.seed)
        if latest is None or not await self.repo.has_seed(sh):
            own = shared_document(self.seed)
            document = own
            if latest is not None:  # an edited file: merged, admin-made objects kept
                previous = await self.repo.latest_seed()
                base = seed_document(previous) if previous is not None else {}
                document = merge_seed(latest.document, base, own)
                try:
                    self.parse(document)
                except ConfigError as err:
                    log.error(
                        "the edited config file conflicts with objects made through the "
                        "admin API; not stored, keeping version %d: %s",
                        latest.version,
                        "; ".join(err.problems),
                    )
                    if not self._switch_to(latest, frozenset()):
                        self.version = 0  # keep the seed running; the poll retries
                    return True
            row = ConfigVersion(
                version=(latest.version if latest else 0) + 1,
                ts=self.clock(),
                source="seed",
                seed_hash=sh,
                document=document,
                change={"op": "seed", "seed_document": own},
            )
            if not await self.repo.insert(row):
                return False  # another instance stored a version meanwhile: re-read
            log.info("config seeded from file as version %d", row.version)
            if document == self.document:
                self._set_live(row)  # the app already runs the seed
            elif not self._switch_to(row, frozenset()):
                self.version = 0
            await self.publish(row.version)
            return True
        if latest.document != self.document:
            log.info("config version %d from the database supersedes the file", latest.version)
            if not self._switch_to(latest, frozenset()):
                self.version = 0  # keep the seed running; the poll retries
                return True
        else:
            self._set_live(latest)
        await self.publish(latest.version)
        return True

    # ---- following -------------------------------------------------------------

    async def poll_once(self) -> None:
        """One poll: bootstrap if needed, else catch up when the version moved."""
        if self.version is None:
            await self.bootstrap()
            return
        self._polls += 1
        published = await self.read_published()
        moved = published is not None and published > self.version
        if moved or self._polls % DB_CHECK_EVERY == 0:
            await self.catch_up()

    async def catch_up(self) -> bool:
        """Switch to the newest stored version, if newer than the live one."""
        async with self._lock:
            rows = await self.repo.newer_than(self.version or 0)
            if not rows:
                return False
            return self._switch_to(rows[-1], reenabled_keys(rows))

    def _switch_to(self, row: ConfigVersion, reenabled: frozenset[KeyRef]) -> bool:
        try:
            cfg = self.parse(row.document)
        except ConfigError as err:
            if self._failed_version != row.version:
                log.error(
                    "config version %d is invalid on this instance; keeping version %s: %s",
                    row.version,
                    self.version,
                    "; ".join(err.problems),
                )
                metrics.CONFIG_RELOADS_TOTAL.labels(result="invalid").inc()
            self._failed_version = row.version
            return False
        self.apply(cfg, reenabled)
        self._set_live(row)
        metrics.CONFIG_RELOADS_TOTAL.labels(result="applied").inc()
        log.info("config version %d applied", row.version)
        return True

    def _set_live(self, row: ConfigVersion) -> None:
        self.version = row.version
        self.document = copy.deepcopy(row.document)
        metrics.CONFIG_VERSION.set(row.version)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.poll_seconds)
            try:
                await self.poll_once()
                self._poll_failing = False
            except Exception as err:  # noqa: BLE001 - the follower must outlive outages
                if not self._poll_failing:
                    log.warning("config poll failed: %s", type(err).__name__)
                self._poll_failing = True

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # ---- the version key ---------------------------------------------------------

    async def read_published(self) -> int | None:
        try:
            raw = await self.store.get(CONFIG_VERSION_KEY)
        except StateUnavailable:
            return None
        try:
            return int(raw) if raw is not None else None
        except ValueError:
            return None

    async def publish(self, version: int) -> None:
        """Raise the published version (never lower it: publishes may race)."""

        def bump(values: list[bytes | None]) -> tuple[list[Write], None]:
            try:
                current = int(values[0]) if values[0] is not None else 0
            except ValueError:
                current = 0
            if current >= version:
                return [], None
            return [Write(CONFIG_VERSION_KEY, str(version).encode())], None

        try:
            await self.store.transact([CONFIG_VERSION_KEY], bump)
        except StateUnavailable:
            log.warning("config version %d not published: state store unavailable", version)

    # ---- changing --------------------------------------------------------------

    async def change(
        self,
        edit: Callable[[dict[str, Any]], T],
        *,
        change: dict[str, Any],
        actor: str | None = None,
        check: Callable[[GatewayConfig | None, GatewayConfig], None] | None = None,
    ) -> tuple[ConfigVersion, T]:
        """Apply `edit` to the newest shared document, validate, store, publish, go live.

        `edit` mutates the document in place and may raise to refuse; the new
        document is validated exactly as a file is at load (ConfigError lists
        every problem); `check(old, new)` may refuse too (the go-live gate).
        """
        async with self._lock:
            if self.version is None:  # start-up precedence first (the database was down)
                await self._bootstrap_once()
            for _ in range(CHANGE_RETRIES):
                latest = await self.repo.latest()
                base = latest.document if latest is not None else self.document
                doc = copy.deepcopy(base)
                result = edit(doc)
                new_cfg = self.parse(doc)
                if check is not None:
                    try:
                        old_cfg: GatewayConfig | None = self.parse(base)
                    except ConfigError:
                        old_cfg = None
                    check(old_cfg, new_cfg)
                row = ConfigVersion(
                    version=(latest.version if latest is not None else self.version or 0) + 1,
                    ts=self.clock(),
                    source="admin",
                    seed_hash=latest.seed_hash if latest is not None else self.seed_hash(self.seed),
                    document=doc,
                    actor=actor,
                    change=change,
                )
                if await self.repo.insert(row):
                    self.apply(new_cfg, reenabled_keys([row]))
                    self._set_live(row)
                    metrics.CONFIG_RELOADS_TOTAL.labels(result="applied").inc()
                    await self.publish(row.version)
                    return row, result
            raise ConfigBusy("the config kept changing underneath this change; retry")
