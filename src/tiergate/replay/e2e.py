"""End-to-end mode: the same sessions over HTTP through a real gateway to the simulator.

Starts, in this process, the provider simulator and a gateway configured like
the in-process replay (cheap pair as base tier, frontier pair as strong, three
keys per channel, the engine's shipped settings with the share caps lifted),
each with uvicorn on a free loopback port. Then it sends every selected turn
as a real chat-completions request, in the same simulated-time order as the
in-process replay. Idle gaps move the simulator's clock (its prompt caches
expire on it) and the gateway planner's clock (tier state, strike decay) by
the same amount; nothing sleeps.

It reports what the simulator actually billed (from its per-key counters,
priced with the replay's price table), the cache hit rate it measured, the
gateway's own `X-Orca-Cost` total, and the cost model's estimate for the same
turns with the models the gateway actually chose and the simulator's token
counts. The difference isolates the cost model's cache assumptions from the
provider's real rules (minimum prefix lengths, grids, breakpoints).

Turns whose corpus `upstream_status` is not 200 are not sent: upstream faults
are exercised by the simulator's own tests. The simulator writes its own
replies, so response-side strikes can differ from the in-process replay; the
report shows how often the two tier decisions agree.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import uvicorn

from tiergate.config_load import parse_config
from tiergate.replay.costmodel import (
    CACHE_READ_MULTIPLIER,
    PRICE_TABLE,
    CostModel,
    ModelPrice,
    SessionCache,
)
from tiergate.replay.features import CorpusFacts
from tiergate.replay.harness import ROUTER_NAME, RunResult

TOKEN = "tg-replay-e2e"
_PER_TOKEN = 1e-6


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerThread:
    """An ASGI app under uvicorn on 127.0.0.1:<free port>, in a daemon thread."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.run(self.server.serve())

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


def _model_entry(m: ModelPrice) -> dict[str, Any]:
    return {
        "upstream": m.name.split("/", 1)[1],
        "price": {"input": m.input, "output": m.output},
        "quality_tier": 1,
    }


def gateway_config(sim_url: str, cost_model: CostModel) -> dict[str, Any]:
    """The replay's router and price table as a gateway config on the simulator."""
    models = [m for pool in cost_model.tiers.values() for m in pool]
    channels: dict[str, dict[str, Any]] = {}
    for m in models:
        ch = channels.setdefault(
            m.provider,
            {
                "name": f"sim-{m.provider}",
                "type": m.provider,
                "base_url": sim_url + ("/v1" if m.provider == "openai" else ""),
                "keys": [f"{m.provider}-key-{i}" for i in range(1, m.keys + 1)],
                "models": {},
            },
        )
        ch["models"][m.name] = _model_entry(m)
    return {
        "database": {"url": ""},
        "workspaces": [{"name": "replay", "tokens": [TOKEN], "escalation_share_cap_percent": 100}],
        "channels": list(channels.values()),
        "routers": [
            {
                "name": ROUTER_NAME,
                "allowed_models": [m.name for m in models],
                "strategy": "balanced",
                "strong_pool": [m.name for m in cost_model.tiers["strong"]],
                "escalation": {"mode": "auto", "share_cap_percent": 100},
            }
        ],
    }


@dataclass
class _Tally:
    input: float = 0.0
    output: float = 0.0
    cached: float = 0.0
    prompt: int = 0

    @property
    def total(self) -> float:
        return self.input + self.output


def _billed(stats: dict[str, Any]) -> tuple[_Tally, int, int]:
    """Price the simulator's per-key counters with the replay's price table."""
    by_upstream = {m.name.split("/", 1)[1]: m for m in PRICE_TABLE.values()}
    tally = _Tally()
    reads = prompts = 0
    for row in stats["entries"]:
        m = by_upstream.get(row["model"])
        if m is None:
            continue
        tally.input += (
            _PER_TOKEN
            * m.input
            * (
                row["input_tokens"]
                + CACHE_READ_MULTIPLIER * row["cache_read_tokens"]
                + m.write_multiplier * row["cache_write_tokens"]
            )
        )
        tally.output += _PER_TOKEN * m.output * row["output_tokens"]
        reads += row["cache_read_tokens"]
        prompts += row["prompt_tokens"]
    return tally, reads, prompts


def pick_sessions(facts: CorpusFacts, limit: int | None) -> list[int]:
    """Every k-th session so each archetype keeps its share; all when limit is None/0."""
    n = len(facts.sessions)
    if not limit or limit >= n:
        return list(range(n))
    step = n / limit
    return sorted({int(i * step) for i in range(limit)})


