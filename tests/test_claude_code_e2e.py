"""Claude Code's requests through the real gateway over HTTP to the provider
simulator, streaming and not, for every upstream format; the Anthropic SDK's
beta messages and count_tokens; the OpenAI SDK's embeddings.

The simulator is wrapped in a recorder, so each test checks what the upstream
actually received: a mid-conversation system message in place (OpenAI, and
Anthropic with the beta header forwarded) or folded (Gemini), Anthropic-only
fields forwarded to Anthropic and to nobody else.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from claude_code_support import BETAS, HEADERS, MID_SYSTEM, SESSION, first_turn, tool_turn
from lanes_http_support import RecordingSim, Upstream
from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config

ROUTED = "orcarouter/coding"  # the router picks openai/gpt-5-mini (cheapest)
ANTHROPIC_MODEL = "anthropic/claude-sonnet-4-5"
GEMINI_MODEL = "gemini/gemini-2.5-flash"
EMBEDDING_MODEL = "emb/text-embedding-3-small"
FOLDED = f"<system>\n{MID_SYSTEM}\n</system>"


@pytest.fixture(scope="module")
def sim() -> Iterator[tuple[ServerThread, RecordingSim]]:
    recording = RecordingSim()
    with ServerThread(recording) as server:
        yield server, recording


@pytest.fixture(scope="module")
def gw(sim: tuple[ServerThread, RecordingSim]) -> Iterator[ServerThread]:
    server, _ = sim
    cfg = gateway_config(server.url)
    cfg["channels"].append(
        {
            "name": "emb",
            "type": "openai_compatible",
            "base_url": f"{server.url}/v1",
            "keys": ["sk-e1", "sk-e2"],
            "models": {
                EMBEDDING_MODEL: {"upstream": "text-embedding-3-small", "price": {"input": 0.02}}
            },
        }
    )
    app = create_app(parse_config(cfg))
    with ServerThread(app) as g:
        g.app = app  # type: ignore[attr-defined]
        yield g


@pytest.fixture()
def seen(sim: tuple[ServerThread, RecordingSim]) -> Iterator[list[Upstream]]:
    server, recording = sim
    httpx.post(f"{server.url}/_sim/reset").raise_for_status()
    recording.seen.clear()
    yield recording.seen
    httpx.delete(f"{server.url}/_sim/faults")


def post_messages(gw: ServerThread, body: dict[str, Any]) -> httpx.Response:
    """Claude Code's request: `?beta=true`, its headers, a bearer token."""
    headers = {**HEADERS, "authorization": f"Bearer {TOKEN}"}
    return httpx.post(f"{gw.url}/v1/messages?beta=true", json=body, headers=headers, timeout=30)


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for frame in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in frame.splitlines() if ": " in line)
        if "event" in lines:
            events.append((lines["event"], json.loads(lines["data"])))
    return events


def answer_blocks(reply: httpx.Response, stream: bool) -> list[str]:
    """The content block types of the answer (the simulator calls the first tool
    on a user turn when tools are offered, as an agent's model often does)."""
    if not stream:
        message = reply.json()
        assert message["type"] == "message" and message["stop_reason"]
        return [b["type"] for b in message["content"]]
    events = sse_events(reply.text)
    assert events[0][0] == "message_start" and events[-1][0] == "message_stop"
    return [e["content_block"]["type"] for kind, e in events if kind == "content_block_start"]


def upstream_call(seen: list[Upstream]) -> tuple[Upstream, dict[str, Any]]:
    calls = [u for u in seen if not u.path.endswith(("/models", "/count_tokens"))]
    assert len(calls) == 1, [u.path for u in calls]
    return calls[0], json.loads(calls[0].body)


# ---- Claude Code's Messages requests, each upstream format -----------------------


@pytest.mark.parametrize("stream", [False, True])
def test_first_turn_routed_to_openai_keeps_the_system_message_in_place(
    gw: ServerThread, seen: list[Upstream], stream: bool
) -> None:
    reply = post_messages(gw, first_turn(ROUTED, stream))
    assert reply.status_code == 200, reply.text
    assert reply.headers["x-orca-resolved-model"] == "openai/gpt-5-mini"
    assert answer_blocks(reply, stream)
    call, body = upstream_call(seen)
    assert call.path == "/v1/chat/completions"
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "system", "system", "user", "system"]
    assert body["messages"][-1] == {"role": "system", "content": MID_SYSTEM}
    assert "anthropic-beta" not in call.headers
    for field in ("context_management", "output_config", "thinking", "metadata"):
        assert field not in body


