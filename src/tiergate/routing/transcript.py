"""Whole-transcript facts, kept per session so each turn pays only for its new messages.

Agents resend the whole conversation on every call. The full-transcript score,
the agent state (turns, tools used, files edited), the prompt-size estimate and
"does it carry images" are all sums or unions over the messages, so a session's
next request can extend the previous request's summary with the messages
appended since, instead of walking 400 messages again (issue 9: deciding cost
independent of transcript length beyond parsing the body).

A summary is reused only when the new request still starts with the summarised
prefix: same message count or more, and the same first message and the same
last summarised message (role, text, tool-call ids). A client that compacts or
rewrites its history fails that check and is summarised from scratch. Editing a
message strictly inside the prefix while keeping both ends is not detected; the
summary then lags until the prefix check fails, which only shifts a heuristic
score.

A session whose history has once failed the check (a rewrite, or a latest
message sent again with different content) also keeps `before_last`, the
summary without its last message, under the same check: a request that
replaces only the latest message then reads one message instead of all of
them. Sessions that only append never keep it (no extra memory for them).

Everything here is pure except `TranscriptCache`, an in-process bounded map
(like the scan memo in routing.difficulty); a miss only costs a full pass.
"""

from __future__ import annotations

import dataclasses
import operator
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tiergate.core.idle_lru import IdleLru
from tiergate.core.model import ChatRequest, ImagePart, Message
from tiergate.routing.difficulty import DifficultyFeatures, Tally, count_tokens
from tiergate.routing.features import AgentState, agent_state
from tiergate.routing.progress import Progress
from tiergate.routing.session_scorer import TaskText, task_text
from tiergate.routing.task_message import ends_examples, own_text


def fingerprint(m: Message) -> int:
    """A message's identity for the prefix check (hashes, so O(1) after the first).

    It covers everything `TranscriptSummary.add` reads: the text, the calls (id,
    name and arguments), the error flag (strikes read it) and how many images the
    message carries (the summary's `images`); a resent message that differs only
    there is not the same message."""
    images = sum(1 for p in m.content if isinstance(p, ImagePart))
    calls = tuple((c.id, c.name, c.arguments) for c in m.tool_calls)
    return hash((m.role, m.text(), m.tool_call_id, calls, m.is_error, images))


@dataclass(slots=True)
class TranscriptSummary:
    """Sums and unions over `messages[:count]` of one conversation."""

    count: int = 0
    first: int = 0
    last: int = 0
    tally: Tally = field(default_factory=Tally)
    tool_messages: bool = False  # tool calls or tool results present (HasTools)
    chars: int = 0  # text + tool-call name/arguments characters (prompt estimate)
    images: bool = False
    progress: Progress = field(default_factory=Progress)  # agent state, stuck evidence
    task: TaskText | None = None  # shape of the task text (task_message, session_scorer)
    rewrites: bool = False  # this session's history once failed the prefix check
    before_last: TranscriptSummary | None = None  # messages[:count - 1], if rewrites

    def copy(self) -> TranscriptSummary:
        """An independent copy: the tally and the progress are the mutable parts.
        (Positional from every field: one per request, cheaper than dataclasses.replace.)"""
        other = TranscriptSummary(*_every_field(self))
        other.tally = self.tally.copy()
        other.progress = self.progress.copy()
        return other

    def extends(self, req: ChatRequest) -> bool:
        """Whether `req` starts with the messages this summary covers."""
        msgs = req.messages
        n = self.count
        return (
            0 < n <= len(msgs)
            and fingerprint(msgs[n - 1]) == self.last
            and fingerprint(msgs[0]) == self.first
        )

    def add(self, m: Message, index: int) -> None:
        """Read the message at `index`: each message is classified once, here."""
        text = m.text()
        self.tally.add(text)
        self.chars += message_chars(m)
        if m.role == "tool":
            self.tool_messages = True
        for call in m.tool_calls:
            self.tally.add(call.arguments)
            self.tool_messages = True
        self.progress.add(m, index)
        if m.role == "user":
            self._read_task(text)
        if not self.images:
            self.images = any(isinstance(p, ImagePart) for p in m.content)

    def _read_task(self, text: str) -> None:
        """The task is the first user message with words of its own (task_message:
        agent-harness blocks left out); aider's worked examples do not count."""
        if ends_examples(text):
            self.task = None
        elif self.task is None:
            own = own_text(text)
            if own:
                self.task = task_text(own)

    # ---- what the deciders read ----------------------------------------------------

    def features(self, req: ChatRequest) -> DifficultyFeatures:
        """Equal to difficulty.full_transcript_features(req)."""
        system = req.system_text()
        tally = self.tally.copy()
        tally.tokens += count_tokens(system)
        for spec in req.tools:
            tally.tokens += count_tokens(spec.name) + count_tokens(spec.description)
        return tally.features(len(system), bool(req.tools) or self.tool_messages)

    def agent_state(self, req: ChatRequest) -> AgentState:
        """Equal to features.agent_state(req)."""
        return agent_state(req, self.progress)

    def prompt_tokens(self, req: ChatRequest) -> int:
        """Equal to approx_prompt_tokens(req), from the summed message characters."""
        return _prompt_tokens(self.chars, req)


