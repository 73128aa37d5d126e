"""The message memo on Responses API bodies (Codex's format, issue #30): assistant
items fold into the assistant message before them, so the memo reuses only up to
the last item that starts a message of its own. A memoised parse equals the plain
one for every sequence of bodies, and so does its render to an upstream; over
HTTP a Codex-shaped session is served with the memo in play."""

from __future__ import annotations

import copy
from typing import Any

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from memo_support import conversations
from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.formats.message_memo import MessageMemo
from tiergate.formats.openai import render_request
from tiergate.formats.responses import parse_request
from tiergate.formats.responses.request import reusable_count
from tiergate.sim.app import create_sim_app

texts = st.text(alphabet="ab \n{}", max_size=12)
user_item = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, texts),
    st.builds(
        lambda t: {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": t}],
        },
        texts,
    ),
)
system_item = st.builds(
    lambda t, role: {"role": role, "content": t}, texts, st.sampled_from(["system", "developer"])
)
assistant_item = st.builds(
    lambda t: {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": t}],
    },
    texts,
)
call_item = st.builds(
    lambda i, a: {"type": "function_call", "call_id": f"c{i}", "name": "shell", "arguments": a},
    st.integers(0, 3),
    texts,
)
output_item = st.builds(
    lambda i, t: {"type": "function_call_output", "call_id": f"c{i}", "output": t},
    st.integers(0, 3),
    texts,
)
reasoning_item = st.builds(
    lambda t: {
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": t}],
    },
    texts,
)
dropped_item = st.just({"type": "web_search_call", "id": "ws1", "status": "completed"})
item = st.one_of(
    user_item,
    system_item,
    assistant_item,
    call_item,
    call_item,
    output_item,
    reasoning_item,
    dropped_item,
)


def body(items: list[Any]) -> dict[str, Any]:
    return {"model": "m", "instructions": "be brief", "input": copy.deepcopy(items)}


@settings(max_examples=400, deadline=None)
@given(conversations(item))
def test_a_memoised_parse_equals_the_parse_without_the_memo(bodies: list[list[Any]]) -> None:
    memo = MessageMemo()
    for items in bodies:
        try:
            plain = parse_request(body(items))
        except Exception as err:  # the same refusal either way
            try:
                parse_request(body(items), memo, 100)
            except Exception as again:  # noqa: BLE001 - compared with the first
                assert type(again) is type(err) and str(again) == str(err)
                continue
            raise AssertionError("the memo accepted what the codec refuses") from err
        memoised = parse_request(body(items), memo, 100)
        assert memoised == plain
        assert render_request(memoised, "up") == render_request(plain, "up")


def test_a_call_after_a_remembered_assistant_message_does_not_change_it() -> None:
    """The fold the cut guards against: the second body adds a call to the assistant
    message the first body ended on; the third shares only that message again."""
    memo = MessageMemo()
    user = {"role": "user", "content": "task"}
    said = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "ok"}],
    }
    call = {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"}
    out = {"type": "function_call_output", "call_id": "c1", "output": "done"}
    sequence = [
        [user, said, {"role": "user", "content": "go on"}],
        [user, said, call, out, {"role": "user", "content": "and?"}],
        [user, said, {"role": "user", "content": "go on"}, said],
    ]
    for items in sequence:
        assert parse_request(body(items), memo, 10) == parse_request(body(items))


def test_the_cut_is_at_the_last_item_that_starts_a_message() -> None:
    user = {"role": "user", "content": "u"}
    call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    out = {"type": "function_call_output", "call_id": "c", "output": "o"}
    items = [user, call, out, call, out, call]
    assert reusable_count(items, 6) == 4  # before the last output: its call may still fold
    assert reusable_count(items, 2) == 0  # nothing but the first message: parse it all
    assert reusable_count(items, 4) == 2


def test_over_http_a_codex_session_is_served_with_the_memo_in_play() -> None:
    with ServerThread(create_sim_app()) as sim:
        cfg = parse_config(gateway_config(sim.url))
        with ServerThread(create_app(cfg)) as gw, httpx.Client(timeout=10) as http:
            url = f"{gw.url}/v1/responses"
            headers = {"authorization": f"Bearer {TOKEN}"}
            items: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
            for turn in range(4):
                r = http.post(
                    url, json={"model": "openai/gpt-5-mini", "input": items}, headers=headers
                )
                assert r.status_code == 200, r.text
                reply = r.json()
                assert reply["object"] == "response"
                said = [o for o in reply["output"] if o.get("type") == "message"]
                items += said or [
                    {"role": "assistant", "content": "ok"},
                ]
                items += [
                    {
                        "type": "function_call",
                        "call_id": f"c{turn}",
                        "name": "shell",
                        "arguments": "{}",
                    },
                    {
                        "type": "function_call_output",
                        "call_id": f"c{turn}",
                        "output": f"out {turn}",
                    },
                ]
            assert len(gw.app.gateway.intake.message_memo) >= 1  # the memo was in play