@pytest.mark.parametrize("stream", [False, True])
def test_first_turn_to_anthropic_forwards_betas_and_every_field(
    gw: ServerThread, seen: list[Upstream], stream: bool
) -> None:
    sent = first_turn(ANTHROPIC_MODEL, stream)
    reply = post_messages(gw, sent)
    assert reply.status_code == 200, reply.text
    assert answer_blocks(reply, stream)
    call, body = upstream_call(seen)
    assert call.path == "/v1/messages" and call.query == b"beta=true"
    betas = call.headers["anthropic-beta"].split(",")
    assert betas == [b for b in BETAS if not b.startswith("oauth-")]
    assert body["messages"][1] == {"role": "system", "content": MID_SYSTEM}
    for field in ("context_management", "output_config", "thinking", "metadata"):
        assert body[field] == sent[field]
    assert body["system"] == sent["system"]  # cache breakpoints as the client set them


@pytest.mark.parametrize("stream", [False, True])
def test_first_turn_to_gemini_folds_the_system_message_into_the_user_turn(
    gw: ServerThread, seen: list[Upstream], stream: bool
) -> None:
    reply = post_messages(gw, first_turn(GEMINI_MODEL, stream))
    assert reply.status_code == 200, reply.text
    assert answer_blocks(reply, stream)
    call, body = upstream_call(seen)
    assert "gemini-2.5-flash:" in call.path
    assert [c["role"] for c in body["contents"]] == ["user"]
    assert body["contents"][0]["parts"][-1] == {"text": FOLDED}
    assert "anthropic-beta" not in call.headers


@pytest.mark.parametrize("model", [ROUTED, ANTHROPIC_MODEL, GEMINI_MODEL])
@pytest.mark.parametrize("stream", [False, True])
def test_a_later_tool_turn_with_newer_blocks_is_served(
    gw: ServerThread, seen: list[Upstream], model: str, stream: bool
) -> None:
    sent = tool_turn(model, stream)
    reply = post_messages(gw, sent)
    assert reply.status_code == 200, reply.text
    _, body = upstream_call(seen)
    if model == ANTHROPIC_MODEL:
        assert body["messages"][1] == sent["messages"][1]  # clear_at: Anthropic applies it
        assert body["speed"] == "standard"
        assert any(t.get("type") == "web_search_20250305" for t in body["tools"])
        kinds = [b["type"] for b in body["messages"][3]["content"]]
        assert kinds == ["tool_result", "document", "text"]
    elif model == ROUTED:
        texts = [m.get("content") for m in body["messages"] if m["role"] == "system"]
        assert "Reply in one line." not in texts  # cleared: a later user message exists
        assert texts[-1] == MID_SYSTEM
        assert [t["function"]["name"] for t in body["tools"]] == ["Bash", "Read"]
    else:
        last_user = body["contents"][-1]
        assert last_user["role"] == "user" and last_user["parts"][-1] == {"text": FOLDED}


def test_the_anthropic_sdk_beta_namespace_through_the_gateway(
    gw: ServerThread, seen: list[Upstream]
) -> None:
    client = anthropic.Anthropic(base_url=gw.url, api_key=TOKEN, max_retries=0)
    params: dict[str, Any] = {
        "model": ANTHROPIC_MODEL,
        "max_tokens": 2048,
        "betas": ["mid-conversation-system-2026-04-07", "context-management-2025-06-27"],
        "messages": [
            {"role": "user", "content": "Say hello"},
            {"role": "system", "content": MID_SYSTEM},
        ],
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "low"},
        "extra_headers": {"x-claude-code-session-id": SESSION},
    }
    message = client.beta.messages.create(**params)
    assert message.content and message.stop_reason == "end_turn"
    with client.beta.messages.stream(**params) as stream:
        final = stream.get_final_message()
    assert any(b.type == "text" and b.text for b in final.content)
    assert len(seen) == 2  # (the Python SDK sends no ?beta=true; the TypeScript one does)
    assert all("mid-conversation-system-2026-04-07" in u.headers["anthropic-beta"] for u in seen)


# ---- count_tokens ------------------------------------------------------------------


def test_count_tokens_with_the_sdk(gw: ServerThread, seen: list[Upstream]) -> None:
    client = anthropic.Anthropic(base_url=gw.url, api_key=TOKEN, max_retries=0)
    short = client.messages.count_tokens(
        model=ROUTED, messages=[{"role": "user", "content": "Say hello"}]
    )
    long = client.messages.count_tokens(
        model=ROUTED,
        system="You are Claude Code.",
        messages=[{"role": "user", "content": "Explain the routing module in detail. " * 50}],
        tools=first_turn(ROUTED, False)["tools"],
    )
    assert 0 < short.input_tokens < long.input_tokens
    beta = client.beta.messages.count_tokens(
        model=ROUTED,
        betas=["mid-conversation-system-2026-04-07"],
        messages=[{"role": "user", "content": "hi"}, {"role": "system", "content": MID_SYSTEM}],
    )
    assert beta.input_tokens > short.input_tokens
    assert seen == []  # counted by the gateway: no upstream call


