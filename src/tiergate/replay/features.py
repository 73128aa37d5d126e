"""Per-turn facts extracted once with the gateway's own code, reused by every policy.

For each corpus turn this module runs exactly what the gateway runs on the
request before the escalation engine: the OpenAI codec (`parse_request`), then
the planner's per-request inputs from replay.planner_inputs (the session id,
side request, conversation key, the conversation's own transcript summary, the
lexical delta score, the learned score floored at it, the request strikes on
the summary's fold, the turn key), the same module the trainer and the
agent-CLI check read; `full_score` for the full-transcript experiment; and,
for the reply, the response-side strike producers. The corpus `session_id` is
sent as `X-OrcaRouter-Session-Id` (replay.planner_inputs: a client that names
its session). Nothing here decides anything: the facts are policy-independent,
so the experiments replay the engine many times without re-parsing 60 MB of
history.

Token counts use tiergate's tokenizer (the simulator's too): a turn's prompt is
its system prompt, tool schemas and messages; its `prefix` is what it shares
with the session's previous *served* request (a failed attempt caches nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from tiergate.core.model import (
    ChatRequest,
    ChatResponse,
    FinishReason,
    Message,
    TextPart,
    ToolCall,
)
from tiergate.core.tokens import count_tokens
from tiergate.formats.errors import FormatError
from tiergate.formats.openai import parse_request
from tiergate.replay.corpus import DEFAULT_IDLE_SECONDS, archetype_of
from tiergate.replay.planner_inputs import WORKSPACE_ID, SessionPlanner, lower_headers
from tiergate.routing.difficulty import full_score
from tiergate.routing.strikes import Strike, response_strikes

#: Simulated start of the replay: 2026-08-14T08:00:00Z (the report's date).
EPOCH = 1_786_694_400.0
#: Sessions start one every this many simulated seconds, in corpus order.
DEFAULT_ARRIVAL_SECONDS = 60.0
_MESSAGE_OVERHEAD = 4
_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
    "error": "error",
}


@dataclass(frozen=True, slots=True)
class TurnFacts:
    """Everything a policy needs about one corpus turn."""

    session: int
    index: int
    """Position in the session's turns, failed attempts included (0-based)."""
    served_index: int | None
    """1-based position among the session's billed turns; None for a failed attempt."""
    at: float
    needs_strong: bool
    status: int
    request_id: str
    delta: float
    full: float
    request_strikes: tuple[Strike, ...]
    response_strikes: tuple[Strike, ...]
    tier_header: str | None
    escalate_header: str | None
    prompt_tokens: int
    prefix_tokens: int
    learned: float = 0.0
    """The learned session scorer's score (routing.session_scorer) from the running summary."""
    reasons: tuple[tuple[str, float], ...] = ()
    """The learned score's top contributions, as the planner puts them in the audit event."""
    conversation: str = ""
    """The conversation inside the session (routing.conversation), as the planner keys it."""
    side_request: bool = False
    """A one-off beside the conversations (routing.conversation.is_side_request)."""


@dataclass(frozen=True, slots=True)
class SessionFacts:
    index: int
    session_id: str
    archetype: str
    scope: str
    turns: tuple[TurnFacts, ...]

    @property
    def hard(self) -> bool:
        return any(t.needs_strong for t in self.turns if t.served_index is not None)


@dataclass(frozen=True, slots=True)
class CorpusFacts:
    sessions: tuple[SessionFacts, ...]
    order: tuple[tuple[int, int], ...]
    """(session, turn index) of every turn in global simulated-time order."""

    @property
    def turn_count(self) -> int:
        return len(self.order)


def chat_response(doc: Mapping[str, Any] | None) -> ChatResponse | None:
    """The corpus `response` as a neutral response (for the response-side producers)."""
    if not doc:
        return None
    calls = []
    for i, raw in enumerate(doc.get("tool_calls") or ()):
        fn = raw.get("function") or {}
        args = fn.get("arguments", "")
        calls.append(
            ToolCall(
                id=str(raw.get("id") or f"call_{i}"),
                name=str(fn.get("name") or ""),
                arguments=args if isinstance(args, str) else orjson.dumps(args).decode(),
            )
        )
    content = doc.get("content")
    finish = doc.get("finish_reason") or ("tool_calls" if calls else "stop")
    return ChatResponse(
        id="replay",
        model="replay",
        content=[TextPart(content)] if isinstance(content, str) and content else [],
        tool_calls=calls,
        finish_reason=_FINISH.get(finish, "stop"),
    )


