"""Tier metadata on the request body: validate it, take it out, classify the turn.

Two shapes (seeds/session-tiers.md):

- managed: a router model (`auto:<name>`, `orcarouter/<name>`, `router/<name>`)
  with top-level `session_tier: {session, lane, approved_model, approved_tier}`;
- public: `roleplay:<name>` with top-level `session_id` and
  `routing.session_tier: {lane, approved_model, approved_tier}`.

The metadata is removed here, before the body is parsed into the neutral model,
so no upstream ever sees it, also when the feature is off (`strip_session_tier`).
A concrete model or a pinned routing mode stays caller-selected: its metadata
is still validated and removed, but the turn acquires no binding. Error
messages name fields, never the values sent.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from tiergate.lanes.errors import invalid

log = logging.getLogger(__name__)

Kind = Literal["managed", "public"]

LANES = ("main", "delegation", "aux")
MANAGED_PREFIXES = ("auto:", "orcarouter/", "router/")
PUBLIC_PREFIX = "roleplay:"
#: `routing.mode` values that pin the route to the caller's choice.
PINNED_ROUTING_MODES = frozenset({"pinned"})

MANAGED_KEYS = frozenset({"session", "lane", "approved_model", "approved_tier"})
PUBLIC_KEYS = frozenset({"lane", "approved_model", "approved_tier"})
MIN_TIER, MAX_TIER = 0, 100
MAX_SESSION_CHARS = 512
MAX_MODEL_CHARS = 256

_ROUTER_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_MODEL = re.compile(r"[^\x00-\x20\x7f]+")  # printable, no whitespace


@dataclass(frozen=True, slots=True)
class TierTurn:
    """One opted-in request's approval, as sent by the orchestrator.

    `session` is the caller's raw session id: kept only in memory to derive the
    lane scope, and excluded from repr so it cannot leak into a log line.
    """

    kind: Kind
    router: str
    lane: str
    approved_model: str
    approved_tier: int
    session: str = field(repr=False)


def classify_model(model: object) -> tuple[Kind, str] | None:
    """(kind, router name) for a router or roleplay model; None for a concrete model."""
    if not isinstance(model, str):
        return None
    for prefix in MANAGED_PREFIXES:
        if model.startswith(prefix) and _ROUTER_NAME.fullmatch(model[len(prefix) :]):
            return "managed", model[len(prefix) :]
    if model.startswith(PUBLIC_PREFIX) and _ROUTER_NAME.fullmatch(model[len(PUBLIC_PREFIX) :]):
        return "public", model[len(PUBLIC_PREFIX) :]
    return None


def extract_session_tier(
    body: dict[str, Any], model: str | None = None, *, pinned: bool = False
) -> tuple[dict[str, Any], TierTurn | None]:
    """Return (body without tier metadata, the turn or None).

    Without metadata the very same body object comes back. `model` defaults to
    `body["model"]`; `pinned` lets the pipeline report a pin it detected itself.
    Raises SessionTierError 400 invalid_session_tier for any malformed metadata.
    Call this only when the feature is enabled; when it is off, use
    `strip_session_tier`.
    """
    routing = body.get("routing")
    has_managed = "session_tier" in body
    has_public = isinstance(routing, dict) and "session_tier" in routing
    if not has_managed and not has_public:
        return body, None

    cleaned = dict(body)
    if has_managed and has_public:
        raise invalid("Send either session_tier or routing.session_tier, not both")
    if has_managed:
        meta = cleaned.pop("session_tier")
        _check_keys(meta, MANAGED_KEYS, "session_tier")
        session = _session(meta["session"], "session_tier.session")
    else:
        assert isinstance(routing, dict)
        rest = dict(routing)
        meta = rest.pop("session_tier")
        if rest:
            cleaned["routing"] = rest
        else:
            del cleaned["routing"]
        _check_keys(meta, PUBLIC_KEYS, "routing.session_tier")
        if "session_id" not in cleaned:
            raise invalid("routing.session_tier requires a top-level session_id")
        session = _session(cleaned.pop("session_id"), "session_id")
    where = "session_tier" if has_managed else "routing.session_tier"
    lane = meta["lane"]
    if not isinstance(lane, str) or lane not in LANES:
        raise invalid(f"{where}.lane must be one of main, delegation, aux")
    approved_model = meta["approved_model"]
    if (
        not isinstance(approved_model, str)
        or len(approved_model) > MAX_MODEL_CHARS
        or not _MODEL.fullmatch(approved_model)
    ):
        raise invalid(
            f"{where}.approved_model must be a model name of 1-{MAX_MODEL_CHARS} "
            "printable characters without spaces"
        )
    tier = meta["approved_tier"]
    if isinstance(tier, bool) or not isinstance(tier, int) or not MIN_TIER <= tier <= MAX_TIER:
        raise invalid(f"{where}.approved_tier must be an integer from {MIN_TIER} to {MAX_TIER}")

    classified = classify_model(model if model is not None else body.get("model"))
    if classified is None:
        return cleaned, None  # a concrete model is caller-selected: never acquires a binding
    kind, router = classified
    if kind == "managed" and has_public:
        raise invalid("A router model takes top-level session_tier, not routing.session_tier")
    if kind == "public" and has_managed:
        raise invalid("A roleplay model takes routing.session_tier with session_id")
    if pinned or _pinned(cleaned.get("routing")):
        return cleaned, None  # a pinned route is caller-selected too
    return cleaned, TierTurn(
        kind=kind,
        router=router,
        lane=lane,
        approved_model=approved_model,
        approved_tier=tier,
        session=session,
    )


def strip_session_tier(body: dict[str, Any]) -> dict[str, Any]:
    """The body without the tier metadata, unvalidated: what the feature does when it
    is off. Both shapes lose exactly what `extract_session_tier` takes out: managed
    `session_tier`; public (roleplay) `routing.session_tier` and its top-level
    `session_id`, the raw session id, which a provider would otherwise receive
    (issue #28). Logged once per process, without values."""
    routing = body.get("routing")
    has_public = isinstance(routing, dict) and "session_tier" in routing
    if "session_tier" not in body and not has_public:
        return body
    cleaned = dict(body)
    cleaned.pop("session_tier", None)
    if has_public:
        assert isinstance(routing, dict)
        cleaned.pop("session_id", None)
        rest = {k: v for k, v in routing.items() if k != "session_tier"}
        if rest:
            cleaned["routing"] = rest
        else:
            del cleaned["routing"]
    global _ignored_logged
    if not _ignored_logged:
        _ignored_logged = True
        log.info(
            "session tier metadata received while SESSION_TIER_MODE is off: removed and "
            "ignored (logged once)"
        )
    return cleaned


_ignored_logged = False


def _check_keys(meta: object, expected: frozenset[str], where: str) -> None:
    if not isinstance(meta, dict) or set(meta) != expected:
        raise invalid(
            f"{where} must be an object with exactly the keys {', '.join(sorted(expected))}"
        )


def _session(value: object, where: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_SESSION_CHARS:
        raise invalid(
            f"{where} must be a non-empty string of at most {MAX_SESSION_CHARS} characters"
        )
    return value


def _pinned(routing: object) -> bool:
    if not isinstance(routing, dict):
        return False
    mode = routing.get("mode")
    return isinstance(mode, str) and mode in PINNED_ROUTING_MODES
