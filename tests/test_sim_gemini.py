"""The simulator's Gemini endpoints over real HTTP (raw httpx: the wire format itself)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from servers import ServerThread
from tiergate.sim.app import create_sim_app

MODEL = "gemini-2.5-flash"
LONG = "You are a careful coding agent. " + " ".join(
    f"Rule {i}: keep functions small and name things clearly." for i in range(200)
)
TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": "read_file",
                "description": "Read a file",
                "parameters": {
                    "type": "OBJECT",
                    "properties": {"path": {"type": "STRING"}},
                    "required": ["path"],
                },
            }
        ]
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


def call(
    sim: ServerThread,
    body: dict[str, Any],
    method: str = "generateContent",
    key: str = "gk-one",
    query: str = "",
) -> httpx.Response:
    return httpx.post(
        f"{sim.url}/v1beta/models/{MODEL}:{method}{query}",
        headers={"x-goog-api-key": key} if key else {},
        json=body,
    )


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def sse_bodies(text: str) -> list[dict[str, Any]]:
    assert "\r\n\r\n" in text
    return [json.loads(e.removeprefix("data: ")) for e in text.split("\r\n\r\n") if e.strip()]


def test_generate_content(sim: ServerThread) -> None:
    r = call(sim, {"contents": [user("Hello")]})
    assert r.status_code == 200
    body = r.json()
    candidate = body["candidates"][0]
    assert candidate["finishReason"] == "STOP" and candidate["content"]["role"] == "model"
    assert candidate["content"]["parts"][0]["text"]
    meta = body["usageMetadata"]
    assert meta["candidatesTokenCount"] == 40
    assert meta["totalTokenCount"] == meta["promptTokenCount"] + 40
    assert "cachedContentTokenCount" not in meta
    assert body["modelVersion"] == MODEL and body["responseId"]


def test_sse_stream_and_json_array_stream_carry_the_same_text(sim: ServerThread) -> None:
    body = {"contents": [user("Stream")], "generationConfig": {"maxOutputTokens": 30}}
    sse = call(sim, body, "streamGenerateContent", query="?alt=sse")
    assert sse.headers["content-type"].startswith("text/event-stream")
    chunks = sse_bodies(sse.text)
    assert len(chunks) > 2
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])
    assert chunks[-1]["candidates"][0]["finishReason"] == "MAX_TOKENS"  # 40 wanted, 30 allowed
    assert chunks[-1]["usageMetadata"]["candidatesTokenCount"] == 30
    text = "".join(
        p.get("text", "") for c in chunks for p in c["candidates"][0]["content"]["parts"]
    )
    array = call(sim, body, "streamGenerateContent").json()
    assert isinstance(array, list) and len(array) == len(chunks)
    assert text == "".join(
        p.get("text", "") for c in array for p in c["candidates"][0]["content"]["parts"]
    )


def test_function_call_then_text_after_function_response(sim: ServerThread) -> None:
    contents: list[Any] = [user("Open the README")]
    first = call(sim, {"contents": contents, "tools": TOOLS}).json()
    part = first["candidates"][0]["content"]["parts"][0]
    assert part["functionCall"]["name"] == "read_file"
    assert isinstance(part["functionCall"]["args"]["path"], str)
    contents += [
        {"role": "model", "parts": [part]},
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "read_file", "response": {"content": "# README"}}}
            ],
        },
    ]
    second = call(sim, {"contents": contents, "tools": TOOLS}).json()
    assert second["candidates"][0]["content"]["parts"][0]["text"]


def test_streamed_function_call_is_whole(sim: ServerThread) -> None:
    r = call(
        sim, {"contents": [user("go")], "tools": TOOLS}, "streamGenerateContent", query="?alt=sse"
    )
    parts = [p for c in sse_bodies(r.text) for p in c["candidates"][0]["content"]["parts"]]
    calls = [p["functionCall"] for p in parts if "functionCall" in p]
    assert len(calls) == 1 and "path" in calls[0]["args"]


def test_bad_args_end_with_malformed_function_call(sim: ServerThread) -> None:
    body = call(sim, {"contents": [user("go [[sim:bad_args]]")], "tools": TOOLS}).json()
    assert body["candidates"][0]["finishReason"] == "MALFORMED_FUNCTION_CALL"


def test_max_tokens_finish_reason(sim: ServerThread) -> None:
    body = {"contents": [user("[[sim:length]]")], "generation_config": {"max_output_tokens": 9}}
    result = call(sim, body).json()
    assert result["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert result["usageMetadata"]["candidatesTokenCount"] == 9


def test_implicit_cache_reports_cached_content_tokens(sim: ServerThread) -> None:
    system = {"parts": [{"text": LONG}]}
    first = call(sim, {"systemInstruction": system, "contents": [user("one")]}).json()
    assert "cachedContentTokenCount" not in first["usageMetadata"]
    second = call(sim, {"systemInstruction": system, "contents": [user("two")]}).json()
    meta = second["usageMetadata"]
    assert meta["cachedContentTokenCount"] >= 1024
    assert meta["promptTokenCount"] == first["usageMetadata"]["promptTokenCount"]
    assert meta["cacheTokensDetails"][0]["tokenCount"] == meta["cachedContentTokenCount"]
    other = call(sim, {"systemInstruction": system, "contents": [user("two")]}, key="gk-two")
    assert "cachedContentTokenCount" not in other.json()["usageMetadata"]


def test_key_in_query_and_missing_key(sim: ServerThread) -> None:
    assert call(sim, {"contents": [user("x")]}, key="", query="?key=abc").status_code == 200
    r = call(sim, {"contents": [user("x")]}, key="")
    assert r.status_code == 401
    assert r.json()["error"]["status"] == "UNAUTHENTICATED" and r.json()["error"]["code"] == 401


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"contents": []}, "contents is not specified"),
        ({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]}, "valid role"),
        (
            {
                "contents": [
                    user("x"),
                    {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
                    user("no response"),
                ]
            },
            "function response parts",
        ),
    ],
)
def test_invalid_requests_are_400(sim: ServerThread, body: dict[str, Any], fragment: str) -> None:
    r = call(sim, body)
    assert r.status_code == 400 and r.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert fragment in r.json()["error"]["message"]


def test_count_tokens_and_models(sim: ServerThread) -> None:
    generated = call(sim, {"contents": [user("count me")]}).json()
    counted = call(sim, {"contents": [user("count me")]}, "countTokens").json()
    assert counted["totalTokens"] == generated["usageMetadata"]["promptTokenCount"]
    models = httpx.get(f"{sim.url}/v1beta/models", params={"key": "k"}).json()["models"]
    assert f"models/{MODEL}" in {m["name"] for m in models}
    assert call(sim, {"contents": [user("x")]}, "embedContent").status_code == 404
