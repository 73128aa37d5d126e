"""Benchmark: linucb's decision, one ranking of two trained arms, per request.

What the strategy does on the hot path once the arms are loaded and the context
vector is built: each arm's posterior under the prior (the warm start's rank-one
correction included), the UCB, the exploration hash. Reported: the minimum over
repeats of the mean microseconds per ranking (the least-disturbed estimate on a
shared machine). Run it beside another checkout to compare two versions.

Run: .venv/bin/python bench/bench_linucb.py [--calls N] [--repeats N]
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

from tiergate.config import ModelConfig, Price, RouterConfig
from tiergate.core.model import ChatRequest, Message, TextPart
from tiergate.routing import linucb, strategies
from tiergate.routing.strategies import Candidate, StrategyContext

WEAK = Candidate("weak", ModelConfig(quality=0.60, price=Price(input=0.6, output=0.6)))
STRONG = Candidate("strong", ModelConfig(quality=0.86, price=Price(input=10.0, output=30.0)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    router = RouterConfig(
        name="bench", strategy="linucb", weak_pool=["weak"], strong_pool=["strong"]
    )
    rng = np.random.default_rng(0)
    arms = {c.name: linucb.LinUCBArm.fresh() for c in (WEAK, STRONG)}
    for name in arms:
        for _ in range(100):
            arms[name] = linucb.update(arms[name], rng.random(linucb.DIM), 0.5)
    x = rng.random(linucb.DIM)
    text = [TextPart("What is 2+2?")]
    req = ChatRequest(model="bench", messages=[Message(role="user", content=text)])

    def once() -> list[str]:
        ctx = StrategyContext(request=req, router=router, score=0.1, bandit_arms=arms, bandit_x=x)
        return strategies.rank("linucb", [WEAK, STRONG], ctx)

    best = min(timeit.repeat(once, number=args.calls, repeat=args.repeats)) / args.calls
    print(f"linucb ranking, 2 arms, {linucb.DIM} dimensions: {best * 1e6:.1f} us")


if __name__ == "__main__":
    main()
