"""No secret and no prompt text leaves the gateway, by any route.

A realistic session of traffic runs against a gateway on the simulator with
distinctive provider keys, workspace, admin and metrics tokens, and prompt
text: both inbound formats, streams, client errors, upstream 401/403 faults
whose messages quote the key (as providers' do) and a 4xx relayed in the
provider's words, the admin API (config, channels, keys added and rotated,
records as JSON and CSV, stats, sessions), /metrics, explain, models and
feedback. Then every surface is scanned: each response body and header the
gateway sent, every log record at DEBUG (raw, and through the JSON formatter of
tiergate.logs), the /metrics text, every row of every database table and the
raw database file, and every key and value in the state store (memory and
Redis). Only masked forms (vendor prefix and last four characters) may appear.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from servers import ServerThread, gateway_config
from tiergate.app import create_app
from tiergate.app_state import AppState
from tiergate.config_load import parse_config
from tiergate.logs import JSONFormatter
from tiergate.sim.app import create_sim_app
from tiergate.state.memory import MemoryStore

RUN = uuid.uuid4().hex
#: Distinct last four characters, so each key's masked form names it.
KEYS = {
    "oa": [f"sk-proj-SECRET-{RUN}-oa{i}" for i in range(3)],
    "an": [f"sk-ant-SECRET-{RUN}-an0"],
    "ge": [f"AIzaSECRET-{RUN}-ge0"],
}
ADDED_KEY = f"sk-proj-SECRET-{RUN}-add"
ROTATED_KEY = f"sk-proj-SECRET-{RUN}-rot"
TOKENS = {"default": f"tg-SECRET-{RUN}-default", "other": f"tg-SECRET-{RUN}-other"}
ADMIN_TOKEN = f"tg-SECRET-{RUN}-admin"
METRICS_TOKEN = f"tg-SECRET-{RUN}-metrics"
WRONG_TOKEN = f"tg-SECRET-{RUN}-wrong"  # a client's mistake must not be echoed either
SECRETS = sorted(
    {
        *(k for ks in KEYS.values() for k in ks),
        ADDED_KEY,
        ROTATED_KEY,
        *TOKENS.values(),
        ADMIN_TOKEN,
        METRICS_TOKEN,
        WRONG_TOKEN,
    }
)
#: Prompt text in every place a client puts it.
PROMPTS = {
    name: f"PROMPT-{name}-{RUN}"
    for name in ("system", "user", "tool", "assistant", "anthropic", "stream", "explain")
}
#: The config names every secret as a ${VAR} reference, as the operator guide
#: recommends, so stored config versions hold references only.
ENV = {
    **{f"KEY_{ch.upper()}_{i}": k for ch, ks in KEYS.items() for i, k in enumerate(ks)},
    "KEY_ADDED": ADDED_KEY,
    "KEY_ROTATED": ROTATED_KEY,
    "TOKEN_DEFAULT": TOKENS["default"],
    "TOKEN_OTHER": TOKENS["other"],
    "METRICS_TOKEN": METRICS_TOKEN,
    "TIERGATE_ADMIN_TOKEN": ADMIN_TOKEN,
}
WEAK, STRONG, GEMINI = "openai/gpt-5-mini", "anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash"
SESSION = {"X-OrcaRouter-Session-Id": f"agent-{RUN}"}


def leaks(text: str | bytes) -> list[str]:
    """Which secrets or prompt texts occur in `text` (by name, never the value)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    found = [f"secret#{i}" for i, s in enumerate(SECRETS) if s in text]
    return found + [f"prompt:{name}" for name, p in PROMPTS.items() if p in text]


def _config(sim_url: str, db: Path, state: dict[str, Any]) -> dict[str, Any]:
    doc = gateway_config(sim_url)
    for ch in doc["channels"]:
        ch["keys"] = [f"${{KEY_{ch['name'].upper()}_{i}}}" for i in range(len(KEYS[ch["name"]]))]
    doc["workspaces"] = [
        {"name": "default", "tokens": ["${TOKEN_DEFAULT}"]},
        {"name": "other", "tokens": ["${TOKEN_OTHER}"]},
    ]
    # No cooldown: a 5xx fault must not leave the later steps without a key.
    doc["server"].update(
        metrics_token="${METRICS_TOKEN}", config_poll_seconds=0.2, cooldown_seconds=0
    )
    doc["database"] = {"url": f"sqlite:///{db}"}
    doc["state"] = state
    doc["routers"].append(
        {
            "name": "esc",
            "allowed_models": ["openai/*", "anthropic/*"],
            "strategy": "cheapest",
            "strong_pool": [STRONG],
            "default_model": WEAK,
            "escalation": {"mode": "manual"},
        }
    )
    return doc


# ---- the session -------------------------------------------------------------------------


