"""The simulator's agent scripts (sim/script.py) over real HTTP with the real SDKs:
each protocol's way of saying a step, the step inferred from the transcript, and
the control endpoint. The agent CLIs themselves are in tests/test_agents_*.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from servers import ServerThread
from tiergate.sim.app import create_sim_app
from tiergate.sim.script import (
    DELEGATED_MARKER,
    DELEGATED_TASK,
    FIX_COMMAND,
    LOOP_STEPS,
    MINI_SWE_DONE,
    TEST_COMMAND,
    WRONG_EDITS,
    script_step,
)

BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "description": {"type": "string"},
                "timeout": {"type": "integer"},
            },
            "required": ["command", "description"],
        },
    },
}
READ = {
    "type": "function",
    "function": {
        "name": "read",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}
ARGV_SHELL = {  # Codex's older `shell` tool takes an argv list
    "type": "function",
    "function": {
        "name": "shell",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "array", "items": {"type": "string"}}},
            "required": ["command"],
        },
    },
}


@pytest.fixture
def sim() -> Iterator[ServerThread]:
    with ServerThread(create_sim_app()) as server:
        yield server


def arm(sim: ServerThread, name: str | None) -> httpx.Response:
    return httpx.post(f"{sim.url}/_sim/script", json={"name": name})


def _openai(sim: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{sim.url}/v1", api_key="sk-test", max_retries=0)


def _play_openai(
    sim: ServerThread, tools: list[dict[str, Any]], turns: int
) -> list[openai.types.chat.ChatCompletionMessage]:
    """Answer every tool call with a fixed result and collect the replies."""
    client = _openai(sim)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test."},
    ]
    replies = []
    for _ in range(turns):
        msg = (
            client.chat.completions.create(
                model="gpt-5-mini",
                messages=messages,  # type: ignore[arg-type]
                tools=tools,  # type: ignore[arg-type]
            )
            .choices[0]
            .message
        )
        replies.append(msg)
        messages.append(msg.model_dump(exclude_none=True))
        for call in msg.tool_calls or []:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "FAILED"})
    return replies


def _commands(replies: list[Any]) -> list[str | None]:
    out: list[str | None] = []
    for msg in replies:
        calls = msg.tool_calls or []
        out.append(orjson.loads(calls[0].function.arguments)["command"] if calls else None)
    return out


def test_fix_script_over_openai_tool_calls(sim: ServerThread) -> None:
    assert arm(sim, "fix").json() == {"name": "fix"}
    replies = _play_openai(sim, [READ, BASH], 4)
    assert _commands(replies) == [TEST_COMMAND, FIX_COMMAND, TEST_COMMAND, None]
    first = orjson.loads(replies[0].tool_calls[0].function.arguments)  # type: ignore[index]
    assert set(first) == {"command", "description"}  # required ones only: no 1 ms timeout
    assert replies[0].tool_calls[0].function.name == "bash"  # type: ignore[index]
    assert "Done" in (replies[3].content or "")


def test_loop_script_repeats_the_failing_command_then_gives_up(sim: ServerThread) -> None:
    arm(sim, "loop")
    commands = _commands(_play_openai(sim, [BASH], LOOP_STEPS))
    assert commands[:-1] == [
        TEST_COMMAND if i % 2 == 0 else WRONG_EDITS[(i // 2) % 2] for i in range(LOOP_STEPS - 1)
    ]
    assert commands[-1] is None
    assert script_step("loop", LOOP_STEPS + 5).command is None


def test_argv_shell_tool_gets_a_bash_argv(sim: ServerThread) -> None:
    arm(sim, "fix")
    (reply,) = _play_openai(sim, [ARGV_SHELL], 1)
    args = orjson.loads(reply.tool_calls[0].function.arguments)  # type: ignore[index]
    assert args == {"command": ["bash", "-lc", TEST_COMMAND]}


def test_fix_script_over_anthropic_tool_use(sim: ServerThread) -> None:
    arm(sim, "fix")
    client = anthropic.Anthropic(base_url=sim.url, api_key="ak-test", max_retries=0)
    tools = [
        {
            "name": "Bash",
            "input_schema": {
                "type": "object",
                "properties": {"command": {"type": "string"}, "timeout": {"type": "number"}},
                "required": ["command"],
            },
        }
    ]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    seen = []
    for _ in range(4):
        msg = client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=1024,
            messages=messages,  # type: ignore[arg-type]
            tools=tools,  # type: ignore[arg-type]
        )
        uses = [b for b in msg.content if b.type == "tool_use"]
        seen.append(uses[0].input["command"] if uses else None)  # type: ignore[index]
        messages.append({"role": "assistant", "content": [b.model_dump() for b in msg.content]})
        if uses:
            result = {"type": "tool_result", "tool_use_id": uses[0].id, "content": "ok"}
            messages.append({"role": "user", "content": [result]})
    assert seen == [TEST_COMMAND, FIX_COMMAND, TEST_COMMAND, None]


AGENT = {
    "type": "function",
    "function": {
        "name": "Agent",
        "parameters": {
            "type": "object",
            "properties": {
                "description": {"type": "string"},
                "prompt": {"type": "string"},
                "subagent_type": {"type": "string"},
                "run_in_background": {"type": "boolean"},
            },
            "required": ["description", "prompt"],
        },
    },
}


def test_delegate_script_spawns_a_sub_agent_that_plays_fix(sim: ServerThread) -> None:
    arm(sim, "delegate")
    client = _openai(sim)
    lead = [{"role": "user", "content": "Fix the failing test."}]
    reply = client.chat.completions.create(
        model="gpt-5-mini",
        messages=lead,  # type: ignore[arg-type]
        tools=[AGENT, BASH],  # type: ignore[list-item]
    )
    (call,) = reply.choices[0].message.tool_calls or []
    assert call.function.name == "Agent"
    args = orjson.loads(call.function.arguments)
    assert args["prompt"] == DELEGATED_TASK and args["run_in_background"] is False
    assert args["subagent_type"] == "general-purpose"
    # the sub-agent (its first user message carries the marker) plays `fix`, even
    # though Claude Code offers it the Agent tool too
    sub = _play_sub(sim, [AGENT, BASH], 4)
    assert sub == [TEST_COMMAND, FIX_COMMAND, TEST_COMMAND, None]
    assert DELEGATED_MARKER in DELEGATED_TASK
    assert [script_step("delegate", i).command for i in range(3)] == [None, TEST_COMMAND, None]
    split = [script_step("split", i).command for i in range(7)]
    assert split[:5] == [script_step("loop", i).command for i in range(5)]
    assert split[5:] == [None, None]  # gives up after its first strike's worth
    lead = [script_step("delegate-split", i).command for i in range(8)]
    assert lead == [None, *split]


def _play_sub(sim: ServerThread, tools: list[dict[str, Any]], turns: int) -> list[str | None]:
    client = _openai(sim)
    messages: list[dict[str, Any]] = [{"role": "user", "content": DELEGATED_TASK}]
    out = []
    for _ in range(turns):
        msg = (
            client.chat.completions.create(
                model="gpt-5-mini",
                messages=messages,  # type: ignore[arg-type]
                tools=tools,  # type: ignore[arg-type]
            )
            .choices[0]
            .message
        )
        out.extend(_commands([msg]))
        messages.append(msg.model_dump(exclude_none=True))
        for c in msg.tool_calls or []:
            messages.append({"role": "tool", "tool_call_id": c.id, "content": "ok"})
    return out


MINI_PROMPT = (
    "Reply with exactly one ```mswea_bash_command block. Finish with "
    "`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`."
)


def test_mini_swe_text_mode_one_fenced_command_per_reply(sim: ServerThread) -> None:
    arm(sim, "fix")
    client = _openai(sim)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": MINI_PROMPT},
        {"role": "user", "content": "Fix the failing test."},
    ]
    commands = []
    for _ in range(4):
        text = (
            client.chat.completions.create(model="gpt-5-mini", messages=messages)  # type: ignore[arg-type]
            .choices[0]
            .message.content
            or ""
        )
        assert text.count("```mswea_bash_command\n") == 1
        commands.append(text.split("```mswea_bash_command\n")[1].split("\n```")[0])
        messages += [
            {"role": "assistant", "content": text},
            {"role": "user", "content": "<returncode>1</returncode>"},
        ]
    assert commands == [TEST_COMMAND, FIX_COMMAND, TEST_COMMAND, MINI_SWE_DONE]


AIDER_PROMPT = "Describe each change with a SEARCH/REPLACE block ending in >>>>>>> REPLACE."


def test_aider_edit_blocks_and_its_examples_do_not_count_as_turns(sim: ServerThread) -> None:
    arm(sim, "fix")
    client = _openai(sim)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": AIDER_PROMPT},
        {"role": "user", "content": "Change get_factorial() to use math.factorial"},
        {
            "role": "assistant",
            "content": "mathweb/app.py\n<<<<<<< SEARCH\n=======\n>>>>>>> REPLACE",
        },
        {"role": "user", "content": "Fix the failing test."},
    ]
    replies = []
    for _ in range(4):
        text = (
            client.chat.completions.create(model="gpt-5-mini", messages=messages)  # type: ignore[arg-type]
            .choices[0]
            .message.content
            or ""
        )
        replies.append(text)
        messages += [
            {"role": "assistant", "content": text},
            {"role": "user", "content": "FAILED (failures=1)"},
        ]
    assert "=======\n    return -(b - a)\n>>>>>>> REPLACE" in replies[0]
    assert "<<<<<<< SEARCH\n    return -(b - a)\n=======\n    return a + b\n" in replies[1]
    assert "SEARCH" not in replies[2] and "SEARCH" not in replies[3]


def test_side_requests_and_disarmed_sims_answer_as_usual(sim: ServerThread) -> None:
    client = _openai(sim)
    title = [{"role": "user", "content": "Write a title for this conversation."}]
    plain = client.chat.completions.create(model="gpt-5-mini", messages=title)  # type: ignore[arg-type]
    arm(sim, "fix")
    side = client.chat.completions.create(model="gpt-5-mini", messages=title)  # type: ignore[arg-type]
    assert side.choices[0].message.content == plain.choices[0].message.content
    assert arm(sim, None).json() == {"name": None}
    (reply,) = _play_openai(sim, [BASH], 1)
    assert _commands([reply]) != [TEST_COMMAND]  # the default responder's synthesised call


def test_script_control_endpoint_rejects_unknown_names_and_reset_disarms(
    sim: ServerThread,
) -> None:
    assert arm(sim, "nope").status_code == 400
    assert httpx.post(f"{sim.url}/_sim/script", json=["fix"]).status_code == 400
    arm(sim, "loop")
    assert httpx.get(f"{sim.url}/_sim/script").json() == {"name": "loop"}
    httpx.post(f"{sim.url}/_sim/reset")
    assert httpx.get(f"{sim.url}/_sim/script").json() == {"name": None}
