"""Small builders for the OpenAPI document's JSON Schemas, shared by the inbound
and admin parts (tiergate.api.openapi, tiergate.api.openapi_inbound)."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(t: str) -> Schema:
    return {"type": [t, "null"]}


def or_null(schema: Schema) -> Schema:
    """`schema`, or JSON null (the gateway treats an explicit null as absent)."""
    return {"anyOf": [schema, {"type": "null"}]}


def const(value: str) -> Schema:
    return {"type": "string", "const": value}


def array(items: Schema, **constraints: Any) -> Schema:
    return {"type": "array", "items": items, **constraints}


def obj(
    props: dict[str, Schema], required: list[str] | None = None, *, open_: bool = True
) -> Schema:
    out: Schema = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    if not open_:
        out["additionalProperties"] = False
    return out


def list_of(item: Schema) -> Schema:
    return obj({"items": {"type": "array", "items": item}}, ["items"])


def error_responses(*statuses: int) -> dict[str, Any]:
    described = {
        400: "Invalid request (problems lists each one)",
        401: "Missing or invalid token",
        404: "Unknown entity",
        409: "Conflict (exists, go-live gate closed, duplicate)",
        413: "Body too large",
        429: "Rate limited",
        503: "Disabled or a backend is unavailable",
    }
    out = {
        str(s): {"description": described.get(s, "Error"), "content": json_content(ref("Error"))}
        for s in statuses
    }
    out["default"] = {"description": "Error", "content": json_content(ref("Error"))}
    return out


def json_content(schema: Schema) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


ERROR = obj(
    {
        "error": obj(
            {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "code": nullable("string"),
                "problems": {"type": "array", "items": {"type": "string"}},
            },
            ["message", "type"],
        )
    },
    ["error"],
)
