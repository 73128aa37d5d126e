"""The command line as a user meets it: --help everywhere, config check, demo mode."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import tiergate
from servers import demo_serve, free_port
from tiergate.defaults import CATALOGUE, STRONG

TIERGATE = [sys.executable, "-m", "tiergate"]


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["serve"],
        ["sim"],
        ["health"],
        ["config"],
        ["config", "check"],
        ["db"],
        ["db", "migrate"],
    ],
)
def test_help_on_every_command(args: list[str]) -> None:
    out = subprocess.run([*TIERGATE, *args, "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    assert "usage:" in out.stdout


def test_version_prints_the_package_version() -> None:
    out = subprocess.run([*TIERGATE, "--version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    assert out.stdout.strip() == f"tiergate {tiergate.__version__}"


def test_make_run_passes_port_host_and_config(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make not installed")
    root = Path(__file__).resolve().parent.parent
    venv = tmp_path / "venv"  # never created: -n only prints what would run
    args = ["make", "-n", "--no-print-directory", "-C", str(root), "run", f"VENV={venv}"]
    out = subprocess.run(
        [*args, "PORT=4100", "HOST=0.0.0.0", "CONFIG=tg.yaml"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    serve = [line for line in out.stdout.splitlines() if "tiergate serve" in line]
    assert serve and serve[-1].split()[1:] == [
        "serve", "--config", "tg.yaml", "--host", "0.0.0.0", "--port", "4100"
    ]  # fmt: skip
    plain = subprocess.run(args, capture_output=True, text=True, timeout=30).stdout
    assert plain.splitlines()[-1].split()[1:] == ["serve"]


def test_demo_catalogue_names_no_model_the_anthropic_sdk_calls_deprecated() -> None:
    from anthropic._data import DEPRECATED_MODELS

    upstreams = {m["upstream"] for models in CATALOGUE.values() for m in models.values()}
    assert not upstreams & set(DEPRECATED_MODELS), upstreams & set(DEPRECATED_MODELS)
    assert set(STRONG) <= {name for models in CATALOGUE.values() for name in models}


def test_config_check_lists_every_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "channels:\n"
        "  - {name: a, type: openai, keys: ['k'], models: {m/x: {}}}\n"
        "  - {name: a, type: openai_compatible, keys: [''], models: {m/y: {}}}\n"
        "routers:\n"
        "  - {name: r, default_model: nope/nope, allowed_models: ['zzz/*']}\n"
    )
    out = subprocess.run(
        [*TIERGATE, "config", "check", str(bad)], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 2
    problems = [line for line in out.stderr.splitlines() if line.strip().startswith("- ")]
    assert len(problems) >= 4, out.stderr
    assert "duplicate channel name" in out.stderr
    assert "base_url" in out.stderr and "default_model" in out.stderr


def test_config_check_reports_yaml_syntax_position(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("server:\n  port: [1,\n")
    out = subprocess.run(
        [*TIERGATE, "config", "check", str(bad)], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 2 and "line" in out.stderr


def test_demo_mode_starts_prints_banner_and_serves(tmp_path: Path) -> None:
    port = free_port()
    with demo_serve(tmp_path, port) as (proc, banner):
        deadline = time.monotonic() + 30
        assert proc.stdout is not None
        assert "DEMO MODE" in banner
        token = re.search(r"Token:\s+(\S+)", banner)
        assert token is not None
        while '-d \'{"model"' not in banner and time.monotonic() < deadline:
            banner += proc.stdout.readline()
        r = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            headers={
                "authorization": f"Bearer {token.group(1)}",
                "x-orcarouter-include-cost": "true",
            },
            json={"model": "orcarouter/auto", "messages": [{"role": "user", "content": "Hello"}]},
            timeout=10,
        )
        assert r.status_code == 200, r.text
        assert r.headers["x-orca-router"] == "auto"
        assert float(r.headers["x-orca-cost"]) > 0
        # the dashboard works out of the box: its URL and an admin token are printed
        dashboard = re.search(r"Dashboard:\s+(\S+)", banner)
        admin = re.search(r"Admin token[^:]*:\s+(\S+)", banner)
        assert dashboard is not None and admin is not None, banner
        assert httpx.get(dashboard.group(1), timeout=10).status_code == 200
        routers = httpx.get(
            f"http://127.0.0.1:{port}/admin/api/routers",
            headers={"authorization": f"Bearer {admin.group(1)}"},
            timeout=10,
        )
        assert routers.status_code == 200, routers.text
        # the banner says the simulator talks filler, and how to arm a script: its
        # command, run as printed, makes the next agent turn the script's first step
        assert "filler text or random tool calls unless a script is armed" in banner
        arm = re.search(r"curl -s (http://\S+/_sim/script) -d '([^']+)'", banner)
        assert arm is not None, banner
        armed = httpx.post(arm.group(1), content=arm.group(2), timeout=10)
        assert armed.status_code == 200 and armed.json() == {"name": "fix"}, armed.text
        bash = {"type": "object", "properties": {"command": {"type": "string"}}}
        turn = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            headers={"authorization": f"Bearer {token.group(1)}"},
            json={
                "model": "orcarouter/coding",
                "messages": [{"role": "user", "content": "fix the failing test"}],
                "tools": [{"type": "function", "function": {"name": "bash", "parameters": bash}}],
            },
            timeout=10,
        )
        assert turn.status_code == 200, turn.text
        (call,) = turn.json()["choices"][0]["message"]["tool_calls"]
        assert "unittest -v test_calc" in call["function"]["arguments"], call


def test_config_check_points_at_the_line_of_a_bad_dsl_rule(tmp_path: Path) -> None:
    cfg = tmp_path / "dsl.yaml"
    cfg.write_text(
        "channels:\n"
        "  - {name: a, type: openai, keys: ['k'], models: {m/x: {}, m/y: {}}}\n"
        "routers:\n"
        "  - name: r\n"
        "    strategy: dsl\n"
        "    rules:\n"
        "      - when: {difficulty: '>= 0.6'}\n"
        "        use: m/nope\n"
    )
    out = subprocess.run(
        [*TIERGATE, "config", "check", str(cfg)], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 2
    assert "line 8" in out.stderr, out.stderr
