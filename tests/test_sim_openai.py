"""The simulator's OpenAI and DeepSeek endpoints over real HTTP, with the official SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from servers import ServerThread
from tiergate.sim.app import create_sim_app

LONG_SYSTEM = "You are a careful coding agent. " + " ".join(
    f"Rule {i}: keep functions small and name things clearly." for i in range(200)
)
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
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


def client(sim: ServerThread, key: str = "sk-one") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{sim.url}/v1", api_key=key, max_retries=0)


def conversation(turns: int) -> list[Any]:
    messages: list[Any] = [{"role": "system", "content": LONG_SYSTEM}]
    for i in range(turns):
        if i:
            messages.append({"role": "assistant", "content": f"Answer number {i}."})
        messages.append({"role": "user", "content": f"Question number {i + 1}?"})
    return messages


def test_non_streaming_completion(sim: ServerThread) -> None:
    raw = client(sim).chat.completions.with_raw_response.create(
        model="gpt-5-mini", messages=[{"role": "user", "content": "Hello there"}]
    )
    resp = raw.parse()
    assert resp.object == "chat.completion" and resp.id.startswith("chatcmpl-")
    assert resp.model == "gpt-5-mini" and raw.headers["x-request-id"]
    choice = resp.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    assert choice.message.content
    assert resp.usage is not None
    assert resp.usage.completion_tokens == 40
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + 40
    assert resp.usage.prompt_tokens_details.cached_tokens == 0  # type: ignore[union-attr]


def test_same_request_same_answer(sim: ServerThread) -> None:
    messages: Any = [{"role": "user", "content": "Deterministic?"}]
    one = client(sim).chat.completions.create(model="gpt-5", messages=messages)
    two = client(sim, "sk-other").chat.completions.create(model="gpt-5", messages=messages)
    assert one.choices[0].message.content == two.choices[0].message.content


def test_streaming_with_usage(sim: ServerThread) -> None:
    chunks = list(
        client(sim).chat.completions.create(
            model="gpt-5-mini",
            messages=[{"role": "user", "content": "Stream please [[sim:output=23]]"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and all(f is None for f in finishes[:-1])
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 23
    assert all(c.usage is None for c in chunks[:-1])
    assert len(chunks) > 4 and text


def test_streaming_without_usage_has_no_usage_chunk(sim: ServerThread) -> None:
    r = httpx.post(
        f"{sim.url}/v1/chat/completions",
        headers={"authorization": "Bearer k"},
        json={"model": "gpt-5", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert r.headers["content-type"].startswith("text/event-stream")
    lines = [x for x in r.text.split("\n\n") if x]
    assert lines[-1] == "data: [DONE]"
    bodies = [json.loads(x.removeprefix("data: ")) for x in lines[:-1]]
    assert all("usage" not in b and b["choices"] for b in bodies)


def test_tool_call_then_answer(sim: ServerThread) -> None:
    c = client(sim)
    messages: list[Any] = [{"role": "user", "content": "Open the README"}]
    first = c.chat.completions.create(model="gpt-5-mini", messages=messages, tools=TOOLS)
    assert first.choices[0].finish_reason == "tool_calls"
    assert first.choices[0].message.content is None
    (call,) = first.choices[0].message.tool_calls or []
    assert call.id.startswith("call_") and call.function.name == "read_file"  # type: ignore[union-attr]
    assert "path" in json.loads(call.function.arguments)  # type: ignore[union-attr]
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "# README"},
    ]
    second = c.chat.completions.create(model="gpt-5-mini", messages=messages, tools=TOOLS)
    assert second.choices[0].finish_reason == "stop" and second.choices[0].message.content


def test_streamed_parallel_tool_calls_assemble(sim: ServerThread) -> None:
    calls: dict[int, dict[str, str]] = {}
    first_delta = None
    for chunk in client(sim).chat.completions.create(
        model="gpt-5-mini",
        messages=[{"role": "user", "content": "two at once [[sim:tools=2]]"}],
        tools=TOOLS,
        stream=True,
    ):
        for choice in chunk.choices:
            first_delta = first_delta or choice.delta
            for tc in choice.delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": "", "name": "", "args": ""})
                slot["id"] += tc.id or ""
                slot["name"] += (tc.function and tc.function.name) or ""
                slot["args"] += (tc.function and tc.function.arguments) or ""
    assert first_delta is not None and first_delta.role == "assistant"
    assert sorted(calls) == [0, 1]
    for slot in calls.values():
        assert slot["id"].startswith("call_") and slot["name"] == "read_file"
        assert "path" in json.loads(slot["args"])
    assert calls[0]["id"] != calls[1]["id"]


def test_second_turn_reads_the_cache_with_the_same_key_only(sim: ServerThread) -> None:
    first = client(sim).chat.completions.create(model="gpt-5-mini", messages=conversation(1))
    assert first.usage is not None and first.usage.prompt_tokens >= 1024
    assert first.usage.prompt_tokens_details.cached_tokens == 0  # type: ignore[union-attr]
    second = client(sim).chat.completions.create(model="gpt-5-mini", messages=conversation(2))
    cached = second.usage.prompt_tokens_details.cached_tokens  # type: ignore[union-attr]
    assert cached >= 1024 and (cached - 1024) % 128 == 0
    assert first.usage.prompt_tokens - 128 < cached <= first.usage.prompt_tokens
    other_key = client(sim, "sk-two").chat.completions.create(
        model="gpt-5-mini", messages=conversation(2)
    )
    assert other_key.usage.prompt_tokens_details.cached_tokens == 0  # type: ignore[union-attr]
    other_model = client(sim).chat.completions.create(model="gpt-5", messages=conversation(2))
    assert other_model.usage.prompt_tokens_details.cached_tokens == 0  # type: ignore[union-attr]


def test_cache_expires_after_idle_window_on_the_simulated_clock(sim: ServerThread) -> None:
    c = client(sim)
    c.chat.completions.create(model="gpt-5-mini", messages=conversation(1))
    httpx.post(f"{sim.url}/_sim/clock", json={"advance": 299})
    warm = c.chat.completions.create(model="gpt-5-mini", messages=conversation(1))
    assert warm.usage.prompt_tokens_details.cached_tokens > 0  # type: ignore[union-attr]
    httpx.post(f"{sim.url}/_sim/clock", json={"advance": 301})
    cold = c.chat.completions.create(model="gpt-5-mini", messages=conversation(1))
    assert cold.usage.prompt_tokens_details.cached_tokens == 0  # type: ignore[union-attr]


def test_short_prompts_are_never_cached(sim: ServerThread) -> None:
    messages: Any = [{"role": "user", "content": "short"}]
    for _ in range(2):
        r = client(sim).chat.completions.create(model="gpt-5-mini", messages=messages)
        assert r.usage.prompt_tokens_details.cached_tokens == 0  # type: ignore[union-attr]


def test_deepseek_usage_fields_and_64_token_units(sim: ServerThread) -> None:
    body = {"model": "deepseek-chat", "messages": conversation(1)}
    headers = {"authorization": "Bearer ds-key"}
    first = httpx.post(f"{sim.url}/chat/completions", headers=headers, json=body).json()["usage"]
    assert first["prompt_cache_hit_tokens"] == 0
    assert first["prompt_cache_miss_tokens"] == first["prompt_tokens"]
    body["messages"] = conversation(2)
    httpx.post(f"{sim.url}/_sim/clock", json={"advance": 3000})  # inside DeepSeek's hour
    second = httpx.post(f"{sim.url}/v1/chat/completions", headers=headers, json=body).json()
    usage = second["usage"]
    hit = usage["prompt_cache_hit_tokens"]
    assert hit > 0 and hit % 64 == 0 and hit > first["prompt_tokens"] - 64
    assert usage["prompt_cache_miss_tokens"] == usage["prompt_tokens"] - hit
    assert usage["prompt_tokens_details"]["cached_tokens"] == hit
    assert "refusal" not in second["choices"][0]["message"]


def test_deepseek_reasoner_streams_reasoning_content(sim: ServerThread) -> None:
    chunks = list(
        client(sim).chat.completions.create(
            model="deepseek-reasoner",
            messages=[{"role": "user", "content": "think"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    reasoning = "".join(
        getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices
    )
    assert reasoning
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens > 0


def test_missing_key_is_401_in_openai_format(sim: ServerThread) -> None:
    r = httpx.post(f"{sim.url}/v1/chat/completions", json={"model": "gpt-5", "messages": []})
    assert r.status_code == 401
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert httpx.get(f"{sim.url}/v1/models").status_code == 401


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([], "empty array"),
        ([{"role": "robot", "content": "x"}], "Supported values"),
        ([{"role": "user", "content": "x"}, {"role": "assistant", "content": None}], "null"),
        ([{"role": "tool", "tool_call_id": "nope", "content": "x"}], "must be a response"),
        (
            [
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "user", "content": "y"},
            ],
            "c1",
        ),
    ],
)
def test_invalid_requests_are_400(sim: ServerThread, messages: Any, fragment: str) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client(sim).chat.completions.create(model="gpt-5", messages=messages)
    assert fragment in str(err.value)


def test_models_list(sim: ServerThread) -> None:
    models = client(sim).models.list()
    assert "gpt-5-mini" in {m.id for m in models}
