"""The body decode memo: equal to orjson.loads, whatever the bytes (formats/body_decode.py)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memo_support import conversations
from tiergate.formats import body_decode
from tiergate.formats.body_decode import (
    BodyDecodeMemo,
    Parts,
    common_prefix,
    same,
    scan_elements,
)

_text = st.text(alphabet=st.sampled_from(list('ab "\\{}[]:,\n\u00e9\u2028\U0001f600')), max_size=12)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool"])},
    optional={
        "content": st.one_of(
            _text,
            st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _text}), max_size=2),
        ),
        "cache_control": st.just({"type": "ephemeral"}),
    },
)
_member = st.one_of(
    st.integers(-5, 5), _text, st.booleans(), st.none(), st.lists(_text, max_size=2)
)
_layout = st.fixed_dictionaries(
    {
        "head": st.dictionaries(st.sampled_from(["model", "system", "n"]), _member, max_size=2),
        "rest": st.dictionaries(st.sampled_from(["tools", "stream", "model", "x"]), _member),
    }
)


def _encode(body: dict[str, Any], style: int) -> bytes:
    """The same object as different clients write it."""
    if style == 0:
        return orjson.dumps(body)  # compact, UTF-8 (Node's JSON.stringify)
    if style == 1:
        return json.dumps(body).encode()  # ", " and ": ", \\u escapes (Python SDKs)
    return json.dumps(body, indent=2, ensure_ascii=False).encode()


def _body(layout: dict[str, Any], messages: list[Any], field: str = "messages") -> dict[str, Any]:
    return {**layout["head"], field: messages, **layout["rest"]}


def _check(memo: BodyDecodeMemo, raw: bytes, field: str = "messages") -> Any:
    got = memo.loads(raw, field)
    want = orjson.loads(raw)
    assert got == want
    assert list(got) == list(want)  # member order too
    return got


#: A conversation's turns, the request layout around them, and a client style per turn.
_conversation = (
    conversations(_message),
    _layout,
    st.lists(st.integers(0, 2), min_size=8, max_size=8),
)


@settings(max_examples=300, deadline=None)
@given(*_conversation, st.booleans())
def test_equal_to_orjson_over_a_conversation(
    history: list[list[Any]], layout: dict[str, Any], styles: list[int], rest_changes: bool
) -> None:
    memo = BodyDecodeMemo(min_bytes=0, key_bytes=1)
    for i, messages in enumerate(history):
        if rest_changes and i % 2:
            layout = {**layout, "rest": {**layout["rest"], "turn": i}}
        _check(memo, _encode(_body(layout, messages), styles[i % len(styles)]))


@settings(max_examples=200, deadline=None)
@given(conversations(_message), st.integers(0, 2), st.data())
def test_corrupted_bodies_fail_exactly_when_orjson_does(
    history: list[list[Any]], style: int, data: st.DataObject
) -> None:
    memo = BodyDecodeMemo(min_bytes=0, key_bytes=1)
    for messages in history:
        raw = _encode({"model": "m", "messages": messages, "tools": []}, style)
        cut = data.draw(st.integers(0, len(raw)))
        damaged = data.draw(st.sampled_from([raw[:cut], raw[:cut] + b"]" + raw[cut:], raw]))
        try:
            want = orjson.loads(damaged)
        except orjson.JSONDecodeError:
            with pytest.raises(orjson.JSONDecodeError):
                memo.loads(damaged)
        else:
            assert memo.loads(damaged) == want


def _split(raw: bytes, cuts: list[int]) -> list[bytes]:
    """`raw` in the pieces a server could hand it over in (empty ones included)."""
    at = sorted({min(c, len(raw)) for c in cuts})
    return [raw[a:b] for a, b in zip([0, *at], [*at, len(raw)], strict=True)]


@settings(max_examples=300, deadline=None)
@given(*_conversation, st.data())
def test_bodies_in_pieces_decode_as_the_joined_bytes(
    history: list[list[Any]], layout: dict[str, Any], styles: list[int], data: st.DataObject
) -> None:
    """Each turn's body split at random points, as uvicorn hands a long body over:
    the memo compares and slices the pieces in place and decodes what orjson
    decodes of their concatenation, reusing the history as a joined body would."""
    memo = BodyDecodeMemo(min_bytes=0, key_bytes=1)
    joined = BodyDecodeMemo(min_bytes=0, key_bytes=1)
    before: tuple[list[Any], list[Any]] = ([], [])
    for i, messages in enumerate(history):
        raw = _encode(_body(layout, messages), styles[i % len(styles)])
        cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=6))
        got = memo.loads_parts(_split(raw, cuts))
        want = joined.loads(raw)
        assert got == orjson.loads(raw) and list(got) == list(want)
        # the messages reused from the turn before are those reused with joined bodies
        got_m, want_m = got.get("messages") or [], want.get("messages") or []
        assert [g is b for g, b in zip(got_m, before[0], strict=False)] == [
            w is b for w, b in zip(want_m, before[1], strict=False)
        ]
        before = (got_m, want_m)


@given(st.binary(max_size=48), st.binary(max_size=48), st.data())
def test_compares_across_pieces_agree_with_bytes(a: bytes, b: bytes, data: st.DataObject) -> None:
    pa = Parts(_split(a, data.draw(st.lists(st.integers(0, 48), max_size=5))))
    pb = Parts(_split(a + b, data.draw(st.lists(st.integers(0, 96), max_size=5))))
    pc = Parts(_split(b, data.draw(st.lists(st.integers(0, 48), max_size=5))))
    assert common_prefix(pb, pa) == len(a)
    whole = common_prefix(Parts((a,)), Parts((b,)))
    assert common_prefix(pa, pc) == whole
    assert a[:whole] == b[:whole] and (whole == min(len(a), len(b)) or a[whole] != b[whole])
    i = data.draw(st.integers(0, len(a)))
    j = data.draw(st.integers(0, len(b)))
    n = data.draw(st.integers(0, 48))
    assert same(pa, i, pc, j, n) == (
        i + n <= len(a) and j + n <= len(b) and a[i : i + n] == b[j : j + n]
    )
    assert pb.slice(i, i + n) == (a + b)[i : i + n]


def _agent_turns(turns: int) -> list[bytes]:
    system = "You are a coding agent. " * 800  # over MIN_BYTES from the first turn
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    bodies = []
    for t in range(turns):
        messages.append({"role": "user" if t % 2 else "tool", "content": f"result {t} " * 50})
        bodies.append(orjson.dumps({"model": "m", "messages": messages, "tools": [{"a": 1}]}))
    return bodies


def test_a_growing_conversation_reuses_the_decoded_history() -> None:
    memo = BodyDecodeMemo()
    bodies = _agent_turns(12)
    previous = None
    for raw in bodies:
        body = _check(memo, raw)
        if previous is not None:
            assert body["messages"][0] is previous["messages"][0]  # reused, not decoded
            assert body["messages"][-2] is previous["messages"][-1]
            assert body["tools"] is previous["tools"]  # unchanged bytes after the array
        previous = body
    assert len(memo) == 1


def test_a_growing_conversation_in_pieces_reuses_the_history_without_a_join() -> None:
    """Bodies handed over in 1 KB pieces, as uvicorn hands over a long one in 64 KB
    pieces: the history is reused, and what the slot keeps is the pieces."""
    memo = BodyDecodeMemo()
    previous = None
    for raw in _agent_turns(12):
        parts = [raw[i : i + 1024] for i in range(0, len(raw), 1024)]
        body = memo.loads_parts(parts)
        assert body == orjson.loads(raw)
        if previous is not None:
            assert body["messages"][0] is previous["messages"][0]
            assert body["messages"][-2] is previous["messages"][-1]
            assert body["tools"] is previous["tools"]
        previous = body
    assert len(memo) == 1 and memo.bytes_held == len(raw)


def test_a_moved_cache_marker_reuses_up_to_the_marked_message() -> None:
    """Claude Code marks its latest messages for the prompt cache; the marker moves."""
    memo = BodyDecodeMemo(min_bytes=0, key_bytes=1)
    history: list[dict[str, Any]] = [{"role": "user", "content": "task " * 100}]
    first = memo.loads(orjson.dumps({"model": "m", "messages": history}))
    marked = [*history, {"role": "assistant", "content": "x", "cache_control": {"t": 1}}]
    memo.loads(orjson.dumps({"model": "m", "messages": marked}))
    moved = [*history, {"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}]
    raw = orjson.dumps({"model": "m", "messages": moved})
    body = _check(memo, raw)
    assert body["messages"][0] is first["messages"][0]


def test_an_edit_before_the_latest_messages_reuses_what_precedes_it() -> None:
    """The latest message unchanged but an earlier one edited (a client that
    rewrote its history): the memo reuses the messages before the edit only."""
    memo = BodyDecodeMemo(min_bytes=0, key_bytes=1)
    history = [{"role": "user", "content": f"message {i} " * 20} for i in range(10)]
    first = memo.loads(orjson.dumps({"model": "m", "messages": history}))
    edited = [*history[:4], {"role": "user", "content": "rewritten"}, *history[5:]]
    body = _check(memo, orjson.dumps({"model": "m", "messages": edited}))
    assert body["messages"][3] is first["messages"][3]  # before the edit: reused
    assert body["messages"][9] is not first["messages"][9]  # after it: decoded again


def test_interleaved_conversations_sharing_a_system_prompt_each_hit() -> None:
    memo = BodyDecodeMemo(min_bytes=0, key_bytes=1)
    prompt = {"role": "system", "content": "same agent " * 100}
    a: list[Any] = [prompt, {"role": "user", "content": "task a"}]
    b: list[Any] = [prompt, {"role": "user", "content": "task b"}]
    last: dict[str, Any] = {}
    for turn in range(4):
        for name, history in (("a", a), ("b", b)):
            history.append({"role": "tool", "content": f"{name}{turn}"})
            body = _check(memo, orjson.dumps({"messages": history, "model": "m"}))
            if name in last:
                assert body["messages"][1] is last[name]["messages"][1]
            last[name] = body
    assert len(memo) == 2


def test_duplicate_and_scalar_members_decode_as_orjson_does() -> None:
    memo = BodyDecodeMemo(min_bytes=0, key_bytes=1)
    raws = [
        b'{"messages": 1, "messages": [{"a": 1}], "model": "x"}',
        b'{"messages": 1, "messages": [{"a": 1}, {"b": "]}"}], "model": "y", "messages": []}',
        b'{"messages": [{"a": 1}, 3, {"c": "\\"]"}]}',
        b'{"messages": [{"a": 1}, 3, {"c": "\\"]"}, [], {}], "messages": [{"a": 1}]}',
        b'{"x": {"messages": [{"a": 1}]}, "messages": [{"a": 1}, {"z": []}]}',
        # the members after the array grow, still ending in the old ones' bytes
        b'{"messages": [{"a": 1}, {"z": []}]}',
        b'{"messages": [{"a": 1}, {"z": []}, {"y": 2}], "x": []}',
        # the latest message gains a member: the same bytes up to its old closing brace
        b'{"messages": [{"a": 1}, {"c": 1}]}',
        b'{"messages": [{"a": 1}, {"c": 1, "d": 2}]}',
    ]
    for raw in raws * 2:
        _check(memo, raw)


def test_the_memo_is_bounded() -> None:
    memo = BodyDecodeMemo(limit=3, max_bytes=10_000, min_bytes=0, key_bytes=1)
    for i in range(10):
        memo.loads(orjson.dumps({"messages": [{"role": "user", "content": f"{i}" * 1000}]}))
    assert len(memo) <= 3 and memo.bytes_held <= 10_000
    memo.clear()
    assert len(memo) == 0 and memo.bytes_held == 0


def test_idle_slots_are_not_matched() -> None:
    now = [0.0]
    memo = BodyDecodeMemo(idle_seconds=10, clock=lambda: now[0], min_bytes=0, key_bytes=1)
    history = [{"role": "user", "content": "a" * 300}]
    first = memo.loads(orjson.dumps({"messages": history}))
    now[0] = 11.0
    body = memo.loads(orjson.dumps({"messages": [*history, {"role": "tool", "content": "b"}]}))
    assert body["messages"][0] is not first["messages"][0]


def _prefix(a: bytes, b: bytes) -> int:
    return common_prefix(Parts((a,)), Parts((b,)))


@given(st.binary(max_size=64), st.binary(max_size=64))
def test_common_prefix(a: bytes, b: bytes) -> None:
    n = _prefix(a + b, a)
    assert n == len(a)
    m = _prefix(a, b)
    assert a[:m] == b[:m] and (m == min(len(a), len(b)) or a[m] != b[m])


@given(st.binary(max_size=40), st.binary(max_size=40))
def test_common_prefix_across_chunks(a: bytes, b: bytes) -> None:
    """The chunk-by-chunk pass and the bisection inside the chunk that differs, with
    chunks small enough that the prefix spans several."""
    saved, body_decode._CHUNK = body_decode._CHUNK, 3
    try:
        m = _prefix(a, b)
        assert a[:m] == b[:m] and (m == min(len(a), len(b)) or a[m] != b[m])
        assert _prefix(a + b, a) == len(a)
    finally:
        body_decode._CHUNK = saved


def test_scan_elements_skips_strings() -> None:
    raw = b'[{"a": "}]\\"{"}, [1, [2]], {"b": {}}] tail'
    ends, close = scan_elements(raw, 1) or ([], -1)
    assert [raw[e - 1 : e] for e in ends] == [b"}", b"]", b"}"]
    assert raw[close : close + 1] == b"]" and raw[close + 1 :] == b" tail"
    assert scan_elements(b'[{"a": 1}', 1) is None


def test_many_live_conversations_of_one_agent_each_continue_their_own_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Forty sessions of one agent open alike (one key): each turn finds its own
    history without comparing itself against the others' (no common_prefix once
    every conversation has its slot), and no conversation loses its slot."""
    memo = BodyDecodeMemo(min_bytes=0, key_bytes=64)
    prompt = {"role": "system", "content": "same agent " * 100}
    histories: dict[int, list[Any]] = {
        n: [prompt, {"role": "user", "content": f"task {n} " * (1 + n % 3)}] for n in range(40)
    }
    last: dict[int, Any] = {}
    calls: list[int] = []
    prefix = body_decode.common_prefix
    monkeypatch.setattr(body_decode, "common_prefix", lambda a, b: calls.append(1) or prefix(a, b))
    for turn in range(4):
        calls.clear()
        for n, history in histories.items():
            history.append({"role": "tool", "content": f"result {n}.{turn} " * 5})
            body = _check(memo, orjson.dumps({"model": "m", "messages": history}))
            if n in last:
                assert body["messages"][1] is last[n]["messages"][1]  # its own slot
                assert body["messages"][-2] is last[n]["messages"][-1]
            last[n] = body
        if turn:
            assert calls == []  # a continuation is found without a common-prefix pass
    assert len(memo) == 40


def test_more_live_conversations_than_the_bound_holds_keep_those_held() -> None:
    """Sixteen sessions of one agent, in turn, against a bound that holds about
    ten: least-recently-used eviction took each slot just before its next turn, so
    none was continued; the held ones now go on being continued, and the rest
    are decoded whole (core/slot_groups.py's shield)."""
    prompt = {"role": "system", "content": "same agent " * 100}
    histories = {n: [prompt, {"role": "user", "content": f"task {n:02d}"}] for n in range(16)}
    size = len(orjson.dumps({"model": "m", "messages": histories[0]}))
    memo = BodyDecodeMemo(min_bytes=0, key_bytes=64, max_bytes=10 * size + size // 2)
    last: dict[int, Any] = {}
    reused_per_turn = []
    for turn in range(4):
        reused = 0
        for n, history in histories.items():
            history.append({"role": "tool", "content": f"r{n}.{turn}"})
            body = _check(memo, orjson.dumps({"model": "m", "messages": history}))
            reused += n in last and body["messages"][1] is last[n]["messages"][1]
            last[n] = body
        reused_per_turn.append(reused)
    assert reused_per_turn[0] == 0 and all(r >= 8 for r in reused_per_turn[1:])
