"""Keys a 401/403 disabled are probed in the background with doubling back-off and
re-enabled when they answer (issue #16); their health is in /metrics."""

from __future__ import annotations

import time
from typing import Any

import httpx

from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.core.upstream import Target
from tiergate.routing.distributor import Distributor
from tiergate.sim.app import create_sim_app


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _distributor(**server: Any) -> tuple[Distributor, Clock]:
    cfg = parse_config(gateway_config("http://127.0.0.1:9", server=server))
    clock = Clock()
    return Distributor.from_config(cfg, clock=clock), clock


def test_back_off_doubles_up_to_the_cap_and_an_answer_re_enables() -> None:
    d, clock = _distributor(key_probe_seconds=10, key_probe_max_seconds=35)
    an = d.channel("an")
    assert an is not None
    target = Target("anthropic/claude-sonnet-4-5", an, 0)
    d.report_failure(target, disable_key=True, retry_after=None, status=401)
    assert not d.is_live("anthropic/claude-sonnet-4-5")
    waits = []
    for _ in range(4):
        assert d.due_probes() == []
        waits.append(an.keys[0].probe_at - clock.now)
        clock.now = an.keys[0].probe_at
        (due,) = d.due_probes()
        d.probe_failed(due, refused=True)
    assert waits == [10, 20, 35, 35]
    clock.now = an.keys[0].probe_at
    d.probe_failed(d.due_probes()[0], refused=False)  # a 5xx says nothing: same wait
    assert an.keys[0].probe_at - clock.now == 35
    clock.now = an.keys[0].probe_at
    d.probe_answered(d.due_probes()[0])
    assert d.is_live("anthropic/claude-sonnet-4-5") and d.due_probes() == []
    assert ("an", 0, "ok") in d.key_health()


def test_operator_disabled_keys_and_probing_off_are_never_probed() -> None:
    d, clock = _distributor(key_probe_seconds=0)
    oa = d.channel("oa")
    assert oa is not None
    d.report_failure(Target("openai/gpt-5-mini", oa, 1), disable_key=True, retry_after=None)
    clock.now += 10_000
    assert d.due_probes() == []
    raw = gateway_config("http://127.0.0.1:9")
    raw["channels"][0]["disabled_keys"] = [2]
    d2 = Distributor.from_config(parse_config(raw), clock=clock)
    clock.now += 10_000
    assert d2.due_probes() == []
    assert ("oa", 2, "disabled") in d2.key_health()


def _metric(url: str, line: str) -> bool:
    return line in httpx.get(f"{url}/metrics").text


def _probes(url: str, result: str) -> float:
    """The probe counter (process-wide, so tests compare differences)."""
    prefix = f'tiergate_upstream_key_probes_total{{channel="an",result="{result}"}} '
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix) :])
    return 0.0


def test_a_key_that_answers_again_comes_back_without_an_operator() -> None:
    with ServerThread(create_sim_app()) as sim:
        server = {"key_probe_seconds": 0.3, "max_attempts": 3}
        cfg = parse_config(gateway_config(sim.url, server=server))
        with ServerThread(create_app(cfg)) as gw:
            # the only Anthropic key: refused by the request and by the first two probes
            httpx.post(
                f"{sim.url}/_sim/faults",
                json={"kind": "status", "status": 401, "api_key": "ak-a", "count": 3},
            )
            body = {
                "model": "anthropic/claude-sonnet-4-5",
                "messages": [{"role": "user", "content": "hi"}],
            }
            headers = {"authorization": f"Bearer {TOKEN}"}
            url = f"{gw.url}/v1/chat/completions"
            refused, answered = _probes(gw.url, "refused"), _probes(gw.url, "answered")
            assert httpx.post(url, json=body, headers=headers).status_code == 502
            assert httpx.post(url, json=body, headers=headers).status_code == 503
            auth_failed = (
                'tiergate_upstream_key_state{channel="an",key="0",state="auth_failed"} 1.0'
            )
            assert _metric(gw.url, auth_failed)
            deadline = time.monotonic() + 10
            while httpx.post(url, json=body, headers=headers).status_code != 200:
                assert time.monotonic() < deadline, "the key was never re-enabled"
                time.sleep(0.2)
            assert _metric(
                gw.url, 'tiergate_upstream_key_state{channel="an",key="0",state="ok"} 1.0'
            )
            assert _probes(gw.url, "refused") - refused == 2
            assert _probes(gw.url, "answered") - answered == 1
        httpx.delete(f"{sim.url}/_sim/faults")
