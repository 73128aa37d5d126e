"""Shared plumbing for the benchmarks: processes, configs and the agent-shaped
request (what is recorded and printed lives in results.py, re-exported here).

Every server a benchmark starts is its own OS process on loopback (simulator,
gateway, peer proxy), started from this module and stopped by its pid, so the
load generator, the gateway and the upstream never share an interpreter or a GIL.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

# Re-exported, so one import gives a benchmark everything it needs.
from results import OUT_DIR as OUT_DIR
from results import ROOT as ROOT
from results import machine_info as machine_info
from results import percentile as percentile
from results import print_machine as print_machine
from results import summarize_us as summarize_us
from results import table as table
from results import write_result as write_result

PYTHON = sys.executable
HOST = "127.0.0.1"
TOKEN = "tg-bench-token"
UPSTREAM_KEYS = ["sk-bench-a", "sk-bench-b", "sk-bench-c"]
REDIS_URL = os.environ.get("TIERGATE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
CLK_TCK = os.sysconf("SC_CLK_TCK")

#: Requested model per gateway variant; "direct" is the simulator's own name.
MODELS = {
    "direct": "gpt-5-mini",
    "plain": "openai/gpt-5-mini",
    "router": "orcarouter/cheap",
    "agent": "orcarouter/agent",
    "learned": "orcarouter/learned",
}
VARIANT_HELP = {
    "plain": "concrete model (no routing; {channel,key} pin on the fingerprint)",
    "router": "named router, strategy cheapest, affinity off, no session id",
    "agent": "router gated_adaptive + session affinity + escalation auto, session id per user",
    "learned": "router strategy learned, t2 at the 80th percentile of recent scores, affinity off",
}


def parse_config(raw: dict[str, Any], env: dict[str, str] | None = None) -> Any:
    """The tree's config parser: tiergate.config_load's, or tiergate.config's on a
    tree from before it moved there (the in-process benches run on older trees
    to compare them with this one)."""
    try:
        from tiergate.config_load import parse_config as parse
    except ModuleNotFoundError:
        from tiergate.config import parse_config as parse
    return parse(raw, env)


def cpu_layout() -> tuple[int | None, int | None]:
    """(core for the server under test, core for the load side) or (None, None).

    With two or more cores the gateway (or peer proxy) gets core 0 to itself, and
    the load generator and simulator share core 1, so the server's figures are not
    inflated by competing with its own load for a core.
    """
    try:
        cores = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return None, None
    if len(cores) < 2:
        return None, None
    return cores[0], cores[1]


# ---- processes ----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process, from /proc (0.0 if gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass
class Proc:
    """A server process started by a benchmark; stopped by its own pid only."""

    name: str
    popen: subprocess.Popen[bytes]
    url: str
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def cpu_seconds(self) -> float:
        return proc_cpu_seconds(self.pid)

    def rss_bytes(self) -> int:
        return proc_rss_bytes(self.pid)

    def log_tail(self, lines: int = 15) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self, timeout: float = 15.0) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)


def spawn(
    name: str,
    args: Sequence[str],
    *,
    port: int,
    workdir: Path,
    cpu: int | None = None,
    env: dict[str, str] | None = None,
    ready_path: str = "/healthz",
    ready_timeout: float = 60.0,
) -> Proc:
    """Start a server process (pinned to `cpu` if given) and wait until it answers."""
    log_path = workdir / f"{name}.log"
    log = log_path.open("wb")

    def pin() -> None:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})

    popen = subprocess.Popen(
        list(args),
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        cwd=workdir,
        preexec_fn=pin,
    )
    log.close()
    proc = Proc(name, popen, f"http://{HOST}:{port}", log_path)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            raise RuntimeError(f"{name} exited during start-up:\n{proc.log_tail()}")
        try:
            with urllib.request.urlopen(proc.url + ready_path, timeout=1) as resp:
                if resp.status < 500:
                    return proc
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    proc.stop()
    raise RuntimeError(f"{name} did not answer {ready_path} within {ready_timeout} s")


def start_sim(workdir: Path, cpu: int | None) -> Proc:
    """The provider simulator with zero latency and instant output."""
    port = free_port()
    args = [PYTHON, "-m", "tiergate", "sim", "--host", HOST, "--port", str(port)]
    return spawn("sim", args, port=port, workdir=workdir, cpu=cpu, ready_path="/_sim/health")


def start_bare_proxy(upstream: Proc, workdir: Path, cpu: int | None, whole: bool = False) -> Proc:
    """bench/bare_proxy.py relaying to `upstream`: the cost of one more hop, nothing
    read (`whole`: each request held until its body has arrived)."""
    port = free_port()
    target = upstream.url.removeprefix("http://")
    args = [PYTHON, str(Path(__file__).with_name("bare_proxy.py")), "--port", str(port)]
    args += ["--upstream", target, *(["--whole-requests"] if whole else [])]
    name = "bare-whole" if whole else "bare"
    return spawn(name, args, port=port, workdir=workdir, cpu=cpu, ready_path="/_sim/health")


def start_gateway(
    cfg: dict[str, Any],
    workdir: Path,
    cpu: int | None,
    name: str = "gateway",
    log_level: str = "INFO",
    env: dict[str, str] | None = None,
) -> Proc:
    """`python -m tiergate serve --config` on a free port, exactly as deployed."""
    port = free_port()
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    args = [PYTHON, "-m", "tiergate", "serve", "--config", str(path), "--port", str(port)]
    args += ["--spool", str(workdir / f"{name}.spool"), "--log-level", log_level]
    return spawn(name, args, port=port, workdir=workdir, cpu=cpu, env=env)


# ---- gateway configuration -----------------------------------------------------


def one_channel_config(sim_url: str, workspace: str = "bench") -> dict[str, Any]:
    """The smallest gateway config on the simulator: one workspace with TOKEN, one
    OpenAI channel with the three UPSTREAM_KEYS, one concrete model; every other
    setting at its default (what an operator gets)."""
    return {
        "database": {"url": ""},
        "workspaces": [{"name": workspace, "tokens": [TOKEN]}],
        "channels": [
            {
                "name": "sim-openai",
                "type": "openai",
                "base_url": f"{sim_url}/v1",
                "keys": list(UPSTREAM_KEYS),
                "models": {"openai/gpt-5-mini": {"upstream": "gpt-5-mini"}},
            }
        ],
    }


def new_prefix(tag: str) -> str:
    return f"bench:{tag}:{uuid.uuid4().hex[:12]}:"


def gateway_config(
    sim_url: str,
    variant: str,
    *,
    state: str = "memory",
    prefix: str | None = None,
    database: str = "none",
    workdir: Path | None = None,
    share_cap_percent: float = 20.0,
) -> dict[str, Any]:
    """One gateway config per benchmark variant (see VARIANT_HELP), on the simulator.

    One OpenAI-type channel with three keys (so the {channel, key} pin matters)
    and a base and a strong model, both cacheable by the simulator's OpenAI rules.
    """
    if variant not in VARIANT_HELP:
        raise ValueError(f"unknown variant {variant!r}")
    db_url = ""
    if database == "sqlite":
        db_url = f"sqlite:///{(workdir or Path('.')) / 'bench-usage.db'}"
    cfg: dict[str, Any] = {
        "server": {"max_attempts": 2},
        "database": {"url": db_url},
        "state": {"backend": state},
        "workspaces": [{"name": "bench", "tokens": [TOKEN]}],
        "channels": [
            {
                "name": "sim-openai",
                "type": "openai",
                "base_url": f"{sim_url}/v1",
                "keys": list(UPSTREAM_KEYS),
                "models": {
                    "openai/gpt-5-mini": {
                        "upstream": "gpt-5-mini",
                        "quality": 0.6,
                        "quality_tier": 1,
                        "price": {"input": 0.25, "cached_input": 0.025, "output": 2.0},
                        "context_window": 400_000,  # the provider's (and the simulator's)
                    },
                    "openai/gpt-5": {
                        "upstream": "gpt-5",
                        "quality": 0.85,
                        "quality_tier": 3,
                        "price": {"input": 1.25, "cached_input": 0.125, "output": 10.0},
                        "context_window": 400_000,
                    },
                },
            }
        ],
        "routers": [
            {
                "name": "cheap",
                "strategy": "cheapest",
                "allowed_models": ["openai/*"],
                "default_model": "openai/gpt-5-mini",
                "session_aware": False,
            },
            {
                "name": "learned",
                "strategy": "learned",
                "allowed_models": ["openai/*"],
                "weak_pool": ["openai/gpt-5-mini"],
                "mid_pool": ["openai/gpt-5-mini"],
                "strong_pool": ["openai/gpt-5"],
                "thresholds": {"t2_percentile": 80},
                "default_model": "openai/gpt-5-mini",
                "session_aware": False,
            },
            {
                "name": "agent",
                "strategy": "gated_adaptive",
                "allowed_models": ["openai/*"],
                "weak_pool": ["openai/gpt-5-mini"],
                "mid_pool": ["openai/gpt-5-mini"],
                "strong_pool": ["openai/gpt-5"],
                "default_model": "openai/gpt-5-mini",
                "session_aware": True,
                "escalation": {
                    "mode": "auto",
                    "share_cap_percent": share_cap_percent,
                    "share_cap_basis": "requests",
                    "max_per_session": 1,
                    # learned (the default) or lexical: bench the session scorer's cost
                    "scorer": os.environ.get("TIERGATE_BENCH_SCORER", "learned"),
                },
            },
        ],
    }
    if state == "redis":
        cfg["state"] = {"backend": "redis", "url": REDIS_URL, "key_prefix": prefix or "bench:"}
    if variant in ("router", "learned"):
        cfg["affinity"] = {"enabled": False}
    return cfg


def redis_cleanup(prefix: str) -> int:
    """Delete every key under a benchmark's prefix; returns the count (0 if unreachable)."""
    import redis

    try:
        r = redis.Redis.from_url(REDIS_URL)
        keys = list(r.scan_iter(match=prefix + "*", count=1000))
        for i in range(0, len(keys), 500):
            r.unlink(*keys[i : i + 500])
        r.close()
        return len(keys)
    except redis.RedisError:
        return 0


