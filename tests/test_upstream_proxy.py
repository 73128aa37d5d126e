"""The upstream client behind a corporate network: HTTPS_PROXY / HTTP_PROXY /
NO_PROXY and extra CA bundles (providers/network.py), against a real forwarding
proxy and TLS server on loopback."""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path

import httpx
import pytest

from proxy_support import ForwardProxy, LocalCA, make_test_ca
from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config import ChannelConfig, ConfigError
from tiergate.config_load import parse_config
from tiergate.providers.base import UpstreamError
from tiergate.providers.http import UpstreamHTTP
from tiergate.providers.network import NoProxy, UpstreamNetwork, parse_proxy
from tiergate.sim.app import create_sim_app
from upstream_support import AUTH, LOOPS, RawServer, Req, Runner, ok, reply, runner_on


@pytest.fixture(params=list(LOOPS))
def run(request: pytest.FixtureRequest) -> Runner:
    return runner_on(request.param)


@pytest.fixture(scope="module")
def test_ca(tmp_path_factory: pytest.TempPathFactory) -> LocalCA:
    return make_test_ca(tmp_path_factory.mktemp("ca"))


def tls_server(ca: LocalCA) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(ca.cert, ca.key)
    return ctx


# ---- the rules, pure ----------------------------------------------------------------------


def test_no_proxy_follows_curls_rules() -> None:
    rules = NoProxy("example.com, .internal.corp,*.svc:8080, 10.0.0.0/8 ,::1")
    assert rules.bypass("example.com", 443) and rules.bypass("api.example.com", 443)
    assert not rules.bypass("notexample.com", 443)
    assert rules.bypass("a.internal.corp", 443) and rules.bypass("internal.corp", 80)
    assert rules.bypass("db.svc", 8080) and not rules.bypass("db.svc", 443)
    assert rules.bypass("10.2.3.4", 443) and not rules.bypass("11.2.3.4", 443)
    assert rules.bypass("[::1]", 443)
    assert NoProxy("*").bypass("anything", 1) and not NoProxy("").bypass("anything", 1)


def test_proxy_urls_and_the_environment() -> None:
    p = parse_proxy("http://user:p%40ss@proxy.corp:3128")
    assert (p.host, p.port) == ("proxy.corp", 3128)
    assert p.authorization == "Basic dXNlcjpwQHNz"  # base64("user:p@ss")
    assert parse_proxy("proxy.corp:8080").port == 8080
    with pytest.raises(ValueError, match="http://"):
        parse_proxy("socks5://proxy:1080")
    env = {"https_proxy": "http://p:1", "NO_PROXY": "localhost", "SSL_CERT_FILE": "/x.pem"}
    net = UpstreamNetwork.from_env(env)
    assert net.proxy_for("https", "api.openai.com", 443) == parse_proxy("http://p:1")
    assert net.proxy_for("https", "localhost", 443) is None
    assert net.proxy_for("http", "api.openai.com", 80) is None  # no HTTP_PROXY set
    assert net.ca_bundle == "/x.pem"


def test_a_channel_ca_bundle_must_be_readable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ca_bundle"):
        parse_config(
            {"channels": [{"name": "c", "type": "openai", "keys": ["k"], "ca_bundle": "/nope.pem"}]}
        )


# ---- over the wire --------------------------------------------------------------------------


def test_https_through_a_connect_tunnel_trusting_the_env_ca_bundle(
    run: Runner, test_ca: LocalCA
) -> None:
    async def scenario() -> None:
        async with RawServer(ok, tls=tls_server(test_ca)) as srv, ForwardProxy() as proxy:
            env = {"HTTPS_PROXY": proxy.url, "REQUESTS_CA_BUNDLE": str(test_ca.ca)}
            http = UpstreamHTTP(network=UpstreamNetwork.from_env(env))
            for _ in range(3):
                assert await http.post_json(srv.url, {}, AUTH) == {"ok": True}
            port = srv.url.split(":")[2].split("/")[0]
            # one tunnel, kept alive; TLS inside it, so the key never reaches the proxy
            assert proxy.log.request_lines == [f"CONNECT localhost:{port} HTTP/1.1"]
            assert srv.connections == 1 and srv.requests[-1].headers["authorization"] == "Bearer k1"
            await http.close()

            untrusting = UpstreamHTTP(network=UpstreamNetwork.from_env({"HTTPS_PROXY": proxy.url}))
            with pytest.raises(UpstreamError) as e:  # the system's CAs do not know the test CA
                await untrusting.post_json(srv.url, {}, AUTH)
            assert e.value.kind == "connect"
            await untrusting.close()

    run(scenario())


