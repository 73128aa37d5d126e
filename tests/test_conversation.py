"""Conversations inside a session: the key, side requests, per-conversation evidence.

A session (the user's task) holds several conversations: the main thread,
sub-agents, side requests. Evidence counts within a conversation, the tier is
the session's (routing.conversation, docs/agents.md).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from escalation_support import REQ_STRIKE, SessionDriver, make_router
from tiergate.core.model import ChatRequest, Message, TextPart, ToolSpec
from tiergate.routing.conversation import (
    SIDE_MAX_TOKENS,
    conversation_key,
    is_side_request,
    transcript_key,
)
from tiergate.routing.session import FINGERPRINT, SessionId
from tiergate.routing.strikes import Strike
from tiergate.routing.tier_state import (
    MAX_STREAKS,
    RecordTurn,
    StrikeMark,
    TierState,
    TurnOutcome,
    apply_intents,
)
from tiergate.state.memory import MemoryStore

HIGH, LOW = 0.72, 0.23

text = st.text(min_size=1, max_size=40)
turns = st.lists(st.tuples(st.sampled_from(["assistant", "user"]), text), min_size=0, max_size=8)


def anthropic_body(system: str, first: str, later: list[tuple[str, str]]) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": first}]}]
    msgs += [{"role": r, "content": t} for r, t in later]
    return {
        "model": "orcarouter/coding",
        "system": [{"type": "text", "text": system}],
        "messages": msgs,
    }


# ---- the key ------------------------------------------------------------------------


@given(system=text, first=text, history=turns, more=turns)
def test_a_growing_history_keeps_its_conversation(
    system: str, first: str, history: list[tuple[str, str]], more: list[tuple[str, str]]
) -> None:
    before = conversation_key(anthropic_body(system, first, history))
    after = conversation_key(anthropic_body(system, first, history + more))
    assert before is not None and before == after


@given(system=text, first=text, other=text, history=turns)
def test_another_opening_is_another_conversation(
    system: str, first: str, other: str, history: list[tuple[str, str]]
) -> None:
    main = conversation_key(anthropic_body(system, first, history))
    if other != first:  # a sub-agent: its own task as the first user message
        assert conversation_key(anthropic_body(system, other, history)) != main
    if other != system:  # a side request: its own system prompt
        assert conversation_key(anthropic_body(other, first, history)) != main


def test_the_key_reads_all_three_formats_and_ignores_cache_breakpoints() -> None:
    openai = {
        "messages": [
            {"role": "system", "content": "You are an agent."},
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": "ok"},
        ]
    }
    anthropic = {
        "system": [
            {"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral"}}
        ],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "fix it"}]}],
    }
    responses = {"instructions": "You are an agent.", "input": "fix it"}
    keys = {conversation_key(b) for b in (openai, anthropic, responses)}
    assert len(keys) == 1 and None not in keys
    assert conversation_key({"messages": [{"role": "assistant", "content": "hi"}]}) is None
    assert transcript_key(None, "c") is None
    assert transcript_key("s", None) == "s" and transcript_key("s", "c") == "s:c"


def test_a_side_request_is_toolless_with_a_tiny_budget() -> None:
    def req(tools: bool, max_tokens: int | None) -> ChatRequest:
        spec = [ToolSpec("Bash", "run", {"type": "object"})] if tools else []
        return ChatRequest(
            "m", [Message("user", [TextPart("quota")])], tools=spec, max_tokens=max_tokens
        )

    assert is_side_request(req(False, 1))  # Claude Code's quota probe
    assert is_side_request(req(False, SIDE_MAX_TOKENS))  # a title
    assert not is_side_request(req(False, SIDE_MAX_TOKENS + 1))
    assert not is_side_request(req(False, None))  # aider, mini-swe-agent's text mode
    assert not is_side_request(req(True, 1))  # a tool turn is a conversation turn
    chat = req(False, 512)
    chat.messages += [Message("assistant", [TextPart("hi")]), Message("user", [TextPart("more")])]
    assert not is_side_request(chat)  # a small-budget chat is a conversation from turn 2
    explicit = SessionId("s-1", "header:x-session-id", True)
    fingerprinted = SessionId("fp:1", FINGERPRINT, False)
    assert is_side_request(req(False, 1), explicit)
    assert not is_side_request(req(False, 1), fingerprinted)  # one conversation by construction


# ---- the stored state ----------------------------------------------------------------


marks = st.lists(
    st.builds(
        StrikeMark,
        st.text(max_size=8),
        st.floats(0, 1e10, allow_nan=False),
        st.text(max_size=8),
        st.sampled_from(["", "aaaa", "bbbb"]),
    ),
    max_size=6,
)


@given(marks=marks, streaks=st.dictionaries(st.sampled_from(["", "a", "b"]), st.integers(1, 9)))
def test_tagged_evidence_round_trips_and_stays_readable_by_older_readers(
    marks: list[StrikeMark], streaks: dict[str, int]
) -> None:
    state = TierState(strikes=marks, streaks=streaks)
    raw = state.to_bytes()
    assert TierState.from_bytes(raw) == state
    doc = orjson.loads(raw)
    # what a reader from before the tags does: three-element marks, one streak
    assert [(t, a, r) for t, a, r in doc["k"]] == [(m.turn, m.at, m.reason) for m in marks]
    assert doc["d"] == max(streaks.values(), default=0)


def test_a_state_from_before_the_tags_counts_for_every_conversation() -> None:
    raw = orjson.dumps(
        {"t": "base", "e": 0, "d": 1, "k": [["t1", 100.0, "repeated_failing_command"]]}
    )
    state = TierState.from_bytes(raw)
    assert state is not None
    assert state.streak_of("main") == state.streak_of("sub") == 1
    assert (
        len(state.live_strikes(200.0, 900.0, "main"))
        == len(state.live_strikes(200.0, 900.0, "sub"))
        == 1
    )
    # the first tagged turn takes the untagged streak over
    state.set_streak("main", 2)
    assert state.streaks == {"main": 2} and state.streak_of("sub") == 0


def test_streaks_are_bounded() -> None:
    state = TierState()
    for i in range(MAX_STREAKS + 3):
        state.set_streak(f"c{i}", 1)
    assert len(state.streaks) == MAX_STREAKS and f"c{MAX_STREAKS + 2}" in state.streaks


def test_a_side_turn_records_nothing_but_its_id() -> None:
    esc = make_router().escalation
    before = TierState(tier="strong", streaks={"main": 1})
    outcome = TurnOutcome(
        success=True,
        served_tier="strong",
        response_strikes=(Strike("truncated_by_length", "response"),),
    )
    after, _ = apply_intents(
        before, [RecordTurn("t9", True, None, conv="side", evaluated=False)], outcome, esc, 10.0
    )
    assert after.seen_turns == ["t9"]
    assert after.strikes == [] and after.streaks == {"main": 1} and after.clean_turns == 0
    assert before.streaks == {"main": 1}  # pure: the input is not touched


# ---- the engine: evidence per conversation, tier per session ----------------------------


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _mixed_strikes(conversations: tuple[str, str]) -> list[str | None]:
    d = SessionDriver(MemoryStore(), make_router())
    headers = []
    for conv in conversations:
        t = await d.turn(strikes=[REQ_STRIKE], conversation=conv)
        headers.append(t.decision.header)
    return headers


def test_one_strike_in_each_of_two_conversations_does_not_escalate() -> None:
    assert run(_mixed_strikes(("main", "sub"))) == ["base", "base"]
    # the same two strikes in one conversation do (the threshold is 2)
    assert run(_mixed_strikes(("main", "main"))) == ["base", "strong; reason=strikes"]


async def test_a_sub_agent_failure_loop_escalates_the_session_and_the_main_thread_follows() -> None:
    d = SessionDriver(MemoryStore(), make_router())
    await d.turn(conversation="main")
    await d.turn(strikes=[REQ_STRIKE], conversation="sub")
    t = await d.turn(strikes=[REQ_STRIKE], conversation="sub")
    assert t.decision.header == "strong; reason=strikes"
    t = await d.turn(conversation="main")  # the task earned it: the tier is the session's
    assert t.decision.serve_tier == "strong" and t.decision.header == "strong"
    state = await d.state()
    assert state is not None and state.escalations_used == 1


async def test_difficulty_streaks_are_per_conversation() -> None:
    d = SessionDriver(MemoryStore(), make_router())
    await d.turn(delta=HIGH, conversation="main")
    t = await d.turn(delta=HIGH, conversation="sub")  # not the main thread's second high turn
    assert t.decision.serve_tier == "base" and t.decision.difficulty_streak == 1
    await d.turn(delta=LOW, conversation="sub")  # an easy sub-agent turn resets only its own
    t = await d.turn(delta=HIGH, conversation="main")
    assert t.decision.header == "strong; reason=difficulty"


async def test_a_side_request_neither_resets_nor_advances_the_main_thread() -> None:
    d = SessionDriver(MemoryStore(), make_router())
    await d.turn(delta=HIGH, conversation="main")
    side = await d.turn(delta=LOW, conversation="main", side=True, strikes=[REQ_STRIKE])
    assert side.decision.serve_tier == "base" and side.commit.committed
    t = await d.turn(delta=HIGH, conversation="main")
    assert t.decision.header == "strong; reason=difficulty"  # the streak survived the side request
    state = await d.state()
    assert state is not None and state.strikes == []  # the side request's strike was not recorded


async def test_a_side_request_follows_the_session_tier_but_never_de_escalates() -> None:
    d = SessionDriver(MemoryStore(), make_router(deescalate_clean_turns=1))
    await d.turn(tier="strong", conversation="main")
    await d.turn(conversation="main")
    # cache-cold, clean turns done, an easy turn: a conversation turn would de-escalate
    side = await d.turn(delta=LOW, idle=3600, conversation="title", side=True)
    assert side.decision.serve_tier == "strong" and side.decision.reason is None
    t = await d.turn(delta=LOW, conversation="main")
    assert t.decision.header == "base; reason=de_escalated"


async def test_equal_turn_ids_in_two_conversations_are_two_turns() -> None:
    # turn_key mixes the conversation in; the engine dedupes on the id it gets
    from tiergate.routing.conversation import turn_key

    req = ChatRequest("m", [Message("user", [TextPart("No files found")])])
    assert turn_key(req, "a") != turn_key(req, "b")
    assert turn_key(req) == turn_key(req, "")


# ---- property: a conversation's evidence is what it would be alone -----------------------

turn_st = st.tuples(st.sampled_from([None, LOW, HIGH]), st.booleans())


@settings(max_examples=60, deadline=None)
@given(
    main=st.lists(turn_st, min_size=1, max_size=8),
    sub=st.lists(turn_st, max_size=8),
    side=st.lists(st.sampled_from([None, LOW, HIGH]), max_size=4),
    order=st.randoms(use_true_random=False),
)
def test_interleaving_other_conversations_leaves_the_main_evidence_unchanged(
    main: list[tuple[float | None, bool]],
    sub: list[tuple[float | None, bool]],
    side: list[float | None],
    order: Any,
) -> None:
    """Manual mode records evidence but never transitions, so the evidence each
    main-thread turn sees must be exactly what it sees with the main thread alone."""

    async def play(schedule: list[tuple[str, Any]]) -> list[tuple[int, int]]:
        d = SessionDriver(MemoryStore(), make_router("manual", strike_decay_seconds=1e9))
        seen = []
        for conv, item in schedule:
            if conv == "side":
                await d.turn(delta=item, conversation="side", side=True, strikes=[REQ_STRIKE])
                continue
            delta, strike = item
            t = await d.turn(delta=delta, strikes=[REQ_STRIKE] if strike else [], conversation=conv)
            if conv == "main":
                seen.append((t.decision.strike_count, t.decision.difficulty_streak))
        return seen

    alone = [("main", t) for t in main]
    mixed: list[tuple[str, Any]] = [
        *alone,
        *(("sub", t) for t in sub),
        *(("side", t) for t in side),
    ]
    order.shuffle(mixed)
    # keep the main thread's own order
    it = iter(alone)
    mixed = [next(it) if conv == "main" else (conv, t) for conv, t in mixed]
    assert run(play(mixed)) == run(play(alone))


@pytest.mark.parametrize("conv", ["", "main"])
async def test_an_untagged_request_still_sees_all_its_session_evidence(conv: str) -> None:
    d = SessionDriver(MemoryStore(), make_router())
    await d.turn(strikes=[REQ_STRIKE])  # untagged, as callers that name no conversation
    t = await d.turn(strikes=[REQ_STRIKE], conversation=conv)
    assert t.decision.header == "strong; reason=strikes"


def test_interleaved_conversations_each_extend_their_own_transcript_summary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The hot path: a sub-agent's turns between two main-thread turns no longer
    make the main thread's next turn re-read its whole transcript."""
    from tiergate.routing import transcript

    reads: list[int] = []
    original = transcript.TranscriptSummary.add

    def counting(self: transcript.TranscriptSummary, m: Message, index: int) -> None:
        reads.append(index)
        original(self, m, index)

    monkeypatch.setattr(transcript.TranscriptSummary, "add", counting)

    def convo(first: str, n: int) -> ChatRequest:
        msgs = [Message("user", [TextPart(first)])]
        for i in range(1, n):
            msgs.append(Message("assistant" if i % 2 else "user", [TextPart(f"{first} {i}")]))
        return ChatRequest("m", msgs)

    cache = transcript.TranscriptCache()
    main_key, sub_key = transcript_key("scope", "main"), transcript_key("scope", "sub")
    cache.summarize(main_key, convo("fix the test", 40))
    cache.summarize(sub_key, convo("look into calc.py", 10))
    reads.clear()
    summary = cache.summarize(main_key, convo("fix the test", 42))
    assert reads == [40, 41] and summary.count == 42  # only the two new messages
