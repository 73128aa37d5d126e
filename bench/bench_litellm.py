"""The LiteLLM proxy as a peer, in front of the same simulator, under the same load.

LiteLLM is never a project dependency: this script installs the pinned version
into a benchmark-only virtual environment (default /tmp/tiergate-bench-litellm-venv,
`--litellm-venv` to change it), writes a config pointing an OpenAI-compatible model
at the simulator's /v1, and runs `litellm --config` with telemetry, the cost-map
download, docs and the admin UI switched off, so nothing leaves loopback. If the
install fails, the figures are marked unavailable and the rest of the run goes on.

Run: .venv/bin/python bench/bench_litellm.py [--quick]
(= bench_overhead.py --litellm, measuring tiergate and LiteLLM side by side in one run)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

import common

LITELLM_SPEC = "litellm[proxy]==1.91.1"
DEFAULT_VENV = Path("/tmp/tiergate-bench-litellm-venv")
MASTER_KEY = "sk-bench-litellm-master"
#: Environment that keeps LiteLLM on loopback: local cost map (no download at import),
#: no telemetry, no docs or admin UI, production mode (no .env loading).
OFFLINE_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY": "False",
    "LITELLM_MODE": "PRODUCTION",
    "NO_DOCS": "True",
    "NO_REDOC": "True",
    "DISABLE_ADMIN_UI": "True",
    "LITELLM_MASTER_KEY": MASTER_KEY,
    "LITELLM_DONT_SHOW_FEEDBACK_BOX": "true",
}


def ensure_venv(venv: Path, install: bool = True) -> tuple[Path | None, str]:
    """(path of the `litellm` executable, note). None when it cannot be had."""
    exe = venv / "bin" / "litellm"
    if exe.exists() and _installed_version(venv) == LITELLM_SPEC.rsplit("==", 1)[1]:
        return exe, f"{LITELLM_SPEC} already in {venv}"
    if not install:
        return None, f"{LITELLM_SPEC} not installed in {venv} (installation disabled)"
    print(f"installing {LITELLM_SPEC} into {venv} (benchmark-only venv) ...", flush=True)
    try:
        if not (venv / "bin" / "python").exists():
            base = Path(sys.base_prefix) / "bin" / "python3"
            python = str(base) if base.exists() else "python3"
            subprocess.run(
                [python, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300
            )
        done = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", LITELLM_SPEC],
            capture_output=True,
            timeout=1200,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as err:
        return None, f"LiteLLM install failed: {type(err).__name__}: {err}"
    if done.returncode != 0 or not exe.exists():
        tail = [
            ln
            for ln in done.stderr.decode(errors="replace").splitlines()
            if not ln.startswith("WARNING: Location")
        ]
        return None, "LiteLLM install failed: " + " | ".join(tail[-5:])
    return exe, f"installed {LITELLM_SPEC} into {venv}"


def _installed_version(venv: Path) -> str | None:
    for meta in (venv / "lib").glob("python3*/site-packages/litellm-*.dist-info/METADATA"):
        for line in meta.read_text(errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return None


def litellm_config(sim_url: str) -> dict[str, Any]:
    return {
        "model_list": [
            {
                "model_name": common.MODELS["direct"],
                "litellm_params": {
                    "model": f"openai/{common.MODELS['direct']}",
                    "api_base": f"{sim_url}/v1",
                    "api_key": common.UPSTREAM_KEYS[0],
                },
            }
        ],
        "litellm_settings": {"telemetry": False, "drop_params": True, "set_verbose": False},
        "general_settings": {"disable_spend_logs": True},
    }


def start_litellm(exe: Path, sim_url: str, workdir: Path, cpu: int | None) -> common.Proc:
    """One LiteLLM proxy process (its default: one uvicorn worker), pinned like the gateway."""
    path = workdir / "litellm.yaml"
    path.write_text(yaml.safe_dump(litellm_config(sim_url), sort_keys=False))
    port = common.free_port()
    args = [
        str(exe),
        "--config",
        str(path),
        "--host",
        common.HOST,
        "--port",
        str(port),
        "--telemetry",
        "False",
    ]
    return common.spawn(
        "litellm",
        args,
        port=port,
        workdir=workdir,
        cpu=cpu,
        env=OFFLINE_ENV,
        ready_path="/health/liveliness",
        ready_timeout=180.0,
    )


def main(argv: list[str] | None = None) -> int:
    import bench_overhead

    args = list(sys.argv[1:] if argv is None else argv)
    if "--help" not in args and "-h" not in args:
        args = ["--litellm", *args]
        if "--variants" not in args:
            args += ["--variants", "plain,agent"]
        if "--states" not in args:
            args += ["--states", "memory"]
    return bench_overhead.main(args, prog="bench_litellm.py")


if __name__ == "__main__":
    raise SystemExit(main())
