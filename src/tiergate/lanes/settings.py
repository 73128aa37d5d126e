"""SESSION_TIER_MODE / SESSION_TIER_TTL_SECONDS / SESSION_TIER_LEASE_SECONDS: the
feature switch, the lane TTL and the in-flight lease's lifetime.

Rules (seeds/session-tiers.md): the feature is off by default; the environment
wins over the config keys `session_tiers.mode` / `session_tiers.ttl_seconds`;
an empty setting is treated as unset, so the next layer (config, then the
built-in default) applies; a malformed mode or TTL disables the feature and
logs exactly one warning that names the setting but never echoes its value
(a typo may carry a secret pasted into the wrong variable).

The lease is short on purpose (issue #27): its holder renews it while the turn
runs (lanes/renew.py), so a gateway killed mid-turn frees the lane within one
lease lifetime instead of the 30-minute lane TTL. The lane's binding keeps the TTL.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

ENV_MODE = "SESSION_TIER_MODE"
ENV_TTL = "SESSION_TIER_TTL_SECONDS"
ENV_LEASE = "SESSION_TIER_LEASE_SECONDS"
CONFIG_MODE = "session_tiers.mode"
CONFIG_TTL = "session_tiers.ttl_seconds"
CONFIG_LEASE = "session_tiers.lease_seconds"

DEFAULT_TTL_SECONDS = 1800
#: A dead holder's lease lapses within this long; the holder renews it every third.
DEFAULT_LEASE_SECONDS = 60
MIN_TTL_SECONDS = 1
MAX_TTL_SECONDS = 86400
MODES = ("off", "sticky")

# ASCII digits only: str.isdigit() and int() accept other scripts' digits and
# signs/whitespace, which the spec does not allow. Ten digits bound the parse.
_TTL_RE = re.compile(r"[0-9]{1,10}", re.ASCII)


@dataclass(frozen=True, slots=True)
class SessionTierSettings:
    """Whether sticky session tiers are on, the idle TTL of a lane, and the lifetime
    of an in-flight lease between renewals."""

    enabled: bool = False
    ttl_seconds: int = DEFAULT_TTL_SECONDS
    lease_seconds: int = DEFAULT_LEASE_SECONDS

    @property
    def lease(self) -> int:
        """The lease's lifetime: never longer than the lane it is a lease on."""
        return min(self.lease_seconds, self.ttl_seconds)

    @classmethod
    def from_env_and_config(
        cls,
        env: Mapping[str, str],
        mode: object = None,
        ttl: object = None,
        lease: object = None,
    ) -> SessionTierSettings:
        """Resolve the settings; `mode`/`ttl`/`lease` are the raw config values
        (None = unset).

        Config values are accepted raw (str or int) so a malformed config value
        disables the feature with the same single warning as a malformed
        environment value, instead of failing differently per source.
        """
        settings, warning = resolve_settings(env, mode, ttl, lease)
        if warning is not None:
            log.warning("%s", warning)
        return settings


def resolve_settings(
    env: Mapping[str, str], mode: object = None, ttl: object = None, lease: object = None
) -> tuple[SessionTierSettings, str | None]:
    """The settings and the warning that disabled them, if any (pure).

    `tiergate config check` prints the same warning `serve` logs, so the two
    never disagree about whether session tiers will be on.
    """
    mode_source, mode_value = _pick(env.get(ENV_MODE), ENV_MODE, mode, CONFIG_MODE)
    ttl_source, ttl_value = _pick(env.get(ENV_TTL), ENV_TTL, ttl, CONFIG_TTL)
    lease_source, lease_value = _pick(env.get(ENV_LEASE), ENV_LEASE, lease, CONFIG_LEASE)

    malformed: list[str] = []
    enabled = False
    if mode_value is not None:
        if isinstance(mode_value, str) and mode_value in MODES:
            enabled = mode_value == "sticky"
        else:
            malformed.append(mode_source)
    ttl_seconds = DEFAULT_TTL_SECONDS
    if ttl_value is not None:
        parsed = _parse_ttl(ttl_value)
        if parsed is None:
            malformed.append(ttl_source)
        else:
            ttl_seconds = parsed
    lease_seconds = DEFAULT_LEASE_SECONDS
    if lease_value is not None:
        parsed = _parse_ttl(lease_value)
        if parsed is None:
            malformed.append(lease_source)
        else:
            lease_seconds = parsed

    if malformed:
        # Names the settings only: never the offending value.
        warning = (
            f"session tiers disabled: malformed {' and '.join(malformed)} (mode must be off"
            f" or sticky; TTL and lease must be ASCII digits, {MIN_TTL_SECONDS}-{MAX_TTL_SECONDS}"
            " seconds)"
        )
        return SessionTierSettings(enabled=False, ttl_seconds=DEFAULT_TTL_SECONDS), warning
    return SessionTierSettings(enabled, ttl_seconds, lease_seconds), None


def _pick(
    env_value: str | None, env_name: str, cfg_value: object, cfg_name: str
) -> tuple[str, object]:
    """Environment first, then config; an empty value counts as unset."""
    if env_value is not None and env_value != "":
        return env_name, env_value
    if cfg_value is not None and cfg_value != "":
        return cfg_name, cfg_value
    return "", None


def _parse_ttl(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        seconds = value
    elif isinstance(value, str) and _TTL_RE.fullmatch(value):
        seconds = int(value)
    else:
        return None
    return seconds if MIN_TTL_SECONDS <= seconds <= MAX_TTL_SECONDS else None
