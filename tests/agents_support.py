"""Drive real agent CLIs through the gateway to the scripted simulator.

One `AgentBench` is a simulator (with an agent script armed), a gateway on it
with a SQLite usage table, and a scratch git repository with a failing test.
`run` starts the agent as a subprocess with a bounded timeout, a private HOME
and config dirs, no proxy, and telemetry and update checks off. Afterwards
`session_report` reads what the gateway recorded: every request's usage row
(key, tier, cache tokens, session hash) joined with what a tap in front of the
gateway saw (which header or body field named the session, the tier header).

Set TIERGATE_AGENT_FIGURES=<file> to have each run append its figures (turns,
session source, cache-hit rates, tiers) to that file as a JSON line: the source
of the table in docs/agents.md.

Agents are installed by `.ci/install-agents.sh` (`make agents`) under
`.agents/`; a missing one skips, or fails under TIERGATE_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socketserver
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from conftest import skip_unless_required
from servers import ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.routing.session import resolve_session_id
from tiergate.sim.app import create_sim_app
from tiergate.sim.script import CALC_FIXED, TEST_COMMAND, scratch_project

ROOT = Path(__file__).resolve().parent.parent
AGENTS_DIR = Path(os.environ.get("TIERGATE_AGENTS_DIR", ROOT / ".agents"))
WEAK = "openai/gpt-5-mini"
STRONG = "anthropic/claude-sonnet-4-5"
ROUTER_MODEL = "orcarouter/coding"
AGENT_TIMEOUT = 90.0
TASK = "The test in test_calc.py fails. Fix calc.py so that it passes."

#: Every agent gets these: no telemetry, no update checks, no proxies.
QUIET_ENV = {
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY": "False",
    "MSWEA_SILENT_STARTUP": "1",
    "NO_COLOR": "1",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}


PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")


def agent_binary(relative: str, package: str) -> Path:
    """The installed agent's executable; skip (or fail when services are required)."""
    path = AGENTS_DIR / relative
    if path.exists():
        return path
    skip_unless_required(f"{package} is not installed at {path}", "run `make agents`")
    raise AssertionError("unreachable")


# ---- the tap: what each request said about its session ------------------------------


@dataclass(slots=True)
class Seen:
    path: str
    session_source: str | None
    session_value: str | None
    offers_tools: bool
    body: dict[str, Any] = field(repr=False, default_factory=dict)
    status: int = 0
    request_id: str | None = None
    tier_header: str | None = None
    resolved_model: str | None = None


class RequestTap:
    """ASGI wrapper in front of the gateway: records, per request, the session id
    source the gateway's own resolver finds and the tier headers it answers with.
    Reads the body once and replays it to the gateway unchanged."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[Seen] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            body = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            body = {}
        body = body if isinstance(body, dict) else {}
        session = resolve_session_id(headers, body)
        seen = Seen(
            scope["path"],
            session and session.source,
            session and session.value,
            bool(body.get("tools")),
            body,
        )
        self.seen.append(seen)
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        async def watch(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                seen.status = message["status"]
                got = {k.decode().lower(): v.decode() for k, v in message.get("headers", [])}
                seen.request_id = got.get("x-orca-request-id")
                seen.tier_header = got.get("x-orca-session-tier")
                seen.resolved_model = got.get("x-orca-resolved-model")
            await send(message)

        await self.app(scope, replay, watch)


# ---- the outbound watch: nothing beyond loopback --------------------------------------


class OutboundWatch(socketserver.ThreadingTCPServer):
    """The agents' HTTP(S) proxy: it refuses every request and records its target.

    Telemetry, update checks and model-list downloads of an agent that honours
    the proxy variables (all five do) land here instead of on the network, so a
    test can assert that there were none."""

    daemon_threads = True

    def __init__(self) -> None:
        self.targets: list[str] = []
        super().__init__(("127.0.0.1", 0), _RefuseAndRecord)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    @contextlib.contextmanager
    def serving(self) -> Iterator[OutboundWatch]:
        thread = threading.Thread(target=self.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.shutdown()
            self.server_close()
            thread.join(timeout=5)


class _RefuseAndRecord(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        line = self.rfile.readline(4096).decode("latin-1").split()
        if len(line) >= 2:
            assert isinstance(self.server, OutboundWatch)
            self.server.targets.append(urlsplit(line[1]).hostname or line[1].rsplit(":", 1)[0])
        self.wfile.write(
            b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )


# ---- the bench ----------------------------------------------------------------------


@dataclass
class Turn:
    """One model request of the agent's session, as the gateway recorded it."""

    path: str
    status: int
    model: str | None
    key_index: int | None
    tier_header: str | None
    input_tokens: int
    cache_read_tokens: int
    session_hash: str | None
    session_source: str | None
    offers_tools: bool
    body: dict[str, Any] = field(repr=False, default_factory=dict)


