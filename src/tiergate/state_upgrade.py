"""Start-up upgrade of what an older release stored: virtual keys out of the config
document into their own table, and every token digest keyed with the server secret.

Why: older releases kept virtual keys inside `config_versions` documents (where a
new seed deleted them) and stored unsalted digests of tokens there (a workspace
token's first 16 hex digits of SHA-256 in its redaction marker, a key's full
SHA-256, and the seed hash over a document holding literal tokens). A database
reader could test guessable tokens offline against those.

Run once per database, in one transaction, guarded by the `hash_scheme` row of
`tiergate_meta` (a second instance starting at the same moment blocks on that
row and then finds the work done). Every row of `config_versions` is rewritten:
- `virtual_keys` removed from its workspaces, after importing each key (its
  newest form) into `virtual_keys` under the keyed hash of its old SHA-256; a key
  missing from the newest version (an older release's seed deleted it) is
  imported revoked, so it is listed but does not authenticate;
- `redacted:sha256:<16 hex>` markers become `redacted:hmac:<HMAC of them>`;
- the seed hash becomes its HMAC (tiergate.config_store.keyed_seed_hash).
Before that, the secret's check value is compared with the one stored by the
first instance: a different secret stops start-up with one clear message.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from tiergate.config_secrets import LEGACY_PREFIX, upgraded_marker
from tiergate.config_store import keyed_seed_hash
from tiergate.db import config_versions_table, meta_table
from tiergate.server_secret import ServerSecret
from tiergate.virtual_keys_store import SqlKeyRepository, VirtualKey, legacy_digest

log = logging.getLogger(__name__)

SCHEME = "hash_scheme"
SCHEME_VERSION = "v2"
CHECK = "secret_check"


class SecretMismatch(RuntimeError):
    """This instance's server secret is not the one the database was written with."""


async def check_secret(engine: AsyncEngine, secret: ServerSecret) -> None:
    """Store the secret's check value, or compare with the stored one."""
    m = meta_table
    mine = secret.check_value()
    q = select(m.c.value).where(m.c.name == CHECK)
    async with engine.connect() as conn:
        stored = (await conn.execute(q)).scalar()
    if stored is None:
        try:
            async with engine.begin() as conn:
                await conn.execute(m.insert(), {"name": CHECK, "value": mine, "counter": 0})
            return
        except IntegrityError:  # another instance stored its own meanwhile
            async with engine.connect() as conn:
                stored = (await conn.execute(q)).scalar()
    if stored != mine:
        raise SecretMismatch(
            f"the server secret ({secret.source}) is not the one this database's tokens "
            "were hashed with: set TIERGATE_SECRET_KEY to the same value on every "
            "instance (docs/operator.md, 'Where state lives')"
        )


def _upgrade_document(doc: dict[str, Any], key: bytes) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    for ws in out.get("workspaces") or []:
        if isinstance(ws, dict):
            ws.pop("virtual_keys", None)
    for section, field in (("channels", "keys"), ("workspaces", "tokens")):
        for item in out.get(section) or []:
            if isinstance(item, dict) and isinstance(item.get(field), list):
                item[field] = [
                    upgraded_marker(key, v)
                    if isinstance(v, str) and v.startswith(LEGACY_PREFIX)
                    else v
                    for v in item[field]
                ]
    return out


def legacy_keys(documents: list[dict[str, Any]], key: bytes, now: float) -> list[VirtualKey]:
    """Every virtual key the documents (oldest first) hold, in its newest form."""
    newest: dict[str, VirtualKey] = {}
    in_last: set[str] = set()
    for i, doc in enumerate(documents):
        for ws in doc.get("workspaces") or []:
            if not isinstance(ws, dict):
                continue
            for vk in ws.get("virtual_keys") or []:
                if not isinstance(vk, dict) or "id" not in vk or "sha256" not in vk:
                    continue
                newest[str(vk["id"])] = from_document(str(ws.get("name")), vk, key)
                if i == len(documents) - 1:
                    in_last.add(str(vk["id"]))
    out = []
    for key_id, vk in newest.items():
        if key_id not in in_last and vk.revoked is None:
            vk = VirtualKey(**{**vk.row(), "revoked": now})  # lost by an older seed
        out.append(vk)
    return out


def from_document(workspace: str, vk: dict[str, Any], key: bytes) -> VirtualKey:
    """A key as an older config document (or a YAML file) declares it."""
    return VirtualKey(
        id=str(vk["id"]),
        workspace=workspace,
        token_hash=legacy_digest(key, bytes.fromhex(str(vk["sha256"]))),
        name=str(vk.get("name") or ""),
        prefix=str(vk.get("prefix") or ""),
        created=float(vk.get("created") or 0.0),
        revoked=None if vk.get("revoked") is None else float(vk["revoked"]),
        rate_limit_rpm=vk.get("rate_limit_rpm"),
        budget_usd_per_day=vk.get("budget_usd_per_day"),
        budget_usd_per_month=vk.get("budget_usd_per_month"),
    )


async def upgrade(
    engine: AsyncEngine, secret: ServerSecret, keys: SqlKeyRepository, now: float | None = None
) -> int:
    """Check the secret, then upgrade an older release's rows once; keys imported."""
    await check_secret(engine, secret)
    m = meta_table
    async with engine.connect() as conn:
        if (await conn.execute(select(m.c.value).where(m.c.name == SCHEME))).scalar():
            return 0
    try:
        return await _upgrade(engine, secret, keys, now)
    except IntegrityError:  # another instance claimed the upgrade first: it is done
        return 0


async def _upgrade(
    engine: AsyncEngine, secret: ServerSecret, keys: SqlKeyRepository, now: float | None
) -> int:
    m, t = meta_table, config_versions_table
    async with engine.begin() as conn:
        # the claim is the first write: a concurrent instance fails on it and rolls back
        await conn.execute(m.insert(), {"name": SCHEME, "value": SCHEME_VERSION, "counter": 0})
        rows = list(await conn.execute(select(t).order_by(t.c.version)))
        imported = legacy_keys(
            [dict(r.document or {}) for r in rows], secret.key, time.time() if now is None else now
        )
        for r in rows:
            change = dict(r.change or {})
            if isinstance(change.get("seed_document"), dict):
                change["seed_document"] = _upgrade_document(change["seed_document"], secret.key)
            await conn.execute(
                update(t)
                .where(t.c.version == r.version)
                .values(
                    document=_upgrade_document(dict(r.document or {}), secret.key),
                    change=change,
                    seed_hash=keyed_seed_hash(secret.key, str(r.seed_hash)),
                )
            )
        added = 0
        for vk in imported:  # in the same transaction as the documents they leave
            added += await keys.insert_in(conn, vk)
    if rows:
        log.info(
            "stored config upgraded: token digests keyed, virtual keys in their own table",
            extra={"versions": len(rows), "virtual_keys": added},
        )
    return added
