"""/openapi.json: an OpenAPI 3.1 document that describes exactly the routes the
app serves, with every reference resolvable (what a fuzzer needs to start)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.routing import Route

from servers import ServerThread, gateway_config
from tiergate.api.openapi import openapi_document
from tiergate.app import create_app
from tiergate.config_load import parse_config

#: Served but deliberately undocumented: the OpenAI path alias without /v1.
UNDOCUMENTED = {("POST", "/chat/completions")}


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return openapi_document()


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref":
                yield v
            else:
                yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def test_document_is_openapi_3_1_with_resolvable_refs(doc: dict[str, Any]) -> None:
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["title"] == "tiergate"
    schemas = doc["components"]["schemas"]
    refs = set(_refs(doc))
    assert refs
    for ref in refs:
        assert ref.startswith("#/components/schemas/"), ref
        assert ref.rsplit("/", 1)[1] in schemas, ref
    ids = [op["operationId"] for item in doc["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids))


def test_every_served_route_is_documented_and_nothing_else(doc: dict[str, Any]) -> None:
    app = create_app(parse_config(gateway_config("http://127.0.0.1:9")))
    served = {
        (method, route.path)
        for route in app.routes
        if isinstance(route, Route)
        for method in (route.methods or set()) - {"HEAD"}
    }
    documented = {(m.upper(), path) for path, item in doc["paths"].items() for m in item}
    assert documented == served - UNDOCUMENTED - {("GET", "/openapi.json"), ("GET", "/metrics")}
    for required in [
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/responses",
        "/v1/models",
        "/v1/feedback",
        "/v1/orcarouter/explain",
        "/healthz",
        "/readyz",
    ]:
        assert required in doc["paths"]


def test_path_parameters_are_declared_and_admin_is_secured(doc: dict[str, Any]) -> None:
    for path, item in doc["paths"].items():
        names = set(re.findall(r"{(\w+)}", path))
        for method, op in item.items():
            declared = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
            assert declared == names, (method, path)
            if path.startswith("/admin/"):
                assert op["security"] == [{"adminToken": []}]
                assert {"200", "201"} & set(op["responses"])
                assert {"401", "default"} <= set(op["responses"])


def test_config_bodies_come_from_the_config_models(doc: dict[str, Any]) -> None:
    schemas = doc["components"]["schemas"]
    channel = schemas["ChannelConfig"]
    assert set(channel["required"]) == {"name", "type"}
    assert channel["properties"]["type"]["enum"] == [
        "openai",
        "anthropic",
        "gemini",
        "deepseek",
        "openai_compatible",
    ]
    patch = schemas["ChannelPatch"]
    assert "required" not in patch and "keys" not in patch["properties"]
    assert "force" in schemas["RouterPatch"]["properties"]
    esc = schemas["EscalationConfig"]["properties"]
    assert {"rollout_percent", "gate_min_labels", "gate_min_precision"} <= set(esc)


def test_served_over_http() -> None:
    app = create_app(parse_config(gateway_config("http://127.0.0.1:9")))
    with ServerThread(app) as gw:
        r = httpx.get(f"{gw.url}/openapi.json")
    assert r.status_code == 200 and r.json() == openapi_document()
