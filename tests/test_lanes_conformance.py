"""Seed sentences of seeds/session-tiers.md that did not hold (issue #16), over
real HTTP: a policy change invalidates only the affected lane, and the router's
default model passes the same eligibility as every other candidate."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lanes_http_support import (
    GPT5,
    MINI,
    TOOLS,
    Gateway,
    Sim,
    chat,
    make_config,
    managed,
    sim_server,
    sticky,
    turn,
    user,
)
from servers import gateway_config
from tiergate.config_load import parse_config


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    with sim_server() as s:
        yield s


def reload(g: Gateway, raw: dict[str, Any]) -> None:
    cfg = parse_config(raw)

    async def swap() -> None:  # on the gateway's loop, as a config poll would
        g.app.state.tiergate.gateway.reload(cfg)

    g.run(swap())


def bound_then_continued(g: Gateway, session: str) -> str:
    """Bind the lane to gpt-5-mini, then send a continuation (no new user turn)
    asking for gpt-5: a bound lane defers the change; an unbound one takes it."""
    first = turn("auto:coding", user("Start"), **managed(session, MINI))
    assert chat(g.url, first).status_code == 200
    again = turn("auto:coding", user("Start"), **managed(session, GPT5))
    r = chat(g.url, again)
    assert r.status_code == 200, r.text
    return r.headers["x-orca-resolved-model"]


def test_an_unrelated_router_leaves_every_lane_bound(sim: Sim) -> None:
    raw = gateway_config(sim.url)
    with sticky(sim.url) as g:
        assert chat(g.url, turn("auto:coding", user("Start"), **managed("s1", MINI))).status_code
        before = g.lane("s1")
        assert before is not None
        other = {"name": "other", "allowed_models": ["anthropic/*"], "strategy": "cheapest"}
        reload(g, {**raw, "routers": [*raw["routers"], other]})
        after = g.lane("s1")
        assert after is not None and after.revision == before.revision
        # the binding holds: a continuation cannot change the approval
        r = chat(g.url, turn("auto:coding", user("Start"), **managed("s1", GPT5)))
        assert r.headers["x-orca-resolved-model"] == "openai/gpt-5-mini"


def test_a_change_to_the_lanes_own_route_invalidates_it(sim: Sim) -> None:
    raw = gateway_config(sim.url)
    with sticky(sim.url) as g:
        assert bound_then_continued(g, "s2") == "openai/gpt-5-mini"
        retiered = gateway_config(sim.url)
        retiered["channels"][0]["models"]["openai/gpt-5-mini"]["quality"] = 0.61
        reload(g, retiered)
        # the approved model's catalogue entry changed: the lane is unbound, and the
        # next request binds afresh with its own approval
        r = chat(g.url, turn("auto:coding", user("Start"), **managed("s2", GPT5)))
        assert r.headers["x-orca-resolved-model"] == "openai/gpt-5"
        assert raw != retiered


def test_the_default_model_must_be_eligible_for_a_lane_turn(sim: Sim) -> None:
    raw = gateway_config(sim.url)
    raw["channels"][0]["models"]["openai/gpt-5-mini"]["supports_tools"] = False
    raw["routers"] = [
        {
            "name": "coding",
            "allowed_models": ["anthropic/*"],
            "strategy": "cheapest",
            "default_model": "openai/gpt-5-mini",
        }
    ]
    with sticky(sim.url, **{}) as g:
        reload(g, raw)
        body = turn("auto:coding", user("Read it"), tools=TOOLS, **managed("s3", MINI))
        r = chat(g.url, body)
        # gpt-5-mini cannot take tools: it is not a candidate, so the approval has
        # no eligible route (it used to be served through the default_model net)
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "session_tier_route_unavailable"
        plain = turn("auto:coding", user("Read it"), tools=TOOLS)
        served = chat(g.url, plain)
        assert served.status_code == 200
        assert served.headers["x-orca-resolved-model"] == "anthropic/claude-sonnet-4-5"
    assert make_config(sim.url) is not None
