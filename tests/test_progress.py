"""Stuck detection (routing.progress): failing is work, failing the same way is stuck.

Sessions are rendered in both protocols (tool calls with tool results, and a
text agent's ```bash blocks with mini-swe-agent observations), so every property
holds for both.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.core.model import ChatRequest, Message, TextPart, ToolCall
from tiergate.routing.progress import (
    DIVERSITY_STRIKE,
    MIN_COMMAND_REPEATS,
    STATE_LIMIT,
    SURVIVAL_STRIKE,
    Progress,
    progress_of,
)
from tiergate.routing.strikes import ProgressCache, request_strikes


@dataclass(frozen=True)
class Run:
    command: str
    failing_test: str | None  # None: the run passes


@dataclass(frozen=True)
class Edit:
    n: int  # distinct edits have distinct n


Step = Run | Edit


def output(step: Run) -> tuple[int, str]:
    if step.failing_test is None:
        return (
            0,
            "============================== 4 passed in 0.10s ===============================\n",
        )
    return 1, (
        f"FAILED tests/test_core.py::{step.failing_test} - AssertionError: assert 1 == 2\n"
        "========================= 1 failed, 3 passed in 0.10s ==========================\n"
    )


def session(steps: list[Step], text: bool) -> list[Message]:
    """One agent reply and one observation per step, after the user's ask."""
    msgs = [Message("user", [TextPart("Make the parser tests pass.")])]
    for i, step in enumerate(steps):
        if isinstance(step, Edit):
            command = f"sed -i 's/old{step.n}/new{step.n}/' pkg/core.py"
            code, out = 0, ""
        else:
            command = step.command
            code, out = output(step)
        if text:
            msgs.append(
                Message("assistant", [TextPart(f"THOUGHT: go.\n\n```bash\n{command}\n```")])
            )
            body = f"<returncode>{code}</returncode>\n<output>\n{out}</output>"
            msgs.append(Message("user", [TextPart(body)]))
        elif isinstance(step, Edit):
            args = orjson.dumps(
                {
                    "file_path": "pkg/core.py",
                    "old_string": f"old{step.n}",
                    "new_string": f"new{step.n}",
                }
            ).decode()
            msgs.append(Message("assistant", tool_calls=[ToolCall(f"c{i}", "Edit", args)]))
            msgs.append(Message("tool", [TextPart("Edited pkg/core.py")], tool_call_id=f"c{i}"))
        else:
            args = orjson.dumps({"command": command}).decode()
            msgs.append(Message("assistant", tool_calls=[ToolCall(f"c{i}", "bash", args)]))
            msgs.append(Message("tool", [TextPart(out)], tool_call_id=f"c{i}"))
    return msgs


def stuck_reasons(steps: list[Step], text: bool) -> list[str]:
    return [s.reason for s in progress_of(session(steps, text)).stuck]


commands = st.sampled_from(["pytest -q", "python reproduce.py", "pytest tests/test_core.py"])
tests = st.sampled_from([f"test_{i}" for i in range(6)])


@st.composite
def fix_cycles(draw: st.DrawFn) -> list[Step]:
    """fail -> edit -> pass, again and again: the shape of progress."""
    steps: list[Step] = []
    for n in range(draw(st.integers(1, 6))):
        command = draw(commands)
        steps += [Run(command, draw(tests)), Edit(n), Run(command, None)]
    return steps


@settings(max_examples=150, deadline=None)
@given(fix_cycles(), st.booleans())
def test_fail_edit_pass_never_strikes(steps: list[Step], text: bool) -> None:
    assert stuck_reasons(steps, text) == []


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 6), tests, st.lists(commands, min_size=7, max_size=7), st.booleans())
def test_the_same_failure_across_edits_strikes_at_the_threshold(
    repeats: int, test: str, runs: list[str], text: bool
) -> None:
    """The failure is seen once, then again after each of `repeats` edits (whatever
    command shows it): it strikes exactly from the SURVIVAL_STRIKE-th survival on."""
    steps: list[Step] = [Run(runs[0], test)]
    for n in range(repeats):
        steps += [Edit(n), Run(runs[n + 1], test)]
    reasons = stuck_reasons(steps, text)
    assert reasons.count("failure_survives_edits") == max(0, repeats - SURVIVAL_STRIKE + 1)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5), commands, tests, st.booleans())
