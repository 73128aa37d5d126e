"""Injected faults, pacing and the /_sim control endpoints, over real HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from servers import ServerThread
from tiergate.sim.app import create_sim_app
from tiergate.sim.settings import SimSettings

OPENAI_BODY = {"model": "gpt-5-mini", "messages": [{"role": "user", "content": "hi"}]}
ANTHROPIC_BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "hi"}],
}
GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app(SimSettings(timeout_fault_seconds=30))) as server:
        yield server


@pytest.fixture(autouse=True)
def _reset(sim: ServerThread) -> Iterator[None]:
    yield
    httpx.post(f"{sim.url}/_sim/reset")


def arm(sim: ServerThread, **fault: Any) -> None:
    r = httpx.post(f"{sim.url}/_sim/faults", json=fault)
    assert r.status_code == 200, r.text


def post(sim: ServerThread, fmt: str, stream: bool = False, key: str = "k1", **kw: Any) -> Any:
    if fmt == "openai":
        return httpx.post(
            f"{sim.url}/v1/chat/completions",
            json={**OPENAI_BODY, "stream": stream},
            headers={"authorization": f"Bearer {key}"},
            **kw,
        )
    if fmt == "anthropic":
        return httpx.post(
            f"{sim.url}/v1/messages",
            json={**ANTHROPIC_BODY, "stream": stream},
            headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
            **kw,
        )
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return httpx.post(
        f"{sim.url}/v1beta/models/gemini-2.5-flash:{method}",
        json=GEMINI_BODY,
        headers={"x-goog-api-key": key},
        **kw,
    )


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "gemini"])
def test_status_fault_in_each_format_for_count_requests(sim: ServerThread, fmt: str) -> None:
    arm(sim, kind="status", status=429, count=2)
    for _ in range(2):
        r = post(sim, fmt)
        assert r.status_code == 429 and r.headers["retry-after"] == "1"
        error = r.json()["error"]
        assert error["message"]
        if fmt == "anthropic":
            assert r.json()["type"] == "error" and error["type"] == "rate_limit_error"
        elif fmt == "gemini":
            assert error["status"] == "RESOURCE_EXHAUSTED" and error["code"] == 429
        else:
            assert error["code"] == "rate_limit_exceeded"
    assert post(sim, fmt).status_code == 200


def test_status_fault_matches_key_and_model_only(sim: ServerThread) -> None:
    arm(sim, kind="status", status=503, count=None, api_key="k2", model="gpt-5-mini", retry_after=7)
    assert post(sim, "openai", key="k1").status_code == 200
    assert post(sim, "anthropic", key="k2").status_code == 200
    for _ in range(3):
        r = post(sim, "openai", key="k2")
        assert r.status_code == 503 and r.headers["retry-after"] == "7"
    assert httpx.delete(f"{sim.url}/_sim/faults").json() == {"cleared": 1}
    assert post(sim, "openai", key="k2").status_code == 200


def test_sdk_sees_provider_errors(sim: ServerThread) -> None:
    arm(sim, kind="status", status=529)
    with pytest.raises(anthropic.APIStatusError) as err:
        anthropic.Anthropic(base_url=sim.url, api_key="k", max_retries=0).messages.create(
            **ANTHROPIC_BODY
        )
    assert err.value.status_code == 529
    arm(sim, kind="status", status=500)
    with pytest.raises(openai.InternalServerError):
        openai.OpenAI(base_url=f"{sim.url}/v1", api_key="k", max_retries=0).chat.completions.create(
            **OPENAI_BODY
        )


def test_timeout_stalls_past_the_client_timeout_and_frees_the_server(sim: ServerThread) -> None:
    arm(sim, kind="timeout", count=1)
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        post(sim, "openai", timeout=0.3)
    assert time.monotonic() - started < 5
    assert post(sim, "openai", timeout=5).status_code == 200
    stats = httpx.get(f"{sim.url}/_sim/stats").json()
    assert stats["totals"]["faults"] == 1 and stats["totals"]["requests"] == 1


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "gemini"])
def test_disconnect_mid_stream(sim: ServerThread, fmt: str) -> None:
    arm(sim, kind="disconnect", after_chunks=3)
    received: list[bytes] = []
    with pytest.raises(httpx.RemoteProtocolError), open_stream(sim, fmt) as r:
        assert r.status_code == 200
        for chunk in r.iter_bytes():
            received.append(chunk)
    data = b"".join(received)
    assert data.count(b"data: ") == 3
    assert b"[DONE]" not in data and b"message_stop" not in data


def open_stream(sim: ServerThread, fmt: str) -> Any:
    if fmt == "openai":
        return httpx.stream(
            "POST",
            f"{sim.url}/v1/chat/completions",
            json={**OPENAI_BODY, "stream": True},
            headers={"authorization": "Bearer k"},
        )
    if fmt == "anthropic":
        return httpx.stream(
            "POST",
            f"{sim.url}/v1/messages",
            json={**ANTHROPIC_BODY, "stream": True},
            headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
        )
    return httpx.stream(
        "POST",
        f"{sim.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        json=GEMINI_BODY,
        headers={"x-goog-api-key": "k"},
    )


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "gemini"])
def test_stream_error_ends_the_stream_with_the_providers_error_event(
    sim: ServerThread, fmt: str
) -> None:
    arm(sim, kind="stream_error", status=529 if fmt == "anthropic" else 503, after_chunks=2)
    with open_stream(sim, fmt) as r:
        assert r.status_code == 200
        text = r.read().decode()
    datas = [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data:")]
    assert len(datas) == 3
    error = json.loads(datas[-1])["error"]
    if fmt == "anthropic":
        assert "event: error" in text and error["type"] == "overloaded_error"
    else:
        assert error["message"]
    arm(sim, kind="stream_error", status=503)
    assert post(sim, fmt).status_code == 503  # not streaming: a plain error status


def test_disconnect_breaks_the_sdk_stream(sim: ServerThread) -> None:
    arm(sim, kind="disconnect", after_chunks=2)
    client = openai.OpenAI(base_url=f"{sim.url}/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.APIError):
        for _ in client.chat.completions.create(**OPENAI_BODY, stream=True):
            pass


def test_disconnect_without_streaming_cuts_the_body(sim: ServerThread) -> None:
    arm(sim, kind="disconnect")
    with pytest.raises(httpx.RemoteProtocolError):
        post(sim, "anthropic")


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "gemini"])
def test_malformed_body_and_stream(sim: ServerThread, fmt: str) -> None:
    arm(sim, kind="malformed", count=2)
    r = post(sim, fmt)
    assert r.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(r.text)
    r = post(sim, fmt, stream=True)
    assert r.status_code == 200
    datas = [
        line.removeprefix("data: ") for line in r.text.splitlines() if line.startswith("data: ")
    ]
    broken = 0
    for data in datas:
        try:
            json.loads(data)
        except json.JSONDecodeError:
            broken += data != "[DONE]"
    assert broken == 1


def test_pacing_latency_and_tokens_per_second() -> None:
    settings = SimSettings(latency_ms=150, tokens_per_second=200, default_output_tokens=40)
    with ServerThread(create_sim_app(settings)) as paced:
        started = time.monotonic()
        assert post(paced, "openai").status_code == 200
        assert time.monotonic() - started >= 0.15 + 0.2
        started = time.monotonic()
        with open_stream(paced, "openai") as r:
            arrivals = [time.monotonic() - started for _ in r.iter_lines()]
        assert arrivals[0] >= 0.14 and arrivals[-1] >= 0.15 + 0.19


def test_control_endpoints_validate_and_report(sim: ServerThread) -> None:
    assert httpx.post(f"{sim.url}/_sim/faults", json={"kind": "explode"}).status_code == 400
    assert (
        httpx.post(f"{sim.url}/_sim/faults", json={"kind": "status", "status": 200}).status_code
        == 400
    )
    assert httpx.post(f"{sim.url}/_sim/clock", json={"advance": "soon"}).status_code == 400
    arm(sim, kind="status", status=500, count=3)
    armed = httpx.get(f"{sim.url}/_sim/faults").json()["armed"]
    assert armed[0]["count"] == 3 and armed[0]["kind"] == "status"
    before = httpx.get(f"{sim.url}/_sim/clock").json()["offset"]
    after = httpx.post(f"{sim.url}/_sim/clock", json={"advance": 60}).json()["offset"]
    assert after == before + 60
    post(sim, "gemini")
    assert httpx.post(f"{sim.url}/_sim/reset").json() == {"status": "reset"}
    assert httpx.get(f"{sim.url}/_sim/faults").json()["armed"] == []
    assert httpx.get(f"{sim.url}/_sim/stats").json()["entries"] == []
    assert httpx.get(f"{sim.url}/_sim/clock").json()["offset"] == 0
    assert httpx.get(f"{sim.url}/_sim/health").json()["status"] == "ok"
