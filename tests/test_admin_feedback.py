"""POST /v1/feedback: workspace-authenticated client verdicts, credited exactly
once to a linucb router's bandit arm and stored for the escalation latency."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from admin_support import (
    OTHER_TOKEN,
    WEAK,
    AdminClient,
    admin_config,
    chat,
    database,
    escalating_router,
    gateway,
)
from servers import TOKEN, ServerThread
from tiergate.sim.app import create_sim_app


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerThread, AdminClient]]:
    pg = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    folder = tmp_path_factory.mktemp("feedback")
    routers = [
        {"name": "bandit", "allowed_models": ["openai/*"], "strategy": "linucb"},
        escalating_router("esc"),
    ]
    with (
        database(request.param, folder, pg) as db,
        ServerThread(create_sim_app()) as sim,
        gateway(admin_config(sim.url, db, routers=routers)) as pair,
    ):
        yield pair


def feedback(gw: ServerThread, body: Any, token: str | None = TOKEN) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{gw.url}/v1/feedback", headers=headers, json=body, timeout=10)


def arm_pulls(gw: ServerThread, model: str) -> int:
    store = gw.app.state.tiergate.store
    assert gw.loop is not None
    raw = asyncio.run_coroutine_threadsafe(store.get(f"bandit:bandit:{model}"), gw.loop).result()
    return int(orjson.loads(raw)["pulls"]) if raw else 0


def test_feedback_credits_the_serving_arm_exactly_once(
    env: tuple[ServerThread, AdminClient],
) -> None:
    gw, _ = env
    r = chat(gw, "orcarouter/bandit", "Sort this list")
    model, rid = r.headers["x-orca-resolved-model"], r.headers["x-orca-request-id"]
    pulls = arm_pulls(gw, model)
    ok = feedback(gw, {"request_id": rid, "score": 0.9})
    assert ok.status_code == 200
    assert ok.json() == {"request_id": rid, "score": 0.9, "credited": True, "recorded": True}
    assert arm_pulls(gw, model) == pulls + 1
    again = feedback(gw, {"request_id": rid, "score": 0.1})
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "duplicate_feedback"
    assert arm_pulls(gw, model) == pulls + 1


def test_another_workspace_cannot_rate_a_request(env: tuple[ServerThread, AdminClient]) -> None:
    gw, _ = env
    rid = chat(gw, "orcarouter/bandit", "Hello").headers["x-orca-request-id"]
    r = feedback(gw, {"request_id": rid, "score": 1}, token=OTHER_TOKEN)
    assert r.status_code == 404 and r.json()["error"]["code"] == "request_not_found"
    assert feedback(gw, {"request_id": rid, "score": 1}).status_code == 200


def test_feedback_for_other_routers_is_recorded_not_credited(
    env: tuple[ServerThread, AdminClient],
) -> None:
    gw, _ = env
    rid = chat(gw, WEAK, "Direct").headers["x-orca-request-id"]
    r = feedback(gw, {"request_id": rid, "score": 0})
    assert r.json() == {"request_id": rid, "score": 0.0, "credited": False, "recorded": True}


@pytest.mark.parametrize(
    ("body", "token", "status"),
    [
        ({"request_id": "abc", "score": 0.5}, None, 401),
        ({"request_id": "abc", "score": 0.5}, "wrong", 401),
        ({"request_id": "0" * 32, "score": 0.5}, TOKEN, 404),
        ({"request_id": "abc", "score": 1.5}, TOKEN, 400),
        ({"request_id": "abc", "score": True}, TOKEN, 400),
        ({"request_id": "abc", "score": "high"}, TOKEN, 400),
        ({"request_id": "../etc", "score": 0.5}, TOKEN, 400),
        ({"request_id": "abc"}, TOKEN, 400),
        ({"request_id": "abc", "score": 0.5, "why": "x"}, TOKEN, 400),
        ([1, 2], TOKEN, 400),
    ],
)
def test_feedback_validation(
    env: tuple[ServerThread, AdminClient], body: Any, token: str | None, status: int
) -> None:
    gw, _ = env
    r = feedback(gw, body, token)
    assert r.status_code == status
    assert set(r.json()["error"]) >= {"message", "type", "code"}


def test_escalation_latency_from_client_feedback(env: tuple[ServerThread, AdminClient]) -> None:
    gw, admin = env

    def turn(session: str, text: str, score: float | None, **headers: str) -> str:
        r = chat(gw, "orcarouter/esc", text, session=session, headers=headers)
        if score is not None:
            rid = r.headers["x-orca-request-id"]
            assert feedback(gw, {"request_id": rid, "score": score}).status_code == 200
        return r.headers["x-orca-session-tier"]

    turn("late", "Easy start", 0.9)
    turn("late", "This is failing", 0.2)
    turn("late", "Still failing", 0.1)
    assert turn("late", "Help", None, **{"X-OrcaRouter-Tier": "strong"}).startswith("strong")
    turn("prompt", "Hard at once", 0.3)
    assert turn("prompt", "Go", None, **{"X-OrcaRouter-Tier": "strong"}).startswith("strong")
    turn("missed", "Struggling", 0.2)
    turn("unrated", "Ok", None, **{"X-OrcaRouter-Tier": "strong"})

    (q,) = admin.get("/stats/quality?router=esc").json()["routers"]
    latency = q["escalation_latency"]["feedback"]
    assert latency == {
        "sessions_escalated": 3,
        "sessions_measured": 2,
        "mean_hard_turns": 1.5,
        "distribution": {"2": 1, "1": 1},
        "hard_sessions_not_escalated": 1,
    }
    assert q["precision"] is None and q["gate"]["labels"] == 0
