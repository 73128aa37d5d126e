"""The learned session scorer: its shipped artifact, its features from the running
transcript summary, and its reasons in the escalation audit event."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from importlib import resources
from types import SimpleNamespace

import pytest

from escalation_support import SessionDriver, make_router
from tiergate.config import EscalationConfig
from tiergate.core.model import ChatRequest, Message, TextPart, ToolCall
from tiergate.gateway.planner import audit_row
from tiergate.routing import session_scorer
from tiergate.routing.session_scorer import FEATURE_NAMES, SessionScorer, features, task_text
from tiergate.routing.transcript import summarize
from tiergate.state.memory import MemoryStore

TASK = (
    "The parser drops the last token when the input ends in a comment.\n"
    '    File "parser.py", line 42, in parse_tokens\n'
    "ValueError: unexpected EOF\n"
)


def _msg(role: str, text: str = "", **kw: object) -> Message:
    return Message(role=role, content=[TextPart(text)] if text else [], **kw)  # type: ignore[arg-type]


def _session() -> list[Message]:
    """A tool-call agent: read, edit, a failing test run twice, then a pass."""
    out = [_msg("system", "You are a coding agent."), _msg("user", TASK)]
    steps = [
        ("read_file", '{"path": "parser.py"}', "def parse_tokens(src): ...", False),
        ("edit_file", '{"path": "parser.py", "old": "a", "new": "b"}', "ok", False),
        ("run", '{"cmd": "pytest -q"}', "FAILED tests/test_p.py::test_eof - ValueError", True),
        ("edit_file", '{"path": "parser.py", "old": "b", "new": "c"}', "ok", False),
        ("run", '{"cmd": "pytest -q"}', "FAILED tests/test_p.py::test_eof - ValueError", True),
        ("run", '{"cmd": "pytest -q"}', "3 passed in 0.1s", False),
    ]
    for i, (name, args, result, failed) in enumerate(steps):
        out.append(
            Message(role="assistant", content=[], tool_calls=[ToolCall(f"c{i}", name, args)])
        )
        out.append(_msg("tool", result, tool_call_id=f"c{i}", is_error=failed))
    return out


def test_shipped_artifact_matches_the_code_and_names_its_sources() -> None:
    doc = json.loads(
        resources.files("tiergate.routing")
        .joinpath("artifacts", session_scorer.ARTIFACT)
        .read_text("utf-8")
    )
    assert set(doc["features"]) <= set(FEATURE_NAMES)
    assert len(doc["weights"]) == len(doc["mean"]) == len(doc["scale"]) == len(doc["features"])
    assert (
        doc["version"] == f"session-scorer-v2 (features {doc['training']['setting']['features']})"
    )
    assert all(s["licence"] for s in doc["sources"])
    assert "held_out" in doc["training"] and "setting" in doc["training"]
    assert session_scorer.shipped().version == doc["version"]


@pytest.mark.parametrize("name", session_scorer.EARLIER_ARTIFACTS)
def test_earlier_artifacts_still_load_and_score_the_same_features(name: str) -> None:
    old = session_scorer.load(name)
    assert old.names == FEATURE_NAMES[: len(old.names)]
    summary = summarize(ChatRequest(model="m", messages=_session()))
    x = features(summary, 0.3)
    # v1 read exactly the first 25 features; extra v2 features change nothing for it
    z = old.bias + sum(
        w * (v - m) / s for w, v, m, s in zip(old.weights, x, old.mean, old.scale, strict=False)
    )
    assert old.score(x) == pytest.approx(1 / (1 + math.exp(-z)))


def test_artifact_with_other_features_is_refused() -> None:
    doc = {"version": "x", "features": ["a"], "mean": [0], "scale": [1], "weights": [1], "bias": 0}
    with pytest.raises(ValueError, match="other features"):
        SessionScorer.from_artifact(doc)
    short = {"version": "y", "features": ["log_edits"], "mean": [], "scale": [1], "weights": [1]}
    with pytest.raises(ValueError, match="do not match"):
        SessionScorer.from_artifact({**short, "bias": 0})


def test_an_artifact_scores_only_the_features_it_names() -> None:
    doc = {
        "version": "z",
        "features": ["log_edits", "lexical_delta"],
        "mean": [0.0, 0.0],
        "scale": [1.0, 1.0],
        "weights": [0.0, 2.0],
        "bias": 0.0,
    }
    scorer = SessionScorer.from_artifact(doc)
    x = tuple(float(i) for i in range(len(FEATURE_NAMES)))
    lexical = float(FEATURE_NAMES.index("lexical_delta"))
    assert scorer.score(x) == pytest.approx(1 / (1 + math.exp(-2.0 * lexical)))
    assert scorer.reasons(x) == {"lexical_delta": round(2.0 * lexical, 3)}


def test_features_of_a_growing_session_equal_a_full_pass() -> None:
    msgs = _session()
    previous = None
    for n in range(2, len(msgs) + 1):
        req = ChatRequest(model="m", messages=msgs[:n])
        previous = summarize(req, previous)
        assert features(previous, 0.3) == features(summarize(req), 0.3)


def test_behaviour_features_count_what_the_agent_did() -> None:
    summary = summarize(ChatRequest(model="m", messages=_session()))
    x = dict(zip(FEATURE_NAMES, features(summary, 0.0), strict=True))
    assert x["log_tool_calls"] == pytest.approx(math.log1p(6))
    assert x["log_files_edited"] == pytest.approx(math.log1p(1))
    assert x["log_edits"] == pytest.approx(math.log1p(2))
    assert x["failure_share"] == pytest.approx(2 / (6 + session_scorer.FAILURE_SHARE_PRIOR))
    assert x["log_longest_failure_streak"] == pytest.approx(math.log1p(1))
    assert x["log_failure_streak"] == 0.0  # the last run passed
    assert x["task_log_lines"] == pytest.approx(math.log1p(3))
    # v2: the failing command now succeeds (a progress event; "3 passed" without
    # pytest's ===== summary line is not counted as a runner's pass), the first edit
    # was the 2nd step
    assert x["log_passes"] == 0.0
    assert x["log_progress_events"] == pytest.approx(math.log1p(1))
    assert x["log_steps_before_first_edit"] == pytest.approx(math.log1p(2))
    assert x["log_steps_since_edit"] == pytest.approx(math.log1p(2))
    assert x["log_distinct_actions"] == pytest.approx(math.log1p(4))  # pytest -q x3
    assert x["repeat_share"] == pytest.approx(1 - 4 / 6)
    assert 0 < x["recent_failure_rate"] < 0.5


def test_task_text_keeps_shapes_not_words() -> None:
    t = task_text(TASK)
    assert 0 < t.indented_share < 1 and 0 < t.identifier_share < 1
    assert task_text("") == session_scorer.TaskText()


def test_score_is_the_logistic_of_the_standardised_dot_product() -> None:
    n = len(FEATURE_NAMES)
    last = FEATURE_NAMES.index("lexical_delta")
    weights = tuple(4.0 if i == last else 0.0 for i in range(n))
    scorer = SessionScorer(
        "t", FEATURE_NAMES, tuple(range(n)), (1.0,) * n, (2.0,) * n, weights, -1.0
    )
    x = tuple(3.0 if i == last else 0.0 for i in range(n))
    assert scorer.score(x) == pytest.approx(1 / (1 + math.exp(-(-1.0 + 4.0 * (3.0 - 1.0) / 2.0))))
    assert scorer.reasons(x) == {"lexical_delta": 4.0}


def test_learned_scorer_is_the_default_and_lexical_is_selectable() -> None:
    assert EscalationConfig().scorer == "learned"
    assert EscalationConfig.model_validate({"scorer": "lexical"}).scorer == "lexical"
    with pytest.raises(ValueError):
        EscalationConfig.model_validate({"scorer": "magic"})


async def test_reasons_reach_the_audit_row_as_names_and_numbers() -> None:
    driver = SessionDriver(MemoryStore(), make_router(scorer="learned"))
    await driver.turn(delta=0.9)  # first high turn: no trigger yet
    driver.now += 20.0
    reasons = (("failure_share", 0.8), ("lexical_delta", 0.4))
    decision = await driver.resolve(replace(driver.inputs(0.9), score_reasons=reasons))
    assert decision.serve_tier == "strong" and decision.trigger == "difficulty"
    ev = next(e for e in decision.events if e.kind == "escalated")
    assert ev.scorer == "learned" and ev.score_reasons == reasons
    row = audit_row(ev, SimpleNamespace(decision=None, extras={}))  # type: ignore[arg-type]
    assert row["detail"]["scorer"] == "learned"
    assert row["detail"]["score_reasons"] == {"failure_share": 0.8, "lexical_delta": 0.4}


def test_learned_score_never_reads_below_the_lexical_score() -> None:
    summary = summarize(ChatRequest(model="m", messages=_session()))
    for lexical in (0.0, 0.3, 0.99):
        score, reasons = session_scorer.explain(summary, lexical)
        assert score == session_scorer.session_score(summary, lexical) >= lexical
        assert all(isinstance(k, str) and isinstance(v, float) for k, v in reasons.items())
    assert session_scorer.explain(summary, 0.99)[1] == {"lexical_floor": 0.99}


def test_gateway_with_the_learned_scorer_escalates_a_session_that_turns_hard() -> None:
    """Real HTTP: openai SDK -> gateway (`scorer: learned`) -> simulator."""
    from servers import ServerThread, gateway_config
    from test_escalation_e2e import EASY, STRONG, WEAK, _hard_turn, _send, _user
    from tiergate.app import create_app
    from tiergate.config_load import parse_config
    from tiergate.sim.app import create_sim_app

    with ServerThread(create_sim_app()) as sim:
        router = {
            "name": "coding",
            "allowed_models": ["openai/*", "anthropic/*"],
            "strategy": "gated_adaptive",
            "weak_pool": [WEAK],
            "mid_pool": [WEAK],
            "strong_pool": [STRONG],
            "default_model": WEAK,
            "escalation": {"mode": "auto", "share_cap_percent": 50, "scorer": "learned"},
        }
        with ServerThread(
            create_app(parse_config(gateway_config(sim.url, routers=[router])))
        ) as gw:
            messages: list[dict[str, object]] = [{"role": "system", "content": "Coding agent."}]
            tiers = []
            for text in [EASY[0], EASY[1], _hard_turn(1), _hard_turn(2), EASY[2]]:
                messages.append({**_user(text)})
                tiers.append(_send(gw, "learned-turns-hard", messages)[1])
    assert tiers[:2] == ["base", "base"]
    assert "strong; reason=difficulty" in tiers[2:4]
    assert tiers[4] == "strong"


def test_one_failed_observation_is_not_a_failing_session() -> None:
    """A session's first test run fails on purpose; read from one observation the
    failed share would be 100 %, as in a long struggle (agent CLI tests caught it)."""
    call = ToolCall("c1", "run_command", '{"cmd": "pytest"}')
    msgs = [
        Message("user", [TextPart("Fix the failing test.")]),
        Message("assistant", [], tool_calls=[call]),
        Message(
            "tool", [TextPart("FAILED test_calc.py::test_add - assert 1 == 3")], tool_call_id="c1"
        ),
    ]
    x = dict(
        zip(
            FEATURE_NAMES,
            features(summarize(ChatRequest(model="m", messages=msgs)), 0.0),
            strict=True,
        )
    )
    assert x["failure_share"] == pytest.approx(1 / 3)
