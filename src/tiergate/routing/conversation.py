"""Which conversation inside a session does this request continue?

A session is the user's task. Agents run several conversations inside one
task under one session id: Claude Code's sub-agents (its Agent/Task tool
starts a conversation with its own system prompt and history), opencode's
task sub-agents, multi-agent harnesses whose roles each send their own
history, and small side requests (title generation, topic detection, quota
probes). Evidence that is a property of one conversation's trajectory (its
transcript summary, strikes, difficulty streak, turn ids) must not mix with
another's; the tier, caps and lane pins stay the session's (docs/agents.md).

A conversation is named by its opening, the same text the session
fingerprint hashes: the system prompt and the first user message. Every
request of one conversation resends that opening unchanged (it is the head of
the prefix the provider caches, so an agent that varied it would defeat its
own prompt cache); a sub-conversation starts a different one. Nothing here is
specific to one agent, reads state or keeps prompt text: the key is a short
hash, only compared inside one session.

A *side request* is a one-off the agent makes beside its conversations: no
tools offered, a small output budget (`max_tokens` at most SIDE_MAX_TOKENS)
and no assistant turn in its history, under an explicit session id (a
fingerprinted session is one conversation by construction, so nothing can be
beside it). It is served and counted as traffic like any request, but records
no evidence, never moves the tier, and may start the session's pins but never
move them, so it can neither reset nor pollute the conversation it was made
for. A chat client's first turn can match too (say `max_tokens: 512`, no
tools, under an explicit id); it then only loses that turn's evidence.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from tiergate.core.model import ChatRequest
from tiergate.routing.session import FINGERPRINT, OpeningMemo, SessionId, opening_parts

#: Largest output budget of a side request. Claude Code's quota probe asks for 1
#: token and its title/topic requests for a few hundred; an agent turn asks for
#: thousands (Claude Code 32,000) or leaves it to the default.
SIDE_MAX_TOKENS = 1024

#: Hex digits of a conversation key: 64 bits, only compared inside one session.
KEY_CHARS = 16


def _key_of(opening: tuple[str, str]) -> str:
    system, first_user = opening
    h = hashlib.blake2b(digest_size=KEY_CHARS // 2, person=b"tiergate-conv1")
    h.update(system.encode("utf-8", "surrogatepass"))
    h.update(b"\x00")
    h.update(first_user.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


_keys: OpeningMemo[str] = OpeningMemo(_key_of)


def conversation_key(body: Mapping[str, Any]) -> str | None:
    """A short, stable name of the conversation `body` continues; None when the
    body has no user message (nothing identifies a conversation yet).

    Same opening (system prompt and first user message, cache breakpoints
    ignored) -> same key, in any of the three wire formats. Remembered by the
    opening's objects (routing.session.OpeningMemo).
    """
    parts = opening_parts(body)
    return None if parts is None else _keys(parts)


def is_side_request(req: ChatRequest, session: SessionId | None = None) -> bool:
    """A one-off beside the agent's conversations: no tools, a tiny output budget,
    no assistant turn yet, and (when `session` is given) an explicit session id.

    Each part is needed: a text-protocol agent (aider, mini-swe-agent's text
    mode) offers no tools on any turn but leaves `max_tokens` unset or large; a
    tool-offering turn is a conversation turn whatever its budget; and a chat
    client with a small budget is a conversation from its second turn on.
    """
    if session is not None and session.source == FINGERPRINT:
        return False
    return (
        not req.tools
        and req.max_tokens is not None
        and req.max_tokens <= SIDE_MAX_TOKENS
        and not any(m.role == "assistant" for m in req.messages)
    )


def transcript_slot(
    req: ChatRequest, body: Mapping[str, Any], session: SessionId | None, scope: str | None
) -> tuple[bool, str, str | None]:
    """(side request?, conversation key or "", the transcript summary's key) of a
    request, as the planner keys it: one summary per conversation of an identified
    session; a side request, or a request of no session, is summarised on its own
    (key None) and never replaces a conversation's summary. The offline mirrors
    (replay.planner_inputs) call this too, so they cannot key differently."""
    side = is_side_request(req, session)
    conv = (conversation_key(body) or "") if scope is not None else ""
    return side, conv, None if side else transcript_key(scope, conv or None)


def transcript_key(scope: str | None, conversation: str | None) -> str | None:
    """The in-process transcript summary's key: one summary per conversation."""
    if scope is None:
        return None
    return scope if conversation is None else f"{scope}:{conversation}"


def turn_key(req: ChatRequest, conversation: str = "") -> str:
    """A stable id for the conversation turn this request carries.

    A client retry of the same turn sends the same history, so it maps to the
    same key and the engine's request-id ring deduplicates its strikes (§4.1).
    The conversation is part of it: two sub-agents whose turns end the same way
    at the same depth are two turns, not a retry.
    """
    h = hashlib.blake2b(digest_size=12)
    h.update(conversation.encode())
    h.update(str(len(req.messages)).encode())
    if req.messages:
        last = req.messages[-1]
        h.update(last.role.encode())
        h.update(last.text().encode("utf-8", "surrogatepass"))
        h.update((last.tool_call_id or "").encode())
        for tc in last.tool_calls:
            h.update(tc.id.encode())
    return h.hexdigest()
