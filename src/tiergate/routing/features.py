"""Agent state derived from the request alone: turns, tools used, failing tests.

Agents resend the whole conversation on every call, so the request already says
how far the session has come and what just happened; no stored state is needed.
The DSL's `agent_state.*` fields and the bandit's context vector read this.
Pure: no I/O, one pass over the history for the cumulative fields and a
latest-turn-only walk for the "just happened" ones.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import orjson

from tiergate.core.model import ChatRequest, Message, ToolCall
from tiergate.routing.difficulty import latest_turn
from tiergate.routing.strikes import is_edit_call, looks_like_test_failure

PATH_ARGUMENT_KEYS: tuple[str, ...] = (
    "path",
    "file_path",
    "filepath",
    "file",
    "filename",
    "target_file",
    "notebook_path",
)
"""Argument names that carry the edited file's path in common agent tool schemas."""

_PATCH_PATH_RE = re.compile(r"^(?:\*\*\* (?:Update|Add|Delete) File: |\+\+\+ b/)(\S+)", re.M)


@dataclass(frozen=True, slots=True)
class AgentState:
    """What the conversation so far says about the agent's progress.

    turns: user turns so far, the current one included (a run of consecutive user
        messages is one turn; tool results are not user turns).
    tools_used: names of every tool the assistant has called.
    files_edited: paths passed to file-changing tools (strikes.is_edit_call decides
        which calls edit, so the DSL and the strike producers agree).
    tool_calls: how many tool calls the assistant has made.
    tests_failed: a tool result in the latest turn looks like a failing test run
        (strikes.looks_like_test_failure).
    tool_errors: tool results in the latest turn marked as errors.
    """

    turns: int = 0
    tools_used: frozenset[str] = frozenset()
    files_edited: frozenset[str] = frozenset()
    tool_calls: int = 0
    tests_failed: bool = False
    tool_errors: int = 0


def edited_paths(call: ToolCall) -> list[str]:
    """Paths a tool call edits, or [] when it is not a file-changing call."""
    return list(_edited_paths(call.name, call.arguments))


@functools.lru_cache(maxsize=16_384)
def _edited_paths(name: str, arguments: str) -> tuple[str, ...]:
    """Memoised by the call's name and arguments: agents resend every earlier call
    each turn, and deciding "is this an edit" parses the arguments."""
    call = ToolCall("", name, arguments)
    if not is_edit_call(call):
        return ()
    try:
        args = orjson.loads(call.arguments) if call.arguments.strip() else {}
    except orjson.JSONDecodeError:
        return ()
    if not isinstance(args, dict):
        return ()
    paths = [args[k] for k in PATH_ARGUMENT_KEYS if isinstance(args.get(k), str) and args[k]]
    for v in args.values():  # apply_patch-style tools carry paths inside the patch text
        if isinstance(v, str) and ("*** " in v or "+++ " in v):
            paths.extend(_PATCH_PATH_RE.findall(v))
    return tuple(paths)


def agent_state(req: ChatRequest) -> AgentState:
    """Derive the AgentState of a request (one pass over the history)."""
    turns = 0
    tools: set[str] = set()
    files: set[str] = set()
    calls = 0
    previous_role: str | None = None
    for m in req.messages:
        if m.role == "user" and previous_role != "user":
            turns += 1
        if m.role != "system":  # an injected instruction does not split a user turn
            previous_role = m.role
        for call in m.tool_calls:
            calls += 1
            tools.add(call.name)
            files.update(edited_paths(call))
    tests_failed, tool_errors = latest_agent_facts(req)
    return AgentState(
        turns=turns,
        tools_used=frozenset(tools),
        files_edited=frozenset(files),
        tool_calls=calls,
        tests_failed=tests_failed,
        tool_errors=tool_errors,
    )


def latest_agent_facts(req: ChatRequest) -> tuple[bool, int]:
    """(tests just failed, tool errors) of the latest turn: the non-cumulative fields."""
    latest = latest_turn(req)
    return tests_just_failed(latest), sum(1 for m in latest if m.role == "tool" and m.is_error)


def tests_just_failed(turn: list[Message]) -> bool:
    """A tool result of this turn reads like a failing test run."""
    return any(m.role == "tool" and looks_like_test_failure(m.text()) for m in turn)
