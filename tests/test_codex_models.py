"""GET /v1/models for Codex CLI: with `client_version` and the operator's
instructions it adds Codex's model catalog (`models`) beside the OpenAI list,
which the openai SDK's `models.list()` keeps reading; without either it is the
plain OpenAI list. The real Codex run is in tests/test_agents_codex.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from servers import TOKEN, ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config import ConfigError
from tiergate.config_load import parse_config
from tiergate.defaults import auto_config

INSTRUCTIONS = "You are a coding agent. Run the tests before and after a change."
CODEX = {"client_version": "0.171.0"}


def serve(tmp_path: Path, instructions: str | None) -> ServerThread:
    doc: dict[str, Any] = gateway_config("http://127.0.0.1:9")
    if instructions is not None:
        path = tmp_path / "codex.md"
        path.write_text(instructions)
        doc["server"]["codex_instructions_file"] = str(path)
    return ServerThread(create_app(parse_config(doc)))


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[ServerThread]:
    with serve(tmp_path, INSTRUCTIONS) as server:
        yield server


def models(gw: ServerThread, **query: str) -> dict[str, Any]:
    r = httpx.get(f"{gw.url}/v1/models", params=query, headers={"authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_codex_gets_its_catalog_beside_the_openai_list(gw: ServerThread) -> None:
    body = models(gw, **CODEX)
    ids = [m["id"] for m in body["data"]]
    slugs = [m["slug"] for m in body["models"]]
    assert body["object"] == "list" and set(slugs) == set(ids)
    assert slugs[0] == "orcarouter/coding"  # routers first: what agents are pointed at
    router = body["models"][0]
    # the router may serve any openai/* or anthropic/* model: the smallest window
    assert router["context_window"] == 128_000
    assert router["base_instructions"] == INSTRUCTIONS
    assert router["shell_type"] == "shell_command" and router["visibility"] == "list"
    assert [m["priority"] for m in body["models"]] == list(range(len(slugs)))
    for entry in body["models"]:  # every field Codex 0.171 requires
        assert {
            "display_name",
            "description",
            "supported_reasoning_levels",
            "supported_in_api",
            "upgrade",
            "supports_reasoning_summaries",
            "support_verbosity",
            "default_verbosity",
            "apply_patch_tool_type",
            "truncation_policy",
            "supports_parallel_tool_calls",
            "experimental_supported_tools",
        } <= set(entry)


def test_other_clients_see_the_openai_list_unchanged(gw: ServerThread) -> None:
    assert set(models(gw)) == {"object", "data"}
    sdk = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=TOKEN, max_retries=0)
    listed = {m.id for m in sdk.models.list()}
    assert "orcarouter/coding" in listed
    # even asked the Codex way, the SDK reads the same list
    assert {m.id for m in sdk.models.list(extra_query=CODEX)} == listed


def test_without_instructions_there_is_no_catalog(tmp_path: Path) -> None:
    """A catalog entry replaces Codex's own prompt; without the operator's text
    Codex would send none, so it keeps its fallback instead."""
    with serve(tmp_path, None) as server:
        assert set(models(server, **CODEX)) == {"object", "data"}


def test_the_instructions_file_is_checked_at_load(tmp_path: Path) -> None:
    doc = gateway_config("http://127.0.0.1:9")
    for bad in (tmp_path / "missing.md", tmp_path):
        doc["server"]["codex_instructions_file"] = str(bad)
        with pytest.raises(ConfigError, match="codex_instructions_file"):
            parse_config(doc)
    empty = tmp_path / "empty.md"
    empty.write_text("")
    doc["server"]["codex_instructions_file"] = str(empty)
    with pytest.raises(ConfigError, match="is empty"):
        parse_config(doc)


def test_the_file_is_reread_when_it_changes(tmp_path: Path) -> None:
    with serve(tmp_path, INSTRUCTIONS) as server:
        assert models(server, **CODEX)["models"][0]["base_instructions"] == INSTRUCTIONS
        path = tmp_path / "codex.md"
        path.write_text("Changed.")
        os.utime(path, (1, 1))  # a different mtime even within the clock's resolution
        assert models(server, **CODEX)["models"][0]["base_instructions"] == "Changed."


def test_demo_mode_serves_the_catalog_with_the_environment_instructions_file(
    tmp_path: Path,
) -> None:
    """Demo mode has no config file: TIERGATE_CODEX_INSTRUCTIONS_FILE is how its
    Codex users stop the "model metadata not found" warning (docs/agents.md)."""
    path = tmp_path / "codex.md"
    path.write_text(INSTRUCTIONS)
    db = {"TIERGATE_DATABASE_URL": f"sqlite:///{tmp_path / 'demo.db'}"}
    env = {**db, "TIERGATE_CODEX_INSTRUCTIONS_FILE": str(path)}
    demo = auto_config(env, sim_url="http://127.0.0.1:9", token=TOKEN, admin_token="tga-x")
    assert demo.server.admin_token == "tga-x"  # both server settings kept
    with ServerThread(create_app(demo, env={})) as gw:
        catalog = {m["slug"]: m for m in models(gw, **CODEX)["models"]}
    assert {"orcarouter/coding", "orcarouter/auto"} <= set(catalog)
    assert catalog["orcarouter/coding"]["base_instructions"] == INSTRUCTIONS
    with ServerThread(
        create_app(auto_config(db, sim_url="http://127.0.0.1:9", token=TOKEN), env={})
    ) as gw:
        assert "models" not in models(gw, **CODEX)
    with pytest.raises(ConfigError, match="codex_instructions_file"):
        auto_config({"TIERGATE_CODEX_INSTRUCTIONS_FILE": str(tmp_path / "none.md")}, sim_url="x")
