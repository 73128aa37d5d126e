"""Session affinity on a simulated agent workload: cache-hit rate and cost per
session with and without affinity, measured side by side in one run.

The same agent sessions (a long system prompt, tool output pasted every turn)
go through two gateways in front of one provider simulator: one with affinity
on, one with it off. The channel has 3 API keys, and the simulator caches per
key, so without affinity most turns land on a key whose cache holds nothing
of the conversation. Cost is what the gateway billed (X-Orca-Cost), from the
cached-token counts the simulator reported.

Run: .venv/bin/python bench/bench_affinity.py [--sessions 20] [--turns 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.sim.app import create_sim_app

SYSTEM = "You are a coding agent in a large monorepo. " + " ".join(
    f"Convention {i}: small commits, typed interfaces, tests next to code." for i in range(250)
)


def _turn(session: int, t: int) -> str:
    out = "\n".join(f"PASS pkg/mod_{session}_{t}_{i} ({i * 3} ms)" for i in range(40))
    return f"Step {t}: continue. Latest test output:\n{out}\n[[sim:text]]"


def run_sessions(url: str, sessions: int, turns: int, label: str) -> dict[str, Any]:
    """Drive the sessions; return hit rate, cost per session and per-turn warmth."""
    client = httpx.Client(
        timeout=30,
        headers={"authorization": f"Bearer {TOKEN}", "x-orcarouter-include-cost": "true"},
    )
    prompt = cached = 0
    cost: list[float] = []
    for s in tqdm(range(sessions), desc=label, unit="session", leave=False):
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        session_cost = 0.0
        for t in range(turns):
            messages.append({"role": "user", "content": _turn(s, t)})
            r = client.post(
                f"{url}/v1/chat/completions",
                json={"model": "orcarouter/coding", "messages": messages},
                headers={"x-orcarouter-session-id": f"{label}-{s}"},
            )
            r.raise_for_status()
            body = r.json()
            usage = body["usage"]
            prompt += usage["prompt_tokens"]
            cached += (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
            session_cost += float(r.headers["x-orca-cost"])
            messages.append(
                {"role": "assistant", "content": body["choices"][0]["message"]["content"]}
            )
        cost.append(session_cost)
    return {
        "cache_hit_rate": cached / prompt,
        "cost_per_session": statistics.mean(cost),
        "sessions": sessions,
        "turns": turns,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sessions", type=int, default=20)
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--quick", action="store_true", help="3 sessions of 4 turns (smoke test)")
    args = p.parse_args(argv)
    sessions, turns = (3, 4) if args.quick else (args.sessions, args.turns)
    results = {}
    with ServerThread(create_sim_app()) as sim:
        for label, enabled in (("affinity-off", False), ("affinity-on", True)):
            cfg = parse_config(gateway_config(sim.url, affinity={"enabled": enabled}))
            with ServerThread(create_app(cfg)) as gw:
                results[label] = run_sessions(gw.url, sessions, turns, label)
    on, off = results["affinity-on"], results["affinity-off"]
    print(f"\n{sessions} agent sessions x {turns} turns, one 3-key OpenAI-shaped channel\n")
    print("| policy | cache hit rate (cached / prompt tokens) | cost per session (USD) |")
    print("|---|---|---|")
    for label, r in results.items():
        print(f"| {label} | {r['cache_hit_rate']:.1%} | {r['cost_per_session']:.5f} |")
    saving = 1 - on["cost_per_session"] / off["cost_per_session"]
    print(f"\naffinity saves {saving:.1%} per session at the same model choice")
    return 0


if __name__ == "__main__":
    sys.exit(main())
