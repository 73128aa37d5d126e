"""What the dashboard's browser tests share: where Chromium is, how it is
launched, whether this machine can drive it, and Python copies of the
dashboard's number formats (static/format.js) to compare what a page shows
with the admin API's JSON.

A test module skips itself when `MISSING` is set and `REQUIRED` is not (a
newcomer's machine without Chromium); under TIERGATE_REQUIRE_SERVICES=1 (CI)
its tests fail instead.
"""

from __future__ import annotations

import math
import os
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("TIERGATE_CHROMIUM", "/usr/bin/chromium")  # Debian's package
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "dashboard"


def missing_browser() -> str | None:
    """What this machine lacks to drive Chromium, or None."""
    missing = []
    if not os.access(CHROMIUM, os.X_OK):
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright Python package (pip install playwright)")
    return "dashboard browser tests need " + " and ".join(missing) if missing else None


MISSING = missing_browser()
REQUIRED = os.environ.get("TIERGATE_REQUIRE_SERVICES") == "1"
SKIP_REASON = f"{MISSING}; set TIERGATE_REQUIRE_SERVICES=1 to make this fail"


def require_browser() -> None:
    """Fail the calling test when the browser is required (CI) but missing."""
    if MISSING:
        pytest.fail(f"{MISSING}, and TIERGATE_REQUIRE_SERVICES=1", pytrace=False)


# ---- the dashboard's number formats (static/format.js) ----------------------------------

DASH = "—"


def js_fixed(x: float, digits: int) -> str:
    """Number.prototype.toFixed: the exact binary value, ties away from zero."""
    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def usd(v: float | None) -> str:
    if v is None:
        return DASH
    a = abs(v)
    if a == 0:
        return "$0.00"
    sign = "-" if v < 0 else ""
    if a >= 1:
        whole, frac = js_fixed(a, 2).split(".")
        return f"{sign}${int(whole):,}.{frac}"
    return f"{sign}${js_fixed(a, min(8, max(2, 2 - math.floor(math.log10(a)))))}"


def pct(v: float | None) -> str:
    return DASH if v is None else js_fixed(v * 100, 1) + "%"


def pct100(v: float | None) -> str:
    return DASH if v is None else js_fixed(v, 1) + "%"


def num(v: float | None) -> str:
    return DASH if v is None else f"{math.floor(v + 0.5):,}"


def dec(v: float | None) -> str:
    return DASH if v is None else js_fixed(v, 2)
