"""Shared fixtures: real Redis / PostgreSQL (skip when absent, unless required) and
state stores for the backend contract tests.

Set TIERGATE_REQUIRE_SERVICES=1 (CI) to turn "service unreachable" into a failure.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit
from uuid import uuid4

import pytest

from redis_cluster_support import redis_cluster
from tiergate.state.base import StateStore
from tiergate.state.memory import MemoryStore
from tiergate.state.redis import RedisStore

REDIS_URL = os.environ.get("TIERGATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_URL = os.environ.get(
    "TIERGATE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for servers tests start)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _reachable(host: str, port: int, timeout: float = 0.3) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def service_address(url: str, default_port: int) -> tuple[str, int]:
    """Host and port of a service URL: tests take both from TIERGATE_TEST_*_URL,
    never assume the default port."""
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or default_port


def service_reachable(url: str, default_port: int) -> bool:
    return _reachable(*service_address(url, default_port))


def require_service(name: str, url: str, default_port: int) -> None:
    """Skip (or fail, when TIERGATE_REQUIRE_SERVICES=1) if the URL's server refuses TCP."""
    host, port = service_address(url, default_port)
    if _reachable(host, port):
        return
    skip_unless_required(f"{name} is not reachable at {host}:{port}", "start it")


def skip_unless_required(message: str, remedy: str) -> None:
    """Skip with `message`, or fail when TIERGATE_REQUIRE_SERVICES=1 (CI)."""
    if os.environ.get("TIERGATE_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{message} and TIERGATE_REQUIRE_SERVICES=1", pytrace=False)
    pytest.skip(f"{message}; {remedy} or set TIERGATE_REQUIRE_SERVICES=1 to make this fail")


@pytest.fixture(scope="session")
def redis_url() -> str:
    require_service("Redis", REDIS_URL, 6379)
    return REDIS_URL


@pytest.fixture(scope="session")
def postgres_url() -> str:
    require_service("PostgreSQL", POSTGRES_URL, 5432)
    return POSTGRES_URL


@pytest.fixture
async def redis_store(redis_url: str) -> AsyncIterator[RedisStore]:
    """A RedisStore under a unique per-test prefix; its keys are deleted afterwards."""
    store = RedisStore(redis_url, key_prefix=f"test:{uuid4().hex}:")
    try:
        yield store
    finally:
        await store.delete_prefix()
        await store.close()


@pytest.fixture
def memory_store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture(params=["memory", "redis"])
def any_store(request: pytest.FixtureRequest) -> StateStore:
    """Each contract test runs once per backend."""
    if request.param == "memory":
        return MemoryStore()
    store: RedisStore = request.getfixturevalue("redis_store")
    return store


@pytest.fixture(scope="module", params=["redis", "valkey"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[int]]:
    """Three cluster primaries of Redis, then of Valkey (skipped without its
    binary), started for the module that asks: the ports, seed first."""
    with redis_cluster(tmp_path_factory.mktemp(request.param), kind=request.param) as ports:
        yield ports
