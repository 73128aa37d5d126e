"""OpenAI `POST /v1/embeddings` for the simulator.

Vectors are deterministic (seeded by the model and the input text) and
unit-length, so a test can check that the same text gives the same vector and
that a gateway relays them untouched. Usage is billed like a real provider:
`prompt_tokens` = `total_tokens` = the tokens of every input. Armed status
faults apply, so retries across channels are testable.
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from tiergate.core.tokens import count_tokens
from tiergate.sim.handler import MISSING_KEY, error_response
from tiergate.sim.openai_wire import OpenAIWire
from tiergate.sim.state import SimState

EMBEDDING_MODELS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072}
MAX_INPUTS = 2048


def _vector(model: str, text: str, dimensions: int) -> list[float]:
    seed = hashlib.blake2b(f"{model}\x00{text}".encode(), digest_size=32).digest()
    raw: list[float] = []
    block = seed
    while len(raw) < dimensions:
        block = hashlib.blake2b(block, digest_size=64).digest()
        raw.extend((b - 127.5) / 127.5 for b in block)
    raw = raw[:dimensions]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return [round(x / norm, 6) for x in raw]


def _inputs(raw: Any) -> list[str] | None:
    """The inputs as texts (token-id arrays become their ids' text), or None if invalid."""
    if isinstance(raw, str):
        return [raw]
    if not isinstance(raw, list) or not raw or len(raw) > MAX_INPUTS:
        return None
    if all(isinstance(x, int) and not isinstance(x, bool) for x in raw):
        return [" ".join(map(str, raw))]
    if all(isinstance(x, str) for x in raw):
        return list(raw)
    if all(isinstance(x, list) and all(isinstance(i, int) for i in x) for x in raw):
        return [" ".join(map(str, x)) for x in raw]
    return None


async def serve_embeddings(state: SimState, wire: OpenAIWire, request: Request) -> Response:
    api_key = wire.api_key(request)
    if not api_key:
        return error_response(wire, 401, MISSING_KEY["openai"])
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        return error_response(wire, 400, "We could not parse the JSON body of your request.")
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        return error_response(wire, 400, "you must provide a model parameter", "model")
    model = body["model"]
    size = EMBEDDING_MODELS.get(model)
    if size is None:
        return error_response(wire, 400, f"{model} does not support embeddings", "model")
    texts = _inputs(body.get("input"))
    if texts is None or any(not t for t in texts):
        return error_response(wire, 400, "'input' must be a non-empty string or array", "input")
    dimensions = body.get("dimensions", size)
    if not isinstance(dimensions, int) or not 1 <= dimensions <= size:
        return error_response(wire, 400, f"dimensions must be between 1 and {size}", "dimensions")
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        return error_response(wire, 400, "encoding_format must be float or base64")

    fault = state.faults.take("openai", api_key, model)
    if fault is not None and fault.kind == "status":
        state.stats.record_fault("openai", api_key, model)
        return error_response(wire, fault.status, fault.message or "Simulated upstream error.")

    tokens = sum(count_tokens(t) for t in texts)
    state.stats.record(
        "openai",
        api_key,
        model,
        prompt_tokens=tokens,
        cache_read=0,
        cache_write=0,
        cache_write_1h=0,
        output_tokens=0,
    )
    data = []
    for i, text in enumerate(texts):
        vector = _vector(model, text, dimensions)
        value: list[float] | str = vector
        if encoding == "base64":
            value = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "index": i, "embedding": value})
    reply = {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    return Response(orjson.dumps(reply), media_type="application/json")
