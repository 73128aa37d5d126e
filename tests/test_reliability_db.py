"""Nothing lost: usage rows survive a database outage (spooled on disk, written
when it returns), SIGTERM drains in-flight streams and flushes, and a kill -9
loses at most the documented flush window."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import yaml

from servers import TOKEN, ServerThread, free_port, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.sim.app import SimSettings, create_sim_app

BODY = {"model": "openai/gpt-5-mini", "messages": [{"role": "user", "content": "hi [[sim:text]]"}]}
AUTH = {"authorization": f"Bearer {TOKEN}"}


class TCPProxy:
    """A loopback TCP forwarder the test can cut and restore (the 'database outage')."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.port = free_port()
        self.target = target_host, target_port
        self.loop = asyncio.new_event_loop()
        self.server: asyncio.base_events.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    async def _pipe(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while data := await r.read(65536):
                w.write(data)
                await w.drain()
        with contextlib.suppress(Exception):
            w.close()

    async def _handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        ur, uw = await asyncio.open_connection(*self.target)
        self.writers |= {w, uw}
        await asyncio.gather(self._pipe(r, uw), self._pipe(ur, w))

    async def _up(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    async def _down(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None
        for w in self.writers:
            w.transport.abort()
        self.writers.clear()

    def up(self) -> None:
        asyncio.run_coroutine_threadsafe(self._up(), self.loop).result(5)

    def down(self) -> None:
        asyncio.run_coroutine_threadsafe(self._down(), self.loop).result(5)


def _pg_url(postgres_url: str, db: str, port: int | None = None) -> str:
    """The test server's URL (user, password, host, query kept) for database `db`,
    through loopback `port` when given: the proxy, whatever port the server is on."""
    parts = urlsplit(postgres_url)
    netloc = parts.netloc
    if port is not None:
        netloc = f"{netloc.rpartition('@')[0]}@127.0.0.1:{port}".lstrip("@")
    return urlunsplit(parts._replace(netloc=netloc, path=f"/{db}"))


def _pg_admin(postgres_url: str, sql: str) -> None:
    async def run() -> None:
        import asyncpg

        conn = await asyncpg.connect(postgres_url)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


def _pg_count(url: str) -> int:
    async def run() -> int:
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            return int(await conn.fetchval("SELECT count(*) FROM usage"))
        finally:
            await conn.close()

    return asyncio.run(run())


def _wait_for(pred: object, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_database_outage_spools_rows_and_writes_them_back(
    postgres_url: str, tmp_path: Path
) -> None:
    db = f"tg_{uuid.uuid4().hex[:12]}"
    _pg_admin(postgres_url, f"CREATE DATABASE {db}")
    server = urlsplit(postgres_url)
    proxy = TCPProxy(server.hostname or "127.0.0.1", server.port or 5432)
    proxy.up()
    url = _pg_url(postgres_url, db, port=proxy.port)
    direct = _pg_url(postgres_url, db)
    try:
        with ServerThread(create_sim_app()) as sim:
            cfg = parse_config(gateway_config(sim.url, database={"url": url}))
            app = create_app(cfg, spool_path=str(tmp_path / "spool.jsonl"))
            with ServerThread(app) as gw, httpx.Client(headers=AUTH, timeout=10) as c:
                for _ in range(5):
                    assert c.post(f"{gw.url}/v1/chat/completions", json=BODY).status_code == 200
                assert _wait_for(lambda: _pg_count(direct) == 5)
                proxy.down()
                for _ in range(10):  # served while the database is unreachable
                    assert c.post(f"{gw.url}/v1/chat/completions", json=BODY).status_code == 200
                assert _wait_for(lambda: (tmp_path / "spool.jsonl").exists())
                assert _pg_count(direct) == 5
                proxy.up()
                assert _wait_for(lambda: _pg_count(direct) == 15), _pg_count(direct)
                assert not (tmp_path / "spool.jsonl").exists()
    finally:
        proxy.down()
        _pg_admin(postgres_url, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def _sqlite_count(path: Path) -> int:
    if not path.exists():
        return 0
    with sqlite3.connect(path) as conn:
        try:
            return int(conn.execute("SELECT count(*) FROM usage").fetchone()[0])
        except sqlite3.OperationalError:
            return 0


def _start_gateway(tmp_path: Path, sim_url: str) -> tuple[subprocess.Popen[bytes], str, Path]:
    db = tmp_path / "usage.db"
    cfg = gateway_config(sim_url, database={"url": f"sqlite:///{db}"})
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(cfg))
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tiergate",
            "serve",
            "--config",
            str(path),
            "--port",
            str(port),
            "--spool",
            str(tmp_path / "spool.jsonl"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )
    url = f"http://127.0.0.1:{port}"
    assert _wait_for(lambda: _healthy(url)), "gateway did not start"
    return proc, url, db


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=0.5).status_code == 200
    except httpx.HTTPError:
        return False


def test_sigterm_drains_a_stream_in_flight_then_flushes(tmp_path: Path) -> None:
    with ServerThread(create_sim_app(SimSettings(tokens_per_second=40))) as sim:
        proc, url, db = _start_gateway(tmp_path, sim.url)
        try:
            body = {
                **BODY,
                "stream": True,
                "messages": [{"role": "user", "content": "long [[sim:output=60]]"}],
            }
            chunks: list[bytes] = []
            with (
                httpx.Client(headers=AUTH, timeout=30) as c,
                c.stream("POST", f"{url}/v1/chat/completions", json=body) as r,
            ):
                for i, chunk in enumerate(r.iter_bytes()):
                    chunks.append(chunk)
                    if i == 0:
                        proc.send_signal(signal.SIGTERM)  # mid-stream
            data = b"".join(chunks)
            assert data.rstrip().endswith(b"data: [DONE]"), data[-200:]
            # uvicorn re-raises the captured SIGTERM after a graceful shutdown
            assert proc.wait(timeout=30) in (0, -signal.SIGTERM)
            assert _sqlite_count(db) == 1
        finally:
            if proc.poll() is None:
                proc.kill()


def test_kill_9_loses_at_most_the_flush_window(tmp_path: Path) -> None:
    with ServerThread(create_sim_app()) as sim:
        proc, url, db = _start_gateway(tmp_path, sim.url)
        try:
            with httpx.Client(headers=AUTH, timeout=10) as c:
                for _ in range(20):
                    assert c.post(f"{url}/v1/chat/completions", json=BODY).status_code == 200
            time.sleep(1.0)  # longer than the documented 0.5 s flush window
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            assert _sqlite_count(db) == 20
        finally:
            if proc.poll() is None:
                proc.kill()
