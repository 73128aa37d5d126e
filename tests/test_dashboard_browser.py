"""The dashboard in a real browser: Playwright drives Debian's Chromium (headless)
against a gateway with real traffic from the simulator. It signs in, opens every
page, reads the numbers shown (data-testid) and compares them with the admin
API's JSON formatted by the same rules, and exercises the wrong-token error,
the filters and CSV export, the session reset and shadow labelling.
Screenshots land in artifacts/dashboard/.

Needs /usr/bin/chromium (`apt-get install chromium`) and the `playwright`
Python package; skipped without them unless TIERGATE_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import contextlib
import csv
import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from admin_support import ADMIN, AdminClient, admin_config, chat, escalating_router, gateway
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
    pct100,
    require_browser,
    usd,
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


def test_formats_mirror_the_javascript_rules() -> None:
    assert usd(0.0017819) == "$0.00178" and usd(0.0469) == "$0.0469"
    assert usd(1234.5) == "$1,234.50" and usd(0) == "$0.00" and usd(None) == DASH
    assert pct(0.8073) == "80.7%" and pct(0.00125) == "0.1%" and num(8226) == "8,226"


# ---- a gateway with real traffic ------------------------------------------------------------

#: Long enough for the providers' prompt caches (which start at 1024 tokens).
LONG_SYSTEM = "You are a careful coding agent. " + " ".join(
    f"Rule {i}: keep functions small, name things clearly and test behaviour." for i in range(300)
)


def failing_turn(i: int) -> list[dict[str, Any]]:
    """A turn that reruns a failing build unchanged and gets the same error again:
    a request-side strike (repeated_failing_command)."""
    err = f"./pool/worker.go:{40 + i}:2: undefined: jobQueue\nexit status 2"
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Make the build pass."}]
    for x in "ab":
        call = {
            "id": f"c{i}{x}",
            "type": "function",
            "function": {"name": "run_command", "arguments": '{"cmd": "make"}'},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}{x}", "content": f"error: {err}"})
    return messages


def _feedback(gw: ServerThread, request_id: str, score: float) -> None:
    r = httpx.post(
        f"{gw.url}/v1/feedback",
        headers={"Authorization": f"Bearer {TOKEN}"},
        json={"request_id": request_id, "score": score},
        timeout=10,
    )
    assert r.status_code == 200, r.text


def send_traffic(gw: ServerThread) -> None:
    """Agent sessions on an escalating router (strong asks after two base turns the
    client rated hard, a once-ask, a session-cap denial, strikes), shadow decisions
    on a canary router, and a direct-model request; long shared system prompts so
    the prompt cache warms per key."""
    for i in range(8):
        convo: list[dict[str, Any]] = [{"role": "system", "content": LONG_SYSTEM}]
        for turn in range(4):
            convo.append({"role": "user", "content": f"Step {turn} of task {i}"})
            headers = {"X-OrcaRouter-Tier": "strong"} if turn == 2 and i < 3 else {}
            if turn == 3 and i == 5:
                headers = {"X-OrcaRouter-Escalate": "once"}
            r = chat(gw, "orcarouter/coding", session=f"dev-{i}", messages=convo, headers=headers)
            assert r.status_code == 200, r.text
            if headers:
                assert r.headers["x-orca-session-tier"].startswith("strong; reason="), headers
            if turn < 2 and i < 3:
                _feedback(gw, r.headers["x-orca-request-id"], 0.2)
            convo.append(
                {"role": "assistant", "content": r.json()["choices"][0]["message"]["content"]}
            )
    # a ratchet spent, reset by the client, asked again: denied by the per-session cap
    chat(gw, "orcarouter/coding", session="dev-0", headers={"X-OrcaRouter-Tier": "base"})
    denied = chat(gw, "orcarouter/coding", session="dev-0", headers={"X-OrcaRouter-Tier": "strong"})
    assert denied.headers["x-orca-session-tier"] == "base; reason=denied:session_cap"
    chat(gw, "orcarouter/coding", session="dev-1")  # back on strong after the ratchet
    strikes = chat(gw, "orcarouter/coding", session="tests-red", messages=failing_turn(9))
    assert strikes.headers["x-orca-session-tier"] == "strong; reason=strikes"
    for i in range(4):
        r = chat(gw, "orcarouter/canary", session=f"loop-{i}", messages=failing_turn(i))
        assert r.headers["x-orca-session-tier"] == "base"  # shadow switches nothing
    assert chat(gw, "openai/gpt-5-mini", "a concrete model").status_code == 200
    assert chat(gw, "orcarouter/coding", token="tg-other-token", session="o-1").status_code == 200


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("dashboard")
    routers = [
        escalating_router("coding", mode="auto", share_cap_percent=90, strike_threshold=1),
        escalating_router(
            "canary", mode="auto", rollout_percent=0, strike_threshold=1, gate_min_labels=2
        ),
    ]
    with ServerThread(create_sim_app()) as sim:
        doc = admin_config(sim.url, str(folder / "tg.db"), routers=routers)
        doc["workspaces"][0]["escalation_share_cap_percent"] = 95
        with gateway(doc) as (gw, admin):
            send_traffic(gw)
            yield {"gw": gw, "admin": admin}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def page(env: dict[str, Any], browser: Browser) -> Iterator[Page]:
    """One signed-in tab for the whole module (auto-refresh every second)."""
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
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
    tab.goto(f"{env['gw'].url}/dashboard/?refresh=1")
    tab.get_by_test_id("login-token").fill(ADMIN)
    tab.get_by_test_id("login-submit").click()
    expect(tab.get_by_test_id("updated-at")).to_contain_text("Updated")
    assert ADMIN not in tab.url
    yield tab
    assert errors == [], errors
    context.close()


def shot(tab: Page, name: str, full_page: bool = False) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full_page)


def open_page(tab: Page, env: dict[str, Any], route: str) -> None:
    """Go to a page and wait until its first refresh has drawn the API's data."""
    tab.goto(f"{env['gw'].url}/dashboard/?refresh=1#/{route}")
    expect(tab.locator(f"#view[data-loaded='{route.split('?')[0]}']")).to_have_count(1)


