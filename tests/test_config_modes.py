"""YAML's `off` is a mode, and `config check` reports what `serve` would do.

YAML 1.1 reads an unquoted `off` as false. The docs write `mode: off` unquoted,
so those exact lines must load; true names no mode and must say which words do.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tiergate.config import ConfigError
from tiergate.config_load import config_warnings, parse_config

DOCS = Path(__file__).resolve().parents[1] / "docs"

CHANNELS = """
channels:
  - name: sim
    type: openai
    base_url: http://127.0.0.1:9/v1
    keys: [k]
    models:
      openai/gpt-5-mini: {upstream: gpt-5-mini}
      anthropic/claude-sonnet-4-5: {upstream: claude-sonnet-4-5}
"""


def _yaml_blocks(doc: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", (DOCS / doc).read_text(encoding="utf-8"), re.S)


def test_the_escalation_docs_unquoted_mode_off_loads_as_off() -> None:
    block = next(b for b in _yaml_blocks("escalation.md") if "mode: off" in b)
    cfg = parse_config(yaml.safe_load(CHANNELS + block))
    assert cfg.routers[0].escalation.mode == "off"


def test_the_session_tiers_docs_block_with_mode_off_loads_as_off() -> None:
    block = next(b for b in _yaml_blocks("session-tiers.md") if "mode: sticky" in b)
    block = block.replace("mode: sticky ", "mode: off    ")  # the documented alternative
    cfg = parse_config(yaml.safe_load(CHANNELS + block))
    assert cfg.session_tiers.mode == "off"
    assert config_warnings(cfg, env={}) == []


@pytest.mark.parametrize(
    "snippet",
    [
        "routers:\n  - name: r\n    escalation: {mode: on}\n",
        "session_tiers: {mode: yes}\n",
    ],
)
def test_a_boolean_true_mode_is_an_error_naming_the_valid_words(snippet: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(yaml.safe_load(CHANNELS + snippet))
    (problem,) = err.value.problems
    assert "mode" in problem and "'off'" in problem


def test_yaml_false_is_off_through_the_admin_document_too() -> None:
    """The admin API validates JSON documents with the same parser: false is off."""
    doc = yaml.safe_load(CHANNELS)
    doc["routers"] = [{"name": "r", "escalation": {"mode": False}}]
    doc["session_tiers"] = {"mode": False}
    cfg = parse_config(doc)
    assert cfg.routers[0].escalation.mode == "off" and cfg.session_tiers.mode == "off"


def test_a_typo_reports_every_consequence() -> None:
    text = CHANNELS.replace("    models:", "    modles:") + (
        "routers:\n  - name: r\n    allowed_models: ['openai/*']\n"
        "    default_model: openai/gpt-5-mini\n"
    )
    with pytest.raises(ConfigError) as err:
        parse_config(yaml.safe_load(text), text=text)
    assert err.value.problems == [
        "channels.0.modles: Extra inputs are not permitted",
        "channels.0.models: a channel must expose at least one model",
        "routers.0.allowed_models: 'openai/*' matches no exposed model",
        "routers.0.default_model: unknown model 'openai/gpt-5-mini'",
    ]


def test_config_check_reports_what_serve_would_disable(tmp_path: Path) -> None:
    """A malformed session-tier TTL: serve disables the feature with a warning, and
    config check prints the same warning (exit 0: the config is usable)."""
    path = tmp_path / "c.yaml"
    path.write_text(CHANNELS + "session_tiers: {mode: sticky, ttl_seconds: soon}\n")
    out = subprocess.run(
        [sys.executable, "-m", "tiergate", "config", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert "warning: session tiers disabled: malformed session_tiers.ttl_seconds" in out.stderr
    assert "1 warning(s)" in out.stdout
