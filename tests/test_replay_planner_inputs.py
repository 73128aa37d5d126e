"""The offline paths read the live planner's per-request inputs (replay.planner_inputs).

The replay (`replay.features.session_facts`), the session scorer's trainer
(`eval.session_scorer_data`) and the agent-CLI check (`eval.agent_cli_check`)
stand in for gateway/planner.py before the escalation engine. Here one
session interleaves a main agent, a sub-agent (Claude Code's Task tool, CodeR's
roles) and a side request, and every offline path must give the engine what the
real Planner gives it on the same requests. The main thread also clears an old
tool result inside its history (as Claude Code's micro-compaction does), which
the planner's per-conversation summary does not re-read: a path that kept one
summary per session would restart on the sub-agent's turn, re-read it, and see
other features and strikes.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from eval.agent_cli_check import planner_facts
from eval.session_scorer_data import extract as trainer_extract

from escalation_support import coding_router
from servers import gateway_config
from tiergate.config_load import parse_config
from tiergate.formats.openai import parse_request
from tiergate.gateway import planner as planner_module
from tiergate.gateway.auth import TokenTable
from tiergate.gateway.planner import Planner
from tiergate.replay.features import EPOCH, session_facts
from tiergate.replay.planner_inputs import planner_inputs
from tiergate.routing import escalation, session_scorer
from tiergate.routing.distributor import Distributor
from tiergate.routing.escalation import EscalationInputs
from tiergate.routing.session_scorer import features
from tiergate.routing.strikes import request_strikes
from tiergate.routing.transcript import TranscriptSummary, summarize
from tiergate.state.memory import MemoryStore

ROUTER = coding_router(mode="manual", scorer="learned")  # inputs only: never moves
SESSION = "interleaved-1"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]
PYTEST = "python -m pytest tests/test_calc.py -q"
FAILED = "F\nFAILED tests/test_calc.py::test_add - AssertionError: assert 3 == 4\n1 failed in 0.02s"


def call(cid: str, command: str, result: str) -> list[dict[str, Any]]:
    args = orjson.dumps({"command": command}).decode()
    fn = {"name": "bash", "arguments": args}
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": fn}],
        },
        {"role": "tool", "tool_call_id": cid, "content": result},
    ]


def agent(system: str, task: str, steps: list[list[dict[str, Any]]]) -> dict[str, Any]:
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    for s in steps:
        msgs += s
    return {"model": "orcarouter/coding", "messages": msgs, "tools": TOOLS, "max_tokens": 32000}


def main_turn(n: int, cleared: bool) -> dict[str, Any]:
    """The main thread after `n` failing test runs; `cleared`: the first run's output
    replaced by a placeholder, strictly inside the history."""
    runs = [call(f"m{i}", PYTEST, FAILED) for i in range(n)]
    if cleared:
        runs[0] = call("m0", PYTEST, "[Old tool result content cleared]")
    return agent("You are the lead coding agent.", "Fix the failing test in calc.py.", runs)


def sub_turn(n: int) -> dict[str, Any]:
    steps = [
        call(f"s{i}", f"grep -n 'def add' calc.py  # {i}", "3:def add(a, b):") for i in range(n)
    ]
    return agent("You are a search sub-agent.", "Find where add() is defined.", steps)


SIDE = {
    "model": "orcarouter/coding",
    "max_tokens": 64,
    "messages": [
        {"role": "system", "content": "Write a five-word title for this conversation."},
        {"role": "user", "content": "Fix the failing test in calc.py."},
    ],
}

#: main 2 runs, sub-agent, side request, main 3 runs (first output cleared), sub-agent, main 4.
BODIES = [
    main_turn(1, False),
    main_turn(2, False),
    sub_turn(1),
    SIDE,
    main_turn(3, True),
    sub_turn(2),
    main_turn(4, True),
]
HEADERS = {"x-orcarouter-session-id": SESSION}


def corpus_doc() -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "archetype": "failure_loop",
        "turns": [{"request": b, "headers": HEADERS, "idle_seconds_before": 5.0} for b in BODIES],
    }


@pytest.fixture
async def live(monkeypatch: pytest.MonkeyPatch) -> list[tuple[EscalationInputs, tuple[float, ...]]]:
    """What the real Planner hands the engine on each request (and the learned
    scorer's feature vector), captured at the engine's door."""
    seen: list[EscalationInputs] = []
    vectors: list[tuple[float, ...]] = []
    resolve, explain = escalation.resolve_escalation, planner_module.explain_session_score

    def resolving(inputs: EscalationInputs, snap: Any) -> Any:
        seen.append(inputs)
        return resolve(inputs, snap)

    def explaining(summary: TranscriptSummary, lexical: float) -> Any:
        vectors.append(features(summary, lexical))
        return explain(summary, lexical)

    monkeypatch.setattr(escalation, "resolve_escalation", resolving)
    monkeypatch.setattr(planner_module, "explain_session_score", explaining)
    # every feature, as the trainer computes them (the gateway skips task_difficulty
    # while the shipped artifact does not read it)
    monkeypatch.setattr(session_scorer, "COMPUTE_TASK_DIFFICULTY", True)
    cfg = parse_config(gateway_config("http://x", routers=[ROUTER]))
    planner = Planner(cfg, Distributor.from_config(cfg), MemoryStore())
    ws = TokenTable(cfg.workspaces).lookup("tg-test-token")
    assert ws is not None
    for i, body in enumerate(BODIES):
        await planner.plan(parse_request(body), body, HEADERS, ws, f"r{i}")
    assert len(seen) == len(vectors) == len(BODIES)
    return list(zip(seen, vectors, strict=True))


def workspace_id() -> str:
    cfg = parse_config(gateway_config("http://x", routers=[ROUTER]))
    ws = TokenTable(cfg.workspaces).lookup("tg-test-token")
    assert ws is not None
    return ws.id


def test_the_session_interleaves_and_a_per_session_summary_would_diverge() -> None:
    """The fixture has teeth: one summary per session sees other features and
    strikes on the main thread's cleared turns than the planner's per-conversation
    summary does."""
    reqs = [parse_request(b) for b in BODIES]
    per_session: list[TranscriptSummary] = []
    summary: TranscriptSummary | None = None
    for r in reqs:
        summary = summarize(r, summary)
        per_session.append(summary)
    inputs = list(planner_inputs((r, b, HEADERS) for r, b in zip(reqs, BODIES, strict=True)))
    assert len({i.conversation for i in inputs}) == 3  # main, sub-agent, the side request's
    assert [i.side for i in inputs] == [False, False, False, True, False, False, False]
    differs = [
        i
        for i, (inp, s, r) in enumerate(zip(inputs, per_session, reqs, strict=True))
        if inp.features() != features(s, inp.lexical)
        or inp.strikes != tuple(request_strikes(r, s.progress))
    ]
    assert differs == [4, 6]  # the main thread's turns after a sub-agent turn


async def test_replay_reads_the_planners_inputs(
    live: list[tuple[EscalationInputs, tuple[float, ...]]],
) -> None:
    facts = session_facts(0, corpus_doc(), EPOCH, workspace_id()).turns
    for i, (t, (inp, _)) in enumerate(zip(facts, live, strict=True)):
        assert t.learned == inp.delta_score, i
        assert t.request_strikes == tuple(inp.request_strikes), i
        assert t.request_id == inp.request_id, i
        assert t.conversation == inp.conversation, i
        assert t.side_request == inp.side_request, i
    assert session_facts(0, corpus_doc(), EPOCH, workspace_id()).scope == live[0][0].scope
    assert any(t.request_strikes for t in facts)  # the strikes are exercised, not all empty


async def test_the_trainer_reads_the_planners_features(
    live: list[tuple[EscalationInputs, tuple[float, ...]]],
) -> None:
    data = trainer_extract([corpus_doc()], real=False)
    for i, (inp, vector) in enumerate(live):
        assert tuple(float(v) for v in data.x[i]) == vector, i  # the lexical delta too
        assert bool(data.strike[i]) == bool(inp.request_strikes), i


async def test_the_agent_cli_check_reads_the_planners_inputs(
    live: list[tuple[EscalationInputs, tuple[float, ...]]],
) -> None:
    """The check sends no session id of its own: the captured header decides."""
    facts = planner_facts(corpus_doc()["turns"]).turns
    for i, (t, (inp, _)) in enumerate(zip(facts, live, strict=True)):
        assert (t.learned, t.request_strikes, t.request_id) == (
            inp.delta_score,
            tuple(inp.request_strikes),
            inp.request_id,
        ), i
        assert (t.conversation, t.side_request) == (inp.conversation, inp.side_request), i


def test_a_fingerprinted_session_is_never_a_side_request() -> None:
    """Without a session id (the agent-CLI check's fingerprint captures) the session
    resolves from the body, as in the gateway, and the side rule does not apply;
    with the corpus id sent as the header (replay) it does."""
    req = parse_request(SIDE)
    (fingerprinted,) = planner_inputs([(req, SIDE, {})])
    (named,) = planner_inputs([(req, SIDE, {})], session_id=SESSION)
    assert fingerprinted.session is not None and fingerprinted.session.source == "fingerprint"
    assert not fingerprinted.side and named.side
    assert named.session is not None and named.session.value == SESSION
