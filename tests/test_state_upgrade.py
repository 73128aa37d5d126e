"""An older release's database, upgraded at start-up (tiergate/state_upgrade.py).

The fixture is what tiergate 9bf17b6 (the release before issue #27) wrote to
`config_versions` after issuing two virtual keys through the admin API and
revoking one (tests/fixtures/README.md says how it was made): the keys live inside
the config documents, and tokens are stored as unsalted SHA-256 digests. After one
start of today's code the keys authenticate from their own table, the revoked
one stays revoked, and no unsalted digest is left in the database.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import create_async_engine

from admin_support import database, gateway
from servers import ServerThread
from tiergate.db import config_versions_table, meta_table
from tiergate.sim.app import create_sim_app

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "release-9bf17b6-config-versions.json").read_text()
)
SECRET = {"TIERGATE_SECRET_KEY": "upgrade-test-secret-" + "e" * 24}


def async_url(url: str) -> str:
    if url.startswith("sqlite:///"):
        return url.replace("sqlite:///", "sqlite+aiosqlite:///", 1)
    return url.replace("postgresql://", "postgresql+asyncpg://", 1)


async def load_old_rows(url: str) -> None:
    """The old release's table and rows, as it left them (no newer table exists)."""
    engine = create_async_engine(async_url(url))
    try:
        async with engine.begin() as conn:
            await conn.run_sync(config_versions_table.create)
            await conn.execute(config_versions_table.insert(), FIXTURE["config_versions"])
    finally:
        await engine.dispose()


async def stored(url: str, upgraded: bool = True) -> tuple[str, str | None]:
    """Every config row as text, and the upgrade marker (once its table exists)."""
    engine = create_async_engine(async_url(url))
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(select(config_versions_table))).mappings().all()
            scheme = None
            if upgraded:
                scheme = (
                    await conn.execute(
                        select(meta_table.c.value).where(meta_table.c.name == "hash_scheme")
                    )
                ).scalar()
    finally:
        await engine.dispose()
    return json.dumps([dict(r) for r in rows], default=str), scheme


def old_config(sim_url: str, db_url: str) -> dict[str, Any]:
    """The old release's YAML, its channel now pointed at this test's simulator."""
    return {
        "database": {"url": db_url},
        "workspaces": [{"name": "default", "tokens": [FIXTURE["workspace_token"]]}],
        "channels": [
            {
                "name": "oa",
                "type": "openai",
                "base_url": f"{sim_url}/v1",
                "keys": [FIXTURE["upstream_key"]],
                "models": {"openai/gpt-5-mini": {"upstream": "gpt-5-mini"}},
            }
        ],
    }


def status(gw: ServerThread, token: str) -> int:
    import httpx

    body = {"model": "openai/gpt-5-mini", "messages": [{"role": "user", "content": "hi"}]}
    r = httpx.post(
        f"{gw.url}/v1/chat/completions", json=body, headers={"authorization": f"Bearer {token}"}
    )
    return r.status_code


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_an_old_release_database_upgrades_without_losing_a_key(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    pg = request.getfixturevalue("postgres_url") if kind == "postgresql" else None
    kept, revoked = FIXTURE["keys"]["kept"], FIXTURE["keys"]["revoked"]
    with ServerThread(create_sim_app()) as sim, database(kind, tmp_path, pg) as db:
        url = db if "://" in db else f"sqlite:///{db}"
        asyncio.run(load_old_rows(url))
        before, _ = asyncio.run(stored(url, upgraded=False))
        assert "redacted:sha256:" in before and "virtual_keys" in before  # the old shape
        for start in ("upgrading start", "second start"):
            with gateway(old_config(sim.url, url), env=SECRET) as (gw, admin):
                assert status(gw, kept["token"]) == 200, start
                assert status(gw, revoked["token"]) == 401, start
                assert status(gw, FIXTURE["workspace_token"]) == 200, start
                listed = admin.get("/virtual-keys", params={"workspace": "default"}).json()
                active = {k["id"]: k["active"] for k in listed["items"]}
                assert active == {kept["id"]: True, revoked["id"]: False}, start
        after, scheme = asyncio.run(stored(url))
        assert scheme == "v2"
        assert "redacted:sha256:" not in after, "an unsalted token digest is still stored"
        assert '"virtual_keys"' not in after, "keys still inside config documents"
        for key in (kept, revoked):
            assert key["token"] not in after
