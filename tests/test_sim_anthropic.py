"""The simulator's Anthropic Messages endpoint over real HTTP, with the official SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from servers import ServerThread
from tiergate.sim.app import create_sim_app

MODEL = "claude-sonnet-4-5"
LONG = "You are a careful coding agent. " + " ".join(
    f"Rule {i}: keep functions small and name things clearly." for i in range(200)
)
TOOLS: list[Any] = [
    {
        "name": "read_file",
        "description": "Read a file",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    }
]


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as server:
        yield server


@pytest.fixture(autouse=True)
def _reset(sim: ServerThread) -> Iterator[None]:
    yield
    httpx.post(f"{sim.url}/_sim/reset")


def client(sim: ServerThread, key: str = "ak-one") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=sim.url, api_key=key, max_retries=0)


def cached_system(ttl: str | None = None) -> list[Any]:
    control: dict[str, str] = {"type": "ephemeral"}
    if ttl:
        control["ttl"] = ttl
    return [{"type": "text", "text": LONG, "cache_control": control}]


def create(sim: ServerThread, key: str = "ak-one", **kw: Any) -> Any:
    kw.setdefault("model", MODEL)
    kw.setdefault("max_tokens", 256)
    return client(sim, key).messages.create(**kw)


def test_non_streaming_message(sim: ServerThread) -> None:
    msg = create(sim, messages=[{"role": "user", "content": "Hello"}])
    assert msg.type == "message" and msg.role == "assistant" and msg.id.startswith("msg_")
    assert msg.stop_reason == "end_turn" and msg.stop_sequence is None
    assert msg.content[0].type == "text" and msg.content[0].text
    assert msg.usage.output_tokens == 40 and msg.usage.input_tokens > 0
    assert msg.usage.cache_read_input_tokens == 0 and msg.usage.cache_creation_input_tokens == 0


def test_streaming_matches_the_full_event_sequence(sim: ServerThread) -> None:
    with client(sim).messages.stream(
        model=MODEL, max_tokens=256, messages=[{"role": "user", "content": "Stream"}]
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert kinds[-2] == "message_delta"
    assert {"content_block_start", "content_block_delta", "content_block_stop"} <= set(kinds)
    assert final.stop_reason == "end_turn" and final.usage.output_tokens == 40
    assert final.content[0].type == "text" and final.content[0].text


def test_raw_stream_has_ping_and_cumulative_usage(sim: ServerThread) -> None:
    r = httpx.post(
        f"{sim.url}/v1/messages",
        headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
        json={
            "model": MODEL,
            "max_tokens": 50,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        },
    )
    events = [block.split("\n") for block in r.text.strip().split("\n\n")]
    names = [e[0].removeprefix("event: ") for e in events]
    assert "ping" in names
    datas = [json.loads(e[1].removeprefix("data: ")) for e in events]
    assert [d["type"] for d in datas] == names
    delta = datas[names.index("message_delta")]
    start = datas[0]["message"]["usage"]
    assert delta["usage"]["output_tokens"] == 40
    assert delta["usage"]["input_tokens"] == start["input_tokens"]


def test_tool_use_round_trip_streaming_and_not(sim: ServerThread) -> None:
    messages: list[Any] = [{"role": "user", "content": "Open the README"}]
    with client(sim).messages.stream(
        model=MODEL, max_tokens=256, tools=TOOLS, messages=messages
    ) as stream:
        streamed = stream.get_final_message()
    plain = create(sim, tools=TOOLS, messages=messages)
    for msg in (streamed, plain):
        assert msg.stop_reason == "tool_use"
        use = next(b for b in msg.content if b.type == "tool_use")
        assert use.id.startswith("toolu_") and use.name == "read_file" and "path" in use.input
    assert streamed.content[0].input == plain.content[0].input
    messages += [
        {"role": "assistant", "content": [b.model_dump() for b in plain.content]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": plain.content[0].id, "content": "# README"}
            ],
        },
    ]
    answer = create(sim, tools=TOOLS, messages=messages)
    assert answer.stop_reason == "end_turn" and answer.content[0].type == "text"


def test_thinking_block_with_signature_comes_first(sim: ServerThread) -> None:
    kw: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": "think it through"}],
    }
    with client(sim).messages.stream(**kw) as stream:
        kinds = [e.delta.type for e in stream if e.type == "content_block_delta"]
        final = stream.get_final_message()
    assert "thinking_delta" in kinds and "signature_delta" in kinds
    thinking = final.content[0]
    assert thinking.type == "thinking" and thinking.thinking and thinking.signature
    plain = create(sim, messages=[{"role": "user", "content": "hm [[sim:thinking]]"}])
    assert plain.content[0].type == "thinking" and plain.content[1].type == "text"


def test_max_tokens_stop_reason(sim: ServerThread) -> None:
    msg = create(sim, max_tokens=5, messages=[{"role": "user", "content": "[[sim:output=50]]"}])
    assert msg.stop_reason == "max_tokens" and msg.usage.output_tokens == 5


def test_breakpoint_write_then_read(sim: ServerThread) -> None:
    first = create(sim, system=cached_system(), messages=[{"role": "user", "content": "one"}])
    u1 = first.usage
    assert u1.cache_read_input_tokens == 0 and u1.cache_creation_input_tokens >= 1024
    assert u1.cache_creation.ephemeral_5m_input_tokens == u1.cache_creation_input_tokens
    second = create(sim, system=cached_system(), messages=[{"role": "user", "content": "two"}])
    u2 = second.usage
    assert u2.cache_read_input_tokens == u1.cache_creation_input_tokens
    assert u2.cache_creation_input_tokens == 0
    # input_tokens excludes what was read from or written to the cache
    assert u2.input_tokens == u1.input_tokens
    count = client(sim).messages.count_tokens(
        model=MODEL, system=cached_system(), messages=[{"role": "user", "content": "two"}]
    )
    assert count.input_tokens == u2.input_tokens + u2.cache_read_input_tokens
    other = create(
        sim, "ak-two", system=cached_system(), messages=[{"role": "user", "content": "x"}]
    )
    assert other.usage.cache_read_input_tokens == 0


def test_breakpoint_on_the_last_message_hits_the_previous_turn(sim: ServerThread) -> None:
    def turn(n: int) -> list[Any]:
        messages: list[Any] = []
        for i in range(n):
            if i:
                messages.append({"role": "assistant", "content": f"answer {i}"})
            messages.append({"role": "user", "content": [{"type": "text", "text": f"q{i} {LONG}"}]})
        messages[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
        return messages

    first = create(sim, messages=turn(1)).usage
    second = create(sim, messages=turn(2)).usage
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens >= 1024
    assert second.cache_creation_input_tokens > 1024  # the new turn is written
    httpx.post(f"{sim.url}/_sim/clock", json={"advance": 301})
    third = create(sim, messages=turn(3)).usage
    assert third.cache_read_input_tokens == 0  # idle past five minutes


def test_one_hour_breakpoints_are_reported_and_survive_idle(sim: ServerThread) -> None:
    first = create(sim, system=cached_system("1h"), messages=[{"role": "user", "content": "a"}])
    assert first.usage.cache_creation.ephemeral_1h_input_tokens >= 1024
    httpx.post(f"{sim.url}/_sim/clock", json={"advance": 1800})
    later = create(sim, system=cached_system("1h"), messages=[{"role": "user", "content": "b"}])
    assert later.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens


def test_stats_bill_the_anthropic_categories(sim: ServerThread) -> None:
    for text in ("one", "two"):
        create(sim, system=cached_system(), messages=[{"role": "user", "content": text}])
    (row,) = httpx.get(f"{sim.url}/_sim/stats").json()["entries"]
    assert row["provider"] == "anthropic" and row["requests"] == 2
    assert row["cache_write_tokens"] == row["cache_read_tokens"] >= 1024
    assert (
        row["input_tokens"] + row["cache_read_tokens"] + row["cache_write_tokens"]
        == (row["prompt_tokens"])
    )
    assert row["output_tokens"] == 80


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
        ({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}, "role"),
        ({"max_tokens": 5, "messages": []}, "at least one message"),
        (
            {
                "max_tokens": 5,
                "messages": [
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
                        ],
                    },
                    {"role": "user", "content": "no result"},
                ],
            },
            "tool_result",
        ),
        (
            {
                "max_tokens": 5,
                "messages": [
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
                        ],
                    },
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "first"},
                            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"},
                        ],
                    },
                ],
            },
            "at the beginning",
        ),
        (
            {
                "max_tokens": 5,
                "messages": [
                    {"role": "user", "content": "x"},
                    {"role": "assistant", "content": [{"type": "text", "text": ""}]},
                    {"role": "user", "content": "y"},
                ],
            },
            "non-empty",
        ),
        (
            {
                "max_tokens": 5,
                "system": [
                    {"type": "text", "text": str(i), "cache_control": {"type": "ephemeral"}}
                    for i in range(5)
                ],
                "messages": [{"role": "user", "content": "x"}],
            },
            "maximum of 4",
        ),
    ],
)
def test_invalid_requests_are_400(sim: ServerThread, body: dict[str, Any], fragment: str) -> None:
    r = httpx.post(
        f"{sim.url}/v1/messages",
        headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
        json={"model": MODEL, **body},
    )
    assert r.status_code == 400
    assert r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert fragment in r.json()["error"]["message"]


def test_missing_key_or_version(sim: ServerThread) -> None:
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    r = httpx.post(f"{sim.url}/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    r = httpx.post(f"{sim.url}/v1/messages", json=body, headers={"x-api-key": "k"})
    assert r.status_code == 400 and "anthropic-version" in r.json()["error"]["message"]


def test_models_list_in_anthropic_format(sim: ServerThread) -> None:
    ids = [m.id for m in client(sim).models.list()]
    assert MODEL in ids


def test_mid_conversation_system_messages_need_the_beta_and_a_turn_before(
    sim: ServerThread,
) -> None:
    """As the API: `role: system` inside `messages` only with the beta header, never first."""
    beta = {"anthropic-beta": "mid-conversation-system-2026-04-07"}
    later = [{"role": "user", "content": "hi"}, {"role": "system", "content": "be brief"}]
    c = client(sim)
    with pytest.raises(anthropic.BadRequestError):
        c.messages.create(model=MODEL, max_tokens=5, messages=later)  # type: ignore[arg-type]
    ok = c.messages.create(model=MODEL, max_tokens=5, messages=later, extra_headers=beta)  # type: ignore[arg-type]
    assert ok.content
    only_config = [{"role": "user", "content": "hi"}, {"role": "system", "output_config": {}}]
    assert c.messages.create(
        model=MODEL,
        max_tokens=5,
        messages=only_config,  # type: ignore[arg-type]
        extra_headers=beta,
    ).content
    first = [{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}]
    with pytest.raises(anthropic.BadRequestError):
        c.messages.create(model=MODEL, max_tokens=5, messages=first, extra_headers=beta)  # type: ignore[arg-type]
