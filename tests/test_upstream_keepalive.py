"""The upstream HTTP client's keep-alive, over real sockets on asyncio and uvloop:
connection reuse, Connection: close, idle connections the server closed, the one
safe retry of a stale connection, and idle expiry (split from
test_upstream_client.py)."""

from __future__ import annotations

import asyncio

import pytest

import tiergate.providers.exchange as exchange_module
from tiergate.providers.base import UpstreamError
from tiergate.providers.client import HTTPClient
from tiergate.providers.http import UpstreamHTTP
from upstream_support import AUTH, LOOPS, RawServer, Req, Runner, ok, reply, runner_on, until


@pytest.fixture(params=list(LOOPS))
def run(request: pytest.FixtureRequest) -> Runner:
    return runner_on(request.param)


# ---- keep-alive: reuse, Connection: close, stale connections, idle expiry ----------------


def test_sequential_calls_reuse_one_connection(run: Runner) -> None:
    async def scenario() -> None:
        async with RawServer(ok) as srv:
            http = UpstreamHTTP()
            for _ in range(200):
                assert await http.post_json(srv.url, {"x": 1}, AUTH) == {"ok": True}
            assert srv.connections == 1 and [r.n for r in srv.requests][-1] == 200
            await http.close()

    run(scenario())


def test_connection_close_is_honoured(run: Runner) -> None:
    async def respond(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(reply(200, b"{}", "connection: close"))
        await asyncio.sleep(0.05)  # the client must not wait for the server to hang up
        return False

    async def scenario() -> None:
        async with RawServer(respond) as srv:
            http = UpstreamHTTP()
            for _ in range(3):
                assert await http.post_json(srv.url, {}, AUTH) == {}
                assert http.client.connections() == 0
            assert srv.connections == 3
            await http.close()

    run(scenario())


def test_idle_connection_closed_by_server_is_replaced(run: Runner) -> None:
    async def respond(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(reply())
        return False  # keep-alive advertised, then the server hangs up while idle

    async def scenario() -> None:
        async with RawServer(respond) as srv:
            http = UpstreamHTTP()
            await http.post_json(srv.url, {}, AUTH)
            await until(lambda: http.client.connections() == 0)
            await http.post_json(srv.url, {}, AUTH)
            assert srv.connections == 2
            await http.close()

    run(scenario())


def test_stale_connection_is_retried_once_on_a_fresh_one(run: Runner) -> None:
    async def respond(req: Req, w: asyncio.StreamWriter) -> bool:
        if req.n == 2:
            return False  # the race: our request met the server's idle close
        w.write(reply())
        return True

    async def scenario() -> None:
        async with RawServer(respond) as srv:
            http = UpstreamHTTP()
            await http.post_json(srv.url, {}, AUTH)
            assert await http.post_json(srv.url, {}, AUTH) == {"ok": True}
            assert [(r.conn, r.n) for r in srv.requests] == [(1, 1), (1, 2), (2, 1)]
            await http.close()

    run(scenario())


def test_no_retry_beyond_the_one_and_none_on_a_fresh_connection(run: Runner) -> None:
    async def respond(req: Req, w: asyncio.StreamWriter) -> bool:
        if (req.conn, req.n) == (1, 1):
            w.write(reply())
            return True
        return False

    async def scenario() -> None:
        async with RawServer(respond) as srv:
            http = UpstreamHTTP()
            await http.post_json(srv.url, {}, AUTH)
            with pytest.raises(UpstreamError) as e:  # stale, then the fresh one fails too
                await http.post_json(srv.url, {}, AUTH)
            assert e.value.kind == "connect"
            assert [(r.conn, r.n) for r in srv.requests] == [(1, 1), (1, 2), (2, 1)]
            with pytest.raises(UpstreamError) as e:  # a fresh connection is never retried
                await http.post_json(srv.url, {}, AUTH)
            assert e.value.kind == "connect" and len(srv.requests) == 4
            await http.close()

    run(scenario())


def test_late_loss_on_a_reused_connection_is_not_resent(
    run: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exchange_module, "_STALE_WINDOW", 0.1)

    async def respond(req: Req, w: asyncio.StreamWriter) -> bool:
        if req.n == 2:
            await asyncio.sleep(0.3)  # worked on it, then died: resending could bill twice
            return False
        w.write(reply())
        return True

    async def scenario() -> None:
        async with RawServer(respond) as srv:
            http = UpstreamHTTP()
            await http.post_json(srv.url, {}, AUTH)
            with pytest.raises(UpstreamError) as e:
                await http.post_json(srv.url, {}, AUTH)
            assert e.value.kind == "connect" and len(srv.requests) == 2
            await http.close()

    run(scenario())


def test_unsolicited_bytes_drop_an_idle_connection(run: Runner) -> None:
    async def respond(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(reply())
        if req.conn == 1:
            await asyncio.sleep(0.05)
            w.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
        return True

    async def scenario() -> None:
        async with RawServer(respond) as srv:
            http = UpstreamHTTP()
            await http.post_json(srv.url, {}, AUTH)
            await until(lambda: http.client.connections() == 0)
            assert await http.post_json(srv.url, {}, AUTH) == {"ok": True}
            assert srv.connections == 2
            await http.close()

    run(scenario())


def test_idle_connections_expire_and_close_closes_all(run: Runner) -> None:
    async def scenario() -> None:
        async with RawServer(ok) as srv:
            client = HTTPClient(idle_timeout=0.2)
            resp = await client.post(srv.url, b"{}", AUTH)
            assert await resp.read() == b'{"ok": true}' and client.connections() == 1
            await until(lambda: srv.ended == 1)  # the client hung up on its own
            assert client.connections() == 0

            http = UpstreamHTTP()
            await asyncio.gather(*(http.post_json(srv.url, {}, AUTH) for _ in range(3)))
            assert http.client.connections() == 3
            await http.close()
            await until(lambda: srv.ended == 4)
            assert await http.post_json(srv.url, {}, AUTH) == {"ok": True}  # usable again
            await http.close()

    run(scenario())