def test_a_channels_own_ca_bundle_trusts_only_its_origin(run: Runner, test_ca: LocalCA) -> None:
    async def scenario() -> None:
        async with RawServer(ok, tls=tls_server(test_ca)) as srv:
            base = srv.url.removesuffix("/chat/completions")
            channel = ChannelConfig(
                name="corp", type="openai", base_url=base, ca_bundle=str(test_ca.ca)
            )
            http = UpstreamHTTP(network=UpstreamNetwork.from_env({}, [channel]))
            assert await http.post_json(srv.url, {}, AUTH) == {"ok": True}
            await http.close()
            other = channel.model_copy(update={"base_url": "https://localhost:1/v1"})
            http = UpstreamHTTP(network=UpstreamNetwork.from_env({}, [other]))
            with pytest.raises(UpstreamError):
                await http.post_json(srv.url, {}, AUTH)
            await http.close()

    run(scenario())


def test_plain_http_goes_to_the_proxy_in_absolute_form_with_credentials(run: Runner) -> None:
    async def scenario() -> None:
        expected = "Basic " + "dTpw"  # base64("u:p")
        async with RawServer(ok) as srv, ForwardProxy(require_auth=expected) as proxy:
            proxied = proxy.url.replace("http://", "http://u:p@")
            http = UpstreamHTTP(network=UpstreamNetwork.from_env({"HTTP_PROXY": proxied}))
            assert await http.post_json(srv.url, {}, AUTH) == {"ok": True}
            assert proxy.log.request_lines == [f"POST {srv.url} HTTP/1.1"]
            assert proxy.log.authorizations == [expected]
            await http.close()

    run(scenario())


def test_a_plain_http_proxys_403_does_not_disable_the_key(run: Runner) -> None:
    """A forward proxy (or firewall, or CDN) answering 403 itself says nothing about
    the provider key: only the provider's own error JSON may disable a key."""

    async def forbidden(req: Req, w: asyncio.StreamWriter) -> bool:
        body = b'{"error": {"message": "Incorrect API key", "type": "invalid_request_error"}}'
        w.write(reply(403, body))
        return True

    async def scenario() -> None:
        async with RawServer(ok) as srv, ForwardProxy(refuse=403) as proxy:
            http = UpstreamHTTP(network=UpstreamNetwork.from_env({"HTTP_PROXY": proxy.url}))
            with pytest.raises(UpstreamError) as e:
                await http.post_json(srv.url, {}, AUTH)
            assert e.value.status == 403 and not e.value.disables_key
            assert e.value.retryable and e.value.cools_down
            assert "proxy or firewall" in e.value.message
            await http.close()
        async with RawServer(forbidden) as srv:  # the provider's own 403 still does
            http = UpstreamHTTP()
            with pytest.raises(UpstreamError) as e:
                await http.post_json(srv.url, {}, AUTH)
            assert e.value.status == 403 and e.value.disables_key
            await http.close()

    run(scenario())


def test_no_proxy_hosts_are_reached_directly(run: Runner) -> None:
    async def scenario() -> None:
        async with RawServer(ok) as srv, ForwardProxy() as proxy:
            env = {"HTTP_PROXY": proxy.url, "NO_PROXY": "example.com,127.0.0.1"}
            http = UpstreamHTTP(network=UpstreamNetwork.from_env(env))
            assert await http.post_json(srv.url, {}, AUTH) == {"ok": True}
            assert proxy.log.request_lines == [] and srv.connections == 1
            await http.close()

    run(scenario())


