"""Bounded, read-only observation of streamed and non-streamed tool-call ids."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from tiergate.core.model import (
    ChatResponse,
    StreamEnd,
    StreamEvent,
    StreamStart,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from tiergate.lanes import ToolCallObserver, observe_events, observe_response


def end(reason: str = "tool_calls") -> StreamEnd:
    return StreamEnd(finish_reason=reason, usage=Usage(1, 1))  # type: ignore[arg-type]


def calls(*ids: str) -> list[StreamEvent]:
    out: list[StreamEvent] = []
    for i, tool_id in enumerate(ids):
        out += [ToolCallStart(i, tool_id, "run"), ToolCallDelta(i, '{"a":'), ToolCallDelta(i, "1}")]
    return out


def observed(events: Sequence[StreamEvent]) -> tuple[str, ...] | None:
    obs = ToolCallObserver()
    for e in events:
        obs.feed(e)
    return obs.result()


def test_ids_are_collected_in_call_order() -> None:
    events: list[StreamEvent] = [StreamStart("r", "m"), TextDelta("hi")]
    events += [*calls("call_a", "call_b"), end()]
    assert observed(events) == ("call_a", "call_b")


def test_plain_text_turn_has_no_ids() -> None:
    events: list[StreamEvent] = [StreamStart("r", "m"), TextDelta("hi"), end("stop")]
    assert observed(events) == ()


def test_repeated_start_with_the_same_id_is_fine() -> None:
    events: list[StreamEvent] = [ToolCallStart(0, "c", "run"), ToolCallStart(0, "c", "run"), end()]
    assert observed(events) == ("c",)


def test_limits_128_ids_of_200_chars() -> None:
    ids = [f"c{i}" for i in range(128)]
    assert observed([*calls(*ids), end()]) == tuple(ids)
    assert observed([*calls(*ids, "c128"), end()]) is None
    assert observed([*calls("x" * 200), end()]) == ("x" * 200,)
    assert observed([*calls("x" * 201), end()]) is None


def test_unknown_states() -> None:
    assert observed(calls("c")) is None  # no final event: incomplete
    assert observed([StreamStart("r", "m"), end("tool_calls")]) is None  # tool_calls, no ids
    assert observed([*calls(""), end()]) is None  # empty id
    assert observed([ToolCallDelta(0, "{}"), end()]) is None  # args for an unseen call
    assert observed([ToolCallStart(0, "a", "f"), ToolCallStart(0, "b", "f"), end()]) is None


def test_unknown_is_sticky_for_the_observation() -> None:
    obs = ToolCallObserver(max_ids=1)
    for e in [*calls("a", "b"), end()]:
        obs.feed(e)
    assert obs.result() is None and obs.finished


async def test_observe_events_yields_the_very_same_objects() -> None:
    events = [StreamStart("r", "m"), TextDelta("x"), *calls("c1"), end()]

    async def source() -> AsyncIterator[StreamEvent]:
        for e in events:
            yield e

    obs = ToolCallObserver()
    passed = [e async for e in observe_events(source(), obs)]
    assert len(passed) == len(events)
    assert all(a is b for a, b in zip(passed, events, strict=True))
    assert obs.result() == ("c1",)


def test_non_streaming_response() -> None:
    resp = ChatResponse(
        id="r",
        model="m",
        tool_calls=[ToolCall("c1", "f", "{}"), ToolCall("c2", "f", "{}")],
        finish_reason="tool_calls",
    )
    assert observe_response(resp) == ("c1", "c2")
    assert observe_response(ChatResponse(id="r", model="m", finish_reason="tool_calls")) is None
    assert observe_response(ChatResponse(id="r", model="m")) == ()
    many = [ToolCall(f"c{i}", "f", "{}") for i in range(129)]
    assert observe_response(ChatResponse(id="r", model="m", tool_calls=many)) is None
