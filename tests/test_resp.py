"""RespClient, the hot path's pipelined Redis client, against real Redis servers.

Tests that pause, stop, flush or reconfigure a server use a private
redis-server (servers.PrivateRedis), never the shared one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from uuid import uuid4

import pytest
import redis.asyncio as aioredis

import servers
from servers import PrivateRedis
from tiergate.state.base import Incr, StateUnavailable, Write
from tiergate.state.redis import RedisPyWire, RedisStore
from tiergate.state.resp import UNAVAILABLE_PREFIXES, ReplyError, RespClient, Script

ECHO = Script.of("return {KEYS[1], ARGV[1]}")


@pytest.fixture
def private() -> Iterator[PrivateRedis]:
    with servers.private_redis() as server:
        yield server


@pytest.fixture
async def admin(private: PrivateRedis) -> AsyncIterator[aioredis.Redis]:
    """redis-py on the private server: pauses, stats and config, independent of RespClient."""
    client = aioredis.Redis(port=private.port)
    yield client
    await client.aclose()


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[RespClient]:
    c = RespClient.from_url(redis_url)
    assert c is not None
    yield c
    await c.close()


def fast(url: str, **kw: float) -> RespClient:
    c = RespClient.from_url(url, **kw)
    assert c is not None
    return c


async def connections(admin: aioredis.Redis) -> int:
    return int((await admin.info("stats"))["total_connections_received"])


# ---- replies in order -----------------------------------------------------------------------


async def test_concurrent_calls_each_get_their_own_reply(client: RespClient) -> None:
    ns = f"resp:{uuid4().hex}:"
    n = 600
    await client.pipeline([("SET", f"{ns}{i}", f"v{i}", "PX", 60_000) for i in range(n)])
    singles = [client.call("GET", f"{ns}{i}") for i in range(n)]
    multis = [client.call("MGET", f"{ns}{i}", f"{ns}{i + 1}", f"{ns}none") for i in range(n - 1)]
    pipes = [client.pipeline([("GET", f"{ns}{i}"), ("STRLEN", f"{ns}{i}")]) for i in range(n)]
    got = await asyncio.gather(*singles, *multis, *pipes)
    assert got[:n] == [f"v{i}".encode() for i in range(n)]
    pairs = [[f"v{i}".encode(), f"v{i + 1}".encode(), None] for i in range(n - 1)]
    assert got[n : 2 * n - 1] == pairs
    assert got[2 * n - 1 :] == [[f"v{i}".encode(), len(f"v{i}")] for i in range(n)]
    await client.call("UNLINK", *[f"{ns}{i}" for i in range(n)])


async def test_one_connection_shared_by_concurrent_first_calls(
    private: PrivateRedis, admin: aioredis.Redis
) -> None:
    before = await connections(admin)
    c = fast(private.url)
    try:
        replies = await asyncio.gather(*(c.call("PING") for _ in range(200)))
        assert replies == [b"PONG"] * 200
        assert await connections(admin) - before == 1
    finally:
        await c.close()


# ---- error replies --------------------------------------------------------------------------


async def test_error_replies_raise_and_leave_the_stream_in_step(client: RespClient) -> None:
    key = f"resp:{uuid4().hex}"
    await client.call("SET", key, "not a number", "PX", 60_000)
    with pytest.raises(ReplyError, match="not an integer"):
        await client.call("INCR", key)
    with pytest.raises(ReplyError, match="unknown command"):
        await client.call("NO-SUCH-COMMAND")
    with pytest.raises(ReplyError, match="not an integer"):  # every reply read, then the error
        await client.pipeline([("GET", key), ("INCR", key), ("PING",)])
    assert await client.call("GET", key) == b"not a number"
    await client.call("DEL", key)


@pytest.mark.parametrize("prefix", UNAVAILABLE_PREFIXES)
async def test_cannot_serve_now_replies_are_state_unavailable(
    client: RespClient, prefix: str
) -> None:
    script = Script.of(f"return redis.error_reply('{prefix} simulated')")
    with pytest.raises(StateUnavailable, match=prefix):
        await client.evalsha(script, [], [])
    assert await client.call("PING") == b"PONG"


async def test_out_of_memory_is_unavailable_through_the_store(
    private: PrivateRedis, admin: aioredis.Redis
) -> None:
    store = RedisStore(private.url, key_prefix="oom:")
    try:
        await store.set("before", b"x")
        await admin.config_set("maxmemory", 1)
        with pytest.raises(StateUnavailable, match="OOM"):
            await store.set("k", b"v")
        with pytest.raises(StateUnavailable, match="OOM"):  # not ValueError: an outage
            await store.apply_batch([Write("k", b"v")], [Incr("n", 1.0)])
        with pytest.raises(StateUnavailable, match="OOM"):
            await store.incr("n")
        assert await store.get("before") == b"x"  # reads still served
        await admin.config_set("maxmemory", 0)
        await store.set("k", b"v")
    finally:
        await store.close()


# ---- timeouts, outages, reconnects ---------------------------------------------------------


async def test_no_reply_in_time_breaks_the_connection_and_the_next_call_reconnects(
    private: PrivateRedis, admin: aioredis.Redis
) -> None:
    c = fast(private.url, socket_timeout=0.2)
    try:
        await c.call("SET", "k", "v")
        before = await connections(admin)
        await admin.execute_command("CLIENT", "PAUSE", 700, "ALL")
        started = time.monotonic()
        calls = [c.call("GET", "k") for _ in range(20)]
        results = await asyncio.gather(*calls, return_exceptions=True)
        elapsed = time.monotonic() - started
        assert all(isinstance(r, StateUnavailable) for r in results), results
        assert 0.15 < elapsed < 0.5, elapsed
        await asyncio.sleep(0.7 - elapsed + 0.1)  # the pause is over
        assert await c.call("GET", "k") == b"v"
        assert await connections(admin) - before == 1
    finally:
        await c.close()


async def test_redis_stopped_fails_fast_and_restarted_works_again(private: PrivateRedis) -> None:
    store = RedisStore(private.url, key_prefix="outage:")
    try:
        await store.set("k", b"v")
        private.stop()
        for _ in range(3):
            started = time.monotonic()
            with pytest.raises(StateUnavailable):
                await store.get_many(["k"])
            assert time.monotonic() - started < 0.25  # refused, not a timeout
        assert await store.ping() is False
        private.start()  # same port, empty
        assert await store.get("k") is None
        await store.set("k", b"w")
        assert await store.incr("n", 2.0) == 2.0
        assert await store.get("k") == b"w"
    finally:
        await store.close()


async def test_calls_in_flight_fail_when_redis_dies(
    private: PrivateRedis, admin: aioredis.Redis
) -> None:
    c = fast(private.url, socket_timeout=5.0)
    try:
        await c.call("PING")
        await admin.execute_command("CLIENT", "PAUSE", 2000, "ALL")
        calls = [asyncio.ensure_future(c.call("INCRBYFLOAT", "n", 1)) for _ in range(5)]
        await asyncio.sleep(0.05)
        started = time.monotonic()
        private.stop(kill=True)
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(r, StateUnavailable) for r in results), results
        assert time.monotonic() - started < 1.0  # the loss, not the 5 s timeout
        private.start()
        assert await c.call("GET", "n") is None  # nothing re-sent to the new server
    finally:
        await c.close()


async def test_busy_script_is_unavailable(private: PrivateRedis, admin: aioredis.Redis) -> None:
    await admin.config_set("busy-reply-threshold", 50)
    spinner, c = fast(private.url, socket_timeout=5.0), fast(private.url)
    try:
        await c.call("PING")
        spin = asyncio.ensure_future(spinner.call("EVAL", "while true do end", 0))
        await asyncio.sleep(0.2)
        with pytest.raises(StateUnavailable, match="BUSY"):
            await c.call("GET", "k")
        await c.call("SCRIPT", "KILL")
        with pytest.raises(ReplyError):
            await spin
        assert await c.call("PING") == b"PONG"
    finally:
        await spinner.close()
        await c.close()


# ---- scripts --------------------------------------------------------------------------------


async def test_evalsha_survives_script_flush(private: PrivateRedis, admin: aioredis.Redis) -> None:
    c = fast(private.url)
    try:
        assert await c.evalsha(ECHO, ["a"], [1]) == [b"a", b"1"]
        await admin.script_flush()
        assert await c.evalsha(ECHO, ["b"], [2]) == [b"b", b"2"]  # NOSCRIPT -> EVAL
        assert await admin.script_exists(ECHO.sha) == [True]  # EVAL cached it again
        assert await c.evalsha(ECHO, ["c"], [3]) == [b"c", b"3"]
        stats = await admin.info("commandstats")
        assert stats["cmdstat_eval"]["calls"] == 2  # new server, then the flush: never again
        assert stats["cmdstat_evalsha"]["calls"] == 3
    finally:
        await c.close()


async def test_store_scripts_survive_a_restart(private: PrivateRedis) -> None:
    store = RedisStore(private.url, key_prefix="restart:")
    try:
        assert await store.incr("n", 1.0) == 1.0
        private.stop()
        private.start()  # empty script cache
        with pytest.raises(StateUnavailable):  # the first call finds the old connection dead
            await store.incr("n", 1.0)
        assert await store.incr("n", 1.0) == 1.0
        assert await store.apply_batch([Write("a", b"1")], [Incr("n", 1.0)])
        assert await store.compare_and_set("a", b"1", b"2")
        assert await store.get_many(["a", "n"]) == [b"2", b"2"]
    finally:
        await store.close()


# ---- cancellation ---------------------------------------------------------------------------


async def test_cancelled_calls_do_not_shift_later_replies(
    private: PrivateRedis, admin: aioredis.Redis
) -> None:
    c = fast(private.url, socket_timeout=5.0)
    try:
        await c.pipeline([("SET", f"k{i}", f"v{i}") for i in range(40)])
        await admin.execute_command("CLIENT", "PAUSE", 300, "ALL")
        tasks = [
            asyncio.ensure_future(
                c.call("GET", f"k{i}") if i % 3 else c.pipeline([("GET", f"k{i}"), ("PING",)])
            )
            for i in range(40)
        ]
        await asyncio.sleep(0.05)  # every command written, no reply yet
        for t in tasks[::2]:
            t.cancel()
        later = [asyncio.ensure_future(c.call("GET", f"k{i}")) for i in range(40)]
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for i, r in enumerate(results):
            if i % 2 == 0:
                assert isinstance(r, asyncio.CancelledError)
            else:
                assert r == (f"v{i}".encode() if i % 3 else [f"v{i}".encode(), b"PONG"])
        assert await asyncio.gather(*later) == [f"v{i}".encode() for i in range(40)]
        assert await c.call("GET", "k7") == b"v7"
    finally:
        await c.close()


async def test_a_cancelled_connect_does_not_cancel_it_for_others(private: PrivateRedis) -> None:
    c = fast(private.url)
    try:
        first = asyncio.ensure_future(c.call("PING"))
        second = asyncio.ensure_future(c.call("PING"))
        await asyncio.sleep(0)
        first.cancel()
        assert await second == b"PONG"
        with pytest.raises(asyncio.CancelledError):
            await first
    finally:
        await c.close()


async def test_a_stalled_loop_does_not_read_a_healthy_redis_as_down(redis_url: str) -> None:
    """CI saw this: under load the loop stalled past the 0.5 s connect deadline, the
    timer beat the finished connect, and budgets failed open on a healthy Redis."""
    c = fast(redis_url, connect_timeout=0.1)
    try:
        for attempt in range(3):  # the stall lands before, during and after the dial
            call = asyncio.ensure_future(c.call("PING"))
            for _ in range(attempt):
                await asyncio.sleep(0)
            time.sleep(0.4)  # the whole loop blocked, as a starved thread is
            assert await call == b"PONG"
            await c.close()
    finally:
        await c.close()


async def test_an_unanswered_connect_still_times_out() -> None:
    """The grace is for a late loop only: a listener that never accepts (a full
    backlog stands in for a black-holed host) still fails within the deadline."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        try:
            for _ in range(8):  # fill the accept queue so further SYNs go unanswered
                f = socket.socket()
                f.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    f.connect(("127.0.0.1", port))
                fillers.append(f)
            c = RespClient("127.0.0.1", port, connect_timeout=0.2)
            started = time.monotonic()
            with pytest.raises(StateUnavailable):
                await c.call("PING")
            assert time.monotonic() - started < 1.0
        finally:
            for f in fillers:
                f.close()


