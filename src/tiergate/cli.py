"""Command line: serve | sim | health | config check | db migrate (and replay, from eval)."""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import os
import socket
import sys
from collections.abc import Sequence

from tiergate import __version__
from tiergate.config import ConfigError, GatewayConfig
from tiergate.config_load import config_warnings, load_config
from tiergate.replay_cli import add_replay_parser
from tiergate.routing.bands import threshold_warnings

BANNER = """
================================================================================
  tiergate DEMO MODE: no config file and no provider keys in the environment.
  Every channel points at the built-in provider simulator on {sim_url}
  (deterministic answers, real prompt-cache accounting, no real LLM calls).
  It replies with filler text or random tool calls unless a script is armed:
    curl -s {sim_url}/_sim/script -d '{{"name": "fix"}}'   (docs/agents.md)
  Set OPENAI_API_KEY / ANTHROPIC_API_KEY / GEMINI_API_KEY / DEEPSEEK_API_KEY,
  or pass --config FILE, to use real providers.
================================================================================
  Gateway:  http://{host}:{port}
  Token:    {token}{token_note}
  Dashboard: http://{host}:{port}/dashboard/
  Admin token (dashboard sign-in): {admin_token}{admin_note}
  Routers:  orcarouter/auto and orcarouter/coding (configured alike, the names
            the README and docs/agents.md use; they escalate to a strong model
            when the session earns it)

  Try it:
    curl -s http://{host}:{port}/v1/chat/completions \\
      -H "Authorization: Bearer {token}" -H "Content-Type: application/json" \\
      -H "X-OrcaRouter-Session-Id: demo-1" -H "X-OrcaRouter-Include-Cost: true" \\
      -d '{{"model": "orcarouter/auto", "messages": [{{"role": "user", "content": "Hello"}}]}}' -i
================================================================================
"""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class PortBusy(Exception):
    """The gateway's port could not be bound; the message is the one line shown."""


def bind_listener(host: str, port: int) -> socket.socket:
    """The gateway's listening socket, bound before anything else starts, so a
    process that cannot serve writes nothing shared (docs/operator.md)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as err:
        raise PortBusy(f"tiergate: cannot listen on {host}:{port}: {err.strerror or err}") from err
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise PortBusy(
                f"tiergate: port {port} on {host} is already in use (another tiergate "
                "or program listens there); stop it or pass --port N"
            ) from err
        raise PortBusy(f"tiergate: cannot listen on {host}:{port}: {err.strerror}") from err
    sock.set_inheritable(True)
    return sock


def demo_database(env: dict[str, str], port: int) -> dict[str, str]:
    """Demo mode's database: one file per port, so a second demo in the same
    folder never rewrites a running one's config (TIERGATE_DATABASE_URL wins)."""
    if env.get("TIERGATE_DATABASE_URL"):
        return env
    return {**env, "TIERGATE_DATABASE_URL": f"sqlite:///tiergate-demo-{port}.db"}


