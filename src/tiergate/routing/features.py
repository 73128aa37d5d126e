"""Agent state derived from the request alone: turns, tools used, failing tests.

Agents resend the whole conversation on every call, so the request already says
how far the session has come and what just happened; no stored state is needed.
The DSL's `agent_state.*` fields and the bandit's context vector read this.
Pure: no I/O, one pass over the history for the cumulative fields (the
routing.progress fold, which also reads text agents' commands and command
output) and a latest-turn-only walk for the "just happened" ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from tiergate.core.model import ChatRequest
from tiergate.routing.actions import PATH_ARGUMENT_KEYS, edited_paths
from tiergate.routing.observations import turn_observations
from tiergate.routing.output_shapes import looks_like_test_failure
from tiergate.routing.progress import Progress, progress_of

__all__ = ["PATH_ARGUMENT_KEYS", "AgentState", "agent_state", "edited_paths"]


@dataclass(frozen=True, slots=True)
class AgentState:
    """What the conversation so far says about the agent's progress.

    turns: user turns so far, the current one included (a run of consecutive user
        messages is one turn; tool results and text agents' command output are not
        user turns).
    tools_used: names of every tool the assistant has called ("bash" for a text
        agent's shell block).
    files_edited: paths passed to file-changing tools or edited by shell commands
        (actions.call_action decides, so the DSL and the strikes agree).
    tool_calls: how many tool calls (or text actions) the assistant has made.
    tests_failed: an observation in the latest turn looks like a failing test run
        (output_shapes.looks_like_test_failure).
    tool_errors: observations in the latest turn flagged as errors (`is_error`, or a
        non-zero exit code in a text observation).
    """

    turns: int = 0
    tools_used: frozenset[str] = frozenset()
    files_edited: frozenset[str] = frozenset()
    tool_calls: int = 0
    tests_failed: bool = False
    tool_errors: int = 0


def agent_state(req: ChatRequest, progress: Progress | None = None) -> AgentState:
    """Derive the AgentState of a request; `progress` is its fold when the caller
    has one (the transcript summary), else the history is folded here."""
    if progress is None:
        progress = progress_of(req.messages)
    tests_failed, tool_errors = latest_agent_facts(req)
    return AgentState(
        turns=progress.turns,
        tools_used=frozenset(progress.tools_used),
        files_edited=frozenset(progress.files_edited),
        tool_calls=progress.tool_calls,
        tests_failed=tests_failed,
        tool_errors=tool_errors,
    )


def latest_agent_facts(req: ChatRequest) -> tuple[bool, int]:
    """(tests just failed, errors flagged) of the latest turn: the non-cumulative fields."""
    observed = turn_observations(req.messages)
    tests_failed = any(looks_like_test_failure(m.text()) for m, _ in observed)
    return tests_failed, sum(1 for _, obs in observed if obs.error_flag)
