"""The lane-store contract's fixtures and helpers, shared by test_lanes_contract.py
(the contract every adapter passes) and test_lanes_storage.py (secrets at rest,
unavailable storage, migrations)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from uuid import uuid4

import pytest
from redis.asyncio import Redis

from tiergate.core.model import Message, TextPart, ToolCall
from tiergate.lanes import (
    LaneRecord,
    LaneStore,
    MemoryLaneStore,
    PreparedTurn,
    RedisLaneStore,
    RouteCandidate,
    SessionTierError,
    SessionTiers,
    SessionTierSettings,
    SqliteLaneStore,
    TierTurn,
    migrate,
)

TTL = 60
LEASE = 10  # the in-flight lease, renewed by its holder; the lane lives TTL
T0 = 1_900_000_000.0
SESSION = "sess-SECRET-4711"
PRINCIPAL = "principal-SECRET-ws1"
PROMPT = "PROMPT-SECRET-please-refactor"
TOOL_ID = "call_SECRET_tool_77"
TOOL_ARGS = '{"path": "ARG-SECRET-file.py"}'
TOOL_RESULT = "RESULT-SECRET-42 passed"
SECRETS = (SESSION, PRINCIPAL, PROMPT, TOOL_ID, TOOL_ARGS, "ARG-SECRET", TOOL_RESULT)

CANDIDATES = [
    RouteCandidate("openai-main/m1", "m1", 1, "openai"),
    RouteCandidate("azure-east/m1", "m1", 1, "azure"),
    RouteCandidate("openai-main/m2", "m2", 2, "openai"),
]

StoreFactory = Callable[..., LaneStore]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """A factory of handles onto ONE shared storage (a second handle is a second
    gateway instance for SQLite and Redis; memory is process-local by design)."""
    backend: str = request.param
    opened: list[LaneStore] = []
    memory: list[MemoryLaneStore] = []
    prefix = f"test:{uuid4().hex}:"
    path = tmp_path / "lanes.db"
    redis_url = request.getfixturevalue("redis_url") if backend == "redis" else ""
    if backend == "sqlite":
        migrate(path)

    def make(capacity: int = 10_000) -> LaneStore:
        store: LaneStore
        if backend == "memory":
            if not memory:
                memory.append(MemoryLaneStore(capacity=capacity))
            return memory[0]
        if backend == "sqlite":
            store = SqliteLaneStore(path, capacity=capacity)
        else:
            store = RedisLaneStore(Redis.from_url(redis_url), key_prefix=prefix, capacity=capacity)
        opened.append(store)
        return store

    yield make
    if backend == "redis":
        client = Redis.from_url(redis_url)
        keys = [k async for k in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()
    for store in opened:
        await store.close()


OPENED: list[SessionTiers] = []


@pytest.fixture(autouse=True)
async def close_tiers() -> AsyncIterator[None]:
    """Stop the lease renewals of every facade a test opened (a crash is simulated
    by stopping one: `crash`)."""
    yield
    while OPENED:
        await OPENED.pop().close()


def tiers_on(
    store: LaneStore, clock: Clock, revision: str = "rev-1", lease: int = TTL
) -> SessionTiers:
    tiers = SessionTiers(SessionTierSettings(True, TTL, lease), store, revision, clock=clock)
    OPENED.append(tiers)
    return tiers


def crash(tiers: SessionTiers, prepared: PreparedTurn) -> None:
    """The holder dies mid-turn: it stops renewing and never finalizes."""
    tiers.renewals.stop(prepared.lease)


def turn(
    lane: str = "main", model: str = "openai:m1", tier: int = 1, session: str = SESSION
) -> TierTurn:
    return TierTurn("managed", "coding", lane, model, tier, session=session)


def user(text: str = PROMPT) -> Message:
    return Message(role="user", content=[TextPart(text)])


def tool_turn() -> list[Message]:
    return [
        user(),
        Message(role="assistant", tool_calls=[ToolCall(TOOL_ID, "edit", TOOL_ARGS)]),
        Message(role="tool", content=[TextPart(TOOL_RESULT)], tool_call_id=TOOL_ID),
    ]


async def prepare(
    tiers: SessionTiers,
    t: TierTurn | None = None,
    messages: list[Message] | None = None,
    principal: str = PRINCIPAL,
) -> PreparedTurn:
    return await tiers.prepare(principal, t or turn(), messages or [user()], CANDIDATES)


async def expect_error(coro: object, status: int, code: str) -> SessionTierError:
    with pytest.raises(SessionTierError) as info:
        await coro  # type: ignore[misc]
    assert (info.value.status, info.value.code) == (status, code)
    return info.value


async def stored(store: LaneStore, prepared: PreparedTurn, now: float) -> LaneRecord | None:
    v = await store.load(prepared.lease.scope, now)
    return v.record if v else None


def rec(scope: str, expires_at: float, model: str = "openai:m1") -> LaneRecord:
    return LaneRecord(scope, "main", model, 1, None, "r", expires_at, outstanding=("ab", "cd"))
