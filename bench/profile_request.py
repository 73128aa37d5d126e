"""The gateway's own cost per request, in one process, without the HTTP server.

The load generator's agent requests (bench_overhead.py's `agent` variant by
default: router + session affinity + escalation, memory state) are fed to the
gateway's ASGI app directly: no uvicorn, no sockets on the inbound side, so
what is measured is tiergate's pipeline from the request body to the reply
bytes, plus its upstream client talking to a real simulator process.
Sessions of 50 turns, each turn a new tool result, as in bench_overhead.py.

Three ways to read it, all deterministic enough to compare two commits on a
noisy shared machine:
  --mode cpu       process CPU µs per request (best of --repeat blocks)
  --mode cprofile  a cProfile of --requests requests, top functions
  --mode sample    a statistical profile (a CPU-time timer signal reads the
                   running stack; no per-call overhead, unlike cProfile):
                   self and inclusive shares per function
  --mode count     run --requests requests after warm-up and exit; under
                   `valgrind --tool=callgrind` two counts differ by the
                   instructions of the extra requests (see --help epilog)

Run: .venv/bin/python bench/profile_request.py [--variant agent] [--state memory]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import os
import pstats
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import asgi_driver
import common

EPILOG = """instruction counts per request (the sim runs outside valgrind):
  for n in 100 400; do valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$n \\
      .venv/bin/python bench/profile_request.py --mode count --requests $n \\
      --sim-url http://127.0.0.1:PORT; done
  (Ir(400) - Ir(100)) / 300 = instructions per request
"""


class Driver:
    """Builds the loadgen's request bodies and sends them through the ASGI app."""

    def __init__(
        self,
        app: Any,
        model: str,
        session: bool,
        stream: bool = False,
        body: str | None = None,
    ) -> None:
        self.app = app
        body = body or json.dumps(common.agent_body(model, stream=stream))
        self.pre, _, self.post = (p.encode() for p in body.partition(common.COUNTER))
        self.session = session
        self.prefix = uuid.uuid4().hex[:10]
        self.sent = 0
        self.statuses: dict[int, int] = {}

    def _request(self) -> tuple[list[tuple[bytes, bytes]], bytes]:
        n = self.sent
        self.sent += 1
        body = self.pre + f"0-{n}".encode() + self.post
        headers = [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"authorization", f"Bearer {common.TOKEN}".encode()),
            (b"content-length", str(len(body)).encode()),
        ]
        if self.session:
            sid = f"{self.prefix}-0-{n // 50}"
            headers.append((b"x-orcarouter-session-id", sid.encode()))
        return headers, body

    async def one(self) -> None:
        headers, body = self._request()
        status = await asgi_driver.post(self.app, "/v1/chat/completions", headers, body)
        self.statuses[status] = self.statuses.get(status, 0) + 1