def redis_pid() -> int | None:
    """The Redis server's pid when it runs on this machine (to read its CPU time)."""
    import redis

    try:
        r = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=0.5)
        pid = int(r.info("server")["process_id"])
        r.close()
    except (redis.RedisError, KeyError, ValueError):
        return None
    return pid if Path(f"/proc/{pid}/stat").exists() else None


def redis_available() -> bool:
    import redis

    try:
        r = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=0.5)
        ok = bool(r.ping())
        r.close()
        return ok
    except redis.RedisError:
        return False


# ---- the agent-shaped request ----------------------------------------------------

SYSTEM_PROMPT = (
    "You are a careful coding agent working in a large Go and Python repository. "
    + " ".join(
        f"Rule {i}: read the relevant files before editing, keep each change small, "
        "run the tests after every edit and report exactly what changed."
        for i in range(60)
    )
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file from the repository",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_command",
            "description": "Run a shell command in the repository root",
            "parameters": {
                "type": "object",
                "properties": {"cmd": {"type": "string"}},
                "required": ["cmd"],
            },
        },
    },
]
COUNTER = "@@N@@"
"""Placeholder the load generator replaces with a per-request counter, so every
request is a new turn (the engine deduplicates a repeated turn)."""
SESSION_ID = "@@SID@@"
"""Placeholder the load generator replaces with the session id (see agent_body)."""


