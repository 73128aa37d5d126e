"""AgentState: what the resent conversation says about the agent's progress."""

from __future__ import annotations

import orjson

from test_difficulty_samples import assistant, request, tool_result, user
from tiergate.core.model import Message, ToolCall
from tiergate.routing.features import AgentState, agent_state, edited_paths


def call(name: str, args: dict, call_id: str = "c") -> Message:
    return Message(
        "assistant", [], tool_calls=[ToolCall(call_id, name, orjson.dumps(args).decode())]
    )


def test_empty_conversation() -> None:
    assert agent_state(request([])) == AgentState()


def test_turns_count_runs_of_user_messages_not_tool_results() -> None:
    msgs = [
        user("a"),
        user("a, continued"),
        call("read_file", {"path": "x.py"}),
        tool_result("..."),
        assistant("read it"),
        user("b"),
        call("bash", {"command": "ls"}),
        tool_result("x.py"),
    ]
    assert agent_state(request(msgs)).turns == 2


def test_tools_used_and_files_edited() -> None:
    patch = "*** Begin Patch\n*** Update File: src/b.py\n@@\n-x\n+y\n*** End Patch"
    msgs = [
        user("go"),
        call("read_file", {"path": "src/a.py"}, "1"),
        tool_result("...", "1"),
        call("edit_file", {"path": "src/a.py", "old_str": "x", "new_str": "y"}, "2"),
        tool_result("ok", "2"),
        call("apply_patch", {"input": patch}, "3"),
        tool_result("ok", "3"),
        call("Write", {"file_path": "README.md", "content": "hi"}, "4"),
        tool_result("ok", "4"),
    ]
    state = agent_state(request(msgs))
    assert state.tools_used == {"read_file", "edit_file", "apply_patch", "Write"}
    assert state.files_edited == {"src/a.py", "src/b.py", "README.md"}
    assert state.tool_calls == 4


def test_read_only_calls_edit_nothing() -> None:
    assert edited_paths(ToolCall("1", "read_file", '{"path": "a.py"}')) == []
    assert edited_paths(ToolCall("1", "edit_file", "not json")) == []


def test_tests_failed_reads_only_the_latest_turn() -> None:
    failing = "=========== 1 failed, 4 passed in 0.12s ===========\nFAILED tests/test_x.py::t"
    just_failed = [user("fix it"), call("bash", {"command": "pytest"}), tool_result(failing)]
    assert agent_state(request(just_failed)).tests_failed
    later = [*just_failed, assistant("Looking."), user("try again")]
    assert not agent_state(request(later)).tests_failed
    passing = [user("run"), call("bash", {"command": "go test"}), tool_result("ok  pkg 0.1s")]
    assert not agent_state(request(passing)).tests_failed


def test_tool_errors_count_errored_results_of_the_latest_turn() -> None:
    msgs = [
        user("go"),
        call("bash", {"command": "make"}),
        tool_result("boom", "c", is_error=True),
        tool_result("boom again", "d", is_error=True),
        tool_result("fine", "e"),
    ]
    assert agent_state(request(msgs)).tool_errors == 2
