"""A real Redis Cluster on loopback for the cluster backend tests: three primaries
(redis-server --cluster-enabled yes on free ports), slots assigned with
`redis-cli --cluster create`, torn down afterwards. Never the shared 6379.

`kind="valkey"` starts valkey-server instead (same flags, same redis-cli): the
binary named by TIERGATE_VALKEY_SERVER, else `valkey-server` on PATH, else the
test skips (Valkey is not a service CI provides; docs/deploy.md says how the
Valkey runs here were made)."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free and valid too."""
    for _ in range(200):
        port = random.randint(20000, 45000)
        if all(_free(p) for p in (port, port + 10000)):
            return port
    raise RuntimeError("no free port pair for a cluster node")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


SERVER = ["--bind", "127.0.0.1", "--cluster-enabled", "yes"]
SERVER += ["--cluster-config-file", "nodes.conf", "--save", "", "--appendonly", "no"]
CREATE = ["redis-cli", "--cluster", "create", "--cluster-yes"]


def require_redis_tools(kind: str = "redis") -> str:
    """The server binary for `kind`; skip (fail under TIERGATE_REQUIRE_SERVICES=1
    for Redis) when it or redis-cli is missing."""
    if kind == "valkey":
        named = os.environ.get("TIERGATE_VALKEY_SERVER")
        server = named or shutil.which("valkey-server")
        if named and not os.access(named, os.X_OK):
            pytest.fail(f"TIERGATE_VALKEY_SERVER={named} is not an executable", pytrace=False)
        if server is None or shutil.which("redis-cli") is None:
            pytest.skip("valkey-server not found: set TIERGATE_VALKEY_SERVER to run on Valkey")
        return server
    missing = [t for t in ("redis-server", "redis-cli") if shutil.which(t) is None]
    if not missing:
        return "redis-server"
    message = f"{' and '.join(missing)} not installed: cannot start a Redis Cluster"
    if os.environ.get("TIERGATE_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{message} and TIERGATE_REQUIRE_SERVICES=1", pytrace=False)
    pytest.skip(message)


def cli(port: int, *args: str) -> str:
    out = subprocess.run(
        ["redis-cli", "-p", str(port), *args], capture_output=True, text=True, timeout=30
    )
    return out.stdout


#: The running nodes of every cluster started here: port -> (process, argv).
NODES: dict[int, tuple[subprocess.Popen[bytes], list[str]]] = {}


def _start(argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_node(port: int) -> None:
    """Kill one node (SIGKILL: no goodbye to its peers or clients)."""
    proc, _ = NODES[port]
    proc.kill()
    proc.wait(timeout=10)


def start_node(port: int) -> None:
    """Start a stopped node again from its nodes.conf; wait until the cluster is ok."""
    _, argv = NODES[port]
    NODES[port] = (_start(argv), argv)
    _wait(lambda: "cluster_state:ok" in cli(port, "CLUSTER", "INFO"))


@contextlib.contextmanager
def redis_cluster(folder: Path, nodes: int = 3, kind: str = "redis") -> Iterator[list[int]]:
    """Start `nodes` primaries, make them one cluster, yield their ports."""
    server = require_redis_tools(kind)
    ports = [cluster_port() for _ in range(nodes)]
    try:
        for port in ports:
            d = folder / str(port)
            d.mkdir()
            argv = [server, *SERVER, "--port", str(port), "--dir", str(d)]
            NODES[port] = (_start(argv), argv)
        for port in ports:
            _wait(lambda p=port: cli(p, "PING").strip() == "PONG")
        subprocess.run(
            [*CREATE, *[f"127.0.0.1:{p}" for p in ports], "--cluster-replicas", "0"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        for port in ports:
            _wait(lambda p=port: "cluster_state:ok" in cli(p, "CLUSTER", "INFO"))
        yield ports
    finally:
        procs = [NODES.pop(p)[0] for p in ports if p in NODES]
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=10)


def keys_on(port: int, pattern: str) -> list[str]:
    """The keys matching `pattern` that one node holds (SCAN on that node only)."""
    return cli(port, "--scan", "--pattern", pattern).split()


def primaries(ports: list[int]) -> list[int]:
    """The ports of the nodes that serve slots now."""
    return [p for p in ports if "myself,master" in cli(p, "CLUSTER", "NODES")]


def node_id(port: int) -> str:
    return cli(port, "CLUSTER", "MYID").strip()


def owner_of(ports: list[int], slot: int) -> int:
    """The port of the primary that serves `slot` now."""
    for line in cli(ports[0], "CLUSTER", "NODES").splitlines():
        fields = line.split()
        port = int(fields[1].split(":")[1].split("@")[0])
        for part in fields[8:]:
            lo, _, hi = part.partition("-")
            if lo.isdigit() and int(lo) <= slot <= int(hi or lo):
                return port
    raise AssertionError(f"no owner for slot {slot}")


def begin_migration(ports: list[int], slot: int, to_port: int, keys: list[str]) -> int:
    """Half a resharding: mark `slot` migrating to `to_port` and move only `keys`,
    so the source answers ASK for them. Returns the source's port."""
    source = owner_of(ports, slot)
    src_id, dst_id = node_id(source), node_id(to_port)
    cli(to_port, "CLUSTER", "SETSLOT", str(slot), "IMPORTING", src_id)
    cli(source, "CLUSTER", "SETSLOT", str(slot), "MIGRATING", dst_id)
    cli(source, "MIGRATE", "127.0.0.1", str(to_port), "", "0", "5000", "KEYS", *keys)
    return source


def move_slot(ports: list[int], slot: int, to_port: int) -> None:
    """Migrate one slot with its keys to another primary (a resharding step), so
    clients holding the old slot map get MOVED."""
    source = owner_of(ports, slot)
    src_id, dst_id = node_id(source), node_id(to_port)
    cli(to_port, "CLUSTER", "SETSLOT", str(slot), "IMPORTING", src_id)
    cli(source, "CLUSTER", "SETSLOT", str(slot), "MIGRATING", dst_id)
    while keys := cli(source, "CLUSTER", "GETKEYSINSLOT", str(slot), "100").split():
        cli(source, "MIGRATE", "127.0.0.1", str(to_port), "", "0", "5000", "KEYS", *keys)
    for port in ports:
        cli(port, "CLUSTER", "SETSLOT", str(slot), "NODE", dst_id)
    _wait(lambda: all(owner_of([p], slot) == to_port for p in ports))


def _wait(cond: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, "redis cluster did not come up"
        time.sleep(0.05)
