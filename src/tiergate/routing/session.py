"""Which conversation does this request belong to?

Resolution order (first non-empty wins), wire-compatible with OrcaRouter:

1. headers  X-OrcaRouter-Session-Id, X-Session-Id, X-Claude-Code-Session-Id,
            then Codex CLI's `session-id` (older releases: `session_id`)
2. body     metadata.session_id, prompt_cache_key,
            metadata.user_id in Claude Code's forms only:
              "user_<hash>_account_<uuid>_session_<uuid>"  -> the session uuid
              '{"device_id": ..., "session_id": "<uuid>"}'  -> its session_id
            user
3. a fingerprint: sha256 of the system prompt + the first user message
   (chat completions, Anthropic messages, or a Responses API body's
   `instructions` + first user input item).

A plain `metadata.user_id` (any other shape) is ignored: it names a person,
not a conversation, and treating it as a session would merge all of that
user's conversations into one pin, one tier state and one escalation cap.
Resolution falls through to `user` and then the fingerprint instead.

Explicit ids are long-pin eligible; a fingerprint is not (two users opening
with the same prompt share it). Hostile ids are tamed: control and format
characters are removed, surrounding whitespace stripped, and an id longer than
MAX_SESSION_ID_CHARS is replaced by its SHA-256, so it stays unique but bounded.
State keys never contain a session id: `session_scope` hashes it together with
the workspace, so equal ids in two workspaces never share state.
"""

from __future__ import annotations

import hashlib
import operator
import re
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson

V = TypeVar("V")

MAX_SESSION_ID_CHARS = 256

HEADER_SOURCES = (
    "x-orcarouter-session-id",
    "x-session-id",
    "x-claude-code-session-id",
    "session-id",
    "session_id",
)

FINGERPRINT = "fingerprint"

#: Unicode categories removed from ids: control, format, surrogate, line/paragraph sep.
_STRIP_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})

_CLAUDE_CODE_SESSION = re.compile(r"_session_([A-Za-z0-9][A-Za-z0-9-]{0,127})$")


@dataclass(frozen=True, slots=True)
class SessionId:
    """A resolved session. `value` is sanitized; `source` says where it came from."""

    value: str
    source: str
    long_pin_eligible: bool


def sanitize_session_id(raw: object) -> str | None:
    """Normalize a client-supplied id; None when nothing usable is left.

    Strings and integers are accepted (JSON numbers are common for ids); booleans,
    objects and lists are not ids.
    """
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        return None
    text = str(raw)
    if len(text) > 16 * MAX_SESSION_ID_CHARS:
        # Far beyond any real id: hash it whole instead of scanning it char by char.
        return "sha256:" + _sha256(text)
    cleaned = text if text.isascii() and text.isprintable() else _strip_invisible(text)
    cleaned = cleaned.strip()
    if not cleaned:
        return None
    if len(cleaned) > MAX_SESSION_ID_CHARS:
        return "sha256:" + _sha256(cleaned)
    return cleaned


def _strip_invisible(text: str) -> str:
    """`text` without control, format, surrogate, private-use, unassigned and line or
    paragraph separator characters. Printable ASCII has none of them, which is
    why the caller skips this per-character scan for it (every session id
    a client sends, on every request)."""
    return "".join(c for c in text if unicodedata.category(c) not in _STRIP_CATEGORIES)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _claude_code_user_id(raw: object) -> object:
    """The session id inside a Claude Code `metadata.user_id`, or None."""
    if not isinstance(raw, str):
        return None
    text = raw.strip()
    if text.startswith("{"):
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        return parsed.get("session_id") if isinstance(parsed, dict) else None
    match = _CLAUDE_CODE_SESSION.search(text)
    return match.group(1) if match else None


def _explicit(headers: Mapping[str, str], body: Mapping[str, Any]) -> SessionId | None:
    for name in HEADER_SOURCES:
        value = sanitize_session_id(headers.get(name))
        if value:
            return SessionId(value, f"header:{name}", True)
    metadata = body.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    candidates: tuple[tuple[str, object], ...] = (
        ("body:metadata.session_id", metadata.get("session_id")),
        ("body:prompt_cache_key", body.get("prompt_cache_key")),
        ("body:metadata.user_id", _claude_code_user_id(metadata.get("user_id"))),
        ("body:user", body.get("user")),
    )
    for source, raw in candidates:
        value = sanitize_session_id(raw)
        if value:
            return SessionId(value, source, True)
    return None


# ---- fingerprint -------------------------------------------------------------


