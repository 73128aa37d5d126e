"""Pure and in-process parts of the admin API: masking, document edits, key-health
carry-over on reload, the go-live gate rules, escalation latency, and the
config follower's start-up precedence (memory repository and store)."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from tiergate.api import config_edits as edits
from tiergate.api.admin_common import AdminError, TokenCheck, parse_time
from tiergate.api.admin_sessions import workspace_id
from tiergate.api.admin_stats import FeedbackTurn, escalation_latency
from tiergate.api.masking import mask_secret, mask_url, secret_source
from tiergate.api.shadow import (
    gate_state,
    gate_status,
    gate_summary,
    live_percent,
    raises_rollout,
)
from tiergate.config import ConfigError, GatewayConfig, RouterConfig, WorkspaceConfig
from tiergate.config_load import parse_config
from tiergate.config_store import (
    CONFIG_VERSION_KEY,
    ConfigSync,
    MemoryConfigRepository,
    seed_hash,
)
from tiergate.core.upstream import Target
from tiergate.gateway.auth import TokenTable
from tiergate.reload import rebuild_distributor
from tiergate.routing.affinity import key_fingerprint
from tiergate.routing.distributor import Distributor
from tiergate.state.memory import MemoryStore

# ---- masking -------------------------------------------------------------------------


def test_mask_secret_never_reveals_short_keys() -> None:
    assert mask_secret("sk-proj-abcdefghijklmnop1234") == "sk-…1234"
    assert mask_secret("AIzaSyD0123456789abcdef") == "…cdef"
    assert mask_secret("sk-a") == "…" and mask_secret("x" * 15) == "…"


def test_secret_source_and_url_masking() -> None:
    assert secret_source("${OPENAI_KEY}") == "env:OPENAI_KEY"
    assert secret_source("${OPENAI_KEY:-fallback}") == "env:OPENAI_KEY"
    assert secret_source("sk-literal") == "literal"
    assert mask_url("redis://:hunter2@cache:6379/0") == "redis://:…@cache:6379/0"
    assert mask_url("postgresql://app:pw@db/tg") == "postgresql://app:…@db/tg"
    assert mask_url("sqlite:///tiergate.db") == "sqlite:///tiergate.db"


def test_token_check_and_time_parsing() -> None:
    check = TokenCheck("s3cret")
    assert check.matches("s3cret") and not check.matches("s3cre") and not check.matches(None)
    assert not TokenCheck(None).configured and not TokenCheck(None).matches("")
    assert parse_time("1700000000.5", "since") == 1700000000.5
    assert parse_time("2024-01-01T00:00:00Z", "since") == 1704067200
    assert parse_time("2024-01-01T00:00:00", "since") == 1704067200  # naive = UTC
    for bad in ("nan", "inf", "tomorrow"):
        with pytest.raises(AdminError):
            parse_time(bad, "since")


def test_workspace_id_matches_the_token_table() -> None:
    (ws,) = {w for _, w in TokenTable([WorkspaceConfig(name="team-a", tokens=["t"])])._entries}
    assert workspace_id("team-a") == ws.id


# ---- document edits -------------------------------------------------------------------------


def test_delete_key_shifts_indices_and_disabled_keys() -> None:
    doc: dict[str, Any] = {
        "channels": [{"name": "c", "keys": ["a", "b", "c", "d"], "disabled_keys": [0, 2, 3]}]
    }
    assert edits.delete_key(doc, "c", 2) == "c"
    assert doc["channels"][0] == {"name": "c", "keys": ["a", "b", "d"], "disabled_keys": [0, 2]}
    with pytest.raises(AdminError) as err:
        edits.delete_key(doc, "c", 3)
    assert err.value.status == 404
    with pytest.raises(AdminError):
        edits.find_channel(doc, "missing")


def test_patch_router_merges_nested_settings_and_keeps_explicit_null() -> None:
    doc: dict[str, Any] = {
        "routers": [{"name": "r", "escalation": {"mode": "auto", "delta_t2": 0.5}}]
    }
    edits.patch_router(doc, "r", {"escalation": {"delta_t2": None}, "weak_pool": ["m"]})
    assert doc["routers"][0] == {
        "name": "r",
        "escalation": {"mode": "auto", "delta_t2": None},
        "weak_pool": ["m"],
    }


# ---- key health survives a reload -------------------------------------------------------------


def _cfg(keys: list[str], disabled: list[int] | None = None) -> GatewayConfig:
    return parse_config(
        {
            "channels": [
                {
                    "name": "oa",
                    "type": "openai",
                    "keys": keys,
                    "disabled_keys": disabled or [],
                    "models": {"m": {}},
                },
                {"name": "other", "type": "openai", "keys": ["z"], "models": {"m": {}}},
            ]
        }
    )


def test_reload_keeps_cooldowns_and_auth_failures_of_surviving_keys() -> None:
    now = [100.0]
    old = Distributor.from_config(_cfg(["a", "b", "c"]), clock=lambda: now[0])
    oa = old.channel("oa")
    assert oa is not None
    old.report_failure(Target("m", oa, 0), disable_key=False, retry_after=50, status=429)
    old.report_failure(Target("m", oa, 1), disable_key=True, retry_after=None, status=401)
    # "a" moved to index 1, "b" to 2, "c" removed, "n" new; config disables nothing
    new = rebuild_distributor(_cfg(["n", "a", "b"]), old)
    ch = new.channel("oa")
    assert ch is not None
    assert ch.keys[1].cooldown_until == 150.0 and ch.keys[1] is oa.keys[0]  # shared state
    assert ch.keys[2].enabled is False  # the 401 still stands
    assert ch.keys[0].enabled and ch.keys[0].cooldown_until == 0  # the new key starts healthy
    # an operator re-enabling the key clears the auth failure and the cooldown
    cleared = rebuild_distributor(_cfg(["n", "a", "b"]), new, {("oa", key_fingerprint("b"))})
    ch2 = cleared.channel("oa")
    assert ch2 is not None and ch2.keys[2].enabled and ch2.key_usable(2, now[0])
    # the operator's own disabled_keys always applies
    off = rebuild_distributor(_cfg(["n", "a", "b"], disabled=[0]), cleared)
    ch3 = off.channel("oa")
    assert ch3 is not None and ch3.enabled_keys() == [1, 2]


# ---- the go-live gate ---------------------------------------------------------------------------


def _router(**esc: Any) -> RouterConfig:
    return RouterConfig(name="r", strong_pool=["m"], escalation=esc)


def test_gate_rules() -> None:
    shadow, live = _router(mode="auto", rollout_percent=0), _router(mode="auto", rollout_percent=5)
    assert raises_rollout(shadow, live) and raises_rollout(None, live)
    assert not raises_rollout(live, shadow) and not raises_rollout(live, live)
    assert raises_rollout(_router(mode="manual"), _router(mode="auto"))  # default rollout 100
    assert live_percent(_router(mode="manual")) == 0
    r = _router(mode="auto", gate_min_labels=10)
    assert gate_status(r, 9, 9).open is False and "9 of the 10" in gate_status(r, 9, 9).reason
    assert gate_status(r, 10, 7).open is True  # exactly 70 %
    assert gate_status(r, 10, 6).open is False and "60.0%" in gate_status(r, 10, 6).reason


def test_a_router_live_for_every_session_reads_live_whatever_its_labels() -> None:
    r = _router(mode="auto", gate_min_labels=10)
    closed, opened = gate_status(r, 0, 0), gate_status(r, 10, 10)
    assert gate_state(closed, 100.0) == gate_state(opened, 100.0) == "live"
    assert gate_state(closed, 99.0) == "closed" and gate_state(opened, 0.0) == "open"
    assert gate_summary(closed, 100.0).startswith("live for every session")
    assert "0 of the 10" in gate_summary(closed, 100.0)  # the labels still shown
    assert gate_summary(closed, 0.0) == closed.reason


def test_escalation_latency_counts_hard_base_turns_before_the_ratchet() -> None:
    turns = [
        FeedbackTurn("r", "s1", 1.0, 0.9),
        FeedbackTurn("r", "s1", 2.0, 0.1),
        FeedbackTurn("r", "s1", 9.0, 0.0),  # after the ratchet: not latency
        FeedbackTurn("r", "s2", 1.0, 0.2),  # never escalated
    ]
    out = escalation_latency({("r", "s1"): 5.0, ("r", "s3"): 5.0}, turns)
    assert out["r"] == {
        "sessions_escalated": 2,
        "sessions_measured": 1,
        "mean_hard_turns": 1.0,
        "distribution": {"1": 1},
        "hard_sessions_not_escalated": 1,
    }


# ---- the config follower -----------------------------------------------------------------------

SEED: dict[str, Any] = {
    "server": {"port": 4000},
    "channels": [{"name": "oa", "type": "openai", "keys": ["${TG_UNIT_KEY}"], "models": {"m": {}}}],
}


class Live:
    """The apply callback's view: what the instance is running."""

    def __init__(self) -> None:
        self.cfg: GatewayConfig | None = None
        self.reenabled: frozenset[tuple[str, str]] = frozenset()
        self.calls = 0

    def __call__(self, cfg: GatewayConfig, reenabled: frozenset[tuple[str, str]]) -> None:
        self.cfg, self.reenabled, self.calls = cfg, reenabled, self.calls + 1


