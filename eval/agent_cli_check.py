"""The agent-CLI check: would a session-scorer candidate break the real agent-CLI tests?

tests/test_agents_*.py drive the real Claude Code, Codex CLI, opencode,
mini-swe-agent and aider CLIs through the gateway against the scripted
simulator. Their *no-struggle* sessions (a first test run that fails on
purpose, one edit, a passing run) must stay on the base tier; their failure
loops must escalate, the Claude Code sub-agent loop by strikes. Those live runs
take minutes; the requests the CLIs send do not depend on the tier (the
simulator answers from the transcript alone), so they are captured once
(eval/agent_cli_sessions/, README there) and replayed here turn by turn through
the decision the live gateway makes:

- per request, what the planner computes before the engine
  (gateway/planner.py `_plan_router` / `_decide_tier`), from
  tiergate.replay.planner_inputs (shared with the replay and the trainer): the
  session id (`resolve_session_id`), side request, conversation key, the
  conversation's running transcript summary (`TranscriptCache`), the lexical
  delta score, the candidate's learned score floored at it (`session_score`),
  the request strikes on the summary's fold and the turn key;
- then the real escalation engine (`resolve_escalation` / `commit_escalation`
  on a memory store, via the replay harness) with the agent tests' router
  (`escalating_router` in tests/agents_support.py: auto mode, the share-cap
  warm-up of 1,000 requests, every other setting the default), one fresh store
  per test as each test starts its own gateway, and response strikes from the
  captured replies.

A candidate fails when a session's outcome breaks what its test asserts about
tiers (`Expect`). Pure apart from reading the fixtures; no network, no CLI.

Unlike `replay.features.session_facts`, which sends every corpus session's id
as the session header, the check passes no session id: the captured requests
keep the headers the CLIs sent, so a fingerprinted session (aider's or
mini-swe-agent's fingerprint tests) resolves to its fingerprint and never gets
the side-request rule, as in the live gateway. eval/agent_cli_sessions/build.py
checks that this path reproduces the live gateway's score and tier on every
request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tiergate.config import RouterConfig
from tiergate.core.model import ChatRequest
from tiergate.formats.openai import parse_request
from tiergate.replay.corpus import iter_corpus
from tiergate.replay.features import EPOCH, CorpusFacts, SessionFacts, TurnFacts, chat_response
from tiergate.replay.harness import Policy, TurnRecord, replay_router, run_policy
from tiergate.replay.planner_inputs import lower_headers, planner_inputs
from tiergate.routing import session_scorer
from tiergate.routing.session_scorer import SessionScorer
from tiergate.routing.strikes import response_strikes

FIXTURES = Path(__file__).resolve().parent / "agent_cli_sessions"
#: tests/agents_support.py `escalating_router()["escalation"]` (a test keeps them equal).
AGENT_TEST_ESCALATION: dict[str, Any] = {"mode": "auto", "share_warmup_requests": 1000}

Expect = Literal["stays_base", "escalates", "escalates_by_strikes"]
"""What the session's test asserts about tiers: `stays_base` (no-struggle sessions:
one model and key throughout, every tier header "base"); `escalates` (a failure
loop: one escalation, by strikes or difficulty, not on the first request,
`assert_escalated_by_strikes`); `escalates_by_strikes` (the Claude Code sub-agent
loop: the header must say strikes)."""
EXPECTS: tuple[Expect, ...] = ("stays_base", "escalates", "escalates_by_strikes")


@dataclass(frozen=True)
class CliSession:
    """One captured agent-CLI test session (one fixture line)."""

    test: str
    agent: str
    expect: Expect
    doc: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class SessionVerdict:
    """One session replayed with one candidate: the tiers it got, and whether its
    test would pass."""

    test: str
    agent: str
    expect: Expect
    tiers: tuple[str | None, ...]
    """The tier header of every request, as the gateway would answer it."""
    scores: tuple[float, ...]
    """The learned score the engine read on every request."""

    @property
    def escalated_at(self) -> int | None:
        """The request that escalated (0-based), or None."""
        for i, t in enumerate(self.tiers):
            if t is not None and t.startswith("strong; reason="):
                return i
        return None

    @property
    def trigger(self) -> str | None:
        i = self.escalated_at
        header = self.tiers[i] if i is not None else None
        return header.split("reason=", 1)[1] if header else None

    @property
    def passed(self) -> bool:
        at = self.escalated_at
        if self.expect == "stays_base":
            return all(t == "base" for t in self.tiers)
        if at is None or at < 1 or any(t != "base" for t in self.tiers[:at]):
            return False
        return self.expect == "escalates" or self.trigger == "strikes"

    def as_dict(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "agent": self.agent,
            "expect": self.expect,
            "passed": self.passed,
            "escalated_at": self.escalated_at,
            "trigger": self.trigger,
        }


@dataclass(frozen=True)
class CheckResult:
    """Every captured session replayed with one candidate."""

    verdicts: tuple[SessionVerdict, ...]

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)

    @property
    def failed(self) -> list[str]:
        """Names of the tests the candidate would fail."""
        return [v.test for v in self.verdicts if not v.passed]

    def as_dict(self) -> dict[str, Any]:
        return {
            "eligible": self.passed,
            "failed": self.failed,
            "sessions": len(self.verdicts),
            "no_struggle_escalated": [
                v.test for v in self.verdicts if v.expect == "stays_base" and not v.passed
            ],
            "failures": [v.as_dict() for v in self.verdicts if not v.passed],
        }


# ---- fixtures -------------------------------------------------------------------------


def load_sessions(folder: Path = FIXTURES) -> list[CliSession]:
    """Every captured session, from the corpus files (*.jsonl) in `folder`."""
    out = []
    for path in sorted(folder.glob("*.jsonl")):
        for doc in iter_corpus(path):
            src = doc["source"]
            if src["expect"] not in EXPECTS:
                raise ValueError(f"{path}: {doc['session_id']}: unknown expect {src['expect']}")
            out.append(CliSession(src["test"], src["agent"], src["expect"], doc))
    if not out:
        raise FileNotFoundError(f"no agent-CLI sessions under {folder}")
    return out


# ---- what the planner computes, per request --------------------------------------------


def corpus_requests(
    turns: Iterable[Mapping[str, Any]],
) -> Iterator[tuple[ChatRequest, Mapping[str, Any], Mapping[str, str]]]:
    """Corpus turns as the planner gets them (the fixtures are chat-completions bodies)."""
    for turn in turns:
        yield parse_request(turn["request"]), turn["request"], lower_headers(turn.get("headers"))


def planner_facts(
    turns: Sequence[Mapping[str, Any]], scorer: SessionScorer | None = None, index: int = 0
) -> SessionFacts:
    """The engine inputs of one test's requests (corpus turns), with `scorer` as the
    learned session scorer (None: the shipped one); `idle_seconds_before` (since the
    test's previous request) runs the clock."""
    facts: list[TurnFacts] = []
    scope = ""
    at = EPOCH
    for i, (turn, inp) in enumerate(
        zip(turns, planner_inputs(corpus_requests(turns)), strict=True)
    ):
        at += float(turn.get("idle_seconds_before", 0.0))
        assert inp.scope is not None  # a fingerprint at least: every body has a user message
        scope = inp.scope
        resp = chat_response(turn.get("response"))
        status = int(turn.get("upstream_status", 200))
        facts.append(
            TurnFacts(
                session=index,
                index=i,
                served_index=i + 1 if status == 200 else None,
                at=at,
                needs_strong=False,
                status=status,
                request_id=inp.turn,
                delta=inp.lexical,
                full=0.0,
                request_strikes=inp.strikes,
                response_strikes=tuple(response_strikes(resp)) if resp else (),
                tier_header=lower_headers(turn.get("headers")).get("x-orcarouter-tier"),
                escalate_header=lower_headers(turn.get("headers")).get("x-orcarouter-escalate"),
                prompt_tokens=0,
                prefix_tokens=0,
                learned=inp.learned(scorer),
                conversation=inp.conversation,
                side_request=inp.side,
            )
        )
    return SessionFacts(index, f"agent-cli-{index}", "unlabelled", scope, tuple(facts))


def agent_test_router() -> RouterConfig:
    """The agent tests' router, as far as the engine reads it."""
    return replay_router(**AGENT_TEST_ESCALATION)


async def _replay(facts: SessionFacts, router: RouterConfig) -> list[TurnRecord]:
    corpus = CorpusFacts((facts,), tuple((0, t.index) for t in facts.turns))
    result = await run_policy(corpus, Policy("agent-cli", router=router))
    return result.records


def replay_session(session: CliSession, scorer: SessionScorer | None = None) -> SessionVerdict:
    """One test's session through the planner's inputs and the real engine."""
    facts = planner_facts(session.doc["turns"], scorer)
    records = asyncio.run(_replay(facts, agent_test_router()))
    return SessionVerdict(
        session.test,
        session.agent,
        session.expect,
        tuple(r.header for r in records),
        tuple(t.learned for t in facts.turns),
    )


def check(
    scorer: SessionScorer | None, sessions: Iterable[CliSession] | None = None
) -> CheckResult:
    """Every captured session replayed with `scorer` (None: the shipped artifact). A
    scorer that reads the task-difficulty score gets it computed, as the gateway
    would if that artifact were shipped."""
    chosen = list(sessions) if sessions is not None else load_sessions()
    before = session_scorer.COMPUTE_TASK_DIFFICULTY
    session_scorer.COMPUTE_TASK_DIFFICULTY = before or (
        scorer is not None and "task_difficulty" in scorer.names
    )
    try:
        return CheckResult(tuple(replay_session(s, scorer) for s in chosen))
    finally:
        session_scorer.COMPUTE_TASK_DIFFICULTY = before


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m eval.agent_cli_check",
        description="Replay the captured agent-CLI test sessions through the engine with "
        "session-scorer artifacts; exit 1 if any would fail its test.",
    )
    ap.add_argument(
        "artifacts", nargs="*", type=Path, help="artifact JSON files (default: the shipped one)"
    )
    ap.add_argument("--fixtures", type=Path, default=FIXTURES)
    ap.add_argument("-v", "--verbose", action="store_true", help="every session, not only failures")
    args = ap.parse_args(argv)
    sessions = load_sessions(args.fixtures)
    targets: list[tuple[str, SessionScorer | None]] = [
        (str(p), SessionScorer.from_artifact(json.loads(p.read_text()))) for p in args.artifacts
    ] or [("shipped", None)]
    ok = True
    for name, scorer in targets:
        result = check(scorer, sessions)
        ok &= result.passed
        print(f"{name}: {'pass' if result.passed else 'FAIL'}")
        for v in result.verdicts:
            if args.verbose or not v.passed:
                print(
                    f"  {'ok  ' if v.passed else 'FAIL'} {v.test}: expects {v.expect}, "
                    f"escalated at request {v.escalated_at} by {v.trigger}"
                )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
