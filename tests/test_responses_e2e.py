"""`POST /v1/responses` over real HTTP: the official openai SDK's `client.responses`
against the gateway, in front of the provider simulator (also real HTTP).

What Codex CLI relies on is checked here: streamed items closed by
`response.output_item.done`, `response.completed` with usage, function and
custom tool calls and their outputs on the next turn, the `session-id` header
keeping a session's tier, and errors as `response.failed`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from admin_support import STRONG, WEAK, AdminClient, admin_config, escalating_router, gateway
from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.billing import request_cost
from tiergate.config_load import parse_config
from tiergate.core.model import Usage
from tiergate.sim.app import create_sim_app

READ_FILE = {
    "type": "function",
    "name": "read_file",
    "description": "Read a file from the workspace",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
}
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Apply a patch to the workspace",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/s"},
}


@pytest.fixture(scope="module")
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as s:
        yield s


@pytest.fixture(scope="module")
def gw(sim: ServerThread) -> Iterator[ServerThread]:
    with ServerThread(create_app(parse_config(gateway_config(sim.url)))) as g:
        yield g


@pytest.fixture(autouse=True)
def _clear_faults(sim: ServerThread) -> Iterator[None]:
    yield
    httpx.delete(f"{sim.url}/_sim/faults")


def oai(gw: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=TOKEN, max_retries=0)


def _stream(client: openai.OpenAI, **kw: Any) -> list[Any]:
    return list(client.responses.create(stream=True, **kw))


# ---- plain text ----------------------------------------------------------------


@pytest.mark.parametrize(
    "model", ["openai/gpt-5-mini", "anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash"]
)
def test_non_streaming_text(gw: ServerThread, model: str) -> None:
    raw = oai(gw).responses.with_raw_response.create(
        model=model, instructions="Be brief.", input="Hi there"
    )
    resp = raw.parse()
    assert resp.object == "response" and resp.id.startswith("resp_")
    assert resp.status == "completed" and resp.model == model
    assert resp.output_text
    (item,) = resp.output
    assert item.type == "message" and item.role == "assistant" and item.status == "completed"
    assert resp.usage is not None and resp.usage.input_tokens > 0
    assert resp.usage.output_tokens > 0
    assert resp.usage.total_tokens == resp.usage.input_tokens + resp.usage.output_tokens
    assert resp.instructions == "Be brief."
    assert raw.headers["x-orca-resolved-model"] == model
    assert len(raw.headers["x-orca-request-id"]) >= 16


@pytest.mark.parametrize("model", ["openai/gpt-5-mini", "anthropic/claude-sonnet-4-5"])
def test_streaming_event_sequence(gw: ServerThread, model: str) -> None:
    events = _stream(
        oai(gw),
        model=model,
        input=[{"role": "user", "content": [{"type": "input_text", "text": "Tell me more"}]}],
    )
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert types[2:4] == ["response.output_item.added", "response.content_part.added"]
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    done = next(e for e in events if e.type == "response.output_item.done")
    assert done.item.type == "message" and done.item.content[0].text == deltas != ""
    assert types.index("response.output_text.done") < types.index("response.content_part.done")
    assert types.index("response.content_part.done") < types.index("response.output_item.done")
    final = events[-1].response
    assert final.status == "completed" and final.output_text == deltas
    assert final.usage is not None and final.usage.input_tokens > 0
    assert final.usage.output_tokens > 0


# ---- tools -----------------------------------------------------------------------


def _first_call(client: openai.OpenAI, stream: bool, **kw: Any) -> tuple[list[Any], Any]:
    """The output items of a turn and its usage, streamed or not."""
    if stream:
        events = _stream(client, **kw)
        added = [e.item.id for e in events if e.type == "response.output_item.added"]
        done = [e.item for e in events if e.type == "response.output_item.done"]
        assert [i.id for i in done] == added  # every item opened is closed
        final = events[-1].response
        assert events[-1].type == "response.completed"
        assert [i.id for i in final.output] == [i.id for i in done]
        return done, final.usage
    resp = client.responses.create(**kw)
    return list(resp.output), resp.usage


@pytest.mark.parametrize("model", ["openai/gpt-5-mini", "anthropic/claude-sonnet-4-5"])
@pytest.mark.parametrize("stream", [False, True])
def test_function_call_then_its_output(gw: ServerThread, model: str, stream: bool) -> None:
    client = oai(gw)
    history: list[Any] = [{"role": "user", "content": "Open the README please"}]
    output, usage = _first_call(client, stream, model=model, input=history, tools=[READ_FILE])
    (call,) = [i for i in output if i.type == "function_call"]
    assert call.name == "read_file" and "path" in json.loads(call.arguments)
    assert call.call_id and call.status == "completed"
    assert usage.output_tokens > 0
    history += [i.model_dump(exclude_none=True) for i in output]
    history.append(
        {"type": "function_call_output", "call_id": call.call_id, "output": "# README\nhello"}
    )
    second, _ = _first_call(client, stream, model=model, input=history, tools=[READ_FILE])
    assert [i.type for i in second] == ["message"]
    assert second[0].content[0].text


@pytest.mark.parametrize("stream", [False, True])
def test_custom_tool_is_served_as_a_function_and_answered_as_custom(
    gw: ServerThread, stream: bool
) -> None:
    client = oai(gw)
    history: list[Any] = [{"role": "user", "content": "Patch the README"}]
    kw = {"model": "openai/gpt-5-mini", "tools": [APPLY_PATCH]}
    output, _ = _first_call(client, stream, input=history, **kw)
    (call,) = output
    assert call.type == "custom_tool_call" and call.name == "apply_patch"
    assert isinstance(call.input, str) and call.input
    assert not call.input.startswith('{"input"')  # the string, not the JSON wrapper
    history += [call.model_dump(exclude_none=True)]
    history.append({"type": "custom_tool_call_output", "call_id": call.call_id, "output": "Done!"})
    second, _ = _first_call(client, stream, input=history, **kw)
    assert [i.type for i in second] == ["message"]


def test_hosted_tools_and_unknown_fields_are_dropped_not_refused(gw: ServerThread) -> None:
    resp = oai(gw).responses.create(
        model="openai/gpt-5-mini",
        input="[[sim:text]] hello",
        tools=[{"type": "web_search"}, READ_FILE],  # type: ignore[list-item]
        include=["reasoning.encrypted_content"],
        store=False,
        reasoning={"effort": "low"},
        text={"verbosity": "low"},
        prompt_cache_key="conv-1",
        extra_body={"a_field_from_next_year": {"x": 1}},
    )
    assert resp.status == "completed" and resp.output_text
    assert [t.type for t in resp.tools] == ["function"]  # what was served


# ---- refusals and errors ---------------------------------------------------------


def test_previous_response_id_is_a_clear_400(gw: ServerThread) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        oai(gw).responses.create(
            model="openai/gpt-5-mini", input="again", previous_response_id="resp_abc"
        )
    assert err.value.status_code == 400
    body: Any = err.value.body
    assert "tiergate stores no responses" in body["message"]
    assert body["type"] == "invalid_request_error"


def test_mid_stream_failure_is_response_failed(gw: ServerThread, sim: ServerThread) -> None:
    httpx.post(
        f"{sim.url}/_sim/faults",
        json={"kind": "stream_error", "status": 503, "count": 5, "model": "gpt-5-mini"},
    )
    events = _stream(oai(gw), model="openai/gpt-5-mini", input="Tell me a long story")
    assert events[-1].type == "response.failed"
    assert events[-1].response.status == "failed"
    assert events[-1].response.error.code == "server_error"
    assert [e.sequence_number for e in events] == list(range(len(events)))


# ---- cost, session, escalation, usage rows ---------------------------------------


def test_cost_header_matches_usage_and_price(gw: ServerThread) -> None:
    raw = oai(gw).responses.with_raw_response.create(
        model="openai/gpt-5",
        input="price me",
        extra_headers={"X-OrcaRouter-Include-Cost": "true"},
    )
    resp = raw.parse()
    assert resp.usage is not None
    model_cfg = parse_config(gateway_config("http://x")).channels[0].models["openai/gpt-5"]
    usage = Usage(resp.usage.input_tokens, resp.usage.output_tokens)
    assert float(raw.headers["x-orca-cost"]) == pytest.approx(
        request_cost(usage, model_cfg, "openai"), rel=1e-6
    )


def test_streamed_cost_is_the_closing_comment(gw: ServerThread) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}", "X-OrcaRouter-Include-Cost": "true"}
    body = {"model": "openai/gpt-5", "input": "price me", "stream": True}
    with httpx.stream("POST", f"{gw.url}/v1/responses", json=body, headers=headers) as r:
        text = r.read().decode()
    assert r.headers["content-type"].startswith("text/event-stream")
    assert "event: response.completed\n" in text
    assert text.rstrip().splitlines()[-1].startswith(": x-orca-cost=")


def _codex_turn(gw: ServerThread, session: str, text: str, **headers: str) -> httpx.Response:
    """A turn shaped as Codex sends it: session-id header, prompt_cache_key, store=false."""
    body = {
        "model": "orcarouter/esc",
        "instructions": "You are Codex.",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        ],
        "tools": [READ_FILE],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "store": False,
        "stream": True,
        "include": [],
        "prompt_cache_key": session,
    }
    h = {"Authorization": f"Bearer {TOKEN}", "session-id": session, **headers}
    return httpx.post(f"{gw.url}/v1/responses", json=body, headers=h, timeout=30)


@pytest.fixture(scope="module")
def admin_env(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServerThread, AdminClient]]:
    db = str(Path(tmp_path_factory.mktemp("responses")) / "tg.db")
    with ServerThread(create_sim_app()) as sim:
        doc = admin_config(sim.url, db, routers=[escalating_router("esc")])
        with gateway(doc) as env:
            yield env


def test_session_id_header_keeps_the_escalated_tier(
    admin_env: tuple[ServerThread, AdminClient],
) -> None:
    gw, admin = admin_env
    first = _codex_turn(gw, "codex-a", "[[sim:text]] Hello")
    assert first.headers["x-orca-session-tier"] == "base"
    assert first.headers["x-orca-resolved-model"] == WEAK
    strong = _codex_turn(gw, "codex-a", "[[sim:text]] Harder", **{"X-OrcaRouter-Tier": "strong"})
    assert strong.headers["x-orca-session-tier"] == "strong; reason=explicit"
    assert strong.headers["x-orca-resolved-model"] == STRONG
    sticky = _codex_turn(gw, "codex-a", "[[sim:text]] And then?")
    assert sticky.headers["x-orca-session-tier"].startswith("strong")
    assert sticky.headers["x-orca-resolved-model"] == STRONG
    other = _codex_turn(gw, "codex-b", "[[sim:text]] Hello")  # another session: its own tier
    assert other.headers["x-orca-resolved-model"] == WEAK
    assert "event: response.completed" in sticky.text
    ids = {r.headers["x-orca-request-id"] for r in (first, strong, sticky)}
    rows = _usage_rows(admin, ids)
    assert {r["model"] for r in rows} == {WEAK, STRONG}
    assert all(r["stream"] and r["status"] == 200 and r["output_tokens"] > 0 for r in rows)
    assert all(r["input_tokens"] > 0 and r["cost_usd"] > 0 for r in rows)
    assert len({r["session_hash"] for r in rows}) == 1  # one session, from the header


def _usage_rows(admin: AdminClient, ids: set[str]) -> list[dict[str, Any]]:
    """The usage rows of these requests, once the recorder has written them."""
    deadline = time.monotonic() + 10
    while True:
        items = admin.get("/usage?router=esc&limit=100").json()["items"]
        rows = [r for r in items if r["request_id"] in ids]
        if len(rows) == len(ids) or time.monotonic() > deadline:
            assert len(rows) == len(ids)
            return rows
        time.sleep(0.1)


# ---- fuzzing: bad input is a clean 4xx, never a 500 -------------------------------

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids),
    max_leaves=10,
)
_item_types = st.sampled_from(
    [
        "message",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "local_shell_call_output",
        "reasoning",
        "item_reference",
        "web_search_call",
        "bogus",
    ]
)
_items = st.fixed_dictionaries(
    {},
    optional={
        "type": _item_types | _values,
        "role": st.sampled_from(["user", "assistant", "developer", "system", "tool"]) | _values,
        "content": st.text(max_size=20) | _values,
        "call_id": st.text(max_size=8) | _values,
        "name": st.sampled_from(["read_file", "apply_patch"]) | _values,
        "arguments": st.just('{"path": "a"}') | _values,
        "input": _values,
        "output": st.text(max_size=20) | _values,
        "encrypted_content": st.just("tgr1.e30=") | _values,
        "action": _values,
    },
)
_bodies = st.fixed_dictionaries(
    {"model": st.sampled_from(["openai/gpt-5-mini", "anthropic/claude-sonnet-4-5"])},
    optional={
        "input": st.lists(_items, max_size=4) | _values,
        "instructions": _values,
        "tools": st.lists(st.sampled_from([READ_FILE, APPLY_PATCH]) | _values, max_size=2),
        "tool_choice": _values,
        "text": _values,
        "reasoning": _values,
        "max_output_tokens": _values,
        "temperature": _values,
        "previous_response_id": _values,
        "background": _values,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=_bodies)
def test_arbitrary_responses_bodies_get_a_clean_answer(gw: ServerThread, body: Any) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    r = httpx.post(f"{gw.url}/v1/responses", json=body, headers=headers, timeout=30)
    event(f"status {r.status_code}")
    assert r.status_code < 500, (r.status_code, r.text[:500])
    if r.status_code >= 400:
        err = r.json()["error"]
        assert isinstance(err["message"], str) and err["type"] == "invalid_request_error"
    else:
        assert r.json()["object"] == "response"


def test_explain_reads_a_responses_body(gw: ServerThread) -> None:
    """`?format=responses` plans a Responses body; the session comes from Codex's header."""
    r = httpx.post(
        f"{gw.url}/v1/orcarouter/explain?format=responses",
        json={"model": "orcarouter/coding", "instructions": "Be brief.", "input": "Hi"},
        headers={"Authorization": f"Bearer {TOKEN}", "session-id": "codex-explain"},
    )
    assert r.status_code == 200, r.text
    plan = r.json()
    assert plan["router"] == "coding" and plan["would_serve"] == "openai/gpt-5-mini"
    assert plan["session"]["source"] == "header:session-id"
    refused = httpx.post(
        f"{gw.url}/v1/orcarouter/explain?format=responses",
        json={"model": "orcarouter/coding", "input": "Hi", "previous_response_id": "resp_1"},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["type"] == "invalid_request_error"
