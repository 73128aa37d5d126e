"""Session-id resolution: documented priority, Claude Code forms, fingerprint, scoping."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.routing.session import (
    MAX_SESSION_ID_CHARS,
    SessionId,
    fingerprint,
    resolve_session_id,
    sanitize_session_id,
    session_scope,
)

UUID = "8f14e45f-ceea-4672-9a1e-3b1b8b6d2a10"
CLAUDE_CODE_USER_ID = f"user_{'a' * 64}_account_0d2c3e44-1111-4222-8333-944455556666_session_{UUID}"
OPENAI_BODY: dict[str, Any] = {
    "model": "orcarouter/coding",
    "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test."},
    ],
}

# (headers, body fields, expected source, expected value): every level of the priority list,
# each row also carrying every lower-priority source to prove it wins.
ALL_HEADERS = {
    "x-orcarouter-session-id": "h1",
    "x-session-id": "h2",
    "x-claude-code-session-id": "h3",
    "session-id": "h4",  # Codex CLI
    "session_id": "h5",  # older Codex CLI releases
}
ALL_BODY = {
    "metadata": {"session_id": "b1", "user_id": CLAUDE_CODE_USER_ID},
    "prompt_cache_key": "b2",
    "user": "b4",
}


def _drop(d: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in names}


PRIORITY_TABLE = [
    (ALL_HEADERS, ALL_BODY, "header:x-orcarouter-session-id", "h1"),
    (_drop(ALL_HEADERS, "x-orcarouter-session-id"), ALL_BODY, "header:x-session-id", "h2"),
    (
        _drop(ALL_HEADERS, "x-orcarouter-session-id", "x-session-id"),
        ALL_BODY,
        "header:x-claude-code-session-id",
        "h3",
    ),
    ({"session-id": "h4", "session_id": "h5"}, ALL_BODY, "header:session-id", "h4"),
    ({"session_id": "h5"}, ALL_BODY, "header:session_id", "h5"),
    ({}, ALL_BODY, "body:metadata.session_id", "b1"),
    (
        {},
        {**ALL_BODY, "metadata": {"user_id": CLAUDE_CODE_USER_ID}},
        "body:prompt_cache_key",
        "b2",
    ),
    (
        {},
        {"metadata": {"user_id": CLAUDE_CODE_USER_ID}, "user": "b4"},
        "body:metadata.user_id",
        UUID,
    ),
    ({}, {"user": "b4"}, "body:user", "b4"),
]


@pytest.mark.parametrize(("headers", "fields", "source", "value"), PRIORITY_TABLE)
def test_priority_order(
    headers: dict[str, str], fields: dict[str, Any], source: str, value: str
) -> None:
    session = resolve_session_id(headers, {**OPENAI_BODY, **fields})
    assert session == SessionId(value, source, long_pin_eligible=True)


def test_fingerprint_when_nothing_explicit() -> None:
    session = resolve_session_id({}, OPENAI_BODY)
    assert session is not None
    assert session.source == "fingerprint"
    assert session.long_pin_eligible is False
    assert session.value.startswith("fp:")


def test_empty_or_blank_values_fall_through() -> None:
    headers = {"x-orcarouter-session-id": "  ", "x-session-id": "\x00\x01"}
    body = {**OPENAI_BODY, "metadata": {"session_id": ""}, "prompt_cache_key": "pk"}
    session = resolve_session_id(headers, body)
    assert session is not None and session.source == "body:prompt_cache_key"


@pytest.mark.parametrize(
    "user_id",
    [
        CLAUDE_CODE_USER_ID,
        f"user_{'a' * 64}_account__session_{UUID}",  # no account: an empty segment
    ],
)
def test_claude_code_legacy_user_id(user_id: str) -> None:
    session = resolve_session_id({}, {**OPENAI_BODY, "metadata": {"user_id": user_id}})
    assert session == SessionId(UUID, "body:metadata.user_id", True)


def test_claude_code_header_and_json_user_id_name_the_same_session() -> None:
    """Claude Code 2.1 sends both; either alone resolves to the same scope."""
    user_id = json.dumps({"device_id": "d" * 64, "account_uuid": "acc", "session_id": UUID})
    body = {**OPENAI_BODY, "metadata": {"user_id": user_id}}
    both = resolve_session_id({"x-claude-code-session-id": UUID}, body)
    header_only = resolve_session_id({"x-claude-code-session-id": UUID}, OPENAI_BODY)
    body_only = resolve_session_id({}, body)
    assert both is not None and header_only is not None and body_only is not None
    assert both.source == "header:x-claude-code-session-id"
    assert session_scope("ws", both) == session_scope("ws", body_only)
    assert session_scope("ws", header_only) == session_scope("ws", body_only)


def test_claude_code_json_user_id() -> None:
    user_id = json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": UUID})
    session = resolve_session_id({}, {**OPENAI_BODY, "metadata": {"user_id": user_id}})
    assert session == SessionId(UUID, "body:metadata.user_id", True)


@pytest.mark.parametrize(
    "user_id",
    [
        "alice@example.com",  # a person, not a conversation
        "user_123",
        '{"device_id": "abc"}',  # JSON form without a session id
        "{not json",
        json.dumps(["session_id", UUID]),
        12345,
    ],
)
def test_other_user_id_shapes_are_not_sessions(user_id: object) -> None:
    body = {**OPENAI_BODY, "metadata": {"user_id": user_id}, "user": "u-1"}
    session = resolve_session_id({}, body)
    assert session == SessionId("u-1", "body:user", True)
    no_user = resolve_session_id({}, {**OPENAI_BODY, "metadata": {"user_id": user_id}})
    assert no_user is not None and no_user.source == "fingerprint"


def test_non_string_fields_are_ignored_or_stringified() -> None:
    body = {**OPENAI_BODY, "metadata": "not a dict", "prompt_cache_key": {"x": 1}, "user": 42}
    assert resolve_session_id({}, body) == SessionId("42", "body:user", True)
    assert resolve_session_id({}, {**OPENAI_BODY, "user": True}).source == "fingerprint"  # type: ignore[union-attr]


# ---- fingerprint ---------------------------------------------------------------


def test_fingerprint_is_stable_across_turns_and_cache_breakpoints() -> None:
    """Later turns append messages and move cache_control; the session must not change."""
    turn1 = {
        "system": [
            {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}
        ],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Fix the bug."}]}],
    }
    turn5 = {
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Fix the bug.", "cache_control": {"type": "ephemeral"}}
                ],
            },
            {"role": "assistant", "content": "Looking."},
            {"role": "user", "content": "Now run the tests."},
        ],
    }
    assert fingerprint(turn1) == fingerprint(turn5)


def test_fingerprint_depends_on_system_and_first_user_message() -> None:
    base = fingerprint(OPENAI_BODY)
    other_system = {
        **OPENAI_BODY,
        "messages": [
            {"role": "developer", "content": "Different instructions."},
            OPENAI_BODY["messages"][1],
        ],
    }
    other_user = {
        **OPENAI_BODY,
        "messages": [OPENAI_BODY["messages"][0], {"role": "user", "content": "Something else."}],
    }
    assert len({base, fingerprint(other_system), fingerprint(other_user)}) == 3


def test_openai_and_anthropic_bodies_with_the_same_opening_match() -> None:
    anthropic = {
        "system": "You are a coding agent.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Fix the failing test."}]}
        ],
    }
    assert fingerprint(anthropic) == fingerprint(OPENAI_BODY)


@pytest.mark.parametrize(
    "opening",
    [
        {"instructions": "You are a coding agent.", "input": "Fix the failing test."},
        {
            "input": [
                {"type": "message", "role": "developer", "content": "You are a coding agent."},
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Fix the failing test."}],
                },
                {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
            ]
        },
    ],
)
def test_responses_bodies_with_the_same_opening_match(opening: dict[str, Any]) -> None:
    assert fingerprint(opening) == fingerprint(OPENAI_BODY)


@pytest.mark.parametrize(
    "body",
    [
        {"messages": []},
        {"messages": [{"role": "system", "content": "only a system prompt"}]},
        {"messages": "not a list"},
        {"system": "s"},
        {"messages": [{"role": "user", "content": ""}]},  # empty opener: would collide
        {"instructions": "s", "input": [{"type": "function_call_output", "output": "x"}]},
        {},
    ],
)
def test_no_user_message_means_no_session(body: dict[str, Any]) -> None:
    assert resolve_session_id({}, body) is None


def test_image_parts_count_in_the_fingerprint() -> None:
    def with_image(url: str) -> dict[str, Any]:
        return {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": url}},
                    ],
                }
            ]
        }

    assert fingerprint(with_image("https://a/1.png")) != fingerprint(with_image("https://a/2.png"))


# ---- hostile ids -----------------------------------------------------------------

_hostile_text = st.one_of(
    st.text(max_size=600),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=200, max_size=5000),
    st.text(alphabet=st.sampled_from("\x00\r\n\t\u202e\u200b\ud800 :*?[]{}\"'\\a"), max_size=400),
    st.from_regex(r"\A[A-Za-z0-9\-_:.]{1,1000}\Z"),
)


def _well_formed(value: str) -> bool:
    return (
        0 < len(value) <= MAX_SESSION_ID_CHARS
        and value == value.strip()
        and not any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in value)
    )


@settings(max_examples=150, deadline=None)
@given(raw=_hostile_text, where=st.sampled_from(["header", "session_id", "cache_key", "user"]))
def test_hostile_ids_are_bounded_clean_and_scoped(raw: str, where: str) -> None:
    headers = {"x-session-id": raw} if where == "header" else {}
    fields: dict[str, Any] = {
        "header": {},
        "session_id": {"metadata": {"session_id": raw}},
        "cache_key": {"prompt_cache_key": raw},
        "user": {"user": raw},
    }[where]
    session = resolve_session_id(headers, {**OPENAI_BODY, **fields})
    assert session is not None  # falls back to the fingerprint when nothing usable is left
    assert _well_formed(session.value)
    session.value.encode("utf-8")  # never a lone surrogate
    scope = session_scope("ws", session)
    assert len(scope) == 32 and all(c in "0123456789abcdef" for c in scope)
    cleaned = sanitize_session_id(raw)
    if cleaned is not None and session.source != "fingerprint":
        assert session.value == cleaned


def test_long_ids_stay_distinct_after_bounding() -> None:
    a = sanitize_session_id("x" * 300 + "a")
    b = sanitize_session_id("x" * 300 + "b")
    assert a and b and a != b and len(a) <= MAX_SESSION_ID_CHARS


def test_control_characters_are_removed() -> None:
    assert sanitize_session_id("\x00abc\u202e-\u200b1\n") == "abc-1"


# ---- scope -------------------------------------------------------------------------


def test_scope_separates_workspaces_and_hides_the_id() -> None:
    session = SessionId("shared-id", "header:x-session-id", True)
    one, two = session_scope("ws-one", session), session_scope("ws-two", session)
    assert one != two
    assert "shared-id" not in one
    assert session_scope("ws-one", session) == one  # deterministic across processes


def test_scope_ignores_which_explicit_source_carried_the_id() -> None:
    header = SessionId("abc", "header:x-session-id", True)
    body = SessionId("abc", "body:prompt_cache_key", True)
    assert session_scope("ws", header) == session_scope("ws", body)


def test_explicit_id_cannot_forge_a_fingerprint_scope() -> None:
    fp = fingerprint(OPENAI_BODY)
    assert fp is not None
    forged = resolve_session_id({"x-session-id": fp.value}, OPENAI_BODY)
    assert forged is not None and forged.value == fp.value
    assert session_scope("ws", forged) != session_scope("ws", fp)


_STRIPPED = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


@settings(max_examples=500)
@given(
    st.one_of(
        st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=80),
        st.text(max_size=80),
    )
)
def test_the_printable_ascii_shortcut_keeps_the_per_character_rule(raw: str) -> None:
    """Printable ASCII skips the per-character scan; every id must come out as
    the scan would have made it."""
    kept = "".join(c for c in raw if unicodedata.category(c) not in _STRIPPED).strip()
    want = kept if kept else None
    if want is not None and len(want) > MAX_SESSION_ID_CHARS:
        return  # hashed: covered by the bounding tests
    assert sanitize_session_id(raw) == want
