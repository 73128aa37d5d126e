"""The container image and the compose file (docs/deploy.md).

`docker build` runs when a Docker daemon answers `docker info`; otherwise that one
test skips with a message, also under TIERGATE_REQUIRE_SERVICES=1: CI machines
without a daemon (this one has the CLI only) cannot build images, and a missing
daemon is a property of the machine, not a fault of the code. Everything the
image relies on is tested without Docker: the healthcheck command against a
real gateway, the Dockerfile's user, base and HEALTHCHECK, and the compose
environment through the very config code the container runs.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from servers import free_port
from tiergate.defaults import auto_config

ROOT = Path(__file__).resolve().parent.parent
TIERGATE = [sys.executable, "-m", "tiergate"]
# as the image's build stage runs it (build isolation fetches setuptools>=77 from PyPI)
PIP_WHEEL = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q"]


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per logical line, continuations joined."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "docker-compose.yml").read_text()))


def test_the_image_is_slim_non_root_and_checks_readyz() -> None:
    steps = dockerfile_instructions()
    bases = [args.split()[0] for word, args in steps if word == "FROM"]
    assert bases and all(b == "python:3.11-slim" for b in bases)
    final = max(i for i, (w, _) in enumerate(steps) if w == "FROM")
    users = [args for w, args in steps[final:] if w == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    [health] = [args for w, args in steps if w == "HEALTHCHECK"]
    assert '"tiergate", "health", "--port", "4000"' in health
    [cmd] = [args for w, args in steps if w == "CMD"]
    assert '"--host", "0.0.0.0"' in cmd and '"--port", "4000"' in cmd


def _dockerignore() -> list[tuple[bool, re.Pattern[str]]]:
    """(negated, regex) per .dockerignore line, in Docker's syntax: paths from the
    context root, `*` and `?` within one path segment, `**` across segments."""
    out = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").strip().strip("/")
        rx = ""
        for part in re.split(r"(\*\*/?|\*|\?)", pattern):
            if part.startswith("**"):
                rx += "(?:.*/)?" if part.endswith("/") else ".*"
            elif part == "*":
                rx += "[^/]*"
            elif part == "?":
                rx += "[^/]"
            else:
                rx += re.escape(part)
        out.append((negated, re.compile(rx)))
    return out


def _ignored(path: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """A path is left out when the last pattern matching it, or a folder above
    it, is not a `!` exception (Docker skips a whole excluded folder)."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for negated, rx in patterns:
        if any(rx.fullmatch(p) for p in prefixes):
            ignored = not negated
    return ignored


def test_dockerignore_keeps_what_make_test_grows_out_of_the_build_context() -> None:
    """`docker build` after `make test` must not send .agents/ (~2 GB), the venvs
    or the caches; and the files the Dockerfile copies must still be sent."""
    patterns = _dockerignore()
    grown = [
        ".agents/node/lib/node_modules/x/index.js",
        ".valkey/bin/valkey-server",
        ".venv/bin/python",
        ".bench-venv/bin/python",
        ".mypy_cache/3.11/x.json",
        ".pytest_cache/v/cache/lastfailed",
        ".ruff_cache/0.1/x",
        ".hypothesis/examples/x",
        "src/tiergate/__pycache__/app.cpython-311.pyc",
        "src/tiergate.egg-info/PKG-INFO",
        "artifacts/dashboard/overview.png",
        "tiergate-demo-4000.db",
        ".git/HEAD",
    ]
    assert [p for p in grown if not _ignored(p, patterns)] == []
    copied = [w for w, _ in dockerfile_instructions() if w in ("COPY", "ADD")]
    assert copied, "the Dockerfile copies nothing?"
    sent = ["pyproject.toml", "README.md"] + [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "src").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and ".egg-info" not in str(p)
    ]
    assert "src/tiergate/routing/artifacts/request_scorer_v1.json" in sent
    assert [p for p in sent if _ignored(p, patterns)] == []


def test_compose_runs_the_gateway_on_redis_and_postgres() -> None:
    services = compose()["services"]
    assert {"tiergate", "redis", "postgres"} <= set(services)
    gw = services["tiergate"]
    assert set(gw["depends_on"]) == {"redis", "postgres"}
    assert all(services[s].get("healthcheck") for s in ("redis", "postgres"))
    # `${VAR:-default}` as an empty shell expands it: the defaults
    defaults = {
        k: re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(v)) for k, v in gw["environment"].items()
    }
    env = {k: v for k, v in defaults.items() if v}
    cfg = auto_config(env, sim_url="http://127.0.0.1:1", token=env["TIERGATE_TOKEN"])
    assert cfg.state.backend == "redis" and cfg.state.url == "redis://redis:6379/0"
    pg = services["postgres"]["environment"]
    expected = f"postgresql://{pg['POSTGRES_USER']}:{pg['POSTGRES_PASSWORD']}@postgres:5432/"
    assert cfg.database.url == expected + pg["POSTGRES_DB"]


def test_health_command_follows_readyz(tmp_path: Path) -> None:
    port = free_port()
    assert subprocess.run([*TIERGATE, "health", "--port", str(port)], timeout=30).returncode == 1
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    proc = subprocess.Popen(
        [*TIERGATE, "serve", "--port", str(port), "--spool", str(tmp_path / "spool")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        out = subprocess.run(
            [*TIERGATE, "health", "--port", str(port)], capture_output=True, text=True, timeout=30
        )
        assert out.returncode == 0, out.stderr
        assert '"status":"ready"' in out.stdout
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_wheel_the_image_installs_carries_the_dashboard(tmp_path: Path) -> None:
    """The image installs tiergate from its wheel: the dashboard's static files and
    py.typed must be in it, not only in the source tree."""
    build = subprocess.run(
        [*PIP_WHEEL, "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    [wheel] = tmp_path.glob("tiergate-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert "tiergate/api/dashboard/static/index.html" in names
    assert "tiergate/api/dashboard/static/app.js" in names and "tiergate/py.typed" in names


def _docker_daemon() -> str | None:
    """Why no image can be built here, or None when a daemon answers."""
    if shutil.which("docker") is None:
        return "the docker CLI is not installed"
    probe = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["docker info failed"])[-1]
        return f"no Docker daemon ({reason})"
    return None


def test_docker_build_and_the_image_runs() -> None:
    why_not = _docker_daemon()
    if why_not is not None:  # a skip even under TIERGATE_REQUIRE_SERVICES=1 (module doc)
        pytest.skip(f"{why_not}: cannot build the image on this machine")
    tag = f"tiergate-test:{os.getpid()}"
    build = subprocess.run(
        ["docker", "build", "-t", tag, str(ROOT)], capture_output=True, text=True, timeout=1800
    )
    assert build.returncode == 0, build.stderr[-4000:]
    try:
        version = subprocess.run(
            ["docker", "run", "--rm", tag, "tiergate", "--version"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert version.returncode == 0 and version.stdout.startswith("tiergate "), version
        user = subprocess.run(
            ["docker", "run", "--rm", tag, "id", "-u"], capture_output=True, text=True, timeout=120
        )
        assert user.stdout.strip() not in ("", "0"), shlex.join(user.args)
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=120)