class Session:
    """A client that keeps every response the gateway sent, headers and body."""

    def __init__(self, url: str, sim_url: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=30)
        self.sim_url = sim_url
        self.responses: list[tuple[str, str]] = []  # (what, headers + body)
        self.metrics: list[str] = []

    def call(
        self,
        expect: int | tuple[int, ...],
        method: str,
        path: str,
        token: str | None = None,
        *,
        api_key: bool = False,
        **kw: Any,
    ) -> httpx.Response:
        """Send; assert the status is one of `expect`. `api_key` sends the token as
        x-api-key (the Anthropic SDK's way) instead of a bearer token."""
        headers = dict(kw.pop("headers", None) or {})
        if token is not None and api_key:
            headers["x-api-key"] = token
        elif token is not None:
            headers["Authorization"] = f"Bearer {token}"
        r = self.client.request(method, path, headers=headers, **kw)
        head = "\n".join(f"{k}: {v}" for k, v in r.headers.multi_items())
        self.responses.append((f"{method} {path} -> {r.status_code}", f"{head}\n{r.text}"))
        allowed = (expect,) if isinstance(expect, int) else expect
        assert r.status_code in allowed, (method, path, r.status_code, r.text[:300])
        return r

    def fault(self, **rule: Any) -> None:
        assert httpx.post(f"{self.sim_url}/_sim/faults", json=rule, timeout=10).is_success

    def clear_faults(self) -> None:
        httpx.delete(f"{self.sim_url}/_sim/faults", timeout=10)


CHAT: dict[str, Any] = {
    "model": "orcarouter/coding",
    "messages": [
        {"role": "system", "content": f"You are terse. {PROMPTS['system']}"},
        {"role": "user", "content": f"Fix the failing test. {PROMPTS['user']}"},
        {
            "role": "assistant",
            "content": PROMPTS["assistant"],
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": f"def f(): {PROMPTS['tool']}"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
    ],
}
MESSAGES: dict[str, Any] = {
    "model": STRONG,
    "max_tokens": 64,
    "system": PROMPTS["system"],
    "metadata": {"user_id": f"user_x_account_y_session_{RUN}"},
    "messages": [
        {"role": "user", "content": PROMPTS["anthropic"]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": PROMPTS["tool"]}
            ],
        },
    ],
}
OPENAI, ANTHROPIC = "/v1/chat/completions", "/v1/messages"


def agents(s: Session) -> str:
    """Both inbound formats, streamed and not; returns a served request id."""
    user = TOKENS["default"]
    r = s.call(200, "POST", OPENAI, user, headers=SESSION, json=CHAT)
    cost = {**SESSION, "X-OrcaRouter-Include-Cost": "true"}
    s.call(200, "POST", OPENAI, user, headers=cost, json=CHAT)
    stream = {
        "model": WEAK,
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": PROMPTS["stream"]}],
    }
    assert "[DONE]" in s.call(200, "POST", OPENAI, user, headers=cost, json=stream).text
    escalate = {**SESSION, "X-OrcaRouter-Tier": "strong"}  # audit rows and tier state
    s.call(200, "POST", OPENAI, user, headers=escalate, json={**CHAT, "model": "orcarouter/esc"})
    s.call(200, "POST", ANTHROPIC, user, api_key=True, json=MESSAGES)
    streamed = s.call(200, "POST", ANTHROPIC, user, api_key=True, json={**MESSAGES, "stream": True})
    assert "message_stop" in streamed.text
    s.call(200, "POST", ANTHROPIC, TOKENS["other"], api_key=True, json={**MESSAGES, "model": WEAK})
    return r.headers["x-orca-request-id"]


def client_errors(s: Session) -> None:
    user = TOKENS["default"]
    s.call(401, "POST", OPENAI, WRONG_TOKEN, json=CHAT)
    s.call(401, "POST", ANTHROPIC, WRONG_TOKEN, api_key=True, json=MESSAGES)
    s.call(400, "POST", OPENAI, user, content=b"{" + PROMPTS["user"].encode())
    s.call(404, "POST", OPENAI, user, json={**CHAT, "model": "nope/x"})
    dangling = {**MESSAGES, "messages": MESSAGES["messages"][2:]}  # a result without its call
    s.call((400, 422), "POST", ANTHROPIC, user, api_key=True, json=dangling)