# ---- URLs -----------------------------------------------------------------------------------


async def test_url_password_user_and_db(private: PrivateRedis, admin: aioredis.Redis) -> None:
    await admin.execute_command("ACL", "SETUSER", "tg", "on", ">s3cret", "~*", "+@all")
    await admin.config_set("requirepass", "p@ss")
    port = private.port
    urls = [f"redis://:p%40ss@127.0.0.1:{port}/3", f"redis://tg:s3cret@127.0.0.1:{port}/3"]
    try:
        for i, url in enumerate(urls):
            c = fast(url)
            try:
                await c.call("SET", f"k{i}", "v")
            finally:
                await c.close()
        await admin.execute_command("AUTH", "p@ss")
        await admin.execute_command("SELECT", 3)
        assert await admin.mget(["k0", "k1"]) == [b"v", b"v"]
        bad = fast(f"redis://:wrong@127.0.0.1:{port}/0")
        with pytest.raises(StateUnavailable, match="WRONGPASS"):
            await bad.call("PING")
        await bad.close()
    finally:
        await admin.config_set("requirepass", "")


def test_other_url_schemes_stay_on_redis_py() -> None:
    assert RespClient.from_url("rediss://127.0.0.1:6380/0") is None
    assert RespClient.from_url("unix:///tmp/redis.sock?health_check_interval=5") is None
    sock = RespClient.from_url("unix://:p%40ss@/run/redis/redis%20a.sock?db=2")
    assert sock is not None and sock.unix_path == "/run/redis/redis a.sock"
    assert sock.where == "/run/redis/redis a.sock"
    assert sock._setup == [("AUTH", "p@ss"), ("SELECT", 2)]
    assert RespClient.from_url("redis://127.0.0.1:6379/0?health_check_interval=5") is None
    parsed = RespClient.from_url("redis://u:p%2Fw@example.com:7000/2")
    assert parsed is not None and (parsed.host, parsed.port) == ("example.com", 7000)


