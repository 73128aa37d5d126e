"""What the admission checks added in issue #27 cost per request: the JSON depth
bound (formats/depth.py) and the budget reservation (gateway/reservations.py).

- depth check: microseconds for a ~100 KB agent body (tool schemas, tool calls,
  tool results), which passes;
- worst-case estimate: microseconds to price the same body's hold;
- budget reservation: state-store operations and round trips per request for a
  key with a daily budget (and for workspace + key day + key month), and the
  wall time of reserve + settle on memory and on Redis, against the old
  check-then-charge (one GET per counter at admission, one INCRBYFLOAT per
  counter after the reply).

Run: .venv/bin/python bench/bench_admission.py [--redis redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
from tiergate.config import ModelConfig, Price
from tiergate.formats import openai as openai_fmt
from tiergate.formats.depth import depth_error
from tiergate.gateway.count_tokens import prompt_tokens
from tiergate.gateway.limits import Limiter, Scope, WorkspaceLimits, budget_key
from tiergate.gateway.worst_case import prompt_tokens_upper, request_worst_case
from tiergate.state.base import Incr, StateStore, Write
from tiergate.state.memory import MemoryStore
from tiergate.state.redis import RedisStore


def agent_body_100k() -> dict[str, Any]:
    """common.agent_body grown to ~100 KB with more read/run tool turns."""
    body = common.agent_body("openai/gpt-5-mini")
    turns = body["messages"][2:]
    i = 0
    while len(orjson.dumps(body)) < 100_000:
        for m in turns:
            m = orjson.loads(orjson.dumps(m).replace(b'"call_', f'"c{i}_'.encode()))
            if m["role"] == "tool":
                m["content"] = f"{m['content']}\n# pass {i}"
            body["messages"].append(m)
        i += 1
    return body


def per_call_us(fn: Callable[[], object], rounds: int = 2000) -> float:
    for _ in range(50):
        fn()
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(rounds):
            fn()
        samples.append((time.perf_counter() - t0) / rounds * 1e6)
    return statistics.median(samples)


class Counting:
    """Counts the StateStore calls made through it (one call = one round trip)."""

    def __init__(self, inner: StateStore) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    async def get(self, key: str) -> bytes | None:
        self.calls["get"] += 1
        return await self.inner.get(key)

    async def incr(self, key: str, amount: float = 1.0, ttl: float | None = None) -> float:
        self.calls["incr"] += 1
        return await self.inner.incr(key, amount, ttl)

    async def apply_batch(
        self, writes: Sequence[Write], incrs: Sequence[Incr] = (), guard: Any = None
    ) -> bool:
        self.calls["apply_batch"] += 1
        return await self.inner.apply_batch(writes, incrs, guard)


async def old_flow(store: Any, scopes: Sequence[Scope], cost: float) -> None:
    """main before #27: a GET per counter at admission, an INCRBYFLOAT per counter after."""
    now = time.time()
    keys = [budget_key(sid, now) for sid, lim, _ in scopes if lim.budget_usd_per_day is not None]
    keys += [f"lim:usdm:{sid}:x" for sid, lim, _ in scopes if lim.budget_usd_per_month is not None]
    for key in keys:
        await store.get(key)
    for key in keys:
        await store.incr(key, cost, ttl=172800)


async def new_flow(store: Any, scopes: Sequence[Scope], cost: float) -> None:
    lim = Limiter(store)
    await lim.settle(await lim.reserve(scopes, cost * 3), cost)


async def measure_store(name: str, store: StateStore, rounds: int) -> None:
    key_only: list[Scope] = [("vk_bench", WorkspaceLimits(budget_usd_per_day=1e9), "key")]
    every: list[Scope] = [
        ("ws_bench", WorkspaceLimits(budget_usd_per_day=1e9), "workspace"),
        ("vk_bench", WorkspaceLimits(budget_usd_per_day=1e9, budget_usd_per_month=1e9), "key"),
    ]
    for label, scopes in (("key day budget", key_only), ("ws day + key day + month", every)):
        for flow_name, flow in (("before", old_flow), ("after", new_flow)):
            counting = Counting(store)
            await flow(counting, scopes, 1e-5)
            ops = dict(counting.calls)
            t0 = time.perf_counter()
            for _ in range(rounds):
                await flow(store, scopes, 1e-5)
            us = (time.perf_counter() - t0) / rounds * 1e6
            print(f"{name:7} {label:26} {flow_name:6} ops/request {ops}  {us:8.1f} us/request")


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    p.add_argument("--rounds", type=int, default=2000)
    args = p.parse_args()

    body = agent_body_100k()
    raw = orjson.dumps(body)
    req = openai_fmt.parse_request(orjson.loads(raw))
    offers = [(ModelConfig(price=Price(input=1.25, output=10.0)), "openai")]
    assert depth_error(body) is None
    print(f"agent body: {len(raw) / 1000:.0f} KB, {len(body['messages'])} messages")
    print(f"depth check:        {per_call_us(lambda: depth_error(body)):8.1f} us/request")
    print(f"orjson.loads:       {per_call_us(lambda: orjson.loads(raw)):8.1f} us (for scale)")
    estimate = per_call_us(lambda: request_worst_case(offers, prompt_tokens_upper(req), None))
    print(f"worst-case estimate:{estimate:8.1f} us/request (characters / 2.5)")
    tokenizer = per_call_us(lambda: prompt_tokens(req), rounds=20)
    print(f"  with the tokenizer:{tokenizer:8.1f} us/request (what count_tokens answers)")
    print(f"  estimate {prompt_tokens_upper(req)} tokens, tokenizer {prompt_tokens(req)}")

    await measure_store("memory", MemoryStore(), args.rounds)
    redis = RedisStore(args.redis, key_prefix=f"bench:{uuid4().hex}:")
    try:
        await measure_store("redis", redis, args.rounds // 4)
    finally:
        await redis.delete_prefix()
        await redis.close()


if __name__ == "__main__":
    asyncio.run(main())