_every_field = operator.attrgetter(*(f.name for f in dataclasses.fields(TranscriptSummary)))
"""Every field of a TranscriptSummary, in __init__ order (TranscriptSummary.copy)."""


def message_chars(m: Message) -> int:
    """Characters of a message the model reads: its text and its tool calls."""
    return len(m.text()) + sum(len(c.arguments) + len(c.name) for c in m.tool_calls)


def approx_prompt_tokens(req: ChatRequest) -> int:
    """A cheap prompt-size estimate for capability checks (~4 characters a token,
    the simulator's rule of thumb): one pass over lengths, no tokenizing. The
    planner gets it from the session summary instead (TranscriptSummary)."""
    return _prompt_tokens(sum(message_chars(m) for m in req.messages), req)


def _prompt_tokens(message_chars: int, req: ChatRequest) -> int:
    chars = message_chars + len(req.system_text())
    for t in req.tools:
        chars += len(t.name) + len(t.description) + 64
    return chars // 4 + 4 * len(req.messages)


def summarize(req: ChatRequest, previous: TranscriptSummary | None = None) -> TranscriptSummary:
    """The summary of `req`, extending `previous` (or, for a session that rewrites
    its history, the summary without its last message) when `req` continues it."""
    msgs = req.messages
    n = len(msgs)
    start, rewrites = _resume_point(req, previous)
    summary = start.copy() if start is not None else TranscriptSummary()
    before_last = start.before_last if start is not None and start.count == n else None
    for i in range(summary.count, n):
        if rewrites and i == n - 1 and i > 0:
            before_last = _before_last(summary, start, msgs)
        summary.add(msgs[i], i)
    summary.count = n
    if msgs:
        summary.first = fingerprint(msgs[0])
        summary.last = fingerprint(msgs[-1])
    summary.rewrites = rewrites
    summary.before_last = before_last if rewrites else None
    return summary


def _resume_point(
    req: ChatRequest, previous: TranscriptSummary | None
) -> tuple[TranscriptSummary | None, bool]:
    """(the summary `req` continues, or None; whether to keep `before_last`)."""
    if previous is None:
        return None, False
    if previous.extends(req):
        return previous, previous.rewrites
    older = previous.before_last
    if older is not None and older.extends(req):
        return older, True
    return None, True


def _before_last(
    summary: TranscriptSummary, start: TranscriptSummary | None, msgs: list[Message]
) -> TranscriptSummary:
    """`summary` (all but the last message read) frozen as a resume point. When
    nothing was read since `start`, that is `start` itself (summaries are never
    mutated once returned), else a copy; never one holding its own resume point."""
    n = len(msgs)
    if start is not None and start.count == n - 1:
        point = start
    else:
        point = summary.copy()
        point.count = n - 1
        point.first = fingerprint(msgs[0])
        point.last = fingerprint(msgs[n - 2])
    if point.before_last is not None:
        point = dataclasses.replace(point, before_last=None)
    return point


TRANSCRIPT_CACHE_LIMIT = 8_192
"""Sessions whose summary is kept, at most: one TranscriptSummary each, about
3.5 KB for a soak agent session (bench/soak.py), so about 30 MB when full."""

TRANSCRIPT_IDLE_SECONDS = 600.0
"""A session's summary is dropped after 10 minutes without a request. Sessions end
without telling the gateway; with only a count bound (50,000 before) a gateway
grew by every new session's summary for hours (issue #27: about 1.5 MB/min in
the soak). A session that comes back later is folded from scratch once."""


class TranscriptCache:
    """The last summary of each recent session, bounded in count and idle time;
    the least recently used sessions go first (core.idle_lru)."""

    def __init__(
        self,
        limit: int = TRANSCRIPT_CACHE_LIMIT,
        idle_seconds: float = TRANSCRIPT_IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._by_session: IdleLru[str, TranscriptSummary] = IdleLru(limit, idle_seconds, clock)

    @property
    def limit(self) -> int:
        return self._by_session.limit

    def __len__(self) -> int:
        return len(self._by_session)

    def summarize(self, session: str | None, req: ChatRequest) -> TranscriptSummary:
        if session is None:
            return summarize(req)
        summary = summarize(req, self._by_session.pop(session))
        self._by_session.put(session, summary)  # re-inserted: most recently used last
        return summary