class _TokenCounter:
    """Tokens per message, memoised by content within a session."""

    def __init__(self) -> None:
        self._memo: dict[tuple[str, str, str], int] = {}

    def message(self, m: Message) -> int:
        args = "\x00".join(f"{c.name}\x01{c.arguments}" for c in m.tool_calls)
        key = (m.role, m.text(), args)
        n = self._memo.get(key)
        if n is None:
            n = _MESSAGE_OVERHEAD + count_tokens(key[1])
            n += sum(count_tokens(c.name) + count_tokens(c.arguments) for c in m.tool_calls)
            self._memo[key] = n
        return n

    def fixed(self, req: ChatRequest) -> int:
        """System prompt and tool schemas: the part every turn of a session repeats."""
        tools = [(t.name, t.description, t.parameters) for t in req.tools]
        return 3 + count_tokens(req.system_text()) + count_tokens(orjson.dumps(tools).decode())


def _shared_messages(a: Sequence[Message], b: Sequence[Message]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x is not y and x != y:
            break
        n += 1
    return n


def session_facts(
    index: int, doc: Mapping[str, Any], start: float, workspace_id: str = WORKSPACE_ID
) -> SessionFacts:
    """Facts of one session's turns; raises FormatError naming the bad turn."""
    session_id = str(doc["session_id"])
    counter = _TokenCounter()
    prev: ChatRequest | None = None
    prev_fixed = 0
    facts: list[TurnFacts] = []
    scope = ""
    planner = SessionPlanner(session_id, workspace_id)
    at = start
    served = 0
    for i, turn in enumerate(doc["turns"]):
        body = turn["request"]
        headers = lower_headers(turn.get("headers"))
        at += float(turn.get("idle_seconds_before", 0 if i == 0 else DEFAULT_IDLE_SECONDS))
        try:
            req = parse_request(body)
        except FormatError as err:
            raise FormatError(
                f"session {session_id} turn {i + 1}: {err.message}", err.param
            ) from None
        inp = planner.step(req, body, headers)
        learned, reasons = inp.explained()
        assert inp.scope is not None  # the session header always resolves
        scope = scope or inp.scope  # the engine's state is keyed by the first turn's session
        fixed = counter.fixed(req)
        sizes = [counter.message(m) for m in req.messages]
        prompt = fixed + sum(sizes)
        prefix = 0
        if prev is not None and fixed == prev_fixed:
            prefix = fixed + sum(sizes[: _shared_messages(prev.messages, req.messages)])
        status = int(turn.get("upstream_status", 200))
        ok = status == 200
        served += ok
        resp = chat_response(turn.get("response")) if ok else None
        facts.append(
            TurnFacts(
                session=index,
                index=i,
                served_index=served if ok else None,
                at=at,
                needs_strong=bool(turn.get("needs_strong", False)),
                status=status,
                request_id=inp.turn,
                delta=inp.lexical,
                full=full_score(req),
                request_strikes=inp.strikes,
                response_strikes=tuple(response_strikes(resp)) if resp else (),
                tier_header=headers.get("x-orcarouter-tier"),
                escalate_header=headers.get("x-orcarouter-escalate"),
                prompt_tokens=prompt,
                prefix_tokens=prefix,
                learned=learned,
                reasons=reasons,
                conversation=inp.conversation,
                side_request=inp.side,
            )
        )
        if ok:
            prev, prev_fixed = req, fixed
    return SessionFacts(index, session_id, archetype_of(dict(doc)), scope, tuple(facts))


def extract(
    sessions: Iterable[Mapping[str, Any]],
    arrival_seconds: float = DEFAULT_ARRIVAL_SECONDS,
    progress: Callable[[int], None] | None = None,
) -> CorpusFacts:
    """Facts of a whole corpus; sessions start `arrival_seconds` apart from EPOCH."""
    out = []
    for i, doc in enumerate(sessions):
        out.append(session_facts(i, doc, EPOCH + i * arrival_seconds))
        if progress is not None:
            progress(len(doc["turns"]))
    order = sorted(
        ((t.at, s.index, t.index) for s in out for t in s.turns), key=lambda x: (x[0], x[1], x[2])
    )
    return CorpusFacts(tuple(out), tuple((s, t) for _, s, t in order))