def _sync(
    repo: MemoryConfigRepository,
    store: MemoryStore,
    seed: dict[str, Any],
    env: dict[str, str] | None = None,
) -> tuple[ConfigSync, Live]:
    live = Live()
    return ConfigSync(repo, store, seed, live, env=env or {"TG_UNIT_KEY": "k"}), live


async def test_start_up_precedence_between_file_and_database() -> None:
    repo, store = MemoryConfigRepository(), MemoryStore()
    a, live_a = _sync(repo, store, SEED)
    await a.bootstrap()
    assert (a.version, live_a.calls) == (1, 0)  # seeded; the app already runs the seed
    assert await store.get(CONFIG_VERSION_KEY) == b"1"

    def drain(doc: dict[str, Any]) -> None:
        doc["channels"][0]["weight"] = 0

    row, _ = await a.change(drain, change={"op": "drain"})
    assert row.version == 2 and live_a.cfg is not None and live_a.cfg.channels[0].weight == 0

    restart, live_r = _sync(repo, store, SEED)  # same file: the database is newer
    await restart.bootstrap()
    assert restart.version == 2 and live_r.cfg is not None and live_r.cfg.channels[0].weight == 0

    edited = copy.deepcopy(SEED)
    edited["channels"][0]["priority"] = 4
    assert seed_hash(edited) != seed_hash(SEED)
    new_file, live_n = _sync(repo, store, edited)  # a file never seen: it wins
    await new_file.bootstrap()
    assert new_file.version == 3 and live_n.calls == 0
    local_only = {**SEED, "server": {"port": 5000}}  # local sections do not count
    assert seed_hash(local_only) == seed_hash(SEED)


