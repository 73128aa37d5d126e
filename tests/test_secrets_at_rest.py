"""No literal provider key or workspace token is stored in `config_versions`
(issue #16), on SQLite and PostgreSQL, and the gateway still serves with them,
across restarts and admin changes."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from admin_support import ADMIN, KEYS, OTHER_TOKEN, SECRETS, AdminClient, admin_config, database
from servers import TOKEN, ServerThread
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.sim.app import create_sim_app


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as s:
        yield s


def stored_documents(url: str) -> str:
    """Every stored document, as the raw text the database holds."""
    if "://" not in url:
        with sqlite3.connect(url) as conn:
            rows = conn.execute("SELECT document FROM config_versions").fetchall()
        return "\n".join(str(r[0]) for r in rows)

    async def read() -> str:
        conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
        try:
            rows = await conn.fetch("SELECT document::text FROM config_versions")
        finally:
            await conn.close()
        return "\n".join(r[0] for r in rows)

    return asyncio.run(read())


@contextlib.contextmanager
def gateway(doc: dict[str, Any], env: dict[str, str]) -> Iterator[tuple[ServerThread, AdminClient]]:
    env = {"TIERGATE_ADMIN_TOKEN": ADMIN, **env}
    with ServerThread(create_app(parse_config(doc, env), env=env)) as gw:
        yield gw, AdminClient(gw.url)


def chat(gw: ServerThread, token: str = TOKEN) -> httpx.Response:
    return httpx.post(
        f"{gw.url}/v1/chat/completions",
        json={"model": "openai/gpt-5-mini", "messages": [{"role": "user", "content": "hi"}]},
        headers={"authorization": f"Bearer {token}"},
        timeout=30,
    )


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_stored_versions_hold_no_literal_secret(
    sim: ServerThread, tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    postgres_url = request.getfixturevalue("postgres_url") if kind == "postgres" else None
    with database(kind, tmp_path, postgres_url) as url:
        doc: dict[str, Any] = admin_config(sim.url, url)
        doc["channels"][1]["keys"] = ["${TG_TEST_ANTHROPIC_KEY}"]  # a reference stays one
        env = {"TG_TEST_ANTHROPIC_KEY": KEYS["an"][0]}
        added = f"sk-proj-added-{uuid.uuid4().hex}"
        with gateway(doc, env) as (gw, admin):
            assert chat(gw).status_code == 200 and chat(gw, OTHER_TOKEN).status_code == 200
            r = admin.post("/channels/oa/keys", json={"key": added})
            assert r.status_code == 201, r.text
            assert admin.get("/config/versions").status_code == 200
            assert admin.get("/config").status_code == 200
            assert chat(gw).status_code == 200
        text = stored_documents(url)
        assert "${TG_TEST_ANTHROPIC_KEY}" in text and "redacted:hmac:" in text
        assert "redacted:sha256:" not in text  # keyed digests only (issue #27)
        for secret in [*SECRETS, added]:
            assert secret not in text
        # a restart from the same file restores its own literals and keeps serving
        with gateway(doc, env) as (gw, admin):
            assert chat(gw).status_code == 200 and chat(gw, OTHER_TOKEN).status_code == 200
            assert len(admin.get("/channels/oa").json()["keys"]) == 4