def upstream_failures(s: Session) -> None:
    """401/403 whose message quotes the refused key: one OpenAI key (another
    serves), then the only Anthropic and Gemini keys (502, then 503 while the key
    stays disabled); a 4xx whose provider text quotes keys (logged, not relayed); a
    stream broken mid-way and a 500."""
    user = TOKENS["default"]
    for key, status, model, path in (
        (KEYS["oa"][0], 401, WEAK, OPENAI),
        (KEYS["an"][0], 401, STRONG, ANTHROPIC),
        (KEYS["ge"][0], 403, GEMINI, OPENAI),
    ):
        message = f"Incorrect API key provided: {key}. You can find your API key at ..."
        s.fault(kind="status", status=status, api_key=key, count=3, message=message)
        body = {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "x"}]}
        for streamed in (False, True):
            json = {**body, "stream": streamed}
            s.call((200, 502, 503), "POST", path, user, api_key=path == ANTHROPIC, json=json)
    s.clear_faults()
    s.fault(kind="status", status=400, model="gpt-5-mini", message=f"Bad key {KEYS['oa']}")
    r = s.call(400, "POST", OPENAI, user, json={**CHAT, "model": WEAK})
    # the provider's words stay in the log (minus the keys); the client gets a
    # generic message in its own format
    assert "Bad key" not in r.text and "rejected the request" in r.text
    s.fault(kind="stream_error", status=529, count=1)
    s.call(200, "POST", OPENAI, user, json={**CHAT, "model": WEAK, "stream": True})
    s.fault(kind="status", status=500, count=1)  # another key serves the retry
    s.call(200, "POST", OPENAI, user, json={**CHAT, "model": WEAK})
    s.clear_faults()


def inbound_rest(s: Session, served_id: str) -> None:
    user = TOKENS["default"]
    explain = {**CHAT, "messages": [{"role": "user", "content": PROMPTS["explain"]}]}
    s.call(200, "POST", "/v1/orcarouter/explain", user, headers=SESSION, json=explain)
    s.call(200, "POST", "/v1/orcarouter/explain?format=anthropic", user, json=MESSAGES)
    s.call(200, "GET", "/v1/models", user)
    s.call(200, "POST", "/v1/feedback", user, json={"request_id": served_id, "score": 0.2})
    for path in ("/healthz", "/readyz", "/openapi.json"):
        s.call(200, "GET", path)


def operator(s: Session) -> None:
    """Config, channels, keys (added and rotated by reference), records, stats."""
    a, user = ADMIN_TOKEN, TOKENS["default"]
    s.call(401, "GET", "/admin/api/config", WRONG_TOKEN)
    s.call(401, "GET", "/admin/api/config", user)
    for path in ("/config", "/config/versions", "/channels", "/channels/oa", "/channels/oa/keys"):
        s.call(200, "GET", f"/admin/api{path}", a)
    bad = {"name": "x", "type": "openai", "keys": [ADDED_KEY], "weight": ADDED_KEY, "models": {}}
    s.call(400, "POST", "/admin/api/channels", a, json=bad)  # must not quote the key
    s.call(201, "POST", "/admin/api/channels/oa/keys", a, json={"key": "${KEY_ADDED}"})
    s.call(200, "PUT", "/admin/api/channels/oa/keys/1", a, json={"key": "${KEY_ROTATED}"})
    for action in ("disable", "enable"):  # enable also clears the runtime 401
        s.call(200, "POST", f"/admin/api/channels/an/keys/0/{action}", a)
    s.call(200, "POST", "/admin/api/channels/oa/drain", a, headers={"X-Tiergate-Actor": "alice"})
    s.call(200, "PATCH", "/admin/api/channels/oa", a, json={"weight": 1})
    for _ in range(4):  # traffic on the added and rotated keys: usage rows, pins
        s.call(200, "POST", OPENAI, user, json={**CHAT, "model": WEAK})
    for path in (
        "/routers",
        "/routers/esc/gate",
        "/audit",
        "/audit?format=csv",
        "/usage",
        "/usage?format=csv",
        "/shadow",
        "/stats/traffic",
        "/stats/share",
        "/stats/escalations",
        "/stats/quality",
        "/stats/cache",
        "/stats/savings",
        f"/sessions/default/agent-{RUN}",
    ):
        s.call(200, "GET", f"/admin/api{path}", a)
    s.call(200, "POST", f"/admin/api/sessions/default/agent-{RUN}/reset?router=esc", a)
    s.call(200, "GET", "/admin/api/channels/oa/keys", a)
    s.call(401, "GET", "/metrics")
    for token in (METRICS_TOKEN, a):  # the scraper's token and the admin's
        s.metrics.append(s.call(200, "GET", "/metrics", token).text)


# ---- what the stores hold ------------------------------------------------------------------


def _database_rows(db: Path) -> dict[str, list[str]]:
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: [repr(row) for row in conn.execute(f'SELECT * FROM "{t}"')] for t in tables}


def _memory_contents(state: AppState) -> list[bytes]:
    store = state.store
    assert isinstance(store, MemoryStore)
    # The dict behind the store: the only way to see every key it holds.
    return [k.encode() + b"=" + value for k, (value, _) in store._data.items()]


