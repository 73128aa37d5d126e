"""Sticky session tiers through real HTTP: the request shapes, every error code a
client can meet, and what may never be stored or logged.

Off mode, leases, streams and boundaries: test_lanes_http.py.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from lanes_http_support import (
    CLAUDE,
    GPT5,
    MINI,
    TOOLS,
    Gateway,
    Sim,
    chat,
    error_code,
    managed,
    meta,
    post,
    public,
    resolved,
    session,
    sim_server,
    sse_tool_ids,
    sticky,
    tool_turn,
    turn,
    upstream_bodies,
    user,
)
from tiergate.lanes import migrate


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    with sim_server() as s:
        yield s


@pytest.fixture(scope="module")
def gw(sim: Sim) -> Iterator[Gateway]:
    """Sticky tiers on the default (memory) store; every test uses its own sessions."""
    with sticky(sim.url) as g:
        yield g


@pytest.fixture(autouse=True)
def _fresh_sim(sim: Sim) -> None:
    sim.reset()


# ---- shapes -------------------------------------------------------------------------


def test_managed_and_public_shapes_bind_separate_lanes(sim: Sim, gw: Gateway) -> None:
    s = session()
    m = chat(gw.url, turn("auto:coding", user("Managed"), **managed(s, GPT5)))
    # public: an identical native name qualifies on any provider; its tier is a label
    p = chat(gw.url, turn("roleplay:coding", user("Public"), **public(s, ("opencode:gpt-5", 42))))
    assert resolved(m) == resolved(p) == "openai/gpt-5"
    bound = [gw.lane(s, kind="managed"), gw.lane(s, kind="public")]
    assert [(r.approved_model, r.approved_tier) for r in bound if r] == [
        GPT5,
        ("opencode:gpt-5", 42),
    ]
    for body in upstream_bodies(sim):  # the metadata never reaches a provider
        assert not {"session_tier", "session_id", "routing"} & body.keys()


@pytest.mark.parametrize(
    "body",
    [
        turn("auto:coding", user("Hi"), **managed("unservable", ("openai:gpt-5", 2))),
        turn("auto:coding", user("Hi"), **managed("unservable", ("openai:gpt-5-pro", 3))),
        turn("roleplay:coding", user("Hi"), **public("unservable", ("anthropic:claude-sonnet", 3))),
    ],
    ids=["managed-wrong-tier", "managed-unknown-model", "public-alias"],
)
def test_unservable_approval_is_503_not_another_model(
    sim: Sim, gw: Gateway, body: dict[str, Any]
) -> None:
    """A reviewed tier that differs (gpt-5 is 3), a model outside the catalogue, a
    provider alias with another native name: no lease, and no other model answers."""
    r = chat(gw.url, body)
    assert r.status_code == 503 and error_code(r) == "session_tier_route_unavailable"
    assert sim.requests() == 0
    assert gw.lane("unservable") is None and gw.lane("unservable", kind="public") is None


def test_caller_selected_routes_never_bind(sim: Sim, gw: Gateway) -> None:
    s = session()
    pinned = public(s, CLAUDE)
    pinned["routing"]["mode"] = "pinned"
    concrete = [
        turn("openai/gpt-5", user("Concrete"), **managed(s, CLAUDE)),
        turn("openai/gpt-5", user("Concrete"), **public(s, CLAUDE)),
    ]
    assert [resolved(chat(gw.url, body)) for body in concrete] == ["openai/gpt-5"] * 2
    # a pinned roleplay route is ordinary routing: the router's own pick, not the approval
    assert resolved(chat(gw.url, turn("roleplay:coding", user("Pinned"), **pinned))) == (
        "openai/gpt-5-mini"
    )
    assert gw.lane(s) is None and gw.lane(s, kind="public") is None
    for body in upstream_bodies(sim):  # validated and removed all the same
        assert "session_tier" not in json.dumps(body) and "session_id" not in body


# ---- 400s -------------------------------------------------------------------------------

_S = "sess-value-never-echoed"
INVALID: list[tuple[str, dict[str, Any]]] = [
    ("auto:coding", {"session_tier": {**meta(_S, GPT5), "approved_tier": "3"}}),
    ("auto:coding", {"session_tier": {**meta(_S, GPT5), "approved_tier": True}}),
    ("auto:coding", {"session_tier": {**meta(_S, GPT5), "approved_tier": 3.0}}),
    ("auto:coding", {"session_tier": {**meta(_S, GPT5), "approved_tier": 101}}),
    ("auto:coding", {"session_tier": {**meta(_S, GPT5), "lane": "lane-never-echoed"}}),
    ("auto:coding", {"session_tier": {**meta(_S, GPT5), "approved_model": "openai: gpt-5"}}),
    ("auto:coding", {"session_tier": {**meta(_S, GPT5), "extra": 1}}),
    ("auto:coding", {"session_tier": {"session": _S, "lane": "main", "approved_tier": 3}}),
    ("auto:coding", managed("x" * 513, GPT5)),
    ("auto:coding", {**managed(_S, GPT5), **public(_S, GPT5)}),
    ("auto:coding", public(_S, GPT5)),
    ("roleplay:coding", managed(_S, GPT5)),
    ("roleplay:coding", {"routing": public(_S, GPT5)["routing"]}),  # no session_id
    ("openai/gpt-5", {"session_tier": {**meta(_S, GPT5), "lane": "nope"}}),  # concrete too
]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_invalid_metadata_is_400_in_the_clients_format(sim: Sim, gw: Gateway, path: str) -> None:
    for model, fields in INVALID:
        r = post(gw.url, path, turn(model, user("Hi"), max_tokens=16, **fields))
        assert r.status_code == 400 and error_code(r) == "invalid_session_tier", (fields, r.text)
        assert _S not in r.text and "never-echoed" not in r.text  # fields named, not values
    assert sim.requests() == 0
    assert gw.lane(_S) is None and gw.lane(_S, kind="public") is None


def tool_exchange(ids: list[str]) -> list[dict[str, Any]]:
    function = {"name": "read_file", "arguments": "{}"}
    calls = [{"id": i, "type": "function", "function": function} for i in ids]
    results = [{"role": "tool", "tool_call_id": i, "content": "ok"} for i in ids]
    return [user("Read all"), {"role": "assistant", "content": None, "tool_calls": calls}, *results]


@pytest.mark.parametrize(
    ("ids", "status"),
    [
        ([f"call_{i}" for i in range(128)], 200),
        ([f"call_{i}" for i in range(129)], 400),
        (["c" * 200], 200),
        (["c" * 201], 400),
    ],
    ids=["128-calls", "129-calls", "200-char-id", "201-char-id"],
)
def test_tool_limits_are_checked_before_any_lease(
    sim: Sim, gw: Gateway, ids: list[str], status: int
) -> None:
    s = session()
    r = chat(gw.url, turn("auto:coding", *tool_exchange(ids), tools=TOOLS, **managed(s, MINI)))
    assert r.status_code == status, r.text
    if status == 400:
        assert error_code(r) == "session_tier_tool_limit"
        assert sim.requests() == 0 and gw.lane(s) is None
    else:
        assert gw.lane(s) is not None


# ---- 503: storage is never faked -----------------------------------------------------


@pytest.mark.parametrize("state", ["missing-file", "missing-table"])
def test_unmigrated_sqlite_store_is_503_never_a_completion(
    sim: Sim, tmp_path: Path, state: str
) -> None:
    path = tmp_path / "lanes.db"
    if state == "missing-table":
        sqlite3.connect(path).close()
    with sticky(sim.url, backend="sqlite", sqlite_path=str(path)) as g:
        for stream in (False, True):
            fields = {"stream": stream, "max_tokens": 16, **managed(session(), MINI)}
            body = turn("auto:coding", user("Hi"), **fields)
            for r in (chat(g.url, body), post(g.url, "/v1/messages", body)):
                assert r.status_code == 503, r.text
                assert r.headers["content-type"] == "application/json"
                assert error_code(r) == "session_tier_storage_unavailable"
        assert sim.requests() == 0
        # a request without tier metadata never touches the store
        assert resolved(chat(g.url, turn("auto:coding", user("Plain"))))
    assert path.exists() == (state == "missing-table")  # a request never creates it


# ---- nothing of the conversation is stored or logged ----------------------------


NOT_THE_GATEWAY = ("openai", "anthropic", "httpx", "httpcore", "tiergate.sim")


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_no_prompt_arguments_or_session_ids_in_store_or_logs(
    sim: Sim, tmp_path: Path, caplog: pytest.LogCaptureFixture, backend: str
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = uuid4().hex
    managed_session, public_session = f"msess-{secret}", f"psess-{secret}"
    prompt = user(f"prompt-{secret} [[sim:tool]]")
    path = tmp_path / "lanes.db"
    migrate(path)
    with sticky(sim.url, backend=backend, sqlite_path=str(path)) as g:
        tier = managed(managed_session, MINI)
        first = chat(g.url, turn("auto:coding", prompt, stream=True, tools=TOOLS, **tier))
        (call_id,) = sse_tool_ids(first.content)
        exchange = tool_turn(call_id, f'{{"path": "args-{secret}"}}', f"result-{secret}")
        history = [prompt, *exchange, user(f"next-{secret} [[sim:text]]")]
        tier = managed(managed_session, CLAUDE)
        assert resolved(chat(g.url, turn("auto:coding", *history, tools=TOOLS, **tier)))
        assert resolved(
            chat(g.url, turn("roleplay:coding", prompt, **public(public_session, GPT5)))
        )
        records = [g.lane(managed_session), g.lane(public_session, kind="public")]
        assert all(records) and g.live_lanes() == 2
        scope = g.scope(managed_session)
    if backend == "sqlite":  # the database and its WAL, after the gateway closed them
        stored = b"".join(f.read_bytes() for f in tmp_path.iterdir()).decode("latin-1")
    else:
        stored = repr(records)
    assert scope in stored and CLAUDE[0] in stored  # the scan does see the lane rows
    assert secret not in stored and call_id not in stored
    gateway_logs = [r for r in caplog.records if not r.name.startswith(NOT_THE_GATEWAY)]
    assert any(r.name == "tiergate.access" for r in gateway_logs)
    for record in gateway_logs:
        assert secret not in f"{record.getMessage()} {record.__dict__}"