async def run_e2e(
    corpus: Sequence[dict[str, Any]],
    facts: CorpusFacts,
    sessions: Sequence[int],
    cost_model: CostModel | None = None,
    in_process: RunResult | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Replay `sessions` of `corpus` over HTTP; returns billed vs estimated figures."""
    from tiergate.app import create_app
    from tiergate.sim.app import create_sim_app

    cost_model = cost_model or CostModel()
    chosen = set(sessions)
    order = [(s, t) for s, t in facts.order if s in chosen]
    sim_app = create_sim_app()
    sim_state = sim_app.state.sim
    with ServerThread(sim_app) as sim:
        app = create_app(parse_config(gateway_config(sim.url, cost_model)))
        gateway = app.state.tiergate.gateway
        gateway.planner.clock = sim_state.clock.now  # the gateway decides on simulated time
        with ServerThread(app) as gw:
            return await _drive(
                gw.url, sim_state, corpus, facts, order, cost_model, in_process, progress
            )


async def _drive(
    url: str,
    sim_state: Any,
    corpus: Sequence[dict[str, Any]],
    facts: CorpusFacts,
    order: Sequence[tuple[int, int]],
    cost_model: CostModel,
    in_process: RunResult | None,
    progress: Callable[[int], None] | None,
) -> dict[str, Any]:
    caches: dict[int, SessionCache] = {}
    last_prompt: dict[int, int] = {}
    model = _Tally()
    orca_cost = 0.0
    sent = errors = agree = compared = strong = 0
    expected = _expected_tiers(in_process)
    started = time.perf_counter()
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        for n, (s, t) in enumerate(order):
            f = facts.sessions[s].turns[t]
            if progress is not None and n % 64 == 63:
                progress(64)
            if f.status != 200:
                continue
            turn = corpus[s]["turns"][t]
            sim_state.clock.offset = f.at - time.time()
            headers = {
                "Authorization": f"Bearer {TOKEN}",
                "X-OrcaRouter-Session-Id": facts.sessions[s].session_id,
                "X-OrcaRouter-Include-Cost": "true",
                **{str(k): str(v) for k, v in (turn.get("headers") or {}).items()},
            }
            async with http.post(
                f"{url}/v1/chat/completions", json=turn["request"], headers=headers
            ) as r:
                body = await r.json(content_type=None)
                if r.status != 200:
                    errors += 1
                    continue
                served = r.headers.get("x-orca-resolved-model", "")
                tier_header = r.headers.get("x-orca-session-tier", "base")
                orca_cost += float(r.headers.get("x-orca-cost", "0") or 0)
            sent += 1
            usage = body.get("usage") or {}
            prompt = int(usage.get("prompt_tokens", 0))
            m = PRICE_TABLE.get(served)
            if m is not None:
                cache = caches.setdefault(s, SessionCache())
                cost = cost_model.turn(
                    cache,
                    m,
                    f.at,
                    prompt,
                    last_prompt.get(s, 0),
                    True,
                    output_tokens=int(usage.get("completion_tokens", 0)),
                )
                model.input += cost.input_usd
                model.output += cost.output_usd
                model.cached += cost.cached_tokens
                model.prompt += prompt
            last_prompt[s] = prompt
            tier = "strong" if tier_header.startswith("strong") else "base"
            strong += tier == "strong"
            if (s, t) in expected:
                compared += 1
                agree += expected[(s, t)] == tier
    if progress is not None:
        progress(len(order) % 64)
    stats = sim_state.stats.snapshot()
    billed, reads, prompts = _billed(stats)
    return {
        "sessions": len({s for s, _ in order}),
        "requests": sent,
        "errors": errors,
        "strong_requests": strong,
        "seconds": round(time.perf_counter() - started, 2),
        "billed_usd": {
            "input": round(billed.input, 6),
            "output": round(billed.output, 6),
            "total": round(billed.total, 6),
        },
        "model_usd": {
            "input": round(model.input, 6),
            "output": round(model.output, 6),
            "total": round(model.total, 6),
        },
        "gateway_reported_usd": round(orca_cost, 6),
        "cache_hit_rate": {
            "billed": round(reads / prompts, 4) if prompts else 0.0,
            "model": round(model.cached / model.prompt, 4) if model.prompt else 0.0,
        },
        "model_vs_billed": round(model.total / billed.total, 4) if billed.total else None,
        "tier_agreement": round(agree / compared, 4) if compared else None,
        "tier_compared": compared,
    }


def _expected_tiers(run: RunResult | None) -> dict[tuple[int, int], str]:
    """The in-process replay's served tier per (session, turn index)."""
    if run is None:
        return {}
    out: dict[tuple[int, int], str] = {}
    counters: dict[int, int] = {}
    for rec in run.records:
        i = counters.get(rec.session, 0)
        counters[rec.session] = i + 1
        if rec.tier is not None:
            out[(rec.session, _turn_index(run, rec.session, i))] = rec.tier
    return out


def _turn_index(run: RunResult, session: int, nth: int) -> int:
    """Records of a session arrive in turn order; the nth record is the nth turn."""
    return run.facts.sessions[session].turns[nth].index
