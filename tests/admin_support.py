"""Helpers for the admin API tests: a gateway on the simulator with realistic
secrets, and an admin client that checks EVERY response body it receives for
any raw secret (provider keys, workspace tokens, the admin token)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx

from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config

ADMIN = "tg-admin-" + uuid.uuid4().hex
OTHER_TOKEN = "tg-other-token"
KEYS = {
    "oa": [f"sk-proj-{uuid.uuid4().hex}{i}" for i in range(3)],
    "an": [f"sk-ant-{uuid.uuid4().hex}"],
    "ge": [f"AIza{uuid.uuid4().hex}"],
}
#: Everything an admin response must never contain.
SECRETS: set[str] = {ADMIN, TOKEN, OTHER_TOKEN, *(k for ks in KEYS.values() for k in ks)}

STRONG = "anthropic/claude-sonnet-4-5"
WEAK = "openai/gpt-5-mini"


def admin_config(sim_url: str, db: str | None, **overrides: Any) -> dict[str, Any]:
    """servers.gateway_config with long, realistic keys and a database: a SQLite
    file path, a database URL, or None for none."""
    cfg = gateway_config(sim_url)
    for ch in cfg["channels"]:
        ch["keys"] = list(KEYS[ch["name"]])
    cfg["database"] = {"url": "" if db is None else db if "://" in db else f"sqlite:///{db}"}
    cfg["server"]["config_poll_seconds"] = 0.2
    cfg.update(overrides)
    return cfg


def escalating_router(name: str = "esc", **escalation: Any) -> dict[str, Any]:
    return {
        "name": name,
        "allowed_models": ["openai/*", "anthropic/*"],
        "strategy": "cheapest",
        "strong_pool": [STRONG],
        "default_model": WEAK,
        "escalation": {"mode": "manual", **escalation},
    }


@contextlib.contextmanager
def database(kind: str, folder: Path, postgres_url: str | None = None) -> Iterator[str]:
    """A fresh database URL: a SQLite file, or a throwaway PostgreSQL database
    (created on the server of `postgres_url`, dropped afterwards)."""
    if kind == "sqlite":
        yield str(folder / "tg.db")
        return
    assert postgres_url is not None
    name = f"tg_admin_{uuid.uuid4().hex[:12]}"
    parts = urlsplit(postgres_url)
    admin_url = urlunsplit(parts._replace(scheme="postgresql"))

    async def run(sql: str) -> None:
        conn = await asyncpg.connect(admin_url)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run(f"CREATE DATABASE {name}"))
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        asyncio.run(run(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


@contextlib.contextmanager
def gateway(
    doc: dict[str, Any], env: dict[str, str] | None = None
) -> Iterator[tuple[ServerThread, AdminClient]]:
    """A running gateway for `doc`, and an admin client for it."""
    app = create_app(parse_config(doc), env={"TIERGATE_ADMIN_TOKEN": ADMIN, **(env or {})})
    with ServerThread(app) as gw:
        yield gw, AdminClient(gw.url)


class AdminClient:
    """httpx against /admin/api that fails the test if a response leaks a secret."""

    def __init__(self, base_url: str, token: str | None = ADMIN) -> None:
        self.base_url = base_url
        self.token = token
        self.seen = 0

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = dict(kw.pop("headers", {}) or {})
        if self.token is not None and "authorization" not in {h.lower() for h in headers}:
            headers["Authorization"] = f"Bearer {self.token}"
        url = path if path.startswith("http") else f"{self.base_url}/admin/api{path}"
        r = httpx.request(method, url, headers=headers, timeout=10, **kw)
        check_no_secrets(r.text)
        self.seen += 1
        return r

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("POST", path, **kw)

    def patch(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("PATCH", path, **kw)

    def put(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("PUT", path, **kw)

    def delete(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("DELETE", path, **kw)


def check_no_secrets(text: str) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert not leaked, f"admin response leaked {len(leaked)} secret(s)"


def chat(
    gw: ServerThread,
    model: str,
    content: str = "Hello",
    *,
    session: str | None = None,
    token: str = TOKEN,
    headers: dict[str, str] | None = None,
    messages: list[dict[str, Any]] | None = None,
) -> httpx.Response:
    h = {"Authorization": f"Bearer {token}", **(headers or {})}
    if session is not None:
        h["X-OrcaRouter-Session-Id"] = session
    body = {"model": model, "messages": messages or [{"role": "user", "content": content}]}
    return httpx.post(f"{gw.url}/v1/chat/completions", headers=h, json=body, timeout=30)


def error_of(r: httpx.Response) -> dict[str, Any]:
    body = r.json()
    assert set(body) == {"error"}, body
    err: dict[str, Any] = body["error"]
    assert {"message", "type", "code"} <= set(err), err
    return err


def poll_items(admin: AdminClient, path: str, want: int) -> list[dict[str, Any]]:
    """The recorder writes in batches: poll `path` until `want` items show (10 s)."""
    import time

    deadline = time.monotonic() + 10
    while True:
        items: list[dict[str, Any]] = admin.get(path).json()["items"]
        if len(items) >= want or time.monotonic() > deadline:
            return items
        time.sleep(0.1)
