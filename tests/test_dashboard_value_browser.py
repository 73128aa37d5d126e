"""The dashboard's Value page in a real browser: Playwright drives Debian's
Chromium (headless) against a gateway with agent sessions from the simulator
whose outcomes CI posted to /v1/outcomes. It reads every number the page shows
(data-testid) and compares it with GET /admin/api/stats/escalation-value
formatted by the same rules (static/format.js), checks that the chart's point
sits at the router's (share, PGR), that the default-odds input re-scores, and
that a router without outcomes explains how to post them. The screenshot lands
in artifacts/dashboard/value.png.

Needs /usr/bin/chromium and the `playwright` Python package, as
tests/test_dashboard_browser.py does; skipped without them unless
TIERGATE_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from admin_support import ADMIN, STRONG, AdminClient, admin_config, chat, escalating_router, gateway
from browser_support import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    DASH,
    MISSING,
    REQUIRED,
    SKIP_REASON,
    dec,
    num,
    pct,
    require_browser,
)
from servers import TOKEN, ServerThread
from tiergate.sim.app import create_sim_app

if MISSING and not REQUIRED:
    pytest.skip(SKIP_REASON, allow_module_level=True)
with contextlib.suppress(ImportError):
    from playwright.sync_api import Browser, Page, ViewportSize, expect, sync_playwright


@pytest.fixture(scope="module", autouse=True)
def browser_required() -> None:
    """Required but missing: every test here fails, the rest of the suite runs."""
    require_browser()


VIEWPORT: ViewportSize = {"width": 1366, "height": 768}  # a laptop screen


EN_DASH = "\u2013"  # between an interval's ends


def interval(pair: list[float] | None, fmt: Any) -> str:
    """page_value.js's interval(): low, an en dash, high; a dash without one."""
    return DASH if not pair else f"{fmt(pair[0])}{EN_DASH}{fmt(pair[1])}"


def verdict(row: dict[str, Any]) -> str:
    """page_value.js's verdict(): above both baselines at its share, or which it misses."""
    if row["pgr"] is None:
        return "nothing to rescue"
    if row["pgr_minus_random"] is not None and row["pgr_minus_random"] <= 0:
        return "not above random"
    if row["pgr_minus_length_rule"] is not None and row["pgr_minus_length_rule"] <= 0:
        return "not above the length rule"
    ci = row.get("interval") or {}
    lows = [(ci.get(k) or [None])[0] for k in ("pgr_minus_random", "pgr_minus_length_rule")]
    if any(x is None or x <= 0 for x in lows):
        return "above both baselines on the point, not yet clear (95 %)"
    return "above random and the length rule (95 %)"


def test_formats_mirror_the_javascript_rules() -> None:
    assert pct(0.8073) == "80.7%" and pct(0.00125) == "0.1%" and num(8226) == "8,226"
    assert dec(0.305) == "0.30" and dec(1.0) == "1.00" and dec(None) == DASH  # binary 0.30499...
    assert interval([0.2, 0.4], dec) == f"0.20{EN_DASH}0.40" and interval(None, dec) == DASH


# ---- a gateway with sessions and their outcomes ----------------------------------------------


def run_session(
    gw: ServerThread,
    router: str,
    turns: int,
    strong_from: int | None = None,
    base_from: int | None = None,
) -> str:
    """A multi-turn agent session on one X-OrcaRouter-Session-Id. The client asks
    for strong at turn `strong_from` (sticky from there) and back to base at
    `base_from` (the escalation is cut off partway). Returns the session id."""
    session = f"value-{uuid.uuid4().hex[:10]}"
    messages: list[dict[str, Any]] = []
    strong = []
    for turn in range(1, turns + 1):
        messages.append({"role": "user", "content": f"Step {turn}: run the tests again"})
        headers: dict[str, str] = {}
        if turn == strong_from:
            headers = {"X-OrcaRouter-Tier": "strong"}
        elif turn == base_from:
            headers = {"X-OrcaRouter-Tier": "base"}
        r = chat(gw, f"orcarouter/{router}", session=session, messages=messages, headers=headers)
        assert r.status_code == 200, r.text
        strong.append(r.headers["x-orca-resolved-model"] == STRONG)
        messages.append(r.json()["choices"][0]["message"])
    want = [
        strong_from is not None and strong_from <= t and (base_from is None or t < base_from)
        for t in range(1, turns + 1)
    ]
    assert strong == want, (session, strong)
    return session


def post_outcome(gw: ServerThread, body: dict[str, Any]) -> None:
    r = httpx.post(
        f"{gw.url}/v1/outcomes",
        headers={"Authorization": f"Bearer {TOKEN}"},
        json=body,
        timeout=10,
    )
    assert r.status_code == 200, r.text