async def test_followers_catch_up_with_reenabled_keys_and_never_go_back() -> None:
    repo, store = MemoryConfigRepository(), MemoryStore()
    a, _ = _sync(repo, store, SEED)
    b, live_b = _sync(repo, store, SEED)
    await a.bootstrap()
    await b.bootstrap()

    def enable(doc: dict[str, Any]) -> None:
        doc["channels"][0]["disabled_keys"] = []

    await a.change(enable, change={"op": "enable_key", "reenable_keys": [["oa", "fp"]]})
    await a.change(lambda d: d["channels"][0].update(priority=2), change={"op": "x"})
    await b.poll_once()  # the published version moved: B loads the newest row
    assert b.version == 3 and live_b.reenabled == {("oa", "fp")}  # union of skipped rows
    await a.publish(1)  # a late, older publish never lowers the version
    assert await store.get(CONFIG_VERSION_KEY) == b"3"


async def test_a_version_invalid_on_this_instance_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    repo, store = MemoryConfigRepository(), MemoryStore()
    a, _ = _sync(repo, store, SEED)
    b, live_b = _sync(repo, store, SEED, env={"TG_UNIT_KEY": "k"})
    await a.bootstrap()
    await b.bootstrap()
    b.env = {}  # B lost the variable the new key refers to
    await a.change(lambda d: d["channels"][0]["keys"].append("${TG_UNIT_KEY}"), change={})
    with caplog.at_level(logging.ERROR, "tiergate.config_store"):
        await b.catch_up()
        await b.catch_up()
    assert b.version == 1 and live_b.calls == 0
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "a key is empty" in errors[0].getMessage()
    with pytest.raises(ConfigError):
        await a.change(lambda d: d["channels"][0].update(type="fax"), change={})
    assert a.version == 2


async def test_a_change_before_start_up_finished_resolves_precedence_first() -> None:
    repo, store = MemoryConfigRepository(), MemoryStore()
    old_file = copy.deepcopy(SEED)
    old_file["channels"][0]["priority"] = 1
    first, _ = _sync(repo, store, old_file)
    await first.bootstrap()  # version 1: an older file
    late, live = _sync(repo, store, SEED)  # its bootstrap failed (database down)
    row, _ = await late.change(lambda d: d["channels"][0].update(weight=2), change={})
    assert row.version == 3  # 2 = this instance's new file, 3 = the change on top of it
    assert live.cfg is not None
    assert (live.cfg.channels[0].priority, live.cfg.channels[0].weight) == (0, 2)