def agent_body(
    model: str, *, stream: bool = False, per_session_prefix: bool = False, pad_kb: int = 0
) -> dict[str, Any]:
    """A fixed agent-shaped chat request (~2.2k prompt tokens, tools, tool results).

    `pad_kb` grows it to at least that many KB the way a session grows: earlier
    read_file turns (a call and its ~2 KB result) before the latest two, so the
    body is a long agent history rather than one huge message.

    The latest message is a tool result carrying COUNTER, as in an agent loop.
    `per_session_prefix` starts the system prompt with SESSION_ID, so every session
    is its own prompt-cache identity at the simulator (a cold read then means the
    session moved to another key or model).
    """
    source = "\n".join(
        f"func step{i}(ctx context.Context) error {{ return nil }}" for i in range(40)
    )
    tests = "\n".join(f"ok   pkg/pool/worker_{i}  0.0{i % 10}s" for i in range(25))
    messages: list[dict[str, Any]] = [
        {
            "role": "system",
            "content": f"[{SESSION_ID}] {SYSTEM_PROMPT}" if per_session_prefix else SYSTEM_PROMPT,
        },
        {"role": "user", "content": "The worker pool drops jobs on shutdown. Find and fix it."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "pool/worker.go"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": source},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "run_command", "arguments": '{"cmd": "go test ./..."}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": f"{tests}\nrun {COUNTER}"},
    ]
    history = messages[2:4]
    turn = 0
    while len(orjson.dumps(messages)) < pad_kb * 1024:
        turn += 1
        call = {**history[0]["tool_calls"][0], "id": f"call_h{turn}"}
        earlier = [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {**history[1], "tool_call_id": f"call_h{turn}", "content": f"{source}\n// {turn}"},
        ]
        messages[2:2] = earlier
    body: dict[str, Any] = {"model": model, "messages": messages, "tools": TOOLS}
    if stream:
        body["stream"] = True
    return body
