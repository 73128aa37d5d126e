"""The replay harness on a tiny hand-built corpus: the real engine escalates on an
explicit header, on strikes and on difficulty; failed attempts commit nothing; the
clock is simulated; the metrics JSON has the DESIGN keys; Redis gives the same result."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from tiergate.formats.openai import parse_request
from tiergate.replay import experiments as ex
from tiergate.replay import pipeline
from tiergate.replay.features import extract
from tiergate.replay.harness import STANDARD_POLICIES, RunResult, SimClock, run_policy
from tiergate.replay.metrics import METRIC_KEYS
from tiergate.replay.pipeline import prepare, run_policies
from tiergate.replay.texts_common import TOOLSETS, Project
from tiergate.replay.traces import stack_dump
from tiergate.replay_cli import EXPERIMENTS, POLICY_NAMES
from tiergate.routing.difficulty import delta_score
from tiergate.state.redis import RedisStore

SYSTEM = "You are a coding agent working in the ledger-svc repository. Use the tools."
ERRORS = (
    'Traceback (most recent call last):\n  File "app.py", line 3, in <module>\nKeyError: "id"',
    "src/app.py:12:5: error: undefined name 'ledger'\nexit code: 1",
)


def _hard_text(seed: int) -> str:
    rng = random.Random(seed)
    dump = stack_dump(rng, Project.pick(rng, "go"), 5000)
    return (
        "The scheduler deadlocks intermittently under load. I suspect a race condition between "
        "the pool shutdown and the channel close: why does the invariant that every job is "
        "acknowledged exactly once break? Explain step by step which interleaving causes it and "
        f"analyse the worst-case complexity of the retry path.\n\n{dump}"
    )


class SessionBuilder:
    """Cumulative chat-completions bodies, one per turn, as an agent sends them."""

    def __init__(self, sid: str, archetype: str) -> None:
        self.doc: dict[str, Any] = {"session_id": sid, "archetype": archetype, "turns": []}
        self.history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        self.n = 0

    def turn(
        self,
        user: str | None = "Rename cnt to count in utils.py.",
        *,
        errors: int = 0,
        calls: int = 0,
        hard: bool = False,
        headers: dict[str, str] | None = None,
        status: int = 200,
        idle: float = 30.0,
    ) -> SessionBuilder:
        pending = [m for m in self.history[-1:] if m.get("tool_calls")]
        new: list[dict[str, Any]] = []
        for call in pending[0]["tool_calls"] if pending else []:
            text = ERRORS[len(new) % 2] if len(new) < errors else "Edited utils.py (+1 -1)."
            new.append({"role": "tool", "tool_call_id": call["id"], "content": text})
        if user is not None:
            new.append({"role": "user", "content": user})
        body = {
            "model": "orcarouter/coding",
            "messages": [*self.history, *new],
            "tools": TOOLSETS["run_edit"],
        }
        self.n += 1
        tool_calls = [
            {
                "id": f"call_{self.n}_{i}",
                "type": "function",
                "function": {
                    "name": "run_command",
                    "arguments": f'{{"command": "pytest -q -k t{i}"}}',
                },
            }
            for i in range(calls)
        ]
        response = {"content": "Done.", "tool_calls": tool_calls, "finish_reason": "stop"}
        turn = {
            "request": body,
            "needs_strong": hard,
            "idle_seconds_before": idle,
            "upstream_status": status,
        }
        if headers:
            turn["headers"] = headers
        if status == 200:
            turn["response"] = response
            self.history = [
                *body["messages"],
                {
                    "role": "assistant",
                    "content": "Done.",
                    **({"tool_calls": tool_calls} if tool_calls else {}),
                },
            ]
        self.doc["turns"].append(turn)
        return self


def tiny_corpus() -> list[dict[str, Any]]:
    explicit = (
        SessionBuilder("explicit", "easy_short")
        .turn()
        .turn(headers={"X-OrcaRouter-Tier": "strong"})
        .turn()
    )
    failed = (
        SessionBuilder("failed", "easy_short")
        .turn()
        .turn(headers={"x-orcarouter-tier": "STRONG"}, status=503)
        .turn(idle=2)
    )
    difficulty = (
        SessionBuilder("difficulty", "latent_hard")
        .turn()
        .turn(_hard_text(1), hard=True)
        .turn(_hard_text(2), hard=True)
        .turn(_hard_text(3), hard=True)
    )
    strikes = (
        SessionBuilder("strikes", "failure_loop")
        .turn("Add pagination.", calls=2)
        .turn("still failing, fix it", errors=2, calls=2, hard=True)
        .turn("still failing, fix it", errors=2, calls=2, hard=True)
        .turn("still failing, fix it", errors=2, calls=2, hard=True)
        .turn("still failing, fix it", errors=2, calls=2, hard=True)
    )
    easy = SessionBuilder("easy", "easy_short")
    for _ in range(5):
        easy.turn(calls=1)
    expiry = (
        SessionBuilder("expiry", "easy_short")
        .turn(headers={"X-OrcaRouter-Tier": "strong"})
        .turn(idle=5 * 3600)  # the 4 h tier state expired on the simulated clock
    )
    return [s.doc for s in (explicit, failed, difficulty, strikes, easy, expiry)]


@pytest.fixture(scope="module")
def facts() -> Any:
    return extract(tiny_corpus())


def tiers(run: RunResult, sid: str) -> list[str | None]:
    idx = next(s.index for s in run.facts.sessions if s.session_id == sid)
    return [r.tier for r in run.by_session()[idx]]


def triggers(run: RunResult, sid: str) -> list[str | None]:
    idx = next(s.index for s in run.facts.sessions if s.session_id == sid)
    return [r.trigger for r in run.by_session()[idx]]


def test_hard_text_scores_high_on_the_real_scorer() -> None:
    body = tiny_corpus()[2]["turns"][1]["request"]
    assert delta_score(parse_request(body)) >= 0.6


async def test_engine_escalates_on_header_strikes_and_difficulty(facts: Any) -> None:
    # the lexical scorer, so that each trigger class shows on its own session
    run = await run_policy(facts, ex.SCORER_POLICIES["escalation-lexical-uncapped"])
    assert tiers(run, "explicit") == ["base", "strong", "strong"]
    assert triggers(run, "explicit")[1] == "explicit"
    assert tiers(run, "difficulty") == ["base", "base", "strong", "strong"]  # streak of 2
    assert triggers(run, "difficulty")[2] == "difficulty"
    # the same commands fail the same way, unchanged: turns 3 and 4 strike
    assert tiers(run, "strikes") == ["base", "base", "base", "strong", "strong"]
    assert triggers(run, "strikes")[3] == "strikes"
    assert set(tiers(run, "easy")) == {"base"}
    kinds = [(e.kind, e.trigger) for e in run.events]
    assert kinds.count(("escalated", "explicit")) == 2
    assert ("escalated", "difficulty") in kinds and ("escalated", "strikes") in kinds


async def test_default_learned_scorer_escalates_the_same_turns(facts: Any) -> None:
    """The default scorer (learned) reads the failure loop's behaviour, so its
    difficulty trigger may beat the strikes to it; the tiers served are the same."""
    run = await run_policy(facts, ex.ENGINE_UNCAPPED)
    assert ex.ENGINE_UNCAPPED.engine_router().escalation.scorer == "learned"
    assert tiers(run, "difficulty") == ["base", "base", "strong", "strong"]
    assert tiers(run, "strikes") == ["base", "base", "base", "strong", "strong"]
    assert triggers(run, "strikes")[3] in ("strikes", "difficulty")
    assert set(tiers(run, "easy")) == {"base"}


async def test_failed_attempt_commits_nothing(facts: Any) -> None:
    run = await run_policy(facts, ex.ENGINE_UNCAPPED)
    # The explicit ask rode on a 503: not billed, not a turn, nothing committed.
    assert tiers(run, "failed") == ["base", None, "base"]
    failed = [r for r in run.records if r.tier is None]
    assert len(failed) == 1 and failed[0].cost == 0.0


async def test_idle_gaps_advance_the_simulated_clock(facts: Any) -> None:
    run = await run_policy(facts, ex.ENGINE_UNCAPPED)
    assert tiers(run, "expiry") == ["strong", "base"]
    assert run.elapsed_seconds < 5  # five simulated hours, no sleeping


async def test_fixed_policies_serve_one_tier_and_affinity_is_cheaper(facts: Any) -> None:
    front = await run_policy(facts, STANDARD_POLICIES["always-frontier"])
    front_aff = await run_policy(facts, STANDARD_POLICIES["always-frontier-affinity"])
    assert {r.tier for r in front.records} == {"strong", None}
    assert not front.events
    cost = sum(r.cost for r in front.records)
    assert sum(r.cost for r in front_aff.records) < cost


async def test_shipped_policy_and_experiment_names_match_the_cli() -> None:
    assert [p.name for p in ex.policy_list()] == list(POLICY_NAMES)
    assert EXPERIMENTS == pipeline.EXPERIMENTS


async def test_metrics_json_has_the_design_keys() -> None:
    prep = prepare(tiny_corpus(), "tiny")
    doc = await run_policies(prep, None)
    assert set(doc["policies"]) == set(POLICY_NAMES)
    for metrics in doc["policies"].values():
        assert set(METRIC_KEYS) <= set(metrics)
        for row in metrics["archetypes"].values():
            assert set(METRIC_KEYS) <= set(row)
    esc = doc["policies"]["escalation-uncapped"]
    assert esc["false_positive_sessions"] == 2  # the two explicit asks on easy sessions
    assert esc["missed_sessions"] == 0
    # difficulty 1 turn after the hard phase starts, strikes 2 (one repeat is not stuck yet)
    assert esc["escalation_latency_turns"] == pytest.approx(1.5)
    cheap = doc["policies"]["always-cheap-affinity"]
    assert cheap["hard_turn_coverage"] == 0 and cheap["missed_sessions"] == 2


async def test_redis_state_gives_the_same_decisions(facts: Any, redis_url: str) -> None:
    stores: list[RedisStore] = []
    prefix = f"test:{uuid.uuid4().hex}:"

    def factory(clock: SimClock) -> RedisStore:
        stores.append(RedisStore(redis_url, key_prefix=prefix))
        return stores[-1]

    redis_run = await run_policy(facts, ex.ENGINE_UNCAPPED, store_factory=factory)
    memory_run = await run_policy(facts, ex.ENGINE_UNCAPPED)
    assert stores, "the engine ran on Redis"
    for sid in ("explicit", "failed", "difficulty", "strikes", "easy"):
        assert tiers(redis_run, sid) == tiers(memory_run, sid)
    leftover = RedisStore(redis_url, key_prefix=prefix)
    try:
        assert await leftover.delete_prefix() == 0  # the run cleaned up after itself
    finally:
        await leftover.close()
