"""Does a session's turn cost more at turn 200 than at turn 2? In-process CPU, side by side.

    .venv/bin/python bench/bench_session_cpu.py [--turns 200] [--sessions 3]
        [--variant agent] [--state redis] [--format openai,anthropic]
        [--upstream openai|anthropic]

Why: agents resend the whole history every turn, so whatever the gateway does
per byte or per message of the body is paid again each turn (issue #30's bar:
turn 200 within 20 % of turn 2). This sends whole sessions, turn 1 to N in
order on one session id, through the gateway's ASGI app in this process (as
bench/profile_request.py: no inbound sockets; its upstream client talks to a
real simulator process) and reads the process CPU of every request
(`time.process_time`, nanosecond clock: one request is one reading, so no 10 ms
ticks blur it). Each session grows like bench_parse_memo.py's: a task, then per
turn an assistant tool call and a `--tool-kb` KB tool result, the tool offered
with every request.

Side by side, sessions alternating in the same run and process:
  memos      the gateway as shipped: message, render, body decode and encode memos
  no-body    the body decode and encode memos off (formats/body_decode.py,
             formats/body_encode.py): the gateway before them
  none       every memo this process can turn off, off (the message memo too)
Reported per window of 10 turns: the median CPU per request (us) and, last,
the ratio of the final window to turns 2-11.

That ratio compares turns measured seconds apart, and this VM drifts by more
than the bar between runs of one build (1.05-2.1x). `--staggered` therefore
also runs, per session, a second session of the same turns that starts when
the first reaches turn N-10, the two sent alternately (which goes first
alternating too): the old session's turns N-9..N and the young one's turns
2-11 are measured at the same time, on the same process and caches, as a
gateway serving a long and a new session at once does. Reported as its own row.
The young session has a task of its own; `--twins` gives it the old one's (the
same opening messages: one task run twice at once).

`--alike N` runs N sessions of one agent at once instead of one after another:
the same system prompt and tools, each its own task (of the same length) and
tool outputs, sent turn by turn in turn (turn 1 of every session, then turn 2,
...), as a gateway serving N sessions of one coding agent does. Their rows are
reported as `<mode> x N alike`. The gateway's memos find a conversation by its
opening, which such sessions share (docs/performance.md, session 25). Past the
memos' bound (`--history-mb`, server.history_cache_mb: about 36 sessions of
441 KB at 16 MiB, 128 at the default 64) the sessions not kept are served whole, which the
median hides: the last column is the last window's 90th percentile
(docs/performance.md, session 26).

`--count OLD,YOUNG` times nothing: it builds `--turns` turns' bodies, then
after a warm-up session sends one session's turns 1..OLD and another's (of its
own task) turns 1..YOUNG, and exits. bench/count_instructions.py
`--session-turns` runs it under callgrind with three pairs and subtracts:
instructions (and simulated cache misses) of turns N-9..N and of turns 2-11,
which no VM's drift can blur. The cycle collector is off while it sends: its
full passes land in whichever run crosses a threshold, a million instructions
a turn of noise.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import itertools
import json
import logging
import os
import pstats
import statistics
import sys
import tempfile
import time
import types
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

import asgi_driver
import bench_parse_memo
import common

MODES = ("memos", "no-body", "none")
PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


def _set_mode(gateway: Any, mode: str, saved: dict[str, Any]) -> None:
    """Turn the memos on or off on the running gateway's own instances (a tree
    from before a memo has none to turn: `--modes memos` measures it as it was)."""
    intake = getattr(gateway, "intake", gateway)  # older trees kept the memos on the gateway
    body_memo = getattr(intake, "body_memo", None)
    providers = [p for p in gateway.providers.values() if hasattr(p.http, "encoder")]
    if not saved:
        saved["min_bytes"] = body_memo.min_bytes if body_memo is not None else 0
        saved["max_bytes"] = intake.message_memo.max_bytes
        saved["encoders"] = {id(p): p.http.encoder for p in providers}
    body_off = mode != "memos"
    if body_memo is not None:
        body_memo.min_bytes = 1 << 62 if body_off else saved["min_bytes"]
        body_memo.clear()
    intake.message_memo.max_bytes = -1 if mode == "none" else saved["max_bytes"]
    intake.message_memo.clear()
    for p in providers:
        plain = types.SimpleNamespace(dumps=orjson.dumps, encode=lambda b: [orjson.dumps(b)])
        p.http.encoder = plain if body_off else saved["encoders"][id(p)]
        if not body_off:
            p.http.encoder.clear()


async def _send(app: Any, path: str, body: bytes, session: str) -> int:
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/json"),
        (b"authorization", f"Bearer {common.TOKEN}".encode()),
        (b"content-length", str(len(body)).encode()),
        (b"anthropic-version", b"2023-06-01"),
        (b"x-orcarouter-session-id", session.encode()),
    ]
    return await asgi_driver.post(app, path, headers, body)


def _tools(fmt: str, count: int = 1) -> list[dict[str, Any]]:
    """The tools an agent offers with every request: `bash` (bench_parse_memo's
    sessions call it), then `count - 1` more with schemas the size of Claude Code's
    (about 1.6 KB each: a long description and eight described parameters)."""
    specs = [("bash", "Run a shell command.", {"cmd": {"type": "string"}})]
    for i in range(1, count):
        props = {f"p{j}": {"type": "string", "description": "A parameter. " * 5} for j in range(8)}
        specs.append((f"Tool{i}", "Does one thing well. " * 40, props))
    out: list[dict[str, Any]] = []
    for name, about, props in specs:
        schema = {"type": "object", "properties": props}
        if fmt == "anthropic":
            out.append({"name": name, "description": about, "input_schema": schema})
        else:
            function = {"name": name, "description": about, "parameters": schema}
            out.append({"type": "function", "function": function})
    return out


def session(
    fmt: str, turns: int, tool_kb: float, model: str, tools: int = 1, system_kb: float = 0.0
) -> list[bytes]:
    """The turns' bodies, each with the agent's tools, as agents send them;
    `system_kb` grows the system prompt to that size (Claude Code's is about 60 KB)."""
    pad = "You are a coding agent. " * int(system_kb * 1024 / 24)
    out = []
    for raw in bench_parse_memo.bodies(fmt, turns, int(tool_kb * 1024)):
        body = orjson.loads(raw)
        body["model"] = model
        body.setdefault("max_tokens", 64)
        body["tools"] = _tools(fmt, tools)
        if pad and "system" in body:
            body["system"] = pad
        elif pad and body.get("messages") and body["messages"][0]["role"] == "system":
            body["messages"][0]["content"] = pad
        out.append(orjson.dumps(body))
    return out


#: Each tool output's first bytes (bench_parse_memo's turns: "out <k> xxx...").
_OUTPUT = b'"out '
_sessions_made = itertools.count()


def own_outputs(bodies: list[bytes]) -> list[bytes]:
    """The bodies with tool outputs no other session of this run has (a 3-hex-digit
    tag, same length, in place of "out"). Why: the gateway remembers what it read
    from a tool output by the text (routing/observations.py, routing/difficulty.py),
    and real sessions do not repeat each other's outputs; sessions built from one
    template did, so a later session's early turns were read from memory and
    looked cheaper than they are."""
    tag = b'"%03x ' % (next(_sessions_made) % 4096)
    return [b.replace(_OUTPUT, tag) for b in bodies]


async def _app(args: argparse.Namespace, sim_url: str, prefix: str) -> tuple[Any, Any, Any]:
    """The gateway's ASGI app as configured for this bench, started: (app, lifespan
    task, its inbox)."""
    from tiergate.app import create_app
    from tiergate.logs import setup_logging

    raw = common.gateway_config(sim_url, args.variant, state=args.state, prefix=prefix)
    if args.upstream == "anthropic":  # the same models, served on the Messages API
        raw["channels"][0].update(type="anthropic", base_url=sim_url)
    if args.history_mb is not None:
        raw.setdefault("server", {})["history_cache_mb"] = args.history_mb
    cfg = common.parse_config(raw, env={})
    setup_logging("INFO")
    for handler in logging.getLogger().handlers:  # written as when served, not shown
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(open(os.devnull, "w"))  # noqa: SIM115 - lives as long as the run
    app = create_app(cfg, spool_path=str(Path(tempfile.mkdtemp()) / "spool"), env={})
    life, inbox = await asgi_driver.lifespan(app)
    return app, life, inbox


async def count_run(args: argparse.Namespace, sim_url: str, old: int, young: int) -> int:
    """--count: a warm-up session, then turns 1..`old` of one session and 1..`young`
    of another, untimed; the non-200 replies."""
    prefix = common.new_prefix("sessioncount")
    app, life, inbox = await _app(args, sim_url, prefix)
    fmt = args.format.split(",")[0]
    model = common.MODELS[args.variant]
    # every run builds the same bodies, so the runs differ only in what is sent
    turns = max(args.turns, old, young, 12)
    bodies = session(fmt, turns, args.tool_kb, model, args.tools, args.system_kb)
    other = own_outputs([b.replace(_TASK, _OTHER_TASK) for b in bodies])
    warm = own_outputs([b.replace(_TASK, b"Fix the band parser") for b in bodies[:12]])
    bodies = own_outputs(bodies)
    bad = 0
    # The cycle collector's full passes cost millions of instructions on a heap this
    # size and land in whichever of the three runs crosses its threshold: counted
    # runs would differ by them, not by the turns sent (see --help).
    gc.collect()
    gc.disable()
    try:
        for name, sent in (("warm", warm), ("old", bodies[:old]), ("young", other[:young])):
            for body in sent:
                bad += await _send(app, PATHS[fmt], body, f"{prefix}-{name}") != 200
        await app.state.tiergate.gateway.drain()
    finally:
        gc.enable()
        await inbox.put({"type": "lifespan.shutdown"})
        await life
        if args.state == "redis":
            common.redis_cleanup(prefix)
    return bad


async def run(args: argparse.Namespace, sim_url: str) -> dict[str, Any]:
    prefix = common.new_prefix("sessioncpu")
    app, life, inbox = await _app(args, sim_url, prefix)
    gateway = app.state.tiergate.gateway
    model = common.MODELS[args.variant]
    cpu: dict[tuple[str, str], list[list[float]]] = {}
    staggered: dict[tuple[str, str], list[tuple[list[float], list[float]]]] = {}
    saved: dict[str, Any] = {}
    profile = cProfile.Profile() if args.profile else None
    bad = 0
    sizes: dict[str, list[int]] = {}
    try:
        for fmt in args.format.split(","):
            bodies = session(fmt, args.turns, args.tool_kb, model, args.tools, args.system_kb)
            sizes[fmt] = [len(b) for b in bodies]
            for rep in range(args.sessions):
                for mode in args.modes.split(","):  # alternating: each sees the same machine
                    _set_mode(gateway, mode, saved)
                    sid = f"{prefix}-{fmt}-{mode}-{rep}-{uuid.uuid4().hex[:6]}"
                    row = []
                    for turn, body in enumerate(own_outputs(bodies), start=1):
                        watched = profile is not None and mode == "memos"
                        watched = watched and turn > args.turns - args.profile
                        if watched:
                            assert profile is not None
                            profile.enable()
                        t0 = time.process_time()
                        status = await _send(app, PATHS[fmt], body, sid)
                        row.append((time.process_time() - t0) * 1e6)
                        if watched:
                            assert profile is not None
                            profile.disable()
                        bad += status != 200
                    cpu.setdefault((fmt, mode), []).append(row)
                    print(f"  {fmt} {mode} session {rep + 1} done", file=sys.stderr)
                    if args.alike:
                        rows, failed = await _alike(app, PATHS[fmt], bodies, sid, args.alike)
                        bad += failed
                        cpu.setdefault((fmt, f"{mode} x {args.alike} alike"), []).extend(rows)
                    if args.staggered:
                        pair = await _staggered(app, PATHS[fmt], bodies, f"{sid}-stag", args.twins)
                        bad += pair[2]
                        staggered.setdefault((fmt, mode), []).append(pair[:2])
        _set_mode(gateway, "memos", saved)
        await gateway.drain()
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        await life
        if args.state == "redis":
            common.redis_cleanup(prefix)
    if profile is not None:
        print(f"\ncProfile of the last {args.profile} turns of each memos session:")
        pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(30)
    return {"cpu": cpu, "staggered": staggered, "non_200": bad, "sizes": sizes}


#: The sessions' task (bench_parse_memo.bodies), and another of the same length.
_TASK, _OTHER_TASK = b"Fix the date parser", b"Fix the time parser"


async def _timed(app: Any, path: str, body: bytes, sid: str) -> tuple[float, int]:
    t0 = time.process_time()
    status = await _send(app, path, body, sid)
    return (time.process_time() - t0) * 1e6, status


async def _staggered(
    app: Any, path: str, bodies: list[bytes], sid: str, twins: bool = False
) -> tuple[list[float], list[float], int]:
    """An old session's last 10 turns and a young one's turns 2-11, interleaved
    (see the module docstring); (old CPU, young CPU, non-200 replies). The young
    session works on another task of the same length unless `twins`: then its
    opening messages are the old one's (one task run twice)."""
    n, bad = len(bodies), 0
    young_bodies = bodies[:11]
    if not twins:
        assert all(_TASK in b for b in young_bodies), "bench_parse_memo's task text changed"
        young_bodies = [b.replace(_TASK, _OTHER_TASK) for b in young_bodies]
    bodies, young_bodies = own_outputs(bodies), own_outputs(young_bodies)
    for body in bodies[: n - 11]:  # the old session up to turn N-11, untimed
        bad += await _send(app, path, body, f"{sid}-old") != 200
    old: list[float] = []
    young: list[float] = []
    for j in range(11):  # old turn N-10+j beside young turn 1+j
        pairs = [(old, bodies[n - 11 + j], f"{sid}-old"), (young, young_bodies[j], f"{sid}-young")]
        for out, body, who in pairs if j % 2 else pairs[::-1]:
            us, status = await _timed(app, path, body, who)
            bad += status != 200
            if j:  # turn N-10 and turn 1 only set the pair up
                out.append(us)
    return old, young, bad


async def _alike(
    app: Any, path: str, bodies: list[bytes], sid: str, count: int
) -> tuple[list[list[float]], int]:
    """`count` sessions of one agent at once, turn by turn in turn (see the module
    docstring): each session's CPU per turn, and the non-200 replies. Each turn's
    body is made as it is sent, so `count` long sessions are never all held."""
    assert all(_TASK in b for b in bodies), "bench_parse_memo's task text changed"
    tasks = [b"Fix the p%03d parser" % (i % 1000) for i in range(count)]
    assert all(len(t) == len(_TASK) for t in tasks)
    tags = [b'"%03x ' % (next(_sessions_made) % 4096) for _ in range(count)]
    rows: list[list[float]] = [[] for _ in range(count)]
    bad = 0
    for body in bodies:
        for i in range(count):
            mine = body.replace(_TASK, tasks[i]).replace(_OUTPUT, tags[i])
            us, status = await _timed(app, path, mine, f"{sid}-alike{i}")
            rows[i].append(us)
            bad += status != 200
    return rows, bad


def windows(turns: int) -> list[tuple[int, int]]:
    """10-turn windows (1-based, inclusive) at the start, quarter, half and end."""
    starts = sorted({2, turns // 4, turns // 2, turns - 9})
    return [(s, min(s + 9, turns)) for s in starts if s >= 2]


def report(res: dict[str, Any], args: argparse.Namespace) -> None:
    wins = windows(args.turns)
    print(
        f"\nin-process CPU per request (us), median over {args.sessions} sessions x 10 turns;"
        f" variant {args.variant}, state {args.state}, {args.upstream} upstream,"
        f" {args.tool_kb:g} KB tool results"
    )
    head = " | ".join(f"turns {a}-{b}" for a, b in wins)
    print(f"| format | mode | {head} | last / first | last window's p90 |")
    print("|---" * (len(wins) + 4) + "|")
    for (fmt, mode), rows in res["cpu"].items():
        sizes = res["sizes"][fmt]
        cells = []
        medians = []
        for a, b in wins:
            med = statistics.median(v for row in rows for v in row[a - 1 : b])
            medians.append(med)
            cells.append(f"{med:,.0f} ({sizes[b - 1] / 1024:,.0f} KB)")
        # the median hides the sessions a memo did not keep (--alike past its bound)
        a, b = wins[-1]
        p90 = statistics.quantiles([v for row in rows for v in row[a - 1 : b]], n=10)[-1]
        ratio = medians[-1] / medians[0]
        print(f"| {fmt} | {mode} | " + " | ".join(cells) + f" | {ratio:.2f} | {p90:,.0f} |")
    if res["staggered"]:
        last = f"{args.turns - 9}-{args.turns}"
        print(f"\nstaggered: turns {last} of one session beside turns 2-11 of another, same time")
        print(f"| format | mode | turns 2-11 | turns {last} | last / first |")
        print("|---|---|---|---|---|")
        for (fmt, mode), pairs in res["staggered"].items():
            sizes = res["sizes"][fmt]
            young = statistics.median(v for _, y in pairs for v in y)
            old = statistics.median(v for o, _ in pairs for v in o)
            print(
                f"| {fmt} | {mode} | {young:,.0f} ({sizes[10] / 1024:,.0f} KB) "
                f"| {old:,.0f} ({sizes[-1] / 1024:,.0f} KB) | {old / young:.2f} |"
            )
    if res["non_200"]:
        print(f"\nnon-200 replies: {res['non_200']}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--turns", type=int, default=200, help="session length")
    p.add_argument("--sessions", type=int, default=3, help="sessions per format and mode")
    p.add_argument("--tool-kb", type=float, default=2.0, help="KB per tool result")
    p.add_argument("--tools", type=int, default=1, help="tools offered (Claude Code: about 20)")
    p.add_argument(
        "--system-kb", type=float, default=0.0, help="system prompt KB (Claude Code: about 60)"
    )
    p.add_argument("--variant", default="agent", choices=sorted(common.VARIANT_HELP))
    p.add_argument("--state", default="redis", choices=["memory", "redis"])
    p.add_argument("--format", default="openai,anthropic", help="comma list of openai,anthropic")
    p.add_argument("--modes", default=",".join(MODES), help="comma list of " + ",".join(MODES))
    p.add_argument(
        "--upstream", default="openai", choices=["openai", "anthropic"], help="upstream API"
    )
    p.add_argument(
        "--profile", type=int, default=0, help="cProfile this many last turns (memos mode)"
    )
    p.add_argument(
        "--staggered",
        action="store_true",
        help="also time turns 2-11 beside another session's last 10 turns",
    )
    p.add_argument(
        "--twins",
        action="store_true",
        help="--staggered's young session repeats the old one's task (same opening messages)",
    )
    p.add_argument(
        "--alike",
        type=int,
        default=0,
        metavar="N",
        help="also run N sessions of one agent at once, turn by turn in turn",
    )
    p.add_argument(
        "--count",
        metavar="OLD,YOUNG",
        default=None,
        help="untimed, for callgrind: turns 1..OLD of one session, 1..YOUNG of another",
    )
    p.add_argument(
        "--history-mb",
        type=int,
        default=None,
        metavar="MB",
        help="server.history_cache_mb (default: the tree's own; 64 since session 27)",
    )
    p.add_argument("--sim-url", default=None, help="a running simulator (else one is started)")
    p.add_argument("--quick", action="store_true", help="tiny run (smoke test)")
    args = p.parse_args(argv)
    if args.count is not None:
        return _count_main(args)
    if args.quick:
        args.turns, args.sessions = (22 if args.staggered else 14), 1
    if args.turns < 12 or (args.staggered and args.turns < 22):
        p.error("--turns must be at least 12 (10-turn windows), 22 with --staggered")
    info = common.machine_info()
    common.print_machine(info)
    with simulator(args.sim_url) as sim_url:
        import uvloop

        res = uvloop.run(run(args, sim_url))
    report(res, args)
    payload = {
        "machine": info,
        "args": vars(args),
        "windows": windows(args.turns),
        "sizes": res["sizes"],
        "cpu_us": {f"{fmt}/{mode}": rows for (fmt, mode), rows in res["cpu"].items()},
        "staggered_us": {
            f"{fmt}/{mode}": [{"old": o, "young": y} for o, y in pairs]
            for (fmt, mode), pairs in res["staggered"].items()
        },
        "non_200": res["non_200"],
    }
    print(f"\nJSON: {common.write_result('session_cpu', payload)}")
    return 1 if res["non_200"] else 0


@contextlib.contextmanager
def simulator(url: str | None) -> Iterator[str]:
    """The simulator at `url`, or one started for the run and stopped after it."""
    if url is not None:
        yield url
        return
    sim = common.start_sim(Path(tempfile.mkdtemp(prefix="tiergate-sessioncpu-")), None)
    try:
        yield sim.url
    finally:
        sim.stop()


def _count_main(args: argparse.Namespace) -> int:
    import uvloop

    old, young = (int(n) for n in args.count.split(","))
    with simulator(args.sim_url) as sim_url:
        bad = uvloop.run(count_run(args, sim_url, old, young))
    print(json.dumps({"old": old, "young": young, "non_200": bad}))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
