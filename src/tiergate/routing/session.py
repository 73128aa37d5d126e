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
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

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
    cleaned = "".join(c for c in text if unicodedata.category(c) not in _STRIP_CATEGORIES)
    cleaned = cleaned.strip()
    if not cleaned:
        return None
    if len(cleaned) > MAX_SESSION_ID_CHARS:
        return "sha256:" + _sha256(cleaned)
    return cleaned


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


def conversation_opening(body: Mapping[str, Any]) -> tuple[str, str] | None:
    """(system prompt, first user message) of an OpenAI, Anthropic or Responses body.

    System text is the Anthropic top-level `system` (Responses: `instructions`)
    plus any system/developer messages before the first user message. None when
    there is no user message.
    """
    system: list[str] = []
    top = body.get("system", body.get("instructions"))  # Anthropic, Responses API
    if top is not None:
        system.append(_content_text(top))
    messages = body.get("messages")
    if messages is None:  # a Responses API body: `input` is a string or items
        messages = body.get("input")
        if isinstance(messages, str):
            return "\n".join(system), messages
    if not isinstance(messages, list):
        return None
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        if role in ("system", "developer"):
            system.append(_content_text(msg.get("content")))
        elif role == "user":
            return "\n".join(system), _content_text(msg.get("content"))
    return None


def fingerprint(body: Mapping[str, Any]) -> SessionId | None:
    """A session id derived from the conversation's opening; never long-pin eligible."""
    opening = conversation_opening(body)
    if opening is None:
        return None
    system, first_user = opening
    if not system and not first_user:
        return None  # every empty opener would collide into one "session"
    digest = _sha256(f"tiergate-fp-v1\x00{system}\x00{first_user}")
    return SessionId("fp:" + digest[:32], FINGERPRINT, False)


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
