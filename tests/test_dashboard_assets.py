"""The dashboard's files: served at /dashboard without a token (they hold no
data), each with its content type and a strict security policy, nothing outside
the list, no secret in any of them, and every module the pages import shipped."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import httpx
import pytest

from admin_support import ADMIN, SECRETS, admin_config, gateway
from servers import ServerThread
from tiergate.api.dashboard import ASSETS

STATIC = resources.files("tiergate.api.dashboard").joinpath("static")


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    doc = admin_config("http://127.0.0.1:9", str(tmp_path_factory.mktemp("dash") / "tg.db"))
    with gateway(doc) as (server, _):
        yield server


def test_dashboard_redirects_to_its_folder_and_serves_the_page(gw: ServerThread) -> None:
    r = httpx.get(f"{gw.url}/dashboard")
    assert r.status_code == 307 and r.headers["location"].endswith("/dashboard/")
    page = httpx.get(f"{gw.url}/dashboard/")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert 'data-testid="login-token"' in page.text and 'src="app.js"' in page.text


@pytest.mark.parametrize("name", sorted(ASSETS))
def test_every_asset_has_its_content_type_and_no_secret(gw: ServerThread, name: str) -> None:
    r = httpx.get(f"{gw.url}/dashboard/{name}")  # no Authorization header
    assert r.status_code == 200
    assert r.headers["content-type"] == ASSETS[name]
    assert r.content == STATIC.joinpath(name).read_bytes()
    leaked = [s for s in SECRETS if s in r.text]
    assert not leaked, f"{name} carries a secret"
    etag = r.headers["etag"]
    again = httpx.get(f"{gw.url}/dashboard/{name}", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""


def test_types_by_extension() -> None:
    expected = {
        ".html": "text/html",
        ".js": "text/javascript",
        ".css": "text/css",
        ".svg": "image/svg+xml",
    }
    for name, media_type in ASSETS.items():
        suffix = name[name.rindex(".") :]
        assert media_type.split(";")[0] == expected[suffix], name


def test_nothing_outside_the_list_is_served(gw: ServerThread) -> None:
    for path in [
        "/dashboard/nope.js",
        "/dashboard/serve.py",
        "/dashboard/__init__.py",
        "/dashboard/..%2Fserve.py",
        "/dashboard/static/app.js",
    ]:
        assert httpx.get(gw.url + path).status_code == 404, path
    r = httpx.post(f"{gw.url}/dashboard/app.js")
    assert r.status_code == 405


def test_the_data_still_needs_the_admin_token(gw: ServerThread) -> None:
    assert httpx.get(f"{gw.url}/admin/api/stats/traffic").status_code == 401
    ok = httpx.get(f"{gw.url}/admin/api/routers", headers={"Authorization": f"Bearer {ADMIN}"})
    assert ok.status_code == 200


def test_the_package_ships_exactly_the_listed_files_and_every_import_resolves() -> None:
    shipped = {p.name for p in STATIC.iterdir() if p.is_file()}
    assert shipped == set(ASSETS)
    page = STATIC.joinpath("index.html").read_text()
    referenced = set(re.findall(r'(?:src|href)="([\w.]+)"', page))
    assert referenced <= set(ASSETS) and "app.js" in referenced
    for name in ASSETS:
        if not name.endswith(".js"):
            continue
        text = STATIC.joinpath(name).read_text()
        for target in re.findall(r'from "\./([\w.]+)"', text):
            assert target in ASSETS, f"{name} imports {target}, which is not served"
        assert "innerHTML" not in text, f"{name}: build DOM nodes, never parse markup"
        assert "localStorage" not in text, f"{name}: the token belongs in sessionStorage"


def test_the_gate_badge_reads_the_api_state() -> None:
    """format.js's gateBadge, run by Node when it is installed (the browser tests
    cover the page itself): a router live for every session is LIVE and good,
    never a red CLOSED gate (issue 28); without `state` it falls back to `open`."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not installed: the browser tests cover gateBadge")
    url = Path(str(STATIC.joinpath("format.js"))).as_uri()
    gates = [
        {"state": "live", "open": False},
        {"state": "open", "open": True},
        {"state": "closed", "open": False},
        {"open": True},
        {"open": False},
    ]
    script = (
        f"import {{ gateBadge }} from {json.dumps(url)};"
        f"console.log(JSON.stringify({json.dumps(gates)}.map(gateBadge)));"
    )
    out = subprocess.run(
        [node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [
        ["LIVE", "good"],
        ["OPEN", "good"],
        ["CLOSED", "bad"],
        ["OPEN", "good"],
        ["CLOSED", "bad"],
    ]
