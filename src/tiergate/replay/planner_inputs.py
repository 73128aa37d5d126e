"""What the planner computes for a request before the escalation engine, offline.

gateway/planner.py (`_plan_router`, `_decide_tier`) derives, per request: the
session id (`resolve_session_id`), whether it is a side request, its
conversation key, the conversation's running transcript summary (one
`TranscriptCache` entry per `transcript_key`; a side request is summarised on
its own and stored nowhere), the lexical delta score, the learned score floored
at it (`session_score`), the request strikes on the summary's fold, and the
turn key. The offline paths that stand in for the gateway (the replay's
`replay.features.session_facts`, the session scorer's trainer
`eval/session_scorer_data.py`, the agent-CLI check `eval/agent_cli_check.py`)
all read those inputs from `SessionPlanner` here, so training, replay and the
live gateway see the same numbers for the same requests.

Corpus sessions carry a `session_id` and, mostly, no headers. Replay and the
trainer pass it as `session_id`: it is sent as `X-OrcaRouter-Session-Id`, as
a client that names its session does (Claude Code, Codex CLI), so the whole
corpus session is one gateway session and the side-request rule applies to it.
A recorded session header wins over it, as on the wire. Without `session_id`
(the agent-CLI check's captured requests, which keep their real headers) the
session resolves exactly as the gateway resolves it, a fingerprint included,
and a fingerprinted request is never a side request.

Pure: no I/O, no state store; the only state is the session's summaries.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tiergate.core.model import ChatRequest
from tiergate.routing.conversation import transcript_slot, turn_key
from tiergate.routing.difficulty import delta_score
from tiergate.routing.session import SessionId, resolve_session_id, session_scope
from tiergate.routing.session_scorer import SessionScorer, explain, features, session_score
from tiergate.routing.strikes import Strike, request_strikes
from tiergate.routing.transcript import TranscriptCache, TranscriptSummary

#: The workspace every replayed session belongs to (its id names the share-cap keys).
WORKSPACE_ID = hashlib.sha256(b"ws:replay").hexdigest()[:16]
#: The header a corpus `session_id` is sent as (routing.session.HEADER_SOURCES[0]).
SESSION_HEADER = "x-orcarouter-session-id"


@dataclass(frozen=True, slots=True)
class PlannerInputs:
    """What gateway/planner.py computes for one request before the engine decides."""

    session: SessionId | None
    scope: str | None
    side: bool
    conversation: str
    summary: TranscriptSummary
    lexical: float
    strikes: tuple[Strike, ...]
    turn: str

    def features(self) -> tuple[float, ...]:
        """The session scorer's feature vector (routing.session_scorer.features)."""
        return features(self.summary, self.lexical)

    def learned(self, scorer: SessionScorer | None = None) -> float:
        """The learned score the engine reads, floored at the lexical one
        (`scorer` None: the shipped artifact)."""
        return session_score(self.summary, self.lexical, scorer)

    def explained(self) -> tuple[float, tuple[tuple[str, float], ...]]:
        """The shipped learned score and the reasons the planner writes to the audit
        event with it (routing.session_scorer.explain)."""
        score, why = explain(self.summary, self.lexical)
        return score, tuple(why.items())


class SessionPlanner:
    """The planner's per-request inputs for one session's requests, fed in order.

    One instance per session: it holds the session's transcript summaries, one
    per conversation, as the planner's TranscriptCache does (an interleaved
    sub-agent neither restarts nor extends the main thread's summary)."""

    def __init__(self, session_id: str | None = None, workspace_id: str = WORKSPACE_ID) -> None:
        self.session_id = session_id
        self.workspace_id = workspace_id
        self._transcripts = TranscriptCache()

    def step(
        self, req: ChatRequest, body: Mapping[str, Any], headers: Mapping[str, str]
    ) -> PlannerInputs:
        """Inputs of the next request: `req` parsed from `body`, `headers` lower-case."""
        if self.session_id is not None:
            headers = {SESSION_HEADER: self.session_id, **headers}
        session = resolve_session_id(headers, body)
        scope = session_scope(self.workspace_id, session) if session is not None else None
        side, conv, key = transcript_slot(req, body, session, scope)
        summary = self._transcripts.summarize(key, req)
        return PlannerInputs(
            session=session,
            scope=scope,
            side=side,
            conversation=conv,
            summary=summary,
            lexical=delta_score(req),
            strikes=tuple(request_strikes(req, summary.progress)),  # the summary's fold
            turn=turn_key(req, conv),
        )


def planner_inputs(
    requests: Iterable[tuple[ChatRequest, Mapping[str, Any], Mapping[str, str]]],
    session_id: str | None = None,
    workspace_id: str = WORKSPACE_ID,
) -> Iterator[PlannerInputs]:
    """`SessionPlanner.step` over one session's (request, body, headers), in order."""
    planner = SessionPlanner(session_id, workspace_id)
    for req, body, headers in requests:
        yield planner.step(req, body, headers)


def lower_headers(headers: Mapping[str, Any] | None) -> dict[str, str]:
    """A corpus turn's headers as the gateway reads them: lower-case names, no nulls."""
    return {str(k).lower(): str(v) for k, v in (headers or {}).items() if v is not None}
