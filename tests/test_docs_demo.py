"""Every model and router name a new user copies from docs/agents.md and the
README works in demo mode (issue 28: `orcarouter/coding` was a 404 there).

The names are read out of the documents, so the test fails as soon as the docs
name something demo mode does not serve, or demo mode stops serving it. The
gateway is the demo config itself (`auto_config` with a simulator URL, what
`tiergate serve` builds without keys) on a real simulator.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from servers import TOKEN, ServerThread
from tiergate.app import create_app
from tiergate.defaults import auto_config
from tiergate.sim.app import create_sim_app
from tiergate.sim.script import SCRIPTS, scratch_project

ROOT = Path(__file__).resolve().parent.parent
AGENTS_DOC = ROOT / "docs" / "agents.md"
README = ROOT / "README.md"

#: Describes the agent tests' own gateway config (tests/agents_support.py), not demo mode.
NOT_DEMO_SECTIONS = ("What the tests check, and what was measured",)

# A router name, optionally behind a client's own prefix: litellm's `openai/` (aider,
# mini-swe-agent) and opencode's provider id (`tiergate/`) are stripped before sending.
_ROUTER = re.compile(
    r"(?<![\w/.-])(?:(?:openai|tiergate)/)?((?:orcarouter|router)/[\w.-]*\w|auto:[\w.-]*\w)"
)
# A concrete exposed model; `/v1/orcarouter/explain` and paths are excluded by the
# look-behind, a client prefix in front of a router by the look-ahead.
_MODEL = re.compile(r"(?<![\w/.-])((?:openai|anthropic|gemini|deepseek)/(?!orcarouter/)[\w.-]*\w)")


def _demo_text(path: Path) -> str:
    """The document without the sections that describe something other than demo mode."""
    keep, skipping = [], False
    for line in path.read_text().splitlines():
        heading = re.match(r"(#+)\s+(.*)", line)
        if heading and len(heading.group(1)) <= 2:
            skipping = heading.group(2).strip() in NOT_DEMO_SECTIONS
        if not skipping:
            keep.append(line)
    return "\n".join(keep)


def doc_names(path: Path) -> tuple[set[str], set[str]]:
    """(router names, concrete model names) as the gateway receives them."""
    text = _demo_text(path)
    return set(_ROUTER.findall(text)), set(_MODEL.findall(text))


def test_the_name_reader_reads_client_prefixed_names() -> None:
    routers, models = doc_names(AGENTS_DOC)
    assert "orcarouter/coding" in routers  # opencode's `tiergate/...`, litellm's `openai/...`
    assert "openai/gpt-5-mini" in models
    assert not any("orcarouter" in m for m in models)
    readme_routers, _ = doc_names(README)
    assert {"orcarouter/auto", "router/auto", "auto:auto"} <= readme_routers
    assert "orcarouter/explain" not in readme_routers  # an endpoint, /v1/orcarouter/explain


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    with ServerThread(create_sim_app()) as sim:
        cfg = auto_config(
            {"TIERGATE_DATABASE_URL": f"sqlite:///{db}"}, sim_url=sim.url, token=TOKEN
        )
        assert cfg.demo
        with ServerThread(create_app(cfg, env={})) as gw:
            yield gw.url


def _names() -> list[tuple[str, str]]:
    out = []
    for doc in (AGENTS_DOC, README):
        routers, models = doc_names(doc)
        out += [(doc.name, n) for n in sorted(routers | models)]
    return out


@pytest.mark.parametrize(("doc", "name"), _names())
def test_every_name_the_docs_give_is_served_in_demo_mode(demo: str, doc: str, name: str) -> None:
    """Through each API the documented agents use: chat completions (opencode, aider,
    mini-swe-agent), Messages (Claude Code) and Responses (Codex)."""
    bearer = {"authorization": f"Bearer {TOKEN}"}
    calls = [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hello"}]}),
        ("/v1/messages", {"max_tokens": 64, "messages": [{"role": "user", "content": "Hello"}]}),
        ("/v1/responses", {"input": "Hello"}),
    ]
    for path, body in calls:
        r = httpx.post(f"{demo}{path}", headers=bearer, json={"model": name, **body}, timeout=30)
        assert r.status_code == 200, f"{doc} names {name!r}; {path} said {r.status_code} {r.text}"


def test_the_model_list_shows_every_router_the_agent_doc_names(demo: str) -> None:
    """opencode and Codex list models: each documented router is in the list under
    its `orcarouter/` name."""
    listed = {
        m["id"]
        for m in httpx.get(
            f"{demo}/v1/models", headers={"authorization": f"Bearer {TOKEN}"}, timeout=30
        ).json()["data"]
    }
    routers, models = doc_names(AGENTS_DOC)
    wanted = {"orcarouter/" + n.split("/", 1)[-1].split(":", 1)[-1] for n in routers} | models
    assert wanted <= listed, wanted - listed


def test_the_scratch_project_line_writes_what_the_scripts_play(tmp_path: Path) -> None:
    """docs/agents.md's "In demo mode the model is the simulator": its one-liner
    writes the project the scripts fix, and it names every script there is."""
    text = AGENTS_DOC.read_text()
    (line,) = [x for x in text.splitlines() if x.startswith(".venv/bin/python -c ")]
    argv = shlex.split(line)
    run = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == scratch_project()
    tests = subprocess.run(
        [sys.executable, "-B", "-m", "unittest", "test_calc"], cwd=tmp_path, capture_output=True
    )
    assert tests.returncode != 0  # add subtracts until the `fix` script's edit
    demo = text[text.index("**In demo mode the model is the simulator.**") :]
    demo = demo[: demo.index("\n## ")]
    assert all(f"`{name}`" in demo for name in SCRIPTS), SCRIPTS
