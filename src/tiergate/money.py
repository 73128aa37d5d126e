"""USD amounts as people read them in messages and logs.

Two decimals from $1 up; below that, three significant digits (at most 8
decimals) with trailing zeros dropped down to two decimals, so a $0.0003
budget reads "$0.0003", not "$0.00". The same digits as the dashboard's
`usd()` (api/dashboard/static/format.js), which keeps the zeros.
"""

from __future__ import annotations

import math

MAX_DECIMALS = 8


def usd(value: float) -> str:
    """`0.0003` -> "$0.0003", `0.1234` -> "$0.123", `1234.5` -> "$1,234.50"."""
    if not math.isfinite(value):
        return f"${value}"
    sign = "-" if value < 0 else ""
    a = abs(value)
    if a >= 1 or a == 0:
        return f"{sign}${a:,.2f}"
    decimals = min(MAX_DECIMALS, max(2, 2 - math.floor(math.log10(a))))
    text = f"{a:.{decimals}f}"
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0").ljust(2, "0")
    if whole == "1":  # rounded up to a dollar (0.9999 -> 1.00)
        return f"{sign}$1.00"
    return f"{sign}${whole}.{frac}"
