"""SESSION_TIER_MODE / SESSION_TIER_TTL_SECONDS resolution (seeds/session-tiers.md)."""

from __future__ import annotations

import logging

import pytest

from tiergate.lanes.settings import SessionTierSettings

LOGGER = "tiergate.lanes.settings"


def resolve(env: dict[str, str], mode: object = None, ttl: object = None) -> SessionTierSettings:
    return SessionTierSettings.from_env_and_config(env, mode, ttl)


def warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING]


def test_defaults_are_off_and_1800(caplog: pytest.LogCaptureFixture) -> None:
    assert resolve({}) == SessionTierSettings(enabled=False, ttl_seconds=1800)
    assert warnings(caplog) == []


def test_sticky_enables() -> None:
    assert resolve({"SESSION_TIER_MODE": "sticky"}) == SessionTierSettings(True, 1800)
    assert resolve({}, mode="sticky", ttl=60) == SessionTierSettings(True, 60)


def test_environment_wins_over_config() -> None:
    env = {"SESSION_TIER_MODE": "off", "SESSION_TIER_TTL_SECONDS": "90"}
    assert resolve(env, mode="sticky", ttl=600) == SessionTierSettings(False, 90)
    env = {"SESSION_TIER_MODE": "sticky", "SESSION_TIER_TTL_SECONDS": "600"}
    assert resolve(env, mode="off", ttl=30) == SessionTierSettings(True, 600)


def test_empty_uses_the_default(caplog: pytest.LogCaptureFixture) -> None:
    env = {"SESSION_TIER_MODE": "", "SESSION_TIER_TTL_SECONDS": ""}
    assert resolve(env) == SessionTierSettings(False, 1800)
    # Empty counts as unset, so the config layer still applies beneath it.
    assert resolve(env, mode="sticky", ttl=42) == SessionTierSettings(True, 42)
    assert resolve({}, mode="", ttl="") == SessionTierSettings(False, 1800)
    assert warnings(caplog) == []


@pytest.mark.parametrize("ttl", ["1", "86400", "0060"])
def test_ttl_bounds_accepted(ttl: str) -> None:
    got = resolve({"SESSION_TIER_MODE": "sticky", "SESSION_TIER_TTL_SECONDS": ttl})
    assert got == SessionTierSettings(True, int(ttl))


@pytest.mark.parametrize(
    "env",
    [
        {"SESSION_TIER_MODE": "Sticky"},
        {"SESSION_TIER_MODE": "sticky "},
        {"SESSION_TIER_MODE": "on"},
        {"SESSION_TIER_MODE": "sticky", "SESSION_TIER_TTL_SECONDS": "0"},
        {"SESSION_TIER_MODE": "sticky", "SESSION_TIER_TTL_SECONDS": "86401"},
        {"SESSION_TIER_MODE": "sticky", "SESSION_TIER_TTL_SECONDS": "-5"},
        {"SESSION_TIER_MODE": "sticky", "SESSION_TIER_TTL_SECONDS": "+5"},
        {"SESSION_TIER_MODE": "sticky", "SESSION_TIER_TTL_SECONDS": " 60"},
        {"SESSION_TIER_MODE": "sticky", "SESSION_TIER_TTL_SECONDS": "1e3"},
        {"SESSION_TIER_MODE": "sticky", "SESSION_TIER_TTL_SECONDS": "60.0"},
        # Arabic-Indic and superscript digits pass str.isdigit(); not ASCII digits.
        {"SESSION_TIER_MODE": "sticky", "SESSION_TIER_TTL_SECONDS": "\u0666\u0660"},
        {"SESSION_TIER_MODE": "sticky", "SESSION_TIER_TTL_SECONDS": "6\u00b2"},
        {"SESSION_TIER_MODE": "sticky", "SESSION_TIER_TTL_SECONDS": "9" * 40},
    ],
)
def test_malformed_disables_with_one_warning_without_the_value(
    env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    assert resolve(env) == SessionTierSettings(False, 1800)
    [warning] = warnings(caplog)
    text = warning.getMessage()
    # The text does not depend on the value: another malformed value in the
    # same setting logs exactly the same words (short values like "0" would
    # make a plain substring check meaningless).
    other = {k: ("sticky" if v == "sticky" else "zz-unique-marker") for k, v in env.items()}
    caplog.clear()
    resolve(other)
    [again] = warnings(caplog)
    assert again.getMessage() == text
    assert "zz-unique-marker" not in text
    for name, value in env.items():
        if value != "sticky":
            assert name in text
            if len(value) > 3:
                assert value not in text


def test_both_malformed_still_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    env = {"SESSION_TIER_MODE": "STICKY-x", "SESSION_TIER_TTL_SECONDS": "abc-secret"}
    assert resolve(env) == SessionTierSettings(False, 1800)
    [warning] = warnings(caplog)
    assert "STICKY-x" not in warning.getMessage()
    assert "abc-secret" not in warning.getMessage()


def test_malformed_ttl_warns_even_when_mode_off(caplog: pytest.LogCaptureFixture) -> None:
    assert resolve({"SESSION_TIER_TTL_SECONDS": "soon"}) == SessionTierSettings(False, 1800)
    assert len(warnings(caplog)) == 1


@pytest.mark.parametrize(
    ("mode", "ttl"), [("yes", 60), ("sticky", 0), ("sticky", 86401), ("sticky", True), (3, 60)]
)
def test_malformed_config_values_disable_too(
    mode: object, ttl: object, caplog: pytest.LogCaptureFixture
) -> None:
    assert resolve({}, mode=mode, ttl=ttl) == SessionTierSettings(False, 1800)
    [warning] = warnings(caplog)
    assert "session_tiers." in warning.getMessage()


def test_lease_seconds_default_config_and_environment() -> None:
    """The in-flight lease (issue #27): 60 s by default, config or environment
    (which wins), never longer than the lane TTL."""
    on = {"SESSION_TIER_MODE": "sticky"}
    assert resolve(on).lease_seconds == 60
    got = SessionTierSettings.from_env_and_config(on, None, None, 5)
    assert got == SessionTierSettings(True, 1800, 5)
    env = {**on, "SESSION_TIER_LEASE_SECONDS": "7"}
    assert SessionTierSettings.from_env_and_config(env, None, 30, "5").lease_seconds == 7
    assert SessionTierSettings.from_env_and_config(on, None, 30, 90).lease == 30


@pytest.mark.parametrize("lease", ["0", "-1", "1.5", "soon-secret", "86401"])
def test_malformed_lease_disables_with_one_warning(
    lease: str, caplog: pytest.LogCaptureFixture
) -> None:
    env = {"SESSION_TIER_MODE": "sticky", "SESSION_TIER_LEASE_SECONDS": lease}
    assert resolve(env) == SessionTierSettings(False, 1800)
    [warning] = warnings(caplog)
    assert "SESSION_TIER_LEASE_SECONDS" in warning.getMessage()
    assert "soon-secret" not in warning.getMessage()