class Sampler:
    """Samples the running Python stack every `interval` seconds of process CPU."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.self_counts: dict[str, int] = {}
        self.incl_counts: dict[str, int] = {}
        self.samples = 0

    def _handler(self, signum: int, frame: Any) -> None:
        self.samples += 1
        seen = set()
        leaf = True
        while frame is not None:
            code = frame.f_code
            if code.co_filename == "<string>":  # dataclass-generated: name the class
                owner = type(frame.f_locals.get("self")).__name__
                name = f"{code.co_name} of {owner} (generated)"
            else:
                name = f"{code.co_name} ({_short(code.co_filename)}:{code.co_firstlineno})"
            if leaf:
                self.self_counts[name] = self.self_counts.get(name, 0) + 1
                leaf = False
            if name not in seen:
                seen.add(name)
                self.incl_counts[name] = self.incl_counts.get(name, 0) + 1
            frame = frame.f_back

    def start(self) -> None:
        signal.signal(signal.SIGPROF, self._handler)
        signal.setitimer(signal.ITIMER_PROF, self.interval, self.interval)

    def stop(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)

    def report(self, top: int) -> None:
        n = max(self.samples, 1)
        print(f"{self.samples} samples")
        for title, counts in (("self", self.self_counts), ("inclusive", self.incl_counts)):
            print(f"\n{title} %")
            for name, c in sorted(counts.items(), key=lambda kv: -kv[1])[:top]:
                print(f"{100 * c / n:6.1f}  {name}")


def _short(path: str) -> str:
    for marker in ("site-packages/", "src/", "python3.11/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


async def run(args: argparse.Namespace, sim_url: str) -> dict[str, Any]:
    from tiergate.app import create_app
    from tiergate.logs import setup_logging

    prefix = common.new_prefix("profile")
    raw = common.gateway_config(sim_url, args.variant, state=args.state, prefix=prefix)
    cfg = common.parse_config(raw, env={})
    setup_logging(args.log_level)
    # the access log is formatted and written as when served, to a file, not here
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(open(os.devnull, "w"))  # noqa: SIM115 - lives as long as the run
    app = create_app(cfg, spool_path=str(Path(tempfile.mkdtemp()) / "spool"), env={})
    life, inbox = await asgi_driver.lifespan(app)
    model = common.MODELS[args.variant]
    drv = Driver(app, model, args.variant == "agent", body=chosen_body(args, model))
    out: dict[str, Any] = {}
    try:
        for _ in range(args.warmup):
            await drv.one()
        if args.mode == "cpu":
            blocks = []
            for _ in range(args.repeat):
                t0 = time.process_time()
                for _ in range(args.requests):
                    await drv.one()
                blocks.append((time.process_time() - t0) / args.requests * 1e6)
            out["cpu_us_per_req"] = sorted(blocks)
        elif args.mode == "sample":
            sampler = Sampler(args.interval_us / 1e6)
            sampler.start()
            for _ in range(args.requests):
                await drv.one()
            sampler.stop()
            sampler.report(args.top)
        elif args.mode == "cprofile":
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(args.requests):
                await drv.one()
            prof.disable()
            stats = pstats.Stats(prof, stream=sys.stdout)
            stats.sort_stats(args.sort).print_stats(args.top)
            if args.dump:
                stats.dump_stats(args.dump)
        else:
            for _ in range(args.requests):
                await drv.one()
        await app.state.tiergate.gateway.drain()
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        await life
        if args.state == "redis":
            common.redis_cleanup(prefix)
    out["statuses"] = drv.statuses
    return out


def chosen_body(args: argparse.Namespace, model: str) -> str | None:
    """--body-kb: the real turn nearest that size in --bodies (bench_bodies.py's
    choice), else the generated agent body grown to it; None: the usual ~12 KB body.
    --tools claude-code: that body with a Claude-Code-shaped tool list
    (bench/agent_tools.py) in place of its own."""
    if not args.body_kb and args.tools == "body":
        return None
    import bench_bodies

    if args.body_kb:
        sessions = bench_bodies.corpus_turns(args.bodies)
        body, source = bench_bodies.pick_bodies(sessions, [args.body_kb])[args.body_kb]
    else:
        body, source = common.agent_body(model), "the generated agent body"
    if args.tools == "claude-code":
        import agent_tools

        body = {**body, "tools": agent_tools.CLAUDE_CODE_SHAPED}
        source += ", Claude-Code-shaped tools"
    print(f"body: {len(json.dumps(body)) // 1024} KB, {source}", file=sys.stderr)
    return bench_bodies.with_counter(body, model)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--variant", default="agent", choices=sorted(common.VARIANT_HELP))
    p.add_argument("--state", default="memory", choices=["memory", "redis"])
    p.add_argument("--mode", default="cpu", choices=["cpu", "cprofile", "count", "sample"])
    p.add_argument("--requests", type=int, default=500)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--interval-us", type=float, default=200.0, help="sample mode's period")
    p.add_argument("--sort", default="tottime")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--dump", default=None, help="write the cProfile stats here")
    p.add_argument("--log-level", default="INFO")
    p.add_argument("--sim-url", default=None, help="a running simulator (else one is started)")
    p.add_argument("--body-kb", type=int, default=0, help="profile a body of this size")
    p.add_argument("--bodies", type=Path, default=None, help="corpus to take real bodies from")
    p.add_argument(
        "--tools",
        default="body",
        choices=["body", "claude-code"],
        help="the body's own tools, or a Claude-Code-shaped list (bench/agent_tools.py)",
    )
    args = p.parse_args(argv)
    sim = None
    sim_url = args.sim_url
    if sim_url is None:
        sim = common.start_sim(Path(tempfile.mkdtemp(prefix="tiergate-prof-")), None)
        sim_url = sim.url
    try:
        import uvloop

        res = uvloop.run(run(args, sim_url))
    finally:
        if sim is not None:
            sim.stop()
    if args.mode not in ("cprofile", "sample"):
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
