"""When a router has no candidate left: say truthfully why, and keep the safety net
to the same eligibility as every other candidate.

Three different situations used to share one answer (503 `no_capable_model`):

- the prompt does not fit any allowed model's context window: the client's
  mistake, 400 `context_length_exceeded` (OpenAI's code; Anthropic renders 400 as
  `invalid_request_error`);
- models that could serve it exist, but every one of them is cooling down after
  upstream failures: 503 `upstream_unavailable` with `Retry-After` (or 429 when
  every cooling key was rate limited), so a client backs off instead of giving up;
- no allowed model has what the request needs (tools, JSON mode, images): 503
  `no_capable_model`, as before.

Pure over the config and the distributor's health; called by the planner.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from tiergate.config import ModelConfig, RouterConfig
from tiergate.core.model import ChatRequest
from tiergate.gateway.errors import GatewayError
from tiergate.routing.distributor import Distributor
from tiergate.routing.strategies import allowed, capable, fits_context, supports_features


def safety_net(
    router: RouterConfig,
    ranked: list[str],
    distributor: Distributor,
    req: ChatRequest,
    prompt_tokens: int,
    has_images: bool | None,
) -> str | None:
    """The router's `default_model`, to append after the ranked candidates, only when
    it is not among them, is live, and could serve this request like any other
    candidate (tools, JSON, images, context); else None."""
    default = router.default_model
    if not default or default in ranked or not distributor.is_live(default):
        return None
    model = distributor.model_config(default)
    if model is None or not capable(model, req, prompt_tokens, has_images):
        return None
    return default


def no_route_error(
    router: RouterConfig,
    exposed: Mapping[str, ModelConfig],
    distributor: Distributor,
    req: ChatRequest,
    prompt_tokens: int,
    has_images: bool | None,
) -> GatewayError:
    """The refusal for a router request that has no live, capable candidate."""
    names = [n for n in exposed if allowed(router, n)]
    if router.default_model and router.default_model in exposed:
        names.append(router.default_model)
    featured = [n for n in names if supports_features(exposed[n], req, has_images)]
    if featured and not any(fits_context(exposed[n], req, prompt_tokens) for n in featured):
        largest = max(exposed[n].context_window for n in featured)
        wanted = prompt_tokens + (req.max_tokens or 0)
        return GatewayError(
            400,
            f"This request needs about {wanted} tokens (prompt and max_tokens); the "
            f"largest context window of router '{router.name}' is {largest} tokens",
            "context_length_exceeded",
        )
    fitting = [n for n in featured if fits_context(exposed[n], req, prompt_tokens)]
    if fitting:
        return upstream_unavailable(distributor, fitting)
    return GatewayError(
        503, f"No model of router '{router.name}' can serve this request", "no_capable_model"
    )


def upstream_unavailable(distributor: Distributor, models: list[str]) -> GatewayError:
    """Every channel of `models` is cooling down (or its keys disabled) after upstream
    failures: 429 when they were all rate limits, else 503, with Retry-After when a
    key will be tried again."""
    status, wait = distributor.unavailable_reason(models)
    headers = {} if wait is None else {"retry-after": str(max(1, math.ceil(wait)))}
    if status == 429:
        return GatewayError(
            429, "Every upstream key is rate limited; retry later", "rate_limit_exceeded", headers
        )
    return GatewayError(
        503,
        "The upstream providers are unavailable after recent failures; retry later",
        "upstream_unavailable",
        headers,
    )