#: (router, turns, strong_from, base_from, resolved, strong_odds, task): "coding"
#: escalates the sessions it was losing (one cut off partway), "review" mostly the
#: ones that would have passed anyway (waste); None odds take the default.
SESSIONS: list[tuple[str, int, int | None, int | None, bool, float | None, str]] = [
    ("coding", 6, 2, None, False, None, "PROJ-1"),
    ("coding", 5, 3, None, False, 0.6, "PROJ-2"),
    ("coding", 4, None, None, True, None, "PROJ-3"),
    ("coding", 6, 2, 5, False, None, "PROJ-4"),
    ("coding", 3, None, None, False, 0.3, "PROJ-5"),
    ("coding", 5, 4, None, True, None, "PROJ-6"),
    ("coding", 4, None, None, True, None, "PROJ-6"),
    ("review", 4, 2, None, True, None, "REV-1"),
    ("review", 5, 4, None, False, None, "REV-2"),
    ("review", 3, None, None, False, None, "REV-3"),
    ("review", 4, 1, None, True, 0.9, "REV-4"),
    ("review", 6, None, None, False, None, "REV-5"),
]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("dashboard-value")
    # caps out of the way: every strong ask is served, so the test knows each session's turns
    routers = [
        escalating_router(name, share_cap_percent=100) for name in ("coding", "review", "quiet")
    ]
    with ServerThread(create_sim_app()) as sim:
        doc = admin_config(sim.url, str(folder / "tg.db"), routers=routers)
        doc["workspaces"][0]["escalation_share_cap_percent"] = 100
        with gateway(doc) as (gw, admin):
            for router, turns, strong_from, base_from, resolved, odds, task in SESSIONS:
                session = run_session(gw, router, turns, strong_from, base_from)
                body: dict[str, Any] = {"session_id": session, "resolved": resolved, "task": task}
                if odds is not None:
                    body["strong_odds"] = odds
                post_outcome(gw, body)
            run_session(gw, "coding", 2)  # served, never reported
            for _ in range(3):
                run_session(gw, "quiet", 2, strong_from=2)  # a router nobody reports on
            yield {"gw": gw, "admin": admin}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def page(env: dict[str, Any], browser: Browser) -> Iterator[Page]:
    """One signed-in tab for the whole module."""
    context = browser.new_context(viewport=VIEWPORT)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on(
        "console",
        lambda m: (
            errors.append(m.text)
            if m.type == "error" and "Failed to load resource" not in m.text
            else None
        ),
    )
    tab.goto(f"{env['gw'].url}/dashboard/")
    tab.get_by_test_id("login-token").fill(ADMIN)
    tab.get_by_test_id("login-submit").click()
    expect(tab.get_by_test_id("updated-at")).to_contain_text("Updated")
    yield tab
    assert errors == [], errors
    context.close()


def open_page(tab: Page, env: dict[str, Any], route: str) -> None:
    """Go to a page and wait until its first refresh has drawn the API's data."""
    tab.goto(f"{env['gw'].url}/dashboard/#/{route}")
    expect(tab.locator(f"#view[data-loaded='{route.split('?')[0]}']")).to_have_count(1)


def value_doc(admin: AdminClient, **params: Any) -> dict[str, Any]:
    r = admin.get("/stats/escalation-value", params=params)
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


def expect_router(tab: Page, row: dict[str, Any]) -> None:
    """Every number of one router's card, as the API's JSON formatted by format.js."""
    rid = f"value-{row['router']}"
    iv = row.get("interval") or {}
    cells = {
        "sessions": num(row["sessions"]),
        "tasks": num(row["instances"]),
        "resolved": num(row["resolved"]),
        "escalated": num(row["escalated"]),
        "turns": num(row["turns"]),
        "share": pct(row["strong_share"]),
        "pgr": dec(row["pgr"]),
        "random": dec(row["random"]),
        "length": dec(row["length_rule"]),
        "oracle": dec(row["oracle"]),
        "vs-random": dec(row["pgr_minus_random"]),
        "vs-length": dec(row["pgr_minus_length_rule"]),
        "waste": pct(row["waste"]),
        "cutoff": pct(row["cut_off"]),
        "default-odds": num(row["default_odds_sessions"]),
    }
    intervals = {
        "share": interval(iv.get("strong_share"), pct),
        "pgr": interval(iv.get("pgr"), dec),
        "random": interval(iv.get("random"), dec),
        "length": interval(iv.get("length_rule"), dec),
        "oracle": interval(iv.get("oracle"), dec),
        "vs-random": interval(iv.get("pgr_minus_random"), dec),
        "vs-length": interval(iv.get("pgr_minus_length_rule"), dec),
        "waste": interval(iv.get("waste"), pct),
        "cutoff": interval(iv.get("cut_off"), pct),
    }
    for key, want in cells.items():
        expect(tab.get_by_test_id(f"{rid}-{key}")).to_have_text(want)
    for key, want in intervals.items():
        expect(tab.get_by_test_id(f"{rid}-{key}-interval")).to_have_text(want)
    expect(tab.get_by_test_id(f"{rid}-verdict")).to_have_text(verdict(row))
    card = tab.get_by_test_id(f"card-{rid}")
    expect(card.locator("h2")).to_have_text(f"{row['router']} · {num(row['sessions'])} sessions")
    # the chart: the router's dot at (share, PGR), its whisker, the two baseline curves
    point = tab.get_by_test_id(f"{rid}-point")
    assert float(point.get_attribute("data-x") or "nan") == pytest.approx(row["strong_share"])
    assert float(point.get_attribute("data-y") or "nan") == pytest.approx(row["pgr"])
    expect(point.locator("line")).to_have_count(3 if iv.get("pgr") else 0)
    tooltip = f"{row['router']}: {dec(row['pgr'])} at {pct(row['strong_share'])}"
    expect(point.locator("title")).to_contain_text(tooltip)
    drawn = 1 if row["curves"]["length_rule"] else 0
    expect(tab.get_by_test_id(f"{rid}-curve-length")).to_have_count(drawn)
    expect(tab.get_by_test_id(f"{rid}-curve-oracle")).to_have_count(drawn)


