"""`make run` installs only the runtime dependencies; the dev extras (~700 MB with
Playwright, schemathesis, mypy) come in only for `make test` (issue #28 item 10).

Reads the recipes `make -n -B` would run against a venv that does not exist, so
it checks a fresh machine's path whatever is installed here, and runs nothing."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _recipes(target: str, tmp_path: Path) -> list[str]:
    proc = subprocess.run(
        ["make", "-C", str(ROOT), "-n", "-B", "--no-print-directory", target, f"VENV={tmp_path}/v"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return proc.stdout.replace(f"{tmp_path}/v", "VENV").splitlines()


def _installs(lines: list[str]) -> list[str]:
    return [line for line in lines if re.search(r"\bpip install\b", line)]


def test_make_run_installs_the_package_without_extras(tmp_path: Path) -> None:
    lines = _recipes("run", tmp_path)
    installs = _installs(lines)
    assert any(re.search(r"install -q -e \.$", line) for line in installs), installs
    assert not any(".[" in line for line in installs), installs  # no extras: no dev, no eval
    assert not any(re.search(r"pytest|mypy|playwright|chromium", line) for line in lines), lines
    assert lines[-1].startswith("VENV/bin/tiergate serve"), lines


def test_make_test_still_installs_the_dev_extras(tmp_path: Path) -> None:
    installs = _installs(_recipes("test", tmp_path))
    assert any("'.[dev]'" in line for line in installs), installs