def _print_problems(source: str, err: ConfigError) -> None:
    print(f"{source}: {len(err.problems)} problem(s):", file=sys.stderr)
    for p in err.problems:
        print(f"  - {p}", file=sys.stderr)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn
    import uvloop

    from tiergate.app import create_app
    from tiergate.defaults import auto_config, new_token, provider_keys
    from tiergate.gc_policy import freeze_startup_heap, time_pauses
    from tiergate.http_protocol import gateway_server_config
    from tiergate.logs import setup_logging

    setup_logging(args.log_level)
    env = dict(os.environ)
    sim_server = None
    banner = None
    listener: socket.socket | None = None
    try:
        if args.config:
            cfg: GatewayConfig = load_config(args.config)
        elif provider_keys(env):
            if not env.get("TIERGATE_TOKEN"):
                print(
                    "TIERGATE_TOKEN must be set when serving real provider keys.", file=sys.stderr
                )
                return 2
            cfg = auto_config(env)
        else:
            from tiergate.sim.app import create_sim_app

            demo_host = args.host or "127.0.0.1"
            demo_port = args.port or 4000
            listener = bind_listener(demo_host, demo_port)  # before the demo's database
            sim_port = free_port()
            sim_url = f"http://127.0.0.1:{sim_port}"
            token = env.get("TIERGATE_TOKEN") or new_token()
            # the dashboard needs an admin token: demo mode makes one, so it works at once
            admin_token = env.get("TIERGATE_ADMIN_TOKEN") or new_token("tga-")
            cfg = auto_config(
                demo_database(env, demo_port), sim_url=sim_url, token=token, admin_token=admin_token
            )
            sim_server = uvicorn.Server(
                uvicorn.Config(
                    create_sim_app(),
                    host="127.0.0.1",
                    port=sim_port,
                    log_level="warning",
                    loop="uvloop",
                    http="httptools",
                )
            )
            banner = BANNER.format(
                sim_url=sim_url,
                host=args.host or cfg.server.host,
                port=args.port or cfg.server.port,
                token=token,
                token_note=""
                if env.get("TIERGATE_TOKEN")
                else "   (generated; set TIERGATE_TOKEN to fix it)",
                admin_token=admin_token,
                admin_note=""
                if env.get("TIERGATE_ADMIN_TOKEN")
                else "   (generated; set TIERGATE_ADMIN_TOKEN to fix it)",
            )
    except ConfigError as err:
        _print_problems(args.config or "environment", err)
        return 2
    except PortBusy as err:
        print(err, file=sys.stderr)
        return 1
    for w in config_warnings(cfg, env, session_tiers=False):  # lanes log their own
        logging.getLogger("tiergate.config").warning("%s", w)
    host = args.host or cfg.server.host
    port = args.port or cfg.server.port
    if listener is None:
        try:
            listener = bind_listener(host, port)
        except PortBusy as err:
            print(err, file=sys.stderr)
            return 1
    server = uvicorn.Server(
        gateway_server_config(create_app(cfg, spool_path=args.spool), host, port)
    )

    async def run() -> None:
        sim_task = asyncio.create_task(sim_server.serve()) if sim_server is not None else None
        while sim_server is not None and not sim_server.started:
            await asyncio.sleep(0.01)
        gw_task = asyncio.create_task(server.serve(sockets=[listener]))
        while not server.started and not gw_task.done():
            await asyncio.sleep(0.01)
        if server.started:  # announce only once the gateway really listens
            freeze_startup_heap()  # full collections skip what start-up built (gc_policy)
            time_pauses()
            print(banner or f"tiergate serving on http://{host}:{port}", flush=True)
        try:
            await gw_task
        finally:
            if sim_server is not None and sim_task is not None:
                sim_server.should_exit = True
                await sim_task

    # uvicorn applies `loop="uvloop"` only in Server.run(); serving through our own
    # coroutine needs the loop chosen here, or stdlib asyncio silently runs instead.
    uvloop.run(run())
    return 0


def cmd_sim(args: argparse.Namespace) -> int:
    import uvicorn

    from tiergate.gc_policy import freeze_startup_heap
    from tiergate.sim.app import SimSettings, create_sim_app

    settings = SimSettings(latency_ms=args.latency_ms, tokens_per_second=args.tokens_per_second)
    app = create_sim_app(settings)
    # Benches time the gateway against this process: its own full collections
    # (24 of up to 55 ms per 8,000 long-session requests) were stalls no provider has.
    freeze_startup_heap()
    print(f"tiergate provider simulator on http://{args.host}:{args.port}", flush=True)
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        loop="uvloop",
        http="httptools",
    )
    return 0


def cmd_config_check(args: argparse.Namespace) -> int:
    try:
        cfg = load_config(args.file)
    except ConfigError as err:
        _print_problems(args.file, err)
        return 2
    warnings = config_warnings(cfg)
    for w in warnings:
        print(f"{args.file}: warning: {w}", file=sys.stderr)
    noted = f", {len(warnings)} warning(s)" if warnings else ""
    print(
        f"{args.file}: OK ({len(cfg.channels)} channels, {len(cfg.exposed_models())} models, "
        f"{len(cfg.routers)} routers, {len(cfg.workspaces)} workspaces{noted})"
    )
    for i, router in enumerate(cfg.routers):
        for warning in threshold_warnings(router, f"routers.{i}"):
            print(f"warning: {warning}")
    return 0


def cmd_db_migrate(args: argparse.Namespace) -> int:
    from tiergate import db
    from tiergate.lanes import migrate as migrate_session_tiers

    url = args.url
    lanes_path = args.session_tiers_sqlite
    if args.config:
        try:
            cfg = load_config(args.config)
        except ConfigError as err:
            _print_problems(args.config, err)
            return 2
        url = cfg.database.url
        if lanes_path is None and cfg.session_tiers.backend == "sqlite":
            # the lane store never creates its table during a request
            lanes_path = cfg.session_tiers.sqlite_path

    async def run() -> list[str]:
        engine = db.make_engine(url)
        try:
            if args.check:
                return await db.pending_migrations(engine)
            return await db.migrate(engine)
        finally:
            await engine.dispose()

    where = url.split("@")[-1]
    if url and args.check:  # report only: exit 1 while something is missing
        missing = asyncio.run(run())
        print(f"{where}: " + (f"pending {', '.join(missing)}" if missing else "up to date"))
        return 1 if missing else 0
    if url:  # an empty database.url disables usage storage: nothing to migrate
        applied = asyncio.run(run())
        print(f"migrated {where}" + (f" (added {', '.join(applied)})" if applied else ""))
    if lanes_path:
        migrate_session_tiers(lanes_path)
        print(f"migrated session_tiers in {lanes_path}")
    return 0