def text(tab: Page, testid: str) -> str:
    return tab.get_by_test_id(testid).inner_text().strip()


def rows_of_csv(data: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(data)))


# ---- the tests ----------------------------------------------------------------------------------


def test_a_wrong_token_is_refused_with_a_clear_error(env: dict[str, Any], browser: Browser) -> None:
    context = browser.new_context(viewport=VIEWPORT)
    tab = context.new_page()
    tab.goto(f"{env['gw'].url}/dashboard")  # redirected to /dashboard/
    expect(tab.get_by_test_id("login-error")).to_be_hidden()
    tab.get_by_test_id("login-token").fill("tg-admin-not-the-token")
    tab.get_by_test_id("login-submit").click()
    error = tab.get_by_test_id("login-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("Wrong admin token")
    expect(tab.locator("#shell")).to_be_hidden()
    assert tab.evaluate("sessionStorage.length") == 0
    shot(tab, "login-wrong-token")
    context.close()


def test_a_token_the_gateway_stops_accepting_returns_to_sign_in(
    env: dict[str, Any], browser: Browser
) -> None:
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script("sessionStorage.setItem('tiergate.adminToken', 'tg-admin-rotated')")
    tab = context.new_page()
    tab.goto(f"{env['gw'].url}/dashboard/#/cache")
    expect(tab.get_by_test_id("login-error")).to_contain_text("no longer accepts")
    assert tab.evaluate("sessionStorage.getItem('tiergate.adminToken')") is None
    context.close()


def test_overview_shows_the_apis_numbers(page: Page, env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    open_page(page, env, "overview?router=coding&range=15m")
    page.get_by_test_id("pause-toggle").click()  # keep the chart still while hovering
    since = time.time() - 900
    traffic = admin.get(f"/stats/traffic?router=coding&bucket=minute&since={since}").json()
    tiers = {s["tier"]: s for s in traffic["series"]}
    assert set(tiers) == {"base", "strong"}
    for tier, s in tiers.items():
        expect(page.get_by_test_id(f"traffic-requests-{tier}")).to_have_text(num(s["requests"]))
        expect(page.get_by_test_id(f"traffic-spend-{tier}")).to_have_text(usd(s["spend_usd"]))
        for point in s["points"]:  # the chart's own numbers, bucket by bucket
            page.locator(f"[data-testid=chart-requests] rect[data-t='{point['t']}']").hover()
            tip = page.get_by_test_id("chart-requests-tip")
            expect(tip).to_contain_text(f"{tier}: {num(point['requests'])}")
    total = sum(s["requests"] for s in tiers.values())
    expect(page.get_by_test_id("kpi-requests")).to_have_text(num(total))
    expect(page.get_by_test_id("kpi-spend")).to_have_text(
        usd(sum(s["spend_usd"] for s in tiers.values()))
    )

    (share,) = [r for r in admin.get("/stats/share").json()["routers"] if r["router"] == "coding"]
    expect(page.get_by_test_id("share-value")).to_have_text(pct(share["share"]))
    # the KPI: served requests in the range; the card: the cap's counted turns. Each
    # label says which, and each matches its own source (docs/dashboard.md)
    served = {t: s["requests"] - sum(p["errors"] for p in s["points"]) for t, s in tiers.items()}
    kpi = pct(served["strong"] / sum(served.values()))
    expect(page.get_by_test_id("kpi-strong-share")).to_have_text(kpi)
    expect(page.get_by_test_id("kpi-strong-share").locator("xpath=..")).to_contain_text(
        "of served requests in this range"
    )
    expect(page.get_by_test_id("share-request-share")).to_have_text(pct(share["request_share"]))
    expect(page.get_by_test_id("share-strong-requests")).to_have_text(
        f"{num(share['strong_requests'])} of {num(share['requests'])} counted turns"
    )
    expect(page.get_by_test_id("share-cap")).to_have_text(pct100(share["cap_percent"]))
    expect(page.get_by_test_id("share-utilisation")).to_have_text(pct(share["utilisation"]))

    esc = admin.get(f"/stats/escalations?router=coding&since={since}").json()
    assert {(i["event"], i["trigger"]) for i in esc["items"]} >= {
        ("escalated", "explicit"),
        ("denied_cap", "explicit"),
        ("escalated", "strikes"),
    }
    for item in esc["items"]:
        testid = f"esc-{item['event']}-{item['trigger']}"
        expect(page.get_by_test_id(testid)).to_have_text(num(item["count"]))
    assert [d["reason"] for d in esc["denials"]] == ["session_cap"]
    expect(page.get_by_test_id("denial-session_cap")).to_have_text(num(esc["denials"][0]["count"]))

    (q,) = admin.get("/stats/quality?router=coding").json()["routers"]
    fb = q["escalation_latency"]["feedback"]
    assert fb["sessions_measured"] == 3 and fb["mean_hard_turns"] == 2.0
    # `coding` is live for every session (rollout 100): LIVE, not a red CLOSED gate
    assert q["live_percent"] == 100 and q["gate"]["state"] == "live"
    expect(page.get_by_test_id("gate-state")).to_have_text("LIVE")
    expect(page.get_by_test_id("gate-state")).to_have_class("badge good")
    expect(page.get_by_test_id("gate-reason")).to_have_text(q["gate"]["summary"])
    expect(page.get_by_test_id("gate-precision")).to_have_text(pct(q["gate"]["precision"]))
    expect(page.get_by_test_id("latency-feedback-mean")).to_have_text(dec(fb["mean_hard_turns"]))
    expect(page.get_by_test_id("latency-feedback-measured")).to_have_text(
        f"{num(fb['sessions_measured'])} of {num(fb['sessions_escalated'])}"
    )
    expect(page.get_by_test_id("latency-dist-2")).to_have_text(num(fb["distribution"]["2"]))
    page.mouse.move(0, 0)
    shot(page, "overview")
    shot(page, "overview-full", full_page=True)
    page.get_by_test_id("pause-toggle").click()


def test_overview_of_the_shadow_router(page: Page, env: dict[str, Any]) -> None:
    open_page(page, env, "overview?router=coding&range=15m")
    page.get_by_test_id("router-select").select_option("canary")
    expect(page.get_by_test_id("router-mode")).to_contain_text("rollout 0.0%")
    esc = env["admin"].get("/stats/escalations?router=canary").json()["items"]
    assert esc == [{"router": "canary", "event": "shadow", "trigger": "strikes", "count": 4}]
    expect(page.get_by_test_id("esc-shadow-strikes")).to_have_text("4")
    expect(page.get_by_test_id("share-status")).to_have_text("warming up")
    expect(page.get_by_test_id("traffic-requests-base")).to_have_text("4")
    assert "router=canary" in page.url
    select = page.get_by_test_id("router-select").element_handle()
    page.wait_for_timeout(1500)  # a refresh or two: the control stays (an open list would too)
    assert select.evaluate("el => el.isConnected")


def test_auto_refresh_and_pause(page: Page, env: dict[str, Any]) -> None:
    open_page(page, env, "overview?router=coding&range=15m")
    before = int(text(page, "kpi-requests").replace(",", ""))
    page.get_by_test_id("pause-toggle").click()
    expect(page.get_by_test_id("pause-toggle")).to_have_attribute("aria-pressed", "true")
    assert chat(env["gw"], "orcarouter/coding", session="late").status_code == 200
    page.wait_for_timeout(2500)  # paused: 1 s refresh period, nothing redrawn
    expect(page.get_by_test_id("kpi-requests")).to_have_text(num(before))
    page.get_by_test_id("pause-toggle").click()  # resuming refreshes at once
    expect(page.get_by_test_id("kpi-requests")).to_have_text(num(before + 1))
    assert chat(env["gw"], "orcarouter/coding", session="later").status_code == 200
    expect(page.get_by_test_id("kpi-requests")).to_have_text(num(before + 2), timeout=5000)


def test_cache_page_shows_hit_rates_and_savings(page: Page, env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    open_page(page, env, "cache")
    cache = admin.get("/stats/cache").json()["channels"]
    savings = admin.get("/stats/savings").json()
    assert {c["channel"] for c in cache} == {"oa", "an"}
    oa_keys = next(c for c in cache if c["channel"] == "oa")["keys"]
    assert len(oa_keys) >= 2  # sessions spread over the channel's keys
    for ch in cache:
        expect(page.get_by_test_id(f"cache-channel-hit-{ch['channel']}")).to_have_text(
            pct(ch["hit_rate"])
        )
        for k in ch["keys"]:
            key = f"{ch['channel']}-{k['key_index']}"
            expect(page.get_by_test_id(f"cache-key-requests-{key}")).to_have_text(
                num(k["requests"])
            )
            expect(page.get_by_test_id(f"cache-key-input-{key}")).to_have_text(
                num(k["input_tokens"])
            )
            expect(page.get_by_test_id(f"cache-key-read-{key}")).to_have_text(
                num(k["cache_read_tokens"])
            )
            expect(page.get_by_test_id(f"cache-key-hit-{key}")).to_have_text(pct(k["hit_rate"]))
    assert savings["total"]["saved_usd"] > 0
    expect(page.get_by_test_id("savings-total-saved")).to_have_text(
        usd(savings["total"]["saved_usd"])
    )
    for item in savings["items"]:
        row = f"{item['router'] or 'direct'}-{item['channel']}"
        expect(page.get_by_test_id(f"savings-saved-{row}")).to_have_text(usd(item["saved_usd"]))
        expect(page.get_by_test_id(f"savings-fraction-{row}")).to_have_text(
            pct(item["saved_fraction"])
        )
    shot(page, "cache")


def test_audit_log_filters_and_csv_export(page: Page, env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    open_page(page, env, "audit")
    rows = page.get_by_test_id("audit-row")
    newest = admin.get("/audit?limit=50").json()["items"]
    expect(rows).to_have_count(len(newest))
    expect(rows.first).to_have_attribute("data-id", str(newest[0]["id"]))

    page.get_by_test_id("audit-event-shadow").check()
    shadow = admin.get("/audit?event=shadow").json()["items"]
    expect(rows).to_have_count(len(shadow))
    assert {r.get_attribute("data-event") for r in rows.all()} == {"shadow"}

    page.get_by_test_id("audit-event-shadow").uncheck()
    page.get_by_test_id("audit-event-escalated").check()
    page.get_by_test_id("audit-event-denied_cap").check()
    page.get_by_test_id("audit-router").select_option("coding")
    page.get_by_test_id("audit-workspace").select_option("default")
    query = "router=coding&workspace=default&event=escalated,denied_cap"
    chosen = admin.get(f"/audit?{query}").json()["items"]
    assert {e["event"] for e in chosen} == {"escalated", "denied_cap"}
    expect(rows).to_have_count(len(chosen))
    assert [r.get_attribute("data-id") for r in rows.all()] == [str(e["id"]) for e in chosen]
    shot(page, "audit")

    with page.expect_download() as info:
        page.get_by_test_id("audit-csv").click()
    download = info.value
    assert download.suggested_filename.startswith("tiergate-audit-")
    exported = rows_of_csv(Path(download.path()).read_text())
    expected = rows_of_csv(admin.get(f"/audit?{query}&format=csv").text)
    assert exported == expected and len(exported) == len(chosen)

    page.get_by_test_id("audit-since").fill("2099-01-01T00:00")
    expect(page.get_by_test_id("audit-table-empty")).to_be_visible()
    page.get_by_test_id("audit-since").fill("")
    expect(rows).to_have_count(len(chosen))


def test_session_inspector_and_reset(page: Page, env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    open_page(page, env, "sessions?workspace=default&session=dev-1")
    api = admin.get("/sessions/default/dev-1").json()
    (coding,) = [r for r in api["routers"] if r["router"] == "coding"]
    assert coding["tier_state"]["tier"] == "strong"
    expect(page.get_by_test_id("session-title")).to_have_text("default / dev-1")
    expect(page.get_by_test_id("session-tier-coding")).to_have_text("strong")
    expect(page.get_by_test_id("session-used-coding")).to_have_text(
        num(coding["tier_state"]["escalations_used"])
    )
    for tier in ("base", "strong"):
        expect(page.get_by_test_id(f"session-pin-coding-{tier}")).to_have_text(
            coding["model_pins"][tier]
        )
    for model, pin in api["channel_pins"].items():
        expect(page.get_by_test_id(f"session-channel-pin-{model}")).to_have_text(
            f"{pin['channel']} #{pin['key_index']}"
        )
    expect(page.get_by_test_id("session-requests").locator("tbody tr")).to_have_count(
        len(api["recent_requests"])
    )
    shot(page, "sessions")

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("session-reset-coding").click()
    expect(page.get_by_test_id("session-reset-result")).to_contain_text("strong → base")
    expect(page.get_by_test_id("session-tier-coding")).to_have_text("base")
    after = admin.get("/sessions/default/dev-1?router=coding").json()["routers"][0]
    assert after["tier_state"]["tier"] == "base"
    assert after["tier_state"]["escalations_used"] == 1  # ratchets are not refunded
    (reset,) = admin.get("/audit?event=reset&trigger=admin").json()["items"]
    assert reset["router"] == "coding" and reset["session_hash"] == api["session_hash"]

    page.get_by_test_id("session-id").fill("dev-2")
    page.get_by_test_id("session-inspect").click()
    expect(page.get_by_test_id("session-title")).to_have_text("default / dev-2")
    first = page.get_by_test_id("recent-session").first
    scope = first.get_attribute("data-scope")
    newest = admin.get("/session-scopes").json()["items"][0]
    assert scope == newest["session_hash"]
    expect(first.get_by_test_id("recent-session-counts")).to_contain_text(
        f"{newest['requests']} req"
    )
    first.click()
    expect(page.get_by_test_id("session-title")).to_have_text(f"scope {scope}")


def test_shadow_labelling_moves_the_gate(page: Page, env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    open_page(page, env, "shadow?router=canary")
    items = admin.get("/shadow?router=canary").json()["items"]
    assert len(items) == 4
    expect(page.get_by_test_id("shadow-row")).to_have_count(4)
    expect(page.get_by_test_id("shadow-gate-state-canary")).to_have_text("CLOSED")
    first, second = items[0]["id"], items[1]["id"]

    page.get_by_test_id(f"shadow-hard-{first}").fill("2")
    page.get_by_test_id(f"shadow-correct-{first}").click()
    expect(page.get_by_test_id(f"shadow-label-state-{first}")).to_have_text("correct")
    page.get_by_test_id(f"shadow-incorrect-{second}").click()
    expect(page.get_by_test_id(f"shadow-label-state-{second}")).to_have_text("incorrect")
    labels = {i["id"]: i["label"] for i in admin.get("/shadow?labelled=true").json()["items"]}
    assert labels[first]["correct"] is True and labels[first]["hard_turns_before"] == 2
    assert labels[second]["correct"] is False
    expect(page.get_by_test_id("shadow-precision-canary")).to_have_text("50.0%")
    expect(page.get_by_test_id("shadow-labels-canary")).to_contain_text("1 correct of 2 labels")
    shot(page, "shadow")

    page.get_by_test_id(f"shadow-correct-{second}").click()  # relabel: the latest wins
    expect(page.get_by_test_id("shadow-gate-state-canary")).to_have_text("OPEN")
    gate = admin.get("/routers/canary/gate").json()
    assert (gate["labels"], gate["correct"], gate["open"]) == (2, 2, True)

    open_page(page, env, "overview?router=canary&range=15m")
    expect(page.get_by_test_id("gate-state")).to_have_text("OPEN")
    expect(page.get_by_test_id("gate-precision")).to_have_text("100.0%")
    expect(page.get_by_test_id("latency-labels-mean")).to_have_text("2.00 (1 labels)")


def test_virtual_keys_issue_list_and_revoke(page: Page, env: dict[str, Any]) -> None:
    admin: AdminClient = env["admin"]
    gw: ServerThread = env["gw"]
    open_page(page, env, "keys")
    expect(page.get_by_test_id("vk-table-empty")).to_be_visible()
    page.get_by_test_id("vk-name").fill("ci bot")
    page.get_by_test_id("vk-month").fill("25")
    page.get_by_test_id("vk-create").click()
    token = page.get_by_test_id("vk-token").inner_text().strip()
    assert token.startswith("tgk-")
    [key] = admin.get("/virtual-keys").json()["items"]
    assert (key["name"], key["budget_usd_per_month"], key["workspace"]) == ("ci bot", 25, "default")
    expect(page.get_by_test_id(f"vk-status-{key['id']}")).to_have_text("active")
    expect(page.get_by_test_id(f"vk-month-{key['id']}")).to_have_text("$0.00 of $25.00")
    assert chat(gw, "openai/gpt-5-mini", token=token).status_code == 200
    page.get_by_test_id(f"vk-usage-{key['id']}").click()  # the key's history, per UTC day
    expect(page.get_by_test_id("vk-usage-key")).to_have_text(key["id"])
    history = admin.get(f"/virtual-keys/{key['id']}/usage").json()
    assert history["total"]["requests"] == 1
    expect(page.get_by_test_id("vk-usage-total-cost")).to_have_text(
        usd(history["total"]["cost_usd"])
    )
    shot(page, "virtual-keys")
    page.get_by_test_id(f"vk-revoke-{key['id']}").click()
    expect(page.get_by_test_id(f"vk-status-{key['id']}")).to_contain_text("revoked")
    assert chat(gw, "openai/gpt-5-mini", token=token).status_code == 401
    page.reload()  # the token was shown once: it is not on the page any more
    expect(page.get_by_test_id("vk-table")).to_be_visible()
    assert token not in page.content()


def test_sign_out_forgets_the_token(page: Page, env: dict[str, Any]) -> None:
    page.get_by_test_id("logout").click()
    expect(page.get_by_test_id("login-token")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0
    page.reload()
    expect(page.get_by_test_id("login-token")).to_be_visible()
