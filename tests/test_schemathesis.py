"""Schemathesis against /openapi.json: every documented operation of the admin
API and of the inbound APIs, fuzzed over real HTTP with valid credentials.

Asserted for every response: no 5xx, JSON errors in the documented shape of the
route (OpenAI or Anthropic on the inbound APIs, the admin envelope on
/admin/api), no traceback text, no secret, and conformance to the document
(status code, content type, headers, body and SSE event schemas, Allow on 405,
auth enforced where declared, valid data accepted and invalid data refused
where the schema can say which is which).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from schemathesis import Case

from admin_support import ADMIN, SECRETS, STRONG, WEAK, admin_config, escalating_router
from servers import TOKEN, ServerThread
from tiergate.api.openapi import openapi_document
from tiergate.app import create_app
from tiergate.config_load import parse_config
from tiergate.sim.app import create_sim_app

#: Examples per operation in the fuzzing phase; the coverage phase adds its
#: boundary cases on top. The whole file runs in well under a minute.
MAX_EXAMPLES = 25

#: No 5xx is acceptable from the main gateway. Each documented 503 needs a cause
#: it does not have: `admin_disabled` (it has an admin token),
#: `database_unavailable` (it has a SQLite database), `state_unavailable` (the
#: in-memory store cannot fail), `router_disabled` (the fuzzer cannot name a real
#: router to disable). test_api_without_database shows the one 503 a missing
#: backend may cause, and only there.
ALLOWED_5XX: frozenset[tuple[int, str]] = frozenset()
NO_DATABASE_5XX = frozenset({(503, "database_unavailable")})

#: Where a schema-valid request may still be refused with 400, because validity
#: depends on more than the request's own shape (positive_data_acceptance off):
SEMANTIC_400 = {
    # Config writes validate the whole resulting document: references between
    # routers, pools and models, unique names, at least one model per channel.
    "config_writes": r"^(POST|PATCH|PUT) /admin/api/(channels|routers)",
    # A stats window needs since < until and at most 5000 buckets.
    "stats_windows": r"^GET /admin/api/(stats/|virtual-keys/\{id\}/usage)",
    # `limit` may reach 100000 with format=csv but 10000 with json: a bound
    # that depends on another parameter's value has no schema.
    "csv_limits": r"^GET /admin/api/(audit|usage)$",
    # Proxied requests: a tool result must answer a call of the previous turn,
    # and the upstream provider has the last word (its 4xx is passed through).
    # A Responses input whose items are all dropped (hosted tools' records) has
    # nothing to answer.
    "proxied": r"^POST /v1/(chat/completions|messages|responses|embeddings)$",
    # Messages rules a schema cannot state: a system message is never the whole
    # conversation, and has content or an output_config.
    "messages_rules": r"^POST /v1/messages/count_tokens$",
}
#: Where a schema-violating request may be accepted (negative_data_rejection off):
LENIENT = {
    # A config change is validated exactly as the YAML file is (docs/operator.md),
    # and the file loader coerces "5" to 5 and "true" to true (values often come
    # from ${VAR}); the document shows the canonical types.
    "config_writes": SEMANTIC_400["config_writes"],
}
#: Operations whose responses depend on the database (503 without one).
DATABASE_BACKED = r"^/admin/api/(audit|usage|shadow|stats/(?!share)|routers/\{name\}/gate)"


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _without(check: str, patterns: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {"include-name-regex": rx, "checks": {check: {"enabled": False}}}
        for rx in patterns.values()
    ]


def _schema(max_examples: int, operations: list[dict[str, Any]]) -> Any:
    return schemathesis.openapi.from_dict(
        openapi_document(),
        config=schemathesis.Config.from_dict(
            {
                "seed": 10,
                "generation": {
                    "max-examples": max_examples,
                    "mode": "all",
                    # Unknown query parameters are ignored, as by most HTTP APIs.
                    "allow-extra-parameters": True,
                    # Credentials are the real ones the tests send, never generated.
                    "with-security-parameters": False,
                },
                "operations": operations,
            }
        ),
    )


#: Built from the document this code serves; test_live_document_is_what_is_fuzzed
#: proves the live /openapi.json is that very document. (Loading it from the
#: live server in a fixture, `schemathesis.pytest.from_fixture`, fails on
#: pytest 9: it rewrites `Function._nodeid`, which no longer exists.)
schema = _schema(
    MAX_EXAMPLES,
    [
        *_without("positive_data_acceptance", SEMANTIC_400),
        *_without("negative_data_rejection", LENIENT),
        # Config bodies have dozens of fields: the coverage phase would spend
        # ~1000 requests on boundaries neither acceptance check judges there.
        # The fuzzing phase still sends them, valid and invalid.
        {
            "include-name-regex": LENIENT["config_writes"],
            "phases": {"coverage": {"enabled": False}},
        },
    ],
)
no_database_schema = _schema(
    5,
    [
        *_without("positive_data_acceptance", SEMANTIC_400),
        # The 503 is the documented answer here; check_response allows only it.
        {
            "include-path-regex": DATABASE_BACKED,
            "checks": {"not_a_server_error": {"enabled": False}},
            "phases": {"coverage": {"enabled": False}},
        },
    ],
).exclude(path_regex="^(?!" + DATABASE_BACKED.removeprefix("^") + ")")  # (include() ORs)


def _gateway(sim_url: str, db: Path | None) -> ServerThread:
    doc = admin_config(sim_url, None if db is None else str(db))
    doc["routers"].append(escalating_router("esc"))
    app = create_app(parse_config(doc), env={"TIERGATE_ADMIN_TOKEN": ADMIN})
    return ServerThread(app)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with ServerThread(create_sim_app()) as sim:
        yield sim.url


@pytest.fixture(scope="module")
def gateway_url(sim_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _gateway(sim_url, tmp_path_factory.mktemp("schemathesis") / "tg.db") as gw:
        _seed_traffic(gw.url)
        yield gw.url


@pytest.fixture(scope="module")
def no_database_url(sim_url: str) -> Iterator[str]:
    with _gateway(sim_url, None) as gw:
        yield gw.url


def _seed_traffic(url: str) -> None:
    """Real requests first, so records, stats and sessions have rows to return."""
    with httpx.Client(base_url=url, headers=_bearer(TOKEN), timeout=30) as c:
        for model, extra in (
            ("orcarouter/coding", {}),
            ("orcarouter/esc", {"X-OrcaRouter-Tier": "strong"}),
            (WEAK, {}),
            (STRONG, {}),
        ):
            r = c.post(
                "/v1/chat/completions",
                headers={"X-OrcaRouter-Session-Id": "fuzz-seed", **extra},
                json={"model": model, "messages": [{"role": "user", "content": "hello"}]},
            )
            assert r.status_code == 200, r.text


def test_live_document_is_what_is_fuzzed(gateway_url: str) -> None:
    live = httpx.get(f"{gateway_url}/openapi.json", timeout=10).json()
    assert live == openapi_document()
    operations = sum(len(item) for item in live["paths"].values())
    assert len(list(schema.get_all_operations())) == operations


@schema.parametrize()
def test_api(case: Case, gateway_url: str) -> None:
    token = ADMIN if case.path.startswith("/admin/") else TOKEN
    response = case.call_and_validate(base_url=gateway_url, headers=_bearer(token))
    check_response(case.path, response, ALLOWED_5XX)


@no_database_schema.parametrize()
def test_api_without_database(case: Case, no_database_url: str) -> None:
    response = case.call_and_validate(base_url=no_database_url, headers=_bearer(ADMIN))
    check_response(case.path, response, NO_DATABASE_5XX)
    if response.status_code < 400:  # only a refusal before any query may succeed
        pytest.fail(f"{case.method} {case.path} answered {response.status_code} without a DB")


def check_response(path: str, response: Any, allowed_5xx: frozenset[tuple[int, str]]) -> None:
    """The promises every response keeps, beyond the schema."""
    status, text = response.status_code, response.text
    assert "Traceback" not in text and 'File "' not in text, text[:500]
    leaked = [s for s in SECRETS if s in text]
    assert not leaked, f"{len(leaked)} secret(s) in the response"
    if status < 400:
        return
    content_type = response.headers.get("content-type", [""])[0]
    assert content_type.startswith("application/json"), (status, content_type)
    body = response.json()
    if path.startswith("/admin/"):
        assert set(body) == {"error"}, body
        err = body["error"]
        assert {"message", "type", "code"} <= set(err), err
    elif path == "/v1/messages":
        assert body["type"] == "error", body
        err = body["error"]
    else:
        err = body["error"]
    assert isinstance(err["message"], str) and isinstance(err["type"], str), body
    if status >= 500:
        assert (status, err.get("code")) in allowed_5xx, (status, text[:500])