def test_a_proxy_refusing_the_tunnel_is_a_retryable_connect_failure(
    run: Runner, test_ca: LocalCA
) -> None:
    async def scenario() -> None:
        async with (
            RawServer(ok, tls=tls_server(test_ca)) as srv,
            ForwardProxy(require_auth="Basic nope") as proxy,
        ):
            env = {"HTTPS_PROXY": proxy.url, "REQUESTS_CA_BUNDLE": str(test_ca.ca)}
            http = UpstreamHTTP(network=UpstreamNetwork.from_env(env))
            with pytest.raises(UpstreamError) as e:
                await http.post_json(srv.url, {}, AUTH)
            assert e.value.kind == "connect" and e.value.retryable
            assert srv.connections == 0
            await http.close()

    run(scenario())


def test_the_gateway_reads_the_proxy_from_its_environment() -> None:
    """create_app's env (os.environ in `tiergate serve`) reaches the upstream client."""

    async def with_proxy() -> None:
        async with ForwardProxy() as proxy:
            with ServerThread(create_sim_app()) as sim:
                cfg = parse_config(gateway_config(sim.url))
                with ServerThread(create_app(cfg, env={"HTTP_PROXY": proxy.url})) as gw:
                    r = await asyncio.to_thread(
                        httpx.post,
                        f"{gw.url}/v1/chat/completions",
                        headers={"authorization": f"Bearer {TOKEN}"},
                        json={
                            "model": "openai/gpt-5-mini",
                            "messages": [{"role": "user", "content": "Hello"}],
                        },
                        timeout=10,
                    )
                    assert r.status_code == 200, r.text
            assert proxy.log.request_lines == [f"POST {sim.url}/v1/chat/completions HTTP/1.1"]

    asyncio.run(with_proxy())


def test_a_refused_proxy_is_named_in_the_log_and_the_attempts_are_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue #28: a proxy's 403 logged only `ConnectError`, the 502 said "after
    retries" after one attempt, and the access log line had `channel: null`."""
    raw = gateway_config("http://127.0.0.1:9", server={"max_attempts": 3})
    raw["channels"][0]["base_url"] = "https://api.openai.example/v1"  # only via the proxy
    raw["channels"][0]["keys"] = ["sk-only"]

    async def scenario() -> tuple[httpx.Response, str]:
        async with ForwardProxy(refuse=403) as proxy:
            proxy_url = proxy.url.replace("http://", "http://puser:ppass@")
            app = create_app(parse_config(raw), env={"HTTPS_PROXY": proxy_url})
            with ServerThread(app) as gw:
                r = await asyncio.to_thread(
                    httpx.post,
                    f"{gw.url}/v1/chat/completions",
                    headers={"authorization": f"Bearer {TOKEN}"},
                    json={
                        "model": "openai/gpt-5-mini",
                        "messages": [{"role": "user", "content": "x"}],
                    },
                    timeout=10,
                )
            return r, proxy.url.removeprefix("http://")

    caplog.set_level(logging.INFO)
    r, address = asyncio.run(scenario())
    assert r.status_code == 502
    message = r.json()["error"]["message"]
    assert "1 attempt" in message and "retries" not in message and "proxy" in message
    assert address not in r.text  # the proxy's address is the operator's, not the client's
    (failed,) = [rec for rec in caplog.records if rec.getMessage() == "upstream proxy failed"]
    assert failed.levelno == logging.WARNING
    assert (failed.proxy, failed.proxy_status) == (address, 403)  # type: ignore[attr-defined]
    assert "403" in failed.provider_message  # type: ignore[attr-defined]
    assert (failed.channel, failed.attempts) == ("oa", 1)  # type: ignore[attr-defined]
    logged = " ".join(str(v) for rec in caplog.records for v in vars(rec).values())
    assert "ppass" not in logged and "puser" not in logged
    (line,) = [rec for rec in caplog.records if rec.name == "tiergate.access"]
    assert (line.channel, line.key_index, line.status) == ("oa", 0, 502)  # type: ignore[attr-defined]
