"""Cancel an upstream call when its client goes away.

An abandoned non-streaming request must not keep its upstream call, and its
cost, running (the pipeline wraps the non-streaming dispatch in it).
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import ClientDisconnect, Request


async def until_disconnect(request: Request, coro: Any) -> Any:
    """Run `coro` in this task, cancelling it if the client disconnects first (so an
    abandoned request does not keep an upstream call, and its cost, running).

    One watcher task instead of two tasks and an asyncio.wait: this is on every
    non-streaming request.
    """
    me = asyncio.current_task()
    assert me is not None
    state = {"running": True, "gone": False}

    def on_watch_done(watch: asyncio.Future[None]) -> None:
        # done callbacks run later on the loop: act only while `coro` still runs
        if watch.cancelled() or watch.exception() is not None or not state["running"]:
            return
        state["gone"] = True
        me.cancel()

    watch = asyncio.ensure_future(wait_disconnect(request))
    watch.add_done_callback(on_watch_done)
    try:
        return await coro
    except asyncio.CancelledError:
        if state["gone"] and me.uncancel() == 0:
            raise ClientDisconnect() from None
        raise
    finally:
        state["running"] = False
        watch.cancel()


async def wait_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