async def test_unix_socket_urls_take_the_fast_client(tmp_path: Path) -> None:
    """A Redis on the gateway's host, by its socket file: the store runs on RespClient
    (not redis-py), serves every hot-path call, fails fast when the server is down
    and comes back by itself when it restarts, as over TCP."""
    sock = str(tmp_path / "redis.sock")
    with servers.private_redis(unix_socket=sock) as server:
        store = RedisStore(f"unix://{sock}?db=1", key_prefix=f"ux:{uuid4().hex}:")
        assert isinstance(store._wire, RespClient) and store._wire.unix_path == sock
        try:
            await store.set_many([Write("a", b"1", 60)])
            assert await store.get_many(["a", "b"]) == [b"1", None]
            assert await store.apply_batch([Write("b", b"2")], [Incr("n", 2.5)], guard=("a", b"1"))
            assert await store.get_many(["b"]) == [b"2"]
            admin = aioredis.Redis(port=server.port, db=1)
            try:  # the same server and database over TCP: the writes are really there
                assert await admin.get(f"{store.prefix}b") == b"2"
                clients = await admin.client_list()
                assert any(c.get("laddr", "").startswith(sock) for c in clients)
            finally:
                await admin.aclose()
            server.stop()
            started = time.monotonic()
            with pytest.raises(StateUnavailable):
                await store.get_many(["a"])
            assert time.monotonic() - started < 2.0
            server.start()
            assert await store.get_many(["a", "b"]) == [None, None]  # no persistence
            assert await store.ping()
        finally:
            await store.close()


async def test_redis_py_fallback_keeps_the_same_contract(redis_url: str) -> None:
    store = RedisStore(redis_url + "?health_check_interval=0", key_prefix=f"fb:{uuid4().hex}:")
    assert isinstance(store._wire, RedisPyWire)
    try:
        await store.set_many([Write("a", b"1", 60), Write("b", b"2")])
        assert await store.get_many(["a", "b", "c"]) == [b"1", b"2", None]
        assert await store.incr("n", 1.5, 60) == 1.5
        assert await store.apply_batch([Write("a", b"3")], [Incr("n", 1.0)], guard=("a", b"1"))
        assert await store.compare_and_set("a", b"3", None)
        await store.set("x", b"not a number")
        with pytest.raises(ValueError):
            await store.incr("x")
        assert await store.ping()
    finally:
        await store.delete_prefix()
        await store.close()