def test_count_tokens_is_close_to_the_simulators_own_count(gw: ServerThread) -> None:
    """The same body counted by the gateway and by the simulator's Anthropic endpoint
    (which tokenizes the rendered prompt with the same tokenizer)."""
    body = first_turn(ANTHROPIC_MODEL, False)
    del body["max_tokens"], body["stream"]
    headers = {**HEADERS, "authorization": f"Bearer {TOKEN}"}
    ours = httpx.post(f"{gw.url}/v1/messages/count_tokens?beta=true", json=body, headers=headers)
    assert ours.status_code == 200, ours.text
    sim_url = gw.app.state.tiergate.cfg.channels[1].base_url  # type: ignore[attr-defined]
    sim_headers = {**HEADERS, "x-api-key": "ak-a"}
    theirs = httpx.post(f"{sim_url}/v1/messages/count_tokens", json=body, headers=sim_headers)
    assert theirs.status_code == 200, theirs.text
    a, b = ours.json()["input_tokens"], theirs.json()["input_tokens"]
    assert abs(a - b) <= 0.2 * b, (a, b)


def test_count_tokens_errors_are_anthropic_errors(gw: ServerThread) -> None:
    bad_key = anthropic.Anthropic(base_url=gw.url, api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as denied:
        bad_key.messages.count_tokens(model=ROUTED, messages=[{"role": "user", "content": "x"}])
    assert denied.value.body["type"] == "error"  # type: ignore[index]
    client = anthropic.Anthropic(base_url=gw.url, api_key=TOKEN, max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.count_tokens(model=ROUTED, messages=[])
    assert bad.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


# ---- embeddings --------------------------------------------------------------------


def oai(gw: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=TOKEN, max_retries=0)


def test_embeddings_pass_through_to_an_openai_channel(
    gw: ServerThread, seen: list[Upstream]
) -> None:
    client = oai(gw)
    reply = client.embeddings.create(model=EMBEDDING_MODEL, input=["alpha", "beta", "alpha"])
    assert reply.model == EMBEDDING_MODEL
    vectors = [d.embedding for d in reply.data]
    assert [len(v) for v in vectors] == [1536] * 3
    assert vectors[0] == vectors[2] != vectors[1]
    assert reply.usage.prompt_tokens > 0
    small = client.embeddings.create(
        model=EMBEDDING_MODEL, input="alpha", dimensions=8, encoding_format="float"
    )
    assert len(small.data[0].embedding) == 8
    bodies = [json.loads(u.body) for u in seen]
    assert [u.path for u in seen] == ["/v1/embeddings", "/v1/embeddings"]
    assert all(b["model"] == "text-embedding-3-small" for b in bodies)


def test_embeddings_retry_another_key_and_record_usage(
    gw: ServerThread, seen: list[Upstream], sim: tuple[ServerThread, RecordingSim]
) -> None:
    server, _ = sim
    rule = {"kind": "status", "status": 500, "model": "text-embedding-3-small", "count": 1}
    httpx.post(f"{server.url}/_sim/faults", json=rule).raise_for_status()  # the first key fails
    recorder = gw.app.state.tiergate.gateway.recorder  # type: ignore[attr-defined]
    rows: list[dict[str, Any]] = []
    original = recorder.record
    recorder.record = lambda table, row: (rows.append(row), original(table, row))
    try:
        reply = oai(gw).embeddings.create(model=EMBEDDING_MODEL, input="retry me")
    finally:
        recorder.record = original
    assert len(reply.data) == 1
    assert len(seen) == 2  # one failed attempt, one served
    (row,) = rows
    assert row["status"] == 200 and row["attempts"] == 2 and row["channel"] == "emb"
    assert row["input_tokens"] == reply.usage.prompt_tokens
    assert row["cost_usd"] == pytest.approx(reply.usage.prompt_tokens * 0.02 / 1e6)


@pytest.mark.parametrize(
    ("model", "error", "status"),
    [
        (ROUTED, openai.NotFoundError, 404),  # a router: embeddings need a concrete model
        (ANTHROPIC_MODEL, openai.NotFoundError, 404),  # no channel of an embeddings type
        ("openai/gpt-5-mini", openai.BadRequestError, 400),  # the provider refuses it
    ],
)
def test_embeddings_errors_are_openai_errors(
    gw: ServerThread, model: str, error: type[openai.APIStatusError], status: int
) -> None:
    with pytest.raises(error) as err:
        oai(gw).embeddings.create(model=model, input="x")
    assert err.value.status_code == status
    assert isinstance(err.value.body, dict) and err.value.body.get("message")


def test_embeddings_need_a_valid_token(gw: ServerThread) -> None:
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        client.embeddings.create(model=EMBEDDING_MODEL, input="x")