async def _redis_contents(url: str, prefix: str) -> list[bytes]:
    """Every key under the prefix with its value, whatever its type; then deleted."""
    client = aioredis.from_url(url)
    out: list[bytes] = []
    try:
        keys = [k async for k in client.scan_iter(match=prefix + "*")]
        for key in keys:
            raw_kind = await client.type(key)
            kind = raw_kind.decode() if isinstance(raw_kind, bytes) else str(raw_kind)
            value: Any
            if kind == "string":
                value = await client.get(key)
            elif kind == "hash":
                value = await client.hgetall(key)
            elif kind == "zset":
                value = await client.zrange(key, 0, -1, withscores=True)
            elif kind == "list":
                value = await client.lrange(key, 0, -1)
            else:
                value = await client.smembers(key)
            out.append(key + b"=" + repr(value).encode())
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()
    return out


# ---- the tests ------------------------------------------------------------------------------


UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every record at DEBUG. uvicorn's loggers do not propagate and are configured
    when a server starts: `listen_to_uvicorn` joins them once the servers run."""
    caplog.set_level(logging.DEBUG)
    saved = [(lg, lg.level, list(lg.handlers)) for lg in map(logging.getLogger, UVICORN_LOGGERS)]
    try:
        yield caplog
    finally:
        for lg, level, handlers in saved:
            lg.setLevel(level)
            lg.handlers[:] = handlers


def listen_to_uvicorn(caplog: pytest.LogCaptureFixture) -> None:
    for lg in map(logging.getLogger, UVICORN_LOGGERS):
        lg.addHandler(caplog.handler)
        lg.setLevel(logging.DEBUG)


@pytest.fixture(params=["memory", "redis"])
def state_backend(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "memory":
        return {"backend": "memory"}
    url = request.getfixturevalue("redis_url")  # skips (or fails, if required) without Redis
    return {"backend": "redis", "url": url, "key_prefix": f"test:{uuid.uuid4().hex}:"}


def test_the_scan_finds_what_it_looks_for() -> None:
    assert leaks(f"x{KEYS['an'][0]}y") == [f"secret#{SECRETS.index(KEYS['an'][0])}"]
    assert leaks(b"..." + PROMPTS["tool"].encode()) == ["prompt:tool"]
    assert leaks("sk-…" + KEYS["oa"][0][-4:]) == []  # the masked form is allowed


def test_no_secret_or_prompt_text_anywhere(
    tmp_path: Path, logs: pytest.LogCaptureFixture, state_backend: dict[str, Any]
) -> None:
    db = tmp_path / "tg.db"
    with ServerThread(create_sim_app()) as sim:
        app = create_app(parse_config(_config(sim.url, db, state_backend), ENV), env=ENV)
        with ServerThread(app) as gw:
            listen_to_uvicorn(logs)
            s = Session(gw.url, sim.url)
            served_id = agents(s)
            client_errors(s)
            upstream_failures(s)
            inbound_rest(s, served_id)
            operator(s)
        # Stopped: every row is flushed and the store holds its final state.
        state: AppState = app.state.tiergate
        if state_backend["backend"] == "memory":
            stored = _memory_contents(state)
        else:
            stored = asyncio.run(_redis_contents(state_backend["url"], state_backend["key_prefix"]))

    problems: list[str] = []
    for what, text in s.responses:
        problems += [f"response {what}: {x}" for x in leaks(text)]
    as_json, plain = JSONFormatter(), logging.Formatter()
    records = [r for r in logs.records if not r.name.startswith("tiergate.sim")]  # the provider
    for record in records:
        for text in (as_json.format(record), plain.format(record), repr(record.args)):
            problems += [f"log {record.name}: {x}" for x in leaks(text)]
    problems += [f"metrics: {x}" for text in s.metrics for x in leaks(text)]
    rows = _database_rows(db)
    problems += [f"table {t}: {x}" for t, rs in rows.items() for r in rs for x in leaks(r)]
    problems += [f"database file: {x}" for x in leaks(db.read_bytes())]
    problems += [f"state store: {x}" for value in stored for x in leaks(value)]
    assert not problems, "\n".join(sorted(set(problems)))

    # Every surface held real material (an empty scan proves nothing).
    assert len(s.responses) > 60 and len(s.metrics) == 2
    assert any(r.name == "tiergate.access" for r in records)
    assert any(r.name == "uvicorn.access" for r in records)
    assert len(rows["usage"]) > 15 and rows["audit_events"] and rows["feedback"]
    assert len(rows["config_versions"]) >= 5
    assert len(stored) > 10
    # What an operator sees instead: the masked form.
    keys = [text for what, text in s.responses if what == "GET /admin/api/channels/oa/keys -> 200"]
    for key in (KEYS["oa"][0], ROTATED_KEY, KEYS["oa"][2], ADDED_KEY):
        assert f"sk-…{key[-4:]}" in keys[-1]