@dataclass
class SessionReport:
    turns: list[Turn]
    """The agent's main session (the session with the most requests), in order."""
    side_requests: int
    """Requests of other sessions (titles, summaries): served, but not the session."""
    failed: list[Seen] = field(default_factory=list)
    """Requests the gateway did not answer with 200."""
    agent_output: str = ""
    """The tail of the agent's stdout and stderr, for failure messages."""

    @property
    def session_sources(self) -> set[str | None]:
        return {t.session_source for t in self.turns}

    @property
    def keys(self) -> set[tuple[str | None, int | None]]:
        return {(t.model, t.key_index) for t in self.turns}

    @property
    def agent_turns(self) -> list[Turn]:
        """The turns of the agent loop: those offering tools when any does, which
        leaves out a session's side requests (opencode's title request shares
        its session id)."""
        with_tools = [t for t in self.turns if t.offers_tools]
        return with_tools or self.turns

    def cache_hit_rate(self, start: int = 1, end: int | None = None) -> float:
        """Cached share of the prompt tokens of agent_turns[start:end]: after the
        first turn, every turn should find the previous turn's prefix cached."""
        turns = self.agent_turns[start:end]
        prompt = sum(t.input_tokens for t in turns)
        return sum(t.cache_read_tokens for t in turns) / prompt if prompt else 0.0

    def direct_cache_hit_rate(self) -> float | None:
        """The same rate with the agent's requests sent straight to a fresh
        simulator on one key, as if there were no gateway: the baseline the
        gateway's rate is held to. None when the session is not plain chat
        completions on the base model (nothing to compare it with)."""
        turns = self.agent_turns
        if not turns or any(t.path != "/v1/chat/completions" or t.model != WEAK for t in turns):
            return None
        upstream = WEAK.split("/", 1)[1]
        with ServerThread(create_sim_app()) as sim, httpx.Client(base_url=sim.url) as client:
            direct = []
            for t in turns:
                body = {k: v for k, v in t.body.items() if k not in ("stream", "stream_options")}
                r = client.post(
                    "/v1/chat/completions",
                    json={**body, "model": upstream},
                    headers={"authorization": "Bearer sk-direct"},
                )
                assert r.status_code == 200, r.text
                usage = r.json()["usage"]
                cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
                direct.append((usage["prompt_tokens"], cached))
        prompt = sum(p for p, _ in direct[1:])
        return sum(c for _, c in direct[1:]) / prompt if prompt else 0.0

    def summary(self) -> str:
        rows = [
            f"{t.path} {t.status} {t.model} key={t.key_index} tier={t.tier_header!r} "
            f"in={t.input_tokens} cached={t.cache_read_tokens} src={t.session_source} "
            f"tools={t.offers_tools}"
            for t in self.turns
        ]
        tail = f"side requests: {self.side_requests}, failed: {self.failed}"
        return "\n".join([*rows, tail, "agent output (tail):", self.agent_output])


def escalating_router() -> dict[str, Any]:
    """Cheapest-first with automatic escalation: strikes (not difficulty, which
    needs a scoring strategy) move a failing session to the strong pool."""
    return {
        "name": "coding",
        "allowed_models": ["openai/*", "anthropic/*"],
        "strategy": "cheapest",
        "default_model": WEAK,
        "strong_pool": [STRONG],
        "escalation": {"mode": "auto", "share_warmup_requests": 1000},
    }


