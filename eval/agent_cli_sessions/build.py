"""Raw agent-CLI captures -> the committed fixtures (one replay-corpus file per CLI).

    PYTHONPATH=src:. python -m eval.agent_cli_sessions.build --raw /tmp/clitraces/raw

Each raw capture (capture_plugin.py) holds the bodies the gateway's planner got
in one agent-CLI test. Per request:

1. the body is parsed with the gateway's own inbound codec for its wire format
   (`gateway.inbound`: OpenAI chat, Anthropic messages, Responses API), then
   rendered as a chat-completions body (`formats.openai.render_request`), the
   replay corpus' request shape;
2. trimmed: the leading system prompt becomes one line naming its length and
   hash (so distinct prompts stay distinct: the conversation key and the
   session fingerprint hash it), tool schemas keep their names only, and
   sampling fields go. Nothing the engine's inputs read is touched: messages
   are kept whole.

Then it is checked, or nothing is written: per request, the planner's inputs
(tiergate.replay.planner_inputs, as the replay and the trainer read them) from
the fixture equal those from the raw wire body through the live codec (every
session-scorer feature, the lexical delta, request strikes, side request,
session source; conversation and turn keys up to renaming), and the captured
live engine (the learned score it read, the tier header it answered) is
reproduced offline. The live values are kept beside each turn (`live`) with
the artifact they came from.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from eval.agent_cli_check import (
    FIXTURES,
    CliSession,
    Expect,
    corpus_requests,
    replay_session,
)
from tiergate.core.model import ChatRequest
from tiergate.formats.openai.request import render_request
from tiergate.gateway.inbound import ANTHROPIC, OPENAI, RESPONSES, InboundFormat
from tiergate.replay.corpus import ROUTER_MODEL, write_corpus
from tiergate.replay.planner_inputs import PlannerInputs, planner_inputs
from tiergate.routing import session_scorer

CODECS: dict[str, InboundFormat] = {
    "openai": OPENAI,
    "anthropic": ANTHROPIC,
    "responses": RESPONSES,
}
#: Every agent-CLI test that runs a session: its CLI and what it asserts about tiers.
TESTS: dict[str, tuple[str, Expect]] = {
    "test_aider_fixes_the_test_after_a_failed_edit": ("aider", "stays_base"),
    "test_aider_sends_a_session_id_when_configured": ("aider", "stays_base"),
    "test_aider_failure_loop_escalates_to_the_strong_tier": ("aider", "escalates"),
    "test_claude_code_fixes_the_test_in_one_warm_session": ("claude-code", "stays_base"),
    "test_claude_code_failure_loop_escalates_to_the_strong_tier": ("claude-code", "escalates"),
    "test_a_claude_code_sub_agent_is_its_own_conversation_in_the_session": (
        "claude-code",
        "stays_base",
    ),
    "test_one_strike_in_the_sub_agent_and_one_in_the_lead_escalate_nothing": (
        "claude-code",
        "stays_base",
    ),
    "test_a_claude_code_sub_agent_failure_loop_escalates_the_task": (
        "claude-code",
        "escalates_by_strikes",
    ),
    "test_codex_fixes_the_test_in_one_warm_session": ("codex", "stays_base"),
    "test_codex_failure_loop_escalates_to_the_strong_tier": ("codex", "escalates"),
    "test_codex_reads_the_model_catalog_and_stops_warning": ("codex", "stays_base"),
    "test_mini_swe_agent_tool_mode_fixes_the_test": ("mini-swe-agent", "stays_base"),
    "test_mini_swe_agent_sends_a_session_id_when_configured": ("mini-swe-agent", "stays_base"),
    "test_mini_swe_agent_tool_mode_failure_loop_escalates": ("mini-swe-agent", "escalates"),
    "test_mini_swe_agent_text_mode_fixes_the_test": ("mini-swe-agent", "stays_base"),
    "test_mini_swe_agent_text_mode_failure_loop_escalates": ("mini-swe-agent", "escalates"),
    "test_opencode_fixes_the_test_in_one_warm_session": ("opencode", "stays_base"),
    "test_opencode_failure_loop_escalates_to_the_strong_tier": ("opencode", "escalates"),
}
SCORE_DECIMALS = 6


class CaptureMismatch(AssertionError):
    """The fixture would not give the engine what the live gateway computed."""


def trimmed(req: ChatRequest) -> dict[str, Any]:
    """`req` as a small chat-completions body: what the engine's inputs read, whole."""
    full = render_request(req, ROUTER_MODEL)
    system = req.system_text()
    messages = full["messages"][len([p for p in req.system if p.text]) :]
    if system:
        digest = hashlib.sha256(system.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        stand_in = f"[system prompt of {len(system)} characters, sha256 {digest}; trimmed]"
        messages = [{"role": "system", "content": stand_in}, *messages]
    body: dict[str, Any] = {"model": ROUTER_MODEL, "messages": messages}
    if req.tools:
        body["tools"] = [
            {"type": "function", "function": {"name": t.name, "parameters": {"type": "object"}}}
            for t in req.tools
        ]
    if req.max_tokens is not None:
        body["max_completion_tokens"] = req.max_tokens
    return body


def _renamed(keys: Sequence[str]) -> list[int]:
    """Keys as first-seen indices: equal patterns mean equal up to renaming."""
    seen: dict[str, int] = {}
    return [seen.setdefault(k, len(seen)) for k in keys]


def _source(p: PlannerInputs) -> str | None:
    return p.session.source if p.session is not None else None


def compare(test: str, live: Sequence[PlannerInputs], fixture: Sequence[PlannerInputs]) -> None:
    """Raise CaptureMismatch unless the fixture gives the engine the live inputs."""
    if len(live) != len(fixture):
        raise CaptureMismatch(f"{test}: {len(live)} requests, {len(fixture)} in the fixture")
    for i, (a, b) in enumerate(zip(live, fixture, strict=True)):
        for what, x, y in (
            ("features", a.features(), b.features()),
            ("lexical delta", a.lexical, b.lexical),
            ("request strikes", a.strikes, b.strikes),
            ("side request", a.side, b.side),
            ("session source", _source(a), _source(b)),
        ):
            if x != y:
                raise CaptureMismatch(f"{test} request {i}: {what} differs: {x} vs {y}")
    for what, pick in (("conversation", "conversation"), ("turn key", "turn")):
        if _renamed([getattr(p, pick) for p in live]) != _renamed(
            [getattr(p, pick) for p in fixture]
        ):
            raise CaptureMismatch(f"{test}: {what} pattern differs")


def read_raw(path: Path) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """(planned requests in order, commits by request id) of one raw capture."""
    records = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    records.sort(key=lambda r: r["seq"])
    requests = [r for r in records if r["kind"] == "request"]
    commits = {r["request_id"]: r for r in records if r["kind"] == "commit"}
    return requests, commits


def session_doc(test: str, raw: Path, artifact_sha: str) -> dict[str, Any]:
    """One test's fixture line, checked against its live capture."""
    agent, expect = TESTS[test]
    requests, commits = read_raw(raw)
    wire = [
        (CODECS[r["format"]].parse_request(r["body"]), r["body"], r["headers"]) for r in requests
    ]
    sessions = {r["live"]["session"][0] for r in requests}
    if len(sessions) != 1:
        raise CaptureMismatch(f"{test}: {len(sessions)} sessions; the check runs one per test")
    turns = []
    for i, (r, (req, _, headers)) in enumerate(zip(requests, wire, strict=True)):
        commit = commits.get(r["request_id"]) or {}
        turn: dict[str, Any] = {"request": trimmed(req)}
        if headers:
            turn["headers"] = headers
        turn["idle_seconds_before"] = round(r["t"] - requests[i - 1]["t"], 2) if i else 0.0
        if commit.get("response") is not None:
            turn["response"] = commit["response"]
        if not commit.get("success", False):
            turn["upstream_status"] = int(commit.get("status") or 502)
        live = r["live"]
        score = live["score"]
        turn["live"] = {
            "tier": live["tier_header"],
            "score": None if score is None else round(score, SCORE_DECIMALS),
        }
        turns.append(turn)
    doc = {
        "session_id": f"{agent}/{test}",
        "archetype": "no_struggle" if expect == "stays_base" else "failure_loop",
        "source": {
            "framework": "agent-cli",
            "agent": agent,
            "test": test,
            "expect": expect,
            "protocol": "tool-call" if any(req.tools for req, _, _ in wire) else "text",
            "wire_format": requests[0]["format"],
            "live_artifact_sha256": artifact_sha,
        },
        "turns": turns,
    }
    compare(test, list(planner_inputs(wire)), list(planner_inputs(corpus_requests(turns))))
    check_live(CliSession(test, agent, expect, doc))
    return doc


def check_live(session: CliSession) -> None:
    """The shipped scorer through the offline engine reproduces the live tiers and scores
    (the capture ran with the shipped artifact: artifact_sha256())."""
    verdict = replay_session(session, None)
    turns = session.doc["turns"]
    live_tiers = tuple(t["live"]["tier"] for t in turns)
    if verdict.tiers != live_tiers:
        raise CaptureMismatch(f"{session.test}: tiers {verdict.tiers} offline, {live_tiers} live")
    for i, (offline, t) in enumerate(zip(verdict.scores, turns, strict=True)):
        live = t["live"]["score"]
        if live is not None and round(offline, SCORE_DECIMALS) != live:
            raise CaptureMismatch(f"{session.test} request {i}: score {offline} vs live {live}")


def artifact_sha256(name: str = session_scorer.ARTIFACT) -> str:
    """The hash of a packaged artifact (the one the capture ran with)."""
    from importlib import resources

    data = resources.files("tiergate.routing").joinpath("artifacts", name).read_bytes()
    return hashlib.sha256(data).hexdigest()


def build(raw_dir: Path, out_dir: Path = FIXTURES) -> dict[str, int]:
    """Write one corpus file per CLI; returns sessions per CLI. Every test of TESTS
    must have a capture (and nothing else), or nothing is written."""
    found = {p.stem: p for p in sorted(raw_dir.glob("*.jsonl"))}
    missing, unknown = sorted(set(TESTS) - set(found)), sorted(set(found) - set(TESTS))
    if missing or unknown:
        raise SystemExit(f"captures missing: {missing}; not in TESTS: {unknown}")
    sha = artifact_sha256()
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for test in TESTS:
        by_agent.setdefault(TESTS[test][0], []).append(session_doc(test, found[test], sha))
    for agent, docs in by_agent.items():
        with open(out_dir / f"{agent}.jsonl", "wb") as fh:
            write_corpus(docs, fh)
    return {agent: len(docs) for agent, docs in by_agent.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m eval.agent_cli_sessions.build", description=__doc__
    )
    ap.add_argument("--raw", type=Path, required=True, help="capture_plugin.py's output folder")
    ap.add_argument("--out", type=Path, default=FIXTURES)
    args = ap.parse_args(argv)
    counts = build(args.raw, args.out)
    print(orjson.dumps(counts).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
