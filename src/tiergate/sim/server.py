"""Run the simulator as its own server (`tiergate sim`)."""

from __future__ import annotations

import logging

import uvicorn

from tiergate.sim.app import create_sim_app
from tiergate.sim.settings import SimSettings

DEFAULT_PORT = 4010
logger = logging.getLogger(__name__)


def run_sim(
    host: str = "127.0.0.1", port: int = DEFAULT_PORT, settings: SimSettings | None = None
) -> None:
    """Serve every provider format on host:port until interrupted."""
    logger.info("provider simulator on http://%s:%d", host, port)
    uvicorn.run(
        create_sim_app(settings),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
    )
