"""Real servers for end-to-end tests: uvicorn in a background thread.

Each server gets its own event loop and a free loopback port, so tests can use
the official sync and async SDK clients against real HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from tiergate.http_protocol import BufferedHttpProtocol

TOKEN = "tg-test-token"

#: One read_file tool in each inbound dialect, for tool-loop tests.
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file from the workspace",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
ANTHROPIC_TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file from the workspace",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    }
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerThread:
    """Run an ASGI app with uvicorn on 127.0.0.1:<free port> in a thread."""

    def __init__(self, app: Any, port: int | None = None) -> None:
        self.app = app
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(
                app,
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
                loop="asyncio",
                http=BufferedHttpProtocol,  # as `tiergate serve` (tiergate/http_protocol.py)
                lifespan="on",
                timeout_graceful_shutdown=5,
            )
        )
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.loop: asyncio.AbstractEventLoop | None = None

    def _run(self) -> None:
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.serve())

    def start(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def gateway_config(sim_url: str, **overrides: Any) -> dict[str, Any]:
    """A gateway config dict on the simulator: OpenAI (3 keys), Anthropic, Gemini."""
    cfg: dict[str, Any] = {
        "server": {"cooldown_seconds": 5, "max_attempts": 3},
        "database": {"url": ""},
        "workspaces": [
            {"name": "default", "tokens": [TOKEN]},
            {"name": "other", "tokens": ["tg-other-token"]},
        ],
        "channels": [
            {
                "name": "oa",
                "type": "openai",
                "base_url": f"{sim_url}/v1",
                "keys": ["sk-a", "sk-b", "sk-c"],
                "models": {
                    "openai/gpt-5-mini": {
                        "upstream": "gpt-5-mini",
                        "quality": 0.6,
                        "price": {"input": 0.25, "cached_input": 0.025, "output": 2.0},
                    },
                    "openai/gpt-5": {
                        "upstream": "gpt-5",
                        "quality": 0.85,
                        "quality_tier": 3,
                        "price": {"input": 1.25, "cached_input": 0.125, "output": 10.0},
                    },
                },
            },
            {
                "name": "an",
                "type": "anthropic",
                "base_url": sim_url,
                "keys": ["ak-a"],
                "models": {
                    "anthropic/claude-sonnet-4-5": {
                        "upstream": "claude-sonnet-4-5",
                        "quality": 0.9,
                        "quality_tier": 3,
                        "price": {"input": 3.0, "output": 15.0},
                    },
                },
            },
            {
                "name": "ge",
                "type": "gemini",
                "base_url": sim_url,
                "keys": ["gk-a"],
                "models": {
                    "gemini/gemini-2.5-flash": {
                        "upstream": "gemini-2.5-flash",
                        "quality": 0.64,
                        "price": {"input": 0.3, "cached_input": 0.03, "output": 2.5},
                    },
                },
            },
        ],
        "routers": [
            {
                "name": "coding",
                "allowed_models": ["openai/*", "anthropic/*"],
                "strategy": "cheapest",
                "default_model": "openai/gpt-5-mini",
            },
        ],
    }
    cfg.update(overrides)
    return cfg


class PrivateRedis:
    """A throwaway redis-server on a free port, without persistence, that a test can
    stop (or kill) and restart on the same port. Never the shared 6379 one."""

    def __init__(self, unix_socket: str | None = None) -> None:
        self.port = free_port()
        #: also listen on this socket file (unix:// URLs), when given
        self.unix_socket = unix_socket
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        unix = ["--unixsocket", self.unix_socket, "--unixsocketperm", "700"]
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                *(unix if self.unix_socket else []),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.1):
                    if self.unix_socket is None or os.path.exists(self.unix_socket):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError("private redis-server did not start")

    def stop(self, *, kill: bool = False) -> None:
        if self.proc is not None:
            self.proc.kill() if kill else self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None


@contextlib.contextmanager
def private_redis(unix_socket: str | None = None) -> Iterator[PrivateRedis]:
    """A started PrivateRedis, stopped afterwards (skips when redis-server is missing)."""
    import pytest

    if shutil.which("redis-server") is None:
        pytest.skip("redis-server binary not installed")
    server = PrivateRedis(unix_socket)
    server.start()
    try:
        yield server
    finally:
        server.stop()


#: Provider keys and tokens a demo-mode `tiergate serve` must not inherit.
DEMO_UNSET = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "DEEPSEEK_API_KEY",
    "TIERGATE_TOKEN",
    "TIERGATE_ADMIN_TOKEN",
)


@contextlib.contextmanager
def demo_serve(
    cwd: Any, port: int, stderr: Any = subprocess.DEVNULL
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`python -m tiergate serve` in demo mode as a user starts it (no provider keys),
    yielded with its banner up to the "Try it:" line; terminated afterwards."""
    env = {k: v for k, v in os.environ.items() if k not in DEMO_UNSET}
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tiergate", "serve", "--port", str(port), "--spool", "spool"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    try:
        banner = ""
        deadline = time.monotonic() + 30
        assert proc.stdout is not None
        while "Try it:" not in banner and time.monotonic() < deadline:
            banner += proc.stdout.readline()
        yield proc, banner
    finally:
        proc.terminate()
        proc.wait(timeout=30)