class AgentBench:
    def __init__(self, tmp: Path, script: str, server: dict[str, Any] | None = None) -> None:
        self.tmp = tmp
        self.script = script
        self.server_settings = dict(server or {})  # merged into the gateway's `server`
        self.repo = tmp / "repo"
        self.home = tmp / "home"
        self.db = tmp / "usage.db"
        self.tap: RequestTap | None = None
        self.sim: ServerThread | None = None
        self.gateway: ServerThread | None = None
        self.report = SessionReport([], 0)
        """Filled in by the test once the agent has run (`session_report()`)."""
        self.elapsed = 0.0
        self.output = ""
        self.outbound = OutboundWatch()

    @property
    def url(self) -> str:
        assert self.gateway is not None
        return self.gateway.url

    @contextlib.contextmanager
    def running(self) -> Iterator[AgentBench]:
        self._make_repo()
        with self.outbound.serving(), ServerThread(create_sim_app()) as sim:
            httpx.post(f"{sim.url}/_sim/script", json={"name": self.script}).raise_for_status()
            cfg = gateway_config(
                sim.url, routers=[escalating_router()], database={"url": f"sqlite:///{self.db}"}
            )
            cfg["server"].update(self.server_settings)
            self.tap = RequestTap(create_app(parse_config(cfg)))
            self.sim = sim
            with ServerThread(self.tap) as gw:
                self.gateway = gw
                yield self

    def _make_repo(self) -> None:
        self.repo.mkdir(parents=True)
        self.home.mkdir(parents=True)
        for name, text in scratch_project().items():
            (self.repo / name).write_text(text)
        git = ["git", "-C", str(self.repo)]
        subprocess.run([*git, "init", "-q"], check=True, timeout=30)
        subprocess.run([*git, "add", "."], check=True, timeout=30)
        subprocess.run(
            [*git, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init"],
            check=True,
            timeout=30,
        )

    def env(self, **extra: str) -> dict[str, str]:
        """A clean environment: PATH and locale only, a private HOME, quiet flags."""
        keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TERM")}
        home = str(self.home)
        return {
            **keep,
            "HOME": home,
            "XDG_CONFIG_HOME": f"{home}/.config",
            "XDG_DATA_HOME": f"{home}/.local/share",
            "XDG_CACHE_HOME": f"{home}/.cache",
            "XDG_STATE_HOME": f"{home}/.local/state",
            "GIT_AUTHOR_NAME": "agent",
            "GIT_AUTHOR_EMAIL": "agent@example.com",
            "GIT_COMMITTER_NAME": "agent",
            "GIT_COMMITTER_EMAIL": "agent@example.com",
            **QUIET_ENV,
            **{name: self.outbound.url for name in PROXY_VARIABLES},
            **extra,
        }

    def run(
        self, argv: list[str], env: dict[str, str], timeout: float = AGENT_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        try:
            done = subprocess.run(
                argv,
                cwd=self.repo,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            tail = (exc.stdout or b"")[-3000:], (exc.stderr or b"")[-3000:]
            raise AssertionError(f"{argv[0]} timed out after {timeout}s: {tail}") from exc
        self.elapsed = time.monotonic() - started
        self.output = (done.stdout[-4000:] + "\n" + done.stderr[-2000:]).strip()
        return done

    def tests_pass(self) -> bool:
        done = subprocess.run(
            TEST_COMMAND.split(), cwd=self.repo, capture_output=True, text=True, timeout=60
        )
        return done.returncode == 0

    def calc_fixed(self) -> bool:
        return (self.repo / "calc.py").read_text() == CALC_FIXED

    def session_report(self) -> SessionReport:
        """Read the usage rows (after the gateway flushed them) joined with the tap."""
        assert self.tap is not None
        by_id = {s.request_id: s for s in self.tap.seen if s.request_id}
        rows = self._usage_rows(len(by_id))
        sessions = Counter(r["session_hash"] for r in rows)
        main = sessions.most_common(1)[0][0] if sessions else None
        turns = []
        for r in rows:
            if r["session_hash"] != main:
                continue
            seen = by_id.get(r["request_id"])
            turns.append(
                Turn(
                    path=seen.path if seen else "?",
                    status=r["status"],
                    model=r["model"],
                    key_index=r["key_index"],
                    tier_header=seen.tier_header if seen else None,
                    input_tokens=r["input_tokens"],
                    cache_read_tokens=r["cache_read_tokens"],
                    session_hash=r["session_hash"],
                    session_source=seen.session_source if seen else None,
                    offers_tools=seen.offers_tools if seen else False,
                    body=seen.body if seen else {},
                )
            )
        failed = [s for s in self.tap.seen if s.status != 200]
        report = SessionReport(turns, len(rows) - len(turns), failed, self.output)
        figures_file = os.environ.get("TIERGATE_AGENT_FIGURES")
        if figures_file:
            with open(figures_file, "ab") as out:
                out.write(orjson.dumps(self.figures(report)) + b"\n")
        return report

    def _usage_rows(self, answered: int) -> list[sqlite3.Row]:
        """The usage table, once it holds a row for each of the `answered` requests:
        the recorder is flushed on the gateway's own loop (rows of a request are
        queued when its response ends), never by stopping the server, whose
        graceful shutdown can outlast a join timeout on a loaded machine."""
        assert self.gateway is not None and self.gateway.loop is not None
        recorder = self.tap.app.state.tiergate.recorder  # type: ignore[union-attr]
        deadline = time.monotonic() + 10
        while True:
            asyncio.run_coroutine_threadsafe(recorder.flush(), self.gateway.loop).result(10)
            with contextlib.closing(sqlite3.connect(self.db)) as db:
                db.row_factory = sqlite3.Row
                rows = db.execute("SELECT * FROM usage ORDER BY ts, id").fetchall()
            if len(rows) >= answered or time.monotonic() > deadline:
                assert len(rows) == answered, f"{len(rows)} usage rows for {answered} requests"
                return rows
            time.sleep(0.1)

    def figures(self, report: SessionReport) -> dict[str, Any]:
        direct = report.direct_cache_hit_rate()
        return {
            "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0],
            "script": self.script,
            "agent_turns": len(report.agent_turns),
            "session_requests": len(report.turns),
            "side_requests": report.side_requests,
            "session_sources": sorted(str(s) for s in report.session_sources),
            "keys": sorted(f"{m}#{k}" for m, k in report.keys),
            "cache_hit_rate": round(report.cache_hit_rate(), 4),
            "direct_cache_hit_rate": None if direct is None else round(direct, 4),
            "tiers": [t.tier_header for t in report.turns],
            "seconds": round(self.elapsed, 1),
            "outbound": sorted(set(self.outbound.targets)),
        }


def assert_stayed_offline(bench: AgentBench, known: frozenset[str] = frozenset()) -> None:
    """No request went to the outbound watch (the agents' proxy), except to the
    `known` hosts an agent contacts with no switch to stop it (docs/agents.md)."""
    unexpected = set(bench.outbound.targets) - known
    assert not unexpected, f"outbound attempts: {sorted(unexpected)}"


def assert_served(report: SessionReport, min_turns: int) -> None:
    """Every request answered, and identified as one session by one source."""
    assert not report.failed, report.summary()
    assert len(report.turns) >= min_turns, report.summary()
    assert all(t.status == 200 for t in report.turns), report.summary()
    assert len(report.session_sources) == 1, report.summary()


def assert_served_one_session(report: SessionReport, min_turns: int) -> None:
    """`assert_served`, on one model and key throughout (no escalation)."""
    assert_served(report, min_turns)
    assert len(report.keys) == 1, report.summary()


def assert_cache_warm(report: SessionReport, minimum: float = 0.95) -> None:
    rate = report.cache_hit_rate()
    assert rate >= minimum, f"cache-hit rate {rate:.3f} after turn 1\n{report.summary()}"


def assert_cache_as_direct(report: SessionReport, tolerance: float = 0.005) -> None:
    """For agents whose own prompt layout caps the rate below 95 % (small prompts,
    or aider re-sending edited files mid-prompt): through the gateway the session
    is cached as well as it would be talking to the provider directly."""
    rate, direct = report.cache_hit_rate(), report.direct_cache_hit_rate()
    assert direct is not None, report.summary()
    assert rate >= direct - tolerance, f"{rate:.3f} via tiergate, {direct:.3f} direct"


def assert_escalated_by_strikes(report: SessionReport) -> None:
    """A failure loop escalates once and stays strong. With the default scorer
    (`learned`, which reads the failure streak) the difficulty trigger may fire on
    the turn the strikes would; either reason, never before the second turn."""
    tiers = [t.tier_header for t in report.turns]
    loop = ("strong; reason=strikes", "strong; reason=difficulty")
    escalated = [t for t in tiers if t in loop]
    assert len(escalated) == 1, report.summary()
    first = tiers.index(escalated[0])
    assert first >= 1, report.summary()
    assert all(t == "base" for t in tiers[:first]), report.summary()
    assert all(t.model == STRONG for t in report.turns[first:]), report.summary()
    # one key per tier: the base turns on one, the strong turns on one
    assert len({(t.model, t.key_index) for t in report.turns[:first]}) == 1, report.summary()
    assert len({(t.model, t.key_index) for t in report.turns[first:]}) == 1, report.summary()