def cmd_health(args: argparse.Namespace) -> int:
    """Exit 0 when the gateway's /readyz says ready: the container HEALTHCHECK
    (the slim image has no curl; this needs nothing but the standard library)."""
    import urllib.error
    import urllib.request

    url = args.url or f"http://127.0.0.1:{args.port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as r:
            print(r.read().decode(errors="replace"))
            return 0
    except urllib.error.HTTPError as err:  # 503 not_ready: the body says which check
        print(err.read().decode(errors="replace"), file=sys.stderr)
    except OSError as err:
        print(f"{url}: {err}", file=sys.stderr)
    return 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tiergate",
        description="Session-aware LLM gateway: affinity, frontier escalation, sticky tiers.",
    )
    p.add_argument("--version", action="version", version=f"tiergate {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser(
        "serve",
        help="run the gateway (demo mode without config or keys)",
        description="Run the gateway. With no --config and no provider keys in "
        "the environment, starts in demo mode on the built-in simulator.",
    )
    s.add_argument("--config", metavar="FILE", help="YAML config file")
    s.add_argument("--host", help="bind address (default from config: 127.0.0.1)")
    s.add_argument("--port", type=int, help="port (default from config: 4000)")
    s.add_argument(
        "--spool",
        metavar="FILE",
        default="tiergate-spool.jsonl",
        help="on-disk buffer for usage/audit rows while the database is down",
    )
    s.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING (default INFO)")
    s.set_defaults(func=cmd_serve)

    m = sub.add_parser(
        "sim",
        help="run the provider simulator alone",
        description="Run the OpenAI/Anthropic/Gemini provider simulator.",
    )
    m.add_argument("--host", default="127.0.0.1")
    m.add_argument("--port", type=int, default=4010)
    m.add_argument("--latency-ms", type=float, default=0.0, help="time to first byte")
    m.add_argument("--tokens-per-second", type=float, default=0.0, help="0 = instant")
    m.set_defaults(func=cmd_sim)

    hc = sub.add_parser(
        "health",
        help="exit 0 when a running gateway is ready (/readyz)",
        description="Ask a running gateway's /readyz; exit 0 when ready, 1 otherwise "
        "(the container image's HEALTHCHECK).",
    )
    hc.add_argument("--port", type=int, default=4000, help="gateway port on 127.0.0.1")
    hc.add_argument("--url", help="full readiness URL (overrides --port)")
    hc.add_argument("--timeout", type=float, default=3.0, help="seconds (default 3)")
    hc.set_defaults(func=cmd_health)

    c = sub.add_parser("config", help="configuration tools", description="Configuration tools.")
    csub = c.add_subparsers(dest="config_command", required=True, metavar="SUBCOMMAND")
    cc = csub.add_parser(
        "check",
        help="validate a config file and print every problem",
        description="Validate a config file; print every problem found.",
    )
    cc.add_argument("file", metavar="FILE")
    cc.set_defaults(func=cmd_config_check)

    d = sub.add_parser("db", help="database tools", description="Database tools.")
    dsub = d.add_subparsers(dest="db_command", required=True, metavar="SUBCOMMAND")
    dm = dsub.add_parser(
        "migrate",
        help="create or upgrade the usage/audit tables",
        description="Apply the additive migrations: create missing tables (usage, "
        "audit_events, ...; session_tiers for the SQLite session-tier store) and add the "
        "columns a table from an older release lacks. Never drops or rewrites anything.",
    )
    dm.add_argument(
        "--config",
        metavar="FILE",
        help="take database.url (and session_tiers.sqlite_path when its backend is sqlite) "
        "from this config",
    )
    dm.add_argument("--url", default="sqlite:///tiergate.db", help="database URL")
    dm.add_argument(
        "--check",
        action="store_true",
        help="only report what the database lacks (exit 1 if anything), change nothing",
    )
    dm.add_argument(
        "--session-tiers-sqlite",
        metavar="PATH",
        help="also create the session_tiers table in this SQLite file",
    )
    dm.set_defaults(func=cmd_db_migrate)
    add_replay_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