def _content_text(content: object) -> str:
    """Stable text of a message content or system field, in either wire format.

    Text blocks contribute their text; other blocks their JSON minus
    `cache_control`, because clients move cache breakpoints between turns and
    that must not change the fingerprint.
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    out: list[str] = []
    for part in content:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            if part.get("type") in ("text", "input_text") and isinstance(part.get("text"), str):
                out.append(part["text"])
            else:
                stable = {k: v for k, v in part.items() if k != "cache_control"}
                try:
                    out.append(orjson.dumps(stable, option=orjson.OPT_SORT_KEYS).decode())
                except TypeError:
                    out.append(repr(sorted(stable)))
    return "\n".join(out)


def opening_parts(body: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The body's own objects its opening is read from: the top-level `system`
    (Responses: `instructions`) or None, each system/developer message before the
    first user message, and that user message (a Responses `input` string stands
    for it). None when there is no user message."""
    top = body.get("system", body.get("instructions"))  # Anthropic, Responses API
    messages = body.get("messages")
    if messages is None:  # a Responses API body: `input` is a string or items
        messages = body.get("input")
        if isinstance(messages, str):
            return (top, messages)
    if not isinstance(messages, list):
        return None
    parts: list[Any] = [top]
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        if role in ("system", "developer"):
            parts.append(msg)
        elif role == "user":
            parts.append(msg)
            return tuple(parts)
    return None


def _opening_texts(parts: tuple[Any, ...]) -> tuple[str, str]:
    top, *system_messages, user = parts
    system = [] if top is None else [_content_text(top)]
    system.extend(_content_text(m.get("content")) for m in system_messages)
    first_user = user if isinstance(user, str) else _content_text(user.get("content"))
    return "\n".join(system), first_user


#: Openings shorter than this (system prompt plus first user message, in
#: characters) are not remembered. Reading them again costs at most a few tens
#: of microseconds, and a shorter opening can sit in a body under the decode
#: memo's 16 KB floor (formats/body_decode.MIN_BYTES), whose objects are new
#: every turn: remembering those only held memory (the soak saw RSS grow by
#: 5 MB more in two minutes with a 4 K floor).
OPENING_MEMO_MIN_CHARS = 16 * 1024
#: Characters of openings remembered, together.
OPENING_MEMO_MAX_CHARS = 8_000_000


class OpeningMemo(Generic[V]):
    """A value computed from a body's opening, remembered by the identities of the
    objects it was read from (`opening_parts`).

    Why: the session fingerprint and the conversation key join and hash the
    system prompt and the first user message on every request, about 100 us for
    Claude Code's 60 KB system prompt. The body decode memo (formats/body_decode.py)
    hands each turn of a conversation the *same* objects for what its bytes
    share with the last turn, so an identity check finds the answer. An entry
    holds its objects, so their ids are not reused while it is kept; bodies are
    never mutated (the decode memo's rule). Only openings long enough to sit in
    a body the decode memo reuses are kept, within OPENING_MEMO_MAX_CHARS; least
    recently stored first out.
    """

    __slots__ = ("_chars", "_compute", "_entries", "max_chars")

    def __init__(
        self, compute: Callable[[tuple[str, str]], V], max_chars: int = OPENING_MEMO_MAX_CHARS
    ) -> None:
        self._compute = compute
        self.max_chars = max_chars
        self._chars = 0
        #: ids of the parts -> (the parts, the value, characters of their text)
        self._entries: OrderedDict[tuple[int, ...], tuple[tuple[Any, ...], V, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __call__(self, parts: tuple[Any, ...]) -> V:
        key = tuple(map(id, parts))
        hit = self._entries.get(key)
        if hit is not None and all(map(operator.is_, hit[0], parts)):
            return hit[1]
        opening = _opening_texts(parts)
        value = self._compute(opening)
        chars = len(opening[0]) + len(opening[1])
        if OPENING_MEMO_MIN_CHARS <= chars <= self.max_chars:
            old = self._entries.pop(key, None)
            if old is not None:
                self._chars -= old[2]
            self._entries[key] = (parts, value, chars)
            self._chars += chars
            while self._chars > self.max_chars:
                self._chars -= self._entries.popitem(last=False)[1][2]
        return value

    def clear(self) -> None:
        self._entries.clear()
        self._chars = 0


def _fingerprint_of(opening: tuple[str, str]) -> SessionId | None:
    system, first_user = opening
    if not system and not first_user:
        return None  # every empty opener would collide into one "session"
    digest = _sha256(f"tiergate-fp-v1\x00{system}\x00{first_user}")
    return SessionId("fp:" + digest[:32], FINGERPRINT, False)


_fingerprints: OpeningMemo[SessionId | None] = OpeningMemo(_fingerprint_of)


def fingerprint(body: Mapping[str, Any]) -> SessionId | None:
    """A session id derived from the conversation's opening; never long-pin eligible."""
    parts = opening_parts(body)
    return None if parts is None else _fingerprints(parts)


def resolve_session_id(headers: Mapping[str, str], body: Mapping[str, Any]) -> SessionId | None:
    """The request's session, by the documented priority; None when unresolvable.

    `headers` must have lower-case keys (Starlette's Headers are case-insensitive).
    """
    return _explicit(headers, body) or fingerprint(body)


def session_scope(workspace_id: str, session: SessionId) -> str:
    """A short hash that names (workspace, session) in every state key.

    Keys never carry the raw id or any token; two workspaces with the same session
    id get different scopes. 128 bits: collisions are not a practical concern.
    """
    kind = "fp" if session.source == FINGERPRINT else "id"  # a client cannot forge an fp
    material = f"tiergate-scope-v1\x00{workspace_id}\x00{kind}\x00{session.value}"
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()[:32]
