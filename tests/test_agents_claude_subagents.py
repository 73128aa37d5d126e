"""Claude Code's sub-agents through tiergate: one session, two conversations.

The `delegate` scripts make the simulator answer the lead conversation's first
turn with a call of Claude Code's Agent tool, so the real CLI starts a
sub-agent: its own system prompt, its own history, the delegated task as its
first user message, and the parent's session id (header and
`metadata.user_id`). The gateway must see two conversations in one session
(routing.conversation): each warm on the session's key, evidence per
conversation, the tier the task's.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path

import pytest

from agents_support import STRONG, WEAK, Turn
from test_agents_claude_code import run_claude
from tiergate.routing.conversation import conversation_key

pytestmark = pytest.mark.agents
CACHE_STEP = 128  # the simulator's OpenAI cache grid past 1,024 tokens


def conversations(turns: list[Turn]) -> tuple[list[Turn], list[Turn]]:
    """(lead, sub-agent) requests in order; the lead made the session's first request."""
    by_key: dict[str | None, list[Turn]] = defaultdict(list)
    for t in turns:
        by_key[conversation_key(t.body)].append(t)
    assert len(by_key) == 2, sorted(map(str, by_key))
    lead = by_key[conversation_key(turns[0].body)]
    sub = next(v for v in by_key.values() if v is not lead)
    return lead, sub


def warm(turns: list[Turn]) -> bool:
    """Each request read its conversation's previous prompt from the cache (to the grid)."""
    return all(
        t.cache_read_tokens >= prev.input_tokens // CACHE_STEP * CACHE_STEP
        for prev, t in itertools.pairwise(turns)
        if prev.model == t.model
    )


def test_a_claude_code_sub_agent_is_its_own_conversation_in_the_session(tmp_path: Path) -> None:
    bench, result = run_claude(tmp_path, "delegate")
    report = bench.report
    assert result["subtype"] == "success" and not result["is_error"], report.summary()
    assert not report.failed and report.side_requests == 0, report.summary()
    assert report.session_sources == {"header:x-claude-code-session-id"}
    lead, sub = conversations(report.turns)
    # lead: delegate, check, done; sub-agent: the fix script's four turns
    assert (len(lead), len(sub)) == (3, 4), report.summary()
    assert [conversation_key(t.body) for t in report.turns[1:5]] == [
        conversation_key(sub[0].body)
    ] * 4
    # one session, one model and key: each conversation warm on it after its first turn
    assert report.keys == {(WEAK, report.turns[0].key_index)}, report.summary()
    assert {t.tier_header for t in report.turns} == {"base"}, report.summary()
    assert warm(lead) and warm(sub), report.summary()
    # the sub-agent's first request already reads the prefix it shares with the lead
    # (Claude Code's tool definitions) from the session's key
    assert sub[0].cache_read_tokens > 0, report.summary()
    assert bench.calc_fixed() and bench.tests_pass()


def test_one_strike_in_the_sub_agent_and_one_in_the_lead_escalate_nothing(
    tmp_path: Path,
) -> None:
    """`delegate-split`: the sub-agent and then the lead each play the loop only up
    to their first strike. Two strikes in the session, never two in one
    conversation. With one evidence record per session (the conversation key
    forced off) the lead escalated by strikes on its 7th request."""
    bench, _ = run_claude(tmp_path, "delegate-split")
    report = bench.report
    assert not report.failed, report.summary()
    lead, sub = conversations(report.turns)
    assert (len(lead), len(sub)) == (7, 6), report.summary()
    assert {t.tier_header for t in report.turns} == {"base"}, report.summary()
    assert report.keys == {(WEAK, report.turns[0].key_index)}, report.summary()
    assert warm(lead) and warm(sub), report.summary()
    assert not bench.tests_pass()


def test_a_claude_code_sub_agent_failure_loop_escalates_the_task(tmp_path: Path) -> None:
    bench, _ = run_claude(tmp_path, "delegate-loop")
    report = bench.report
    assert not report.failed, report.summary()
    lead, sub = conversations(report.turns)
    tiers = [t.tier_header for t in sub]
    assert "strong; reason=strikes" in tiers, report.summary()
    first = tiers.index("strong; reason=strikes")
    assert all(t == "base" for t in tiers[:first]), report.summary()
    assert all(t.model == STRONG for t in sub[first:]), report.summary()
    # the lead delegated on base; once the task has escalated it is served strong too
    assert lead[0].tier_header == "base" and lead[0].model == WEAK
    assert all(t.model == STRONG and t.tier_header == "strong" for t in lead[1:]), report.summary()
    assert len({(t.model, t.key_index) for t in report.turns if t.model == STRONG}) == 1
    assert not bench.tests_pass()
