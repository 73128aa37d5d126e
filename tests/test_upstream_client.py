"""The upstream HTTP client over real sockets, on asyncio and on uvloop.

Against the provider simulator (formats, pool reuse, injected faults) and
against small scripted asyncio servers for the edge cases the simulator cannot
produce: chunked and gzip bodies, Connection: close, idle connections the server
closed, stalls, cancellation mid-body, pool limits and concurrency.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import time
import zlib
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from servers import ServerThread, free_port
from tiergate.providers.base import UpstreamError
from tiergate.providers.client import ConnectTimeout, HTTPClient
from tiergate.providers.http import UpstreamHTTP
from tiergate.sim.app import create_sim_app
from tiergate.sim.settings import SimSettings
from upstream_support import (
    AUTH,
    CHUNKED_HEAD,
    LOOPS,
    OPENAI_BODY,
    PAD,
    RawServer,
    Req,
    Runner,
    chunk,
    drain,
    ok,
    reply,
    runner_on,
    stall,
    until,
)


@pytest.fixture(params=list(LOOPS))
def run(request: pytest.FixtureRequest) -> Runner:
    return runner_on(request.param)


# ---- the simulator ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app(SimSettings(timeout_fault_seconds=30))) as server:
        yield server


@pytest.fixture
def sim_url(sim: ServerThread) -> Iterator[str]:
    yield sim.url
    httpx.post(f"{sim.url}/_sim/reset")


def arm(sim_url: str, **fault: Any) -> None:
    r = httpx.post(f"{sim_url}/_sim/faults", json=fault)
    assert r.status_code == 200, r.text


SIM_CALLS = {
    "openai": ("/v1/chat/completions", OPENAI_BODY, AUTH),
    "anthropic": (
        "/v1/messages",
        {**OPENAI_BODY, "model": "claude-sonnet-4-5", "max_tokens": 50},
        {"x-api-key": "k1", "anthropic-version": "2023-06-01"},
    ),
    "gemini": (
        "/v1beta/models/gemini-2.5-flash:generateContent",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        {"x-goog-api-key": "k1"},
    ),
}


@pytest.mark.parametrize("fmt", list(SIM_CALLS))
def test_sim_formats_reuse_one_connection(run: Runner, sim_url: str, fmt: str) -> None:
    path, body, headers = SIM_CALLS[fmt]

    async def scenario() -> None:
        http = UpstreamHTTP()
        for _ in range(30):
            out = await http.post_json(sim_url + path, body, headers)
            assert "usage" in out or "usageMetadata" in out
        stream_path = path.replace(":generateContent", ":streamGenerateContent?alt=sse")
        it = await http.post_stream(sim_url + stream_path, {**body, "stream": True}, headers)
        chunks = await drain(it)
        assert b"data:" in b"".join(chunks)
        assert http.client.connections() == 1
        await http.close()

    run(scenario())


def test_sim_status_faults_carry_status_retry_after_and_message(run: Runner, sim_url: str) -> None:
    url = sim_url + "/v1/chat/completions"

    async def scenario() -> None:
        http = UpstreamHTTP()
        for stream in (False, True):
            arm(sim_url, kind="status", status=429, message="slow down please")
            with pytest.raises(UpstreamError) as e:
                if stream:
                    await http.post_stream(url, {**OPENAI_BODY, "stream": True}, AUTH)
                else:
                    await http.post_json(url, OPENAI_BODY, AUTH)
            err = e.value
            assert (err.kind, err.status, err.retry_after) == ("status", 429, 1.0)
            assert "slow down please" in err.message and err.retryable
        arm(sim_url, kind="status", status=500)
        with pytest.raises(UpstreamError) as e:
            await http.post_json(url, OPENAI_BODY, AUTH)
        assert (e.value.kind, e.value.status, e.value.retry_after) == ("status", 500, None)
        assert (await http.post_json(url, OPENAI_BODY, AUTH))["choices"]
        assert http.client.connections() == 1  # error bodies were read: the connection lived on
        await http.close()

    run(scenario())


def test_sim_malformed_disconnect_and_timeout_faults(run: Runner, sim_url: str) -> None:
    url = sim_url + "/v1/chat/completions"
    stream_body = {**OPENAI_BODY, "stream": True}

    async def kind_of(call: Awaitable[Any]) -> str:
        try:
            await call
        except UpstreamError as err:
            return err.kind
        return "ok"

    async def scenario() -> None:
        http = UpstreamHTTP(read_timeout=0.5)
        arm(sim_url, kind="malformed")
        assert await kind_of(http.post_json(url, OPENAI_BODY, AUTH)) == "malformed"
        arm(sim_url, kind="disconnect")
        assert await kind_of(http.post_json(url, OPENAI_BODY, AUTH)) == "connect"
        arm(sim_url, kind="timeout")
        assert await kind_of(http.post_json(url, OPENAI_BODY, AUTH)) == "timeout"
        arm(sim_url, kind="timeout")
        assert await kind_of(http.post_stream(url, stream_body, AUTH)) == "timeout"

        arm(sim_url, kind="disconnect", after_chunks=2)
        got: list[bytes] = []
        with pytest.raises(UpstreamError) as e:
            async for c in await http.post_stream(url, stream_body, AUTH):
                got.append(c)
        assert e.value.kind == "stream_cut" and b"data:" in b"".join(got)
        assert (await http.post_json(url, OPENAI_BODY, AUTH))["choices"]
        await http.close()

    run(scenario())


# ---- bodies: chunked, gzip, deflate, close-delimited, 1xx ---------------------------------


def test_request_shape_and_header_defaults(run: Runner) -> None:
    async def scenario() -> None:
        async with RawServer(ok) as srv:
            http = UpstreamHTTP()
            await http.post_json(srv.url, {"a": 1}, {"x-api-key": "k", "Content-Type": "app/x"})
            h = srv.requests[0].headers
            assert h["host"] == srv.url.split("/")[2]
            assert h["content-type"] == "app/x" and h["x-api-key"] == "k"
            assert h["content-length"] == str(len(srv.requests[0].body))
            assert "gzip" in h["accept-encoding"]
            assert orjson.loads(srv.requests[0].body) == {"a": 1}
            with pytest.raises(UpstreamError) as e:
                await http.post_json(srv.url, {}, {"x-evil": "a\r\nhost: elsewhere"})
            assert e.value.kind == "connect" and len(srv.requests) == 1
            await http.close()

    run(scenario())


def test_a_body_in_pieces_is_sent_whole_with_its_length(run: Runner) -> None:
    """The encode memo hands the client pieces (bytes and views) for one vectored
    write: the server reads the joined bytes under the summed content-length,
    over one keep-alive connection, on both loops."""

    async def scenario() -> None:
        async with RawServer(ok) as srv:
            client = HTTPClient()
            history = b'{"messages":[' + b'{"role":"user","content":"x"},' * 2000
            pieces = [history[:7], memoryview(history)[7:], b'{"role":"user"}]}']
            for _ in range(2):
                assert await (await client.post(srv.url, pieces, AUTH)).read() == b'{"ok": true}'
            want = b"".join(pieces)
            assert [r.body for r in srv.requests] == [want, want]
            assert srv.requests[0].headers["content-length"] == str(len(want))
            assert srv.connections == 1
            await client.close()

    run(scenario())


def test_chunked_response_streams_chunks_as_they_arrive(run: Runner) -> None:
    async def scenario() -> None:
        release = asyncio.Event()

        async def respond(req: Req, w: asyncio.StreamWriter) -> bool:
            w.write(CHUNKED_HEAD + b"\r\n" + chunk(b"data: one\n\n"))
            await release.wait()
            w.write(chunk(b"data: two\n\n") + b"0\r\n\r\n")
            return True

        async with RawServer(respond) as srv:
            http = UpstreamHTTP()
            it = await http.post_stream(srv.url, {}, AUTH)
            assert await it.__anext__() == b"data: one\n\n"  # before the server sent the rest
            release.set()
            assert await drain(it) == [b"data: two\n\n"]
            it = await http.post_stream(srv.url, {}, AUTH)
            assert b"".join(await drain(it)) == b"data: one\n\ndata: two\n\n"
            assert srv.connections == 1
            await http.close()

    run(scenario())


def test_chunked_json_body_is_joined(run: Runner) -> None:
    async def respond(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        for part in (b'{"a": ', b'"xyz"', b', "b": 2}'):
            w.write(chunk(part))
            await w.drain()
            await asyncio.sleep(0.01)
        w.write(b"0\r\n\r\n")
        return True

    async def scenario() -> None:
        async with RawServer(respond) as srv:
            http = UpstreamHTTP()
            for _ in range(3):
                assert await http.post_json(srv.url, {}, AUTH) == {"a": "xyz", "b": 2}
            assert srv.connections == 1
            await http.close()

    run(scenario())


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
def test_compressed_json_body_is_decoded(run: Runner, encoding: str) -> None:
    doc = {"choices": [{"text": "x" * 5000}]}
    wbits = {"gzip": 31, "deflate": 15, "raw-deflate": -15}[encoding]
    z = zlib.compressobj(wbits=wbits)
    packed = z.compress(orjson.dumps(doc)) + z.flush()
    name = "gzip" if encoding == "gzip" else "deflate"

    async def respond(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(reply(200, packed, f"content-encoding: {name}"))
        return True

    async def scenario() -> None:
        async with RawServer(respond) as srv:
            http = UpstreamHTTP()
            assert await http.post_json(srv.url, {}, AUTH) == doc
            assert await http.post_json(srv.url, {}, AUTH) == doc
            assert srv.connections == 1
            await http.close()

    run(scenario())


def test_gzip_stream_is_decoded_chunk_by_chunk(run: Runner) -> None:
    async def scenario() -> None:
        release = asyncio.Event()

        async def respond(req: Req, w: asyncio.StreamWriter) -> bool:
            z = zlib.compressobj(wbits=31)
            w.write(CHUNKED_HEAD + b"content-encoding: gzip\r\n\r\n")
            w.write(chunk(z.compress(b"data: one\n\n") + z.flush(zlib.Z_SYNC_FLUSH)))
            await release.wait()
            w.write(chunk(z.compress(b"data: two\n\n") + z.flush()) + b"0\r\n\r\n")
            return True

        async with RawServer(respond) as srv:
            http = UpstreamHTTP()
            it = await http.post_stream(srv.url, {}, AUTH)
            assert await it.__anext__() == b"data: one\n\n"
            release.set()
            assert b"".join(await drain(it)) == b"data: two\n\n"
            await http.close()

    run(scenario())


def test_corrupt_gzip_is_a_connect_error_and_drops_the_connection(run: Runner) -> None:
    async def respond(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(reply(200, b"not gzip at all", "content-encoding: gzip"))
        return True

    async def scenario() -> None:
        async with RawServer(respond) as srv:
            http = UpstreamHTTP()
            with pytest.raises(UpstreamError) as e:
                await http.post_json(srv.url, {}, AUTH)
            assert e.value.kind == "connect" and http.client.connections() == 0
            await http.close()

    run(scenario())


def test_close_delimited_body_and_informational_head(run: Runner) -> None:
    async def respond(req: Req, w: asyncio.StreamWriter) -> bool:
        if req.conn == 1:
            w.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + b'{"until": "eof"}')
            return False
        w.write(b"HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n" + reply(200, b'{"after": 103}'))
        return True

    async def scenario() -> None:
        async with RawServer(respond) as srv:
            http = UpstreamHTTP()
            assert await http.post_json(srv.url, {}, AUTH) == {"until": "eof"}
            assert await http.post_json(srv.url, {}, AUTH) == {"after": 103}
            await http.close()

    run(scenario())


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for localhost (openssl CLI)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    d = tmp_path_factory.mktemp("tls")
    crt, key = d / "crt.pem", d / "key.pem"
    argv = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    argv += ["-keyout", str(key), "-out", str(crt), "-subj", "/CN=localhost"]
    argv += ["-addext", "subjectAltName=DNS:localhost"]
    subprocess.run(argv, check=True, capture_output=True)
    return crt, key


def test_https_verifies_the_certificate_and_sends_sni(run: Runner, cert: tuple[Path, Path]) -> None:
    crt, key = cert
    seen: list[str | None] = []
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(crt, key)

    def on_sni(sock: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
        seen.append(name)

    server_ctx.sni_callback = on_sni

    async def scenario() -> None:
        async with RawServer(ok, tls=server_ctx) as srv:
            trusting = ssl.create_default_context(cafile=str(crt))
            client = HTTPClient(ssl_context=trusting)
            for _ in range(3):
                assert await (await client.post(srv.url, b"{}", AUTH)).read() == b'{"ok": true}'
            pieces = [b'{"a":', memoryview(b"[1,2]")[:3], b"]}"]  # TLS writes pieces too
            assert await (await client.post(srv.url, pieces, AUTH)).read() == b'{"ok": true}'
            assert srv.requests[-1].body == b'{"a":[1,]}'
            assert seen == ["localhost"] and srv.connections == 1
            await client.close()
            http = UpstreamHTTP()  # the system's CAs do not know this certificate
            with pytest.raises(UpstreamError) as e:
                await http.post_json(srv.url, {}, AUTH)
            assert e.value.kind == "connect"
            await http.close()

    run(scenario())


# ---- failures: refused, timeouts, status errors ------------------------------------------


def test_connection_refused_is_a_connect_error(run: Runner) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1/chat/completions"

    async def scenario() -> None:
        http = UpstreamHTTP()
        for call in (http.post_json, http.post_stream):
            with pytest.raises(UpstreamError) as e:
                await call(url, {}, AUTH)
            assert e.value.kind == "connect" and e.value.status == 0 and e.value.retryable
        await http.close()

    run(scenario())


def test_read_timeout_is_between_bytes(run: Runner) -> None:
    async def trickle(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        for part in (b"[1", b",2", b",3", b",4", b",5", b"]"):
            w.write(chunk(part))
            await asyncio.sleep(0.1)
        w.write(b"0\r\n\r\n")
        return True

    async def scenario() -> None:
        async with RawServer(stall) as srv:
            http = UpstreamHTTP(read_timeout=0.3)
            t0 = time.monotonic()
            with pytest.raises(UpstreamError) as e:
                await http.post_json(srv.url, {}, AUTH)
            assert e.value.kind == "timeout" and 0.25 < time.monotonic() - t0 < 2
            assert http.client.connections() == 0
            await http.close()
        async with RawServer(trickle) as srv:  # 0.6 s in all, never 0.3 s silent
            http = UpstreamHTTP(read_timeout=0.3)
            with pytest.raises(UpstreamError) as e:
                await http.post_json(srv.url, {}, AUTH)
            assert e.value.kind == "malformed"  # a JSON list: it arrived whole
            await http.close()

    run(scenario())


def test_stall_and_cut_after_the_first_chunk(run: Runner) -> None:
    async def respond(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(CHUNKED_HEAD + b"\r\n" + chunk(b"data: one\n\n"))
        if req.conn == 1:
            await asyncio.sleep(30)
        return False

    async def scenario() -> None:
        async with RawServer(respond) as srv:
            http = UpstreamHTTP(read_timeout=0.3)
            for kind in ("timeout", "stream_cut"):
                it = await http.post_stream(srv.url, {}, AUTH)
                assert await it.__anext__() == b"data: one\n\n"
                with pytest.raises(UpstreamError) as e:
                    await it.__anext__()
                assert e.value.kind == kind
            assert http.client.connections() == 0
            await http.close()

    run(scenario())


def test_status_error_reads_provider_json_and_keeps_the_connection(run: Runner) -> None:
    async def respond(req: Req, w: asyncio.StreamWriter) -> bool:
        if req.n == 1:
            w.write(reply(429, b'{"error": {"message": "slow down"}}', "retry-after: 7"))
        elif req.n == 2:
            w.write(reply(503, b"<html>busy</html>", "retry-after: 9999"))
        else:
            w.write(reply(400, b'{"error": {"message": "bad"}}'))
        return True

    async def scenario() -> None:
        async with RawServer(respond) as srv:
            http = UpstreamHTTP()
            errs = []
            for call in (http.post_json, http.post_json, http.post_stream):
                with pytest.raises(UpstreamError) as e:
                    await call(srv.url, {}, AUTH)
                errs.append(e.value)
            assert errs[0] == UpstreamError("status", 429, "upstream: slow down", 7.0)
            assert errs[1] == UpstreamError(
                "status", 503, "upstream returned HTTP 503", 300.0, provider_body=False
            )
            assert errs[2] == UpstreamError("status", 400, "upstream: bad", None)
            assert not errs[2].retryable and srv.connections == 1
            await http.close()

    run(scenario())


# ---- cancellation, limits, concurrency ---------------------------------------------------


def test_cancel_mid_body_closes_the_connection(run: Runner) -> None:
    async def scenario() -> None:
        sent = asyncio.Event()

        async def respond(req: Req, w: asyncio.StreamWriter) -> bool:
            if req.conn == 1:
                w.write(b'HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n{"partial')
                sent.set()
                await asyncio.sleep(30)
            w.write(reply())
            return True

        async with RawServer(respond) as srv:
            http = UpstreamHTTP()
            task = asyncio.create_task(http.post_json(srv.url, {}, AUTH))
            await sent.wait()
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert http.client.connections() == 0
            assert await http.post_json(srv.url, {}, AUTH) == {"ok": True}
            assert srv.connections == 2
            await http.close()

    run(scenario())


@pytest.mark.parametrize("how", ["aclose", "cancel"])
def test_stream_consumer_leaving_closes_the_connection(run: Runner, how: str) -> None:
    async def respond(req: Req, w: asyncio.StreamWriter) -> bool:
        w.write(CHUNKED_HEAD + b"\r\n" + chunk(b"data: one\n\n"))
        await asyncio.sleep(30)
        return False

    async def scenario() -> None:
        async with RawServer(respond) as srv:
            http = UpstreamHTTP()
            it = await http.post_stream(srv.url, {}, AUTH)
            assert await it.__anext__() == b"data: one\n\n"
            if how == "aclose":
                await it.aclose()  # type: ignore[attr-defined]
            else:
                task = asyncio.create_task(it.__anext__())
                await asyncio.sleep(0.05)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            assert http.client.connections() == 0
            await http.close()

    run(scenario())


def test_pool_limit_waits_for_a_free_connection(run: Runner) -> None:
    async def slow(req: Req, w: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.02)
        w.write(reply(200, req.body))
        return True

    async def scenario() -> None:
        async with RawServer(slow) as srv:
            client = HTTPClient(limit_per_host=2)

            async def one(i: int) -> bytes:
                return await (await client.post(srv.url, b"%d" % i, AUTH)).read()

            assert await asyncio.gather(*(one(i) for i in range(10))) == [
                b"%d" % i for i in range(10)
            ]
            assert srv.connections == 2
            await client.close()
        async with RawServer(stall) as srv:
            client = HTTPClient(limit_per_host=1, connect_timeout=0.2)
            busy = asyncio.create_task(client.post(srv.url, b"{}", AUTH))
            await until(lambda: srv.requests != [])
            with pytest.raises(ConnectTimeout):
                await client.post(srv.url, b"{}", AUTH)
            busy.cancel()
            await client.close()

    run(scenario())


def test_concurrent_calls_each_get_their_own_body(run: Runner) -> None:
    async def echo(req: Req, w: asyncio.StreamWriter) -> bool:
        i = orjson.loads(req.body)["i"]
        await asyncio.sleep((i * 7 % 10) / 1000)
        w.write(reply(200, orjson.dumps({"i": i})))
        return True

    async def scenario() -> None:
        async with RawServer(echo) as srv:
            http = UpstreamHTTP()
            for _ in range(2):
                calls = (http.post_json(srv.url, {"i": i, "pad": PAD}, AUTH) for i in range(100))
                out = await asyncio.gather(*calls)
                assert [o["i"] for o in out] == list(range(100))
            assert srv.connections <= 100 and http.client.connections() == srv.connections
            await http.close()

    run(scenario())
