"""The operator dashboard at /dashboard: static pages over the admin JSON API.

The pages hold no data and no secret, so they are served without a token; every
number is fetched by the browser from /admin/api with the admin token the
operator types in (kept in sessionStorage, sent as `Authorization: Bearer`).
Plain ES modules, no build step: the files in static/ are what the browser runs.
"""

from tiergate.api.dashboard.serve import ASSETS, dashboard_mount

__all__ = ["ASSETS", "dashboard_mount"]