# ---- the tests ----------------------------------------------------------------------------------


def test_the_value_page_shows_the_apis_numbers(page: Page, env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    doc = value_doc(admin)
    routers = {r["router"]: r for r in doc["routers"]}
    assert set(routers) == {"coding", "review"}, "quiet has no outcome"
    coding = routers["coding"]
    # what the sessions were built to show: cut off partway, a default-odds share,
    # waste on review, intervals from several tasks, curves to draw
    assert coding["cut_off"] > 0 and coding["default_odds_sessions"] == 5
    assert routers["review"]["waste"] > 0 and coding["interval"]["pgr"] is not None
    assert coding["curves"]["length_rule"] and doc["sessions_without_outcome"] == 4

    page.get_by_test_id("nav-value").click()
    expect(page.locator("#view[data-loaded='value']")).to_have_count(1)
    page.get_by_test_id("pause-toggle").click()  # keep the numbers still while reading
    expect(page.get_by_test_id("value-scored")).to_have_text(
        num(sum(r["sessions"] for r in doc["routers"]))
    )
    expect(page.get_by_test_id("value-without-outcome")).to_have_text(
        num(doc["sessions_without_outcome"])
    )
    expect(page.get_by_test_id("value-default-odds")).to_have_text(dec(doc["default_odds"]))
    for row in doc["routers"]:
        expect_router(page, row)
    explained = page.get_by_test_id("card-value-explained")
    expect(explained).to_contain_text("q = r + (1 - r) p s / n")
    expect(explained).to_contain_text("PGR = (Q - Q_base) / (Q_strong - Q_base)")
    chart = page.get_by_test_id("value-coding-chart")
    expect(chart).to_contain_text("strong-turn share")
    expect(chart).to_contain_text("PGR (share of the gap to all-strong closed)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "value.png"), full_page=True)
    page.get_by_test_id("pause-toggle").click()


def test_the_default_odds_rescore_the_sessions_without_their_own(
    page: Page, env: dict[str, Any]
) -> None:
    admin: AdminClient = env["admin"]
    open_page(page, env, "value?router=coding")
    expect(page.get_by_test_id("card-value-review")).to_have_count(0)
    before = value_doc(admin, router="coding")["routers"][0]
    odds = page.get_by_test_id("value-odds")
    odds.fill("0.5")
    odds.press("Enter")
    expect(page).to_have_url(re.compile(r"[?&]odds=0\.5(&|$)"))
    doc = value_doc(admin, router="coding", odds=0.5)
    expect(page.get_by_test_id("value-default-odds")).to_have_text(dec(0.5))
    (row,) = doc["routers"]
    assert row["pgr"] != pytest.approx(before["pgr"]), "p moved for the default-odds sessions"
    expect_router(page, row)
    odds.fill("7")  # out of range: not sent, the numbers stay
    odds.press("Enter")
    assert "odds=7" not in page.url
    expect(page.get_by_test_id("value-coding-pgr")).to_have_text(dec(row["pgr"]))


def test_a_router_without_outcomes_says_how_to_post_them(page: Page, env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    doc = value_doc(admin, router="quiet")
    assert doc["routers"] == [] and doc["sessions_without_outcome"] == 3
    open_page(page, env, "value?router=quiet")
    empty = page.get_by_test_id("value-empty")
    expect(empty).to_be_visible()
    expect(empty.locator("h2")).to_have_text("No outcomes for quiet yet")
    expect(empty).to_contain_text("3 sessions were served in this range without an outcome")
    expect(empty).to_contain_text("POST /v1/outcomes")
    example = page.get_by_test_id("value-empty-example")
    expect(example).to_contain_text('"session_id":"<the X-OrcaRouter-Session-Id the agent sent>"')
    expect(example).to_contain_text('"resolved":true')
    expect(empty).to_contain_text('"strong_odds": 0.4')
    expect(page.get_by_test_id("value-without-outcome")).to_have_text("3")
    expect(page.get_by_test_id("value-scored")).to_have_text("0")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "value-empty.png"))
