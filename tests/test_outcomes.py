"""POST /v1/outcomes and GET /admin/api/stats/escalation-value: an operator's CI
reports how sessions ended, and the gateway scores its own escalations by
counterfactual value (DESIGN.md), on SQLite and PostgreSQL, over real HTTP."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from admin_support import (
    ADMIN,
    OTHER_TOKEN,
    STRONG,
    AdminClient,
    admin_config,
    database,
    error_of,
    escalating_router,
    gateway,
)
from servers import TOKEN, ServerThread
from tiergate.api.admin_value import fold_sessions
from tiergate.replay.counterfactual import SessionValue, curves, score
from tiergate.sim.app import create_sim_app


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerThread, AdminClient]]:
    pg = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    folder = tmp_path_factory.mktemp("outcomes")
    with (
        database(request.param, folder, pg) as db,
        ServerThread(create_sim_app()) as sim,
        gateway(admin_config(sim.url, db, routers=[escalating_router("esc")])) as pair,
    ):
        yield pair


def post_outcome(gw: ServerThread, body: Any, token: str | None = TOKEN) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{gw.url}/v1/outcomes", headers=headers, json=body, timeout=10)


@dataclass
class Served:
    """What the client saw of one session: its request ids and which turns were strong."""

    session: str
    request_ids: list[str]
    strong: list[bool]


def run_session(gw: ServerThread, turns: int, strong_from: int | None = None) -> Served:
    """A multi-turn chat on one session id through the manual-escalation router;
    the client asks for strong at turn `strong_from` (1-based) and the session
    stays there."""
    session = f"cf-{uuid.uuid4().hex[:10]}"
    messages: list[dict[str, Any]] = []
    ids, strong = [], []
    for turn in range(1, turns + 1):
        messages.append({"role": "user", "content": f"Step {turn}: run the tests again"})
        headers = {"Authorization": f"Bearer {TOKEN}", "X-OrcaRouter-Session-Id": session}
        if turn == strong_from:
            headers["X-OrcaRouter-Tier"] = "strong"
        r = httpx.post(
            f"{gw.url}/v1/chat/completions",
            headers=headers,
            json={"model": "orcarouter/esc", "messages": messages},
            timeout=30,
        )
        assert r.status_code == 200, r.text
        ids.append(r.headers["x-orca-request-id"])
        strong.append(r.headers["x-orca-resolved-model"] == STRONG)
        messages.append(r.json()["choices"][0]["message"])
    return Served(session, ids, strong)


def as_value(s: Served, resolved: float, odds: float, task: str | None = None) -> SessionValue:
    first = next((i + 1 for i, x in enumerate(s.strong) if x), None)
    return SessionValue(
        s.session, task or s.session, resolved, odds, len(s.strong), sum(s.strong), first
    )


def test_the_gateway_scores_its_own_sessions_as_the_client_saw_them(
    env: tuple[ServerThread, AdminClient],
) -> None:
    gw, admin = env
    won = run_session(gw, 4)
    rescued = run_session(gw, 5, strong_from=2)
    lost = run_session(gw, 3)
    unreported = run_session(gw, 2)
    assert rescued.strong == [False, True, True, True, True], "the escalation is sticky"
    assert not any(won.strong + lost.strong + unreported.strong)

    ok = post_outcome(gw, {"session_id": won.session, "resolved": "pass", "task": "PROJ-1"})
    assert ok.status_code == 200, ok.text
    assert ok.json()["resolved"] == 1.0 and ok.json()["replaced"] is False
    by_request = post_outcome(
        gw, {"request_id": rescued.request_ids[0], "resolved": False, "strong_odds": 0.5}
    )
    assert by_request.status_code == 200, by_request.text
    shash = by_request.json()["session_hash"]
    assert post_outcome(gw, {"session_hash": shash, "resolved": "fail", "strong_odds": 0.5}).json()[
        "replaced"
    ]
    assert post_outcome(gw, {"session_id": lost.session, "resolved": "closed"}).status_code == 200

    r = admin.get("/stats/escalation-value", params={"router": "esc", "odds": "0.8"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["default_odds"] == 0.8
    assert doc["sessions_without_outcome"] == 1  # `unreported`
    [row] = doc["routers"]
    values = [
        as_value(won, 1.0, 0.8, "PROJ-1"),
        as_value(rescued, 0.0, 0.5),
        as_value(lost, 0.0, 0.8),
    ]
    want = score(values, resamples=0)
    assert row["router"] == "esc" and row["sessions"] == 3 and row["resolved"] == 1
    assert row["turns"] == 12 and row["escalated"] == 1 and row["default_odds_sessions"] == 2
    for key in ("pgr", "strong_share", "waste", "cut_off", "random", "length_rule", "oracle"):
        assert row[key] == pytest.approx(want[key], abs=1e-12), key
    # by hand: q = r + (1 - r) p s / n; Q_base 1/3; Q_strong (1 + 0.5 + 0.8) / 3
    q = (1 + 0.5 * 4 / 5 + 0) / 3
    assert row["pgr"] == pytest.approx((q - 1 / 3) / ((1 + 0.5 + 0.8) / 3 - 1 / 3))
    assert row["strong_share"] == pytest.approx(4 / 12)
    assert row["waste"] == 0.0 and row["cut_off"] == 0.0
    want_curves = curves(values)
    assert set(row["curves"]) == set(want_curves)
    for key, points in want_curves.items():
        assert row["curves"][key] == pytest.approx(points), key


def test_concurrent_posts_for_one_session_all_land_and_the_answer_follows(
    env: tuple[ServerThread, AdminClient],
) -> None:
    """A CI retry racing its first attempt: every post answers 200 and one row
    remains; the value endpoint reuses its answer only until an outcome arrives."""
    gw, admin = env
    served = run_session(gw, 2)
    params = {"router": "esc", "odds": "0.3"}
    first = admin.get("/stats/escalation-value", params=params).json()
    again = admin.get("/stats/escalation-value", params=params).json()  # a new `until`
    crossed = int(again["until"] // 30) != int(first["until"] // 30)  # a new 30 s grain
    assert again["computed_at"] == first["computed_at"] or crossed  # reused
    now = time.time()  # as the dashboard asks: an explicit window ending now
    window = {**params, "since": str(now - 3600), "until": str(now)}
    polled = admin.get("/stats/escalation-value", params=window).json()
    window = {**params, "since": str(now - 3599), "until": str(now + 1)}
    repolled = admin.get("/stats/escalation-value", params=window).json()
    if int(now // 30) == int((now + 1) // 30):  # the same 30 s grain
        assert repolled["computed_at"] == polled["computed_at"]
    bodies = [{"session_id": served.session, "resolved": i % 2} for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        codes = [r.status_code for r in pool.map(lambda b: post_outcome(gw, b), bodies)]
    assert codes == [200] * 8
    scraped = httpx.get(f"{gw.url}/metrics", headers={"Authorization": f"Bearer {ADMIN}"}).text
    assert 'tiergate_session_outcomes_total{result="replaced"}' in scraped
    after = admin.get("/stats/escalation-value", params=params).json()
    assert after["computed_at"] > first["computed_at"]  # an outcome arrived: recomputed
    [row] = after["routers"]
    assert row["sessions"] == first["routers"][0]["sessions"] + 1 if first["routers"] else 1


def test_outcomes_are_refused_in_the_clients_wire_format(
    env: tuple[ServerThread, AdminClient],
) -> None:
    gw, _ = env
    served = run_session(gw, 1)
    sid = served.session
    cases: list[tuple[Any, int, str]] = [
        ({"session_id": sid, "resolved": True, "note": "x"}, 400, "invalid_request"),
        ({"resolved": True}, 400, "invalid_request"),
        (
            {"session_id": sid, "request_id": served.request_ids[0], "resolved": 1},
            400,
            "invalid_request",
        ),
        ({"session_id": sid, "resolved": "maybe"}, 400, "invalid_request"),
        ({"session_id": sid, "resolved": 1, "strong_odds": 1.5}, 400, "invalid_request"),
        ({"session_id": sid, "resolved": 1, "strong_odds": "0.4"}, 400, "invalid_request"),
        (
            {"session_id": sid, "resolved": 1, "task": "the bug in the parser"},
            400,
            "invalid_request",
        ),
        ({"session_hash": "nothex", "resolved": 1}, 400, "invalid_request"),
        ({"session_id": "never-served", "resolved": 1}, 404, "session_not_found"),
    ]
    for body, status, code in cases:
        r = post_outcome(gw, body)
        assert r.status_code == status, (body, r.text)
        assert error_of(r)["code"] == code, body
    assert post_outcome(gw, {"session_id": sid, "resolved": 1}, token=None).status_code == 401
    other = post_outcome(gw, {"session_id": sid, "resolved": 1}, token=OTHER_TOKEN)
    assert other.status_code == 404 and error_of(other)["code"] == "session_not_found"
    assert post_outcome(gw, {"session_id": sid, "resolved": 1}).status_code == 200


def test_the_value_endpoint_checks_its_query(env: tuple[ServerThread, AdminClient]) -> None:
    _, admin = env
    for params in ({"odds": "2"}, {"odds": "often"}, {"since": "2", "until": "1"}):
        r = admin.get("/stats/escalation-value", params=params)
        assert r.status_code == 400, params
    empty = admin.get("/stats/escalation-value", params={"router": "no-such-router"})
    assert empty.status_code == 200 and empty.json()["routers"] == []
    assert AdminClient(admin.base_url, token=None).get("/stats/escalation-value").status_code == 401


@dataclass(frozen=True)
class Row:
    session_hash: str
    router: str
    tier: str | None
    resolved: float
    strong_odds: float | None
    task: str | None


_tiers = st.sampled_from(["strong", "base", None])


@given(
    st.lists(
        st.tuples(
            st.sampled_from("abcde"), st.sampled_from(["r1", "r2"]), st.lists(_tiers, min_size=1)
        ),
        max_size=6,
        unique_by=lambda t: t[0],
    )
)
def test_folding_rows_counts_each_sessions_turns_in_order(
    sessions: list[tuple[str, str, list[str | None]]],
) -> None:
    rows = [
        Row(h, router, tier, 0.0, None, None) for h, router, tiers in sessions for tier in tiers
    ]
    folded = fold_sessions(rows)
    assert sum(len(v) for v in folded.values()) == len(sessions)
    for h, router, tiers in sessions:
        s = folded[router][h]
        assert s.turns == len(tiers) and s.strong == tiers.count("strong")
        want = tiers.index("strong") + 1 if "strong" in tiers else None
        assert s.first_strong == want


def test_without_a_database_outcomes_are_503_not_lost_silently() -> None:
    with (
        ServerThread(create_sim_app()) as sim,
        gateway(admin_config(sim.url, None, routers=[escalating_router("esc")])) as (gw, _),
    ):
        served = run_session(gw, 1)
        r = post_outcome(gw, {"session_id": served.session, "resolved": True})
        assert r.status_code == 503 and error_of(r)["code"] == "database_unavailable"