def test_the_same_command_failing_the_same_way_strikes(
    times: int, command: str, test: str, text: bool
) -> None:
    reasons = stuck_reasons([Run(command, test)] * times, text)
    assert reasons.count("repeated_failing_command") == max(0, times - MIN_COMMAND_REPEATS + 1)
    assert "failure_survives_edits" not in reasons  # no edit was made


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 8), st.booleans())
def test_new_failures_after_edits_strike_only_when_nothing_passes(n: int, text: bool) -> None:
    steps: list[Step] = []
    for i in range(n):
        steps += [Edit(i), Run("pytest -q", f"test_{i}")]
    assert stuck_reasons(steps, text).count("diverging_failures") == max(
        0, n - DIVERSITY_STRIKE + 1
    )
    with_passes: list[Step] = []
    for i in range(n):
        with_passes += [Edit(i), Run("pytest -q", f"test_{i}"), Run("pytest -q", None)]
    assert stuck_reasons(with_passes, text) == []


def test_a_failing_reproduction_before_any_edit_is_not_evidence() -> None:
    for text in (False, True):
        assert stuck_reasons([Run("python reproduce.py", "test_0")], text) == []


def test_request_strikes_report_only_the_latest_turn() -> None:
    steps: list[Step] = [Run("pytest -q", "test_0"), Edit(0), Run("pytest -q", "test_0")]
    steps += [Edit(1), Run("pytest -q", "test_0")]
    for text in (False, True):
        msgs = session(steps, text)
        req = ChatRequest(model="m", messages=msgs)
        assert [s.reason for s in request_strikes(req)] == ["failure_survives_edits"]
        later = ChatRequest(model="m", messages=msgs[:-2])
        assert request_strikes(later) == []


def test_the_fold_is_incremental_and_copies_are_independent() -> None:
    msgs = session([Run("pytest -q", "test_0"), Edit(0), Run("pytest -q", "test_0")], True)
    progress = Progress()
    for i, m in enumerate(msgs[:3]):
        progress.add(m, i)
    snapshot = progress.copy()
    for i, m in enumerate(msgs[3:], start=3):
        progress.add(m, i)
    assert progress == progress_of(msgs)
    assert snapshot.edits == 0 and progress.edits == 1


def test_state_stays_bounded() -> None:
    steps: list[Step] = []
    for i in range(STATE_LIMIT + 50):
        steps += [Edit(i), Run(f"pytest -k case{i}", f"test_{i}")]
    progress = progress_of(session(steps, False))
    assert len(progress.seen) <= STATE_LIMIT and len(progress.failing) <= STATE_LIMIT
    assert len(progress.diverse) <= STATE_LIMIT and len(progress.stuck) <= 8


# ---- ProgressCache: request_strikes without a session summary ------------------------


def requests_of(msgs: list[Message]) -> list[list[Message]]:
    """The requests an agent sends along `msgs`: each ends on an observation."""
    return [msgs[:end] for end in range(1, len(msgs) + 1) if msgs[end - 1].role != "assistant"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(fix_cycles(), st.just([Edit(9), Run("pytest", "t1")]))), st.booleans())
def test_the_cache_extends_the_previous_request_exactly(
    blocks: list[list[Step]], text: bool
) -> None:
    cache = ProgressCache()
    msgs = session([step for block in blocks for step in block], text)
    for request in requests_of(msgs):
        assert cache.fold(request) == progress_of(request)
        assert cache.fold(request) is cache.fold(request)  # a retry reads nothing


def test_sessions_sharing_a_prompt_and_a_last_output_do_not_share_a_fold() -> None:
    cache = ProgressCache()
    steps: list[Step] = [Run("pytest -q", "test_0"), Edit(0), Run("pytest -q", "test_0")]
    stuck = session([*steps, Edit(1), Run("pytest -q", "test_0")], True)
    other = session([Run("ls", None), Run("cat a.py", None), Run("git diff", None)], True)
    other[1] = Message("assistant", [TextPart("A different reply.\n\n```bash\nls -la\n```")])
    other = [*other, *stuck[len(other) :]]  # same length, same last message
    assert len(other) == len(stuck) and other[-1] == stuck[-1] and other[0] == stuck[0]
    assert cache.fold(stuck).stuck and cache.fold(other) == progress_of(other)
