"""The request pipeline: HTTP in -> normalize -> decide -> dispatch -> observe
-> commit -> HTTP out.

This module only orchestrates. Parsing and rendering live in the wire codecs,
deciding in the planner (pure reads), sending in dispatch, and every state
write in the plan's deferred `commit`, which runs only after a successful
upstream reply.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Collection
from typing import Any

import orjson
from starlette.background import BackgroundTask
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from tiergate import metrics
from tiergate.billing import request_cost
from tiergate.config import GatewayConfig
from tiergate.core.model import ChatRequest, ChatResponse, StreamAccumulator, StreamEvent
from tiergate.core.upstream import Target
from tiergate.formats.errors import FormatError
from tiergate.gateway import dispatch, failures
from tiergate.gateway.auth import TokenTable, Workspace, bearer_token
from tiergate.gateway.disconnect import until_disconnect
from tiergate.gateway.errors import GatewayError
from tiergate.gateway.explain import describe_plan
from tiergate.gateway.inbound import InboundFormat
from tiergate.gateway.lanes import LaneGlue
from tiergate.gateway.limits import Limiter, Scope
from tiergate.gateway.planner import Outcome, Planner, RoutePlan
from tiergate.gateway.request_body import ChatIntake, check_depth, read_body
from tiergate.gateway.reservations import NO_RESERVATION, Reservation
from tiergate.gateway.served import ServedRequest, record_served, record_served_later
from tiergate.gateway.stream_close import ClosingStream
from tiergate.gateway.worst_case import prompt_tokens_upper, request_worst_case
from tiergate.lanes import PreparedTurn, ToolCallObserver
from tiergate.providers.base import Provider, UpstreamError
from tiergate.recorder import Recorder
from tiergate.reload import rebuild_distributor
from tiergate.routing.distributor import Distributor

log = logging.getLogger("tiergate.access")

JSON = "application/json"


class Gateway:
    """Everything one request needs, wired once at start-up."""

    def __init__(
        self,
        cfg: GatewayConfig,
        tokens: TokenTable,
        distributor: Distributor,
        providers: dict[str, Provider],
        planner: Planner,
        recorder: Recorder,
        lanes: LaneGlue,
    ) -> None:
        self.cfg = cfg
        self.tokens = tokens
        self.distributor = distributor
        self.providers = providers
        self.planner = planner
        self.recorder = recorder
        self.lanes = lanes
        self.limiter = Limiter(planner.store)
        # reads and parses with each conversation's memos
        self.intake = ChatIntake(cfg.server.history_cache_bytes)
        self.retry = dispatch.RetryPolicy(cfg.server.max_attempts, cfg.server.retry_budget_seconds)
        self._background: set[asyncio.Task[None]] = set()

    def reload(self, cfg: GatewayConfig, reenabled: Collection[tuple[str, str]] = ()) -> None:
        """Swap every config-derived part at once (no await, so no request sees a mix).

        Key health carries over (tiergate.reload). Session pins, tier state and
        bandit arms live in the state store and are untouched; requests in flight
        finish on the plan they were given.
        """
        distributor = rebuild_distributor(cfg, self.distributor, reenabled)
        old = self.planner
        planner = Planner(cfg, distributor, old.store, old.recorder, old.clock, old.commits)
        self.lanes.reload(cfg, distributor)
        self.cfg = cfg
        self.tokens = self.tokens.with_workspaces(cfg.workspaces)
        self.distributor = distributor
        self.planner = planner
        self.retry = dispatch.RetryPolicy(cfg.server.max_attempts, cfg.server.retry_budget_seconds)

    # ---- entry point ---------------------------------------------------------

    async def handle(self, fmt: InboundFormat, request: Request) -> Response:
        request_id = _new_request_id()
        started = time.perf_counter()
        headers = {"x-orca-request-id": request_id}
        plan: RoutePlan | None = None
        workspace: Workspace | None = None
        try:
            workspace = self.authenticate(request)
            await self.admit(workspace)
            body, size = await self.intake.read(fmt, request, self.cfg.server.max_body_bytes)
            body, turn = self.lanes.extract(body)
            req = self.intake.parse(fmt, body, size)
            if fmt.read_transport is not None:
                fmt.read_transport(req, request)
            plan = await self.planner.plan(
                req,
                body,
                request.headers,
                workspace,
                request_id,
                lane_turn=turn is not None,
            )
            plan.extras["request_id"] = request_id
            if plan.router is not None:
                headers["x-orca-router"] = plan.router.name
            if plan.tier_header is not None:
                headers["x-orca-session-tier"] = plan.tier_header
            ctx = _Ctx(fmt, request, request_id, started, workspace, req, plan, headers)
            if turn is not None:
                ctx.lane = await self.lanes.prepare(workspace, turn, req, plan)
            try:
                # the worst case held on the budgets (429 when spent), settled when billed
                ctx.hold = await self.reserve(workspace, req, plan.models)
                if req.stream:
                    return await self._stream(ctx)
                return await self._complete(ctx)
            finally:
                if not ctx.hold_handed_off:
                    self.settle(ctx.hold, 0.0)  # no-op once billed; else released
                if ctx.lane is not None and not ctx.lane_handed_off:
                    # any exit that did not finalize the lane (disconnect, error) releases
                    # it, before the reply is sent: an immediate retry must not get 409.
                    # No output reached the client, so no tool call did: ids ().
                    await asyncio.shield(
                        self._spawn(
                            self.lanes.finalize(
                                ctx.lane,
                                served_model=None,
                                response=None,
                                tool_call_ids=(),
                                credential_failure=ctx.lane_credential_failure,
                            )
                        )
                    )
        except GatewayError as err:
            if err.code == "session_tier_busy":
                metrics.LEASE_CONFLICTS_TOTAL.inc()
            self._refused(request_id, workspace, plan, err, started, request)
            headers.update(err.headers or {})
            return self.error_response(fmt, err, headers)
        except FormatError as err:  # the request cannot be expressed in the upstream's format
            refusal = GatewayError(400, err.message, "invalid_request")
            self._refused(request_id, workspace, plan, refusal, started, request)
            return self.error_response(fmt, refusal, headers)
        except ClientDisconnect:
            failures.log_refusal(
                plan, 499, started, request_id, "client_disconnect", request.scope.get("path")
            )
            return Response(status_code=499, headers=headers)

    async def explain(self, fmt: InboundFormat, request: Request) -> Response:
        """Plan the request exactly as `handle` would, then stop: no dispatch, no commit."""
        try:
            workspace = self.authenticate(request)
            body, size = await self.intake.read(fmt, request, self.cfg.server.max_body_bytes)
            body, turn = self.lanes.extract(body)  # validated and removed, never leased here
            req = self.intake.parse(fmt, body, size)
            if fmt.read_transport is not None:
                fmt.read_transport(req, request)
            plan = await self.planner.plan(
                req, body, request.headers, workspace, "explain", lane_turn=turn is not None
            )
        except GatewayError as err:
            return self.error_response(fmt, err, dict(err.headers or {}))
        return Response(orjson.dumps(describe_plan(plan, req)), 200, media_type=JSON)

    # ---- request intake ------------------------------------------------------

    def authenticate(self, request: Request) -> Workspace:
        ws = self.tokens.lookup(bearer_token(request.headers))
        if ws is None:
            raise GatewayError(401, "Invalid or missing API token", "invalid_api_key")
        return ws

    async def admit(self, workspace: Workspace) -> None:
        """The workspace's rate limit, then its virtual key's (429 GatewayError when over)."""
        await self.limiter.admit(workspace.id, workspace.limits)
        if workspace.key_id is not None:
            await self.limiter.admit(workspace.key_id, workspace.key_limits, "key")

    async def reserve(
        self, workspace: Workspace, req: ChatRequest | None, models: list[str], tokens: int = 0
    ) -> Reservation:
        """Hold the request's worst-case cost on the workspace's and its key's budgets
        (gateway/reservations.py); 429 GatewayError when one is already spent.
        `tokens`: the prompt size when there is no chat request (embeddings)."""
        scopes: list[Scope] = []
        if workspace.limits.budgeted:
            scopes.append((workspace.id, workspace.limits, "workspace"))
        if workspace.key_id is not None and workspace.key_limits.budgeted:
            scopes.append((workspace.key_id, workspace.key_limits, "key"))
        if not scopes:
            return NO_RESERVATION
        offers = [
            (ch.config.models[m], ch.config.type)
            for m in models
            for ch in self.distributor.serving(m)
            if m in ch.config.models
        ]
        if req is None:
            amount = request_worst_case(offers, tokens, 0)
        else:
            amount = request_worst_case(offers, prompt_tokens_upper(req), req.max_tokens)
        return await self.limiter.reserve(scopes, amount)

    def settle(self, hold: Reservation, cost: float) -> None:
        """Replace a budget hold by the billed cost (0 releases it), in the background.
        Closed at once, so a later settle of the same hold is a no-op."""
        settlement = hold.close(cost)
        if settlement:
            self._spawn(self.limiter.apply(settlement))

    async def read_json(self, request: Request) -> dict[str, Any]:
        """The body as a JSON object, its depth checked (400 GatewayError otherwise)."""
        body, _ = await read_body(request, self.cfg.server.max_body_bytes)
        check_depth(body)
        return body

    def _dispatch_args(self, ctx: _Ctx) -> tuple[Any, ...]:
        """What both dispatch paths take: the request, the plan's order, the live
        distributor and providers, and the retry policy."""
        return (
            ctx.req,
            ctx.plan.models,
            ctx.plan.channel_pin,
            self.distributor,
            self.providers,
            self.retry,
        )

    # ---- non-streaming -------------------------------------------------------

    async def _complete(self, ctx: _Ctx) -> Response:
        ctx.upstream_started = time.perf_counter()
        try:
            resp, served = await until_disconnect(
                ctx.request, dispatch.complete(*self._dispatch_args(ctx))
            )
        except (UpstreamError, dispatch.NoUpstream) as err:
            return self._upstream_failed(ctx, err)
        cost, done = self._price(ctx, served.target, resp)
        outcome = Outcome(True, served.target, resp, cost, served.fallback)
        if self.planner.shared_state:
            # a fleet: the session's next turn may land on another process, which
            # must find this turn's pins and tier state: the writes leave first
            await self.planner.commits.spawn_sent(ctx.plan.scope, self._commit(ctx.plan, outcome))
        else:
            # one process: the reply need not wait for the writes, as the session's
            # next turn waits for them here (SessionCommits)
            self.planner.commits.spawn(ctx.plan.scope, self._commit(ctx.plan, outcome))
        if ctx.lane is not None:
            ctx.lane_handed_off = True
            await self.lanes.finalize(
                ctx.lane,
                served_model=served.target.model,
                response=resp,
                tool_call_ids=tuple(ctx.fmt.tool_id(tc.id) for tc in resp.tool_calls),
            )
        ctx.headers["x-orca-resolved-model"] = served.target.model
        if _wants_cost(ctx.request):
            ctx.headers["x-orca-cost"] = f"{cost:.8f}"
        body = ctx.fmt.render_response(resp, ctx.req)
        # metrics, usage row and log line once the reply is sent (same task, so a
        # graceful shutdown still waits for them; latency is measured as before)
        record = BackgroundTask(
            record_served_later,
            self.recorder,
            self._served(ctx),
            served.target,
            resp,
            served.attempts,
            cost,
            done,
        )
        return Response(orjson.dumps(body), 200, ctx.headers, media_type=JSON, background=record)

    # ---- streaming -----------------------------------------------------------

    async def _stream(self, ctx: _Ctx) -> Response:
        ctx.upstream_started = time.perf_counter()
        try:
            first, rest, served = await dispatch.open_stream(*self._dispatch_args(ctx))
        except (UpstreamError, dispatch.NoUpstream) as err:
            return self._upstream_failed(ctx, err)
        ctx.headers["x-orca-resolved-model"] = served.target.model
        ctx.headers["cache-control"] = "no-cache"
        ctx.lane_handed_off = True  # the relay finalizes the lane when the stream ends
        ctx.hold_handed_off = True  # and bills the budget hold; the close releases it if not
        return ClosingStream(
            self._relay(ctx, first, rest, served),
            on_close=lambda: self.settle(ctx.hold, 0.0),
            status_code=200,
            headers=ctx.headers,
            media_type="text/event-stream",
        )

    async def _relay(
        self,
        ctx: _Ctx,
        first: StreamEvent,
        rest: AsyncIterator[StreamEvent],
        served: dispatch.Served,
    ) -> AsyncIterator[bytes]:
        """Render upstream events in the client's dialect, byte for byte as they come."""
        renderer = ctx.fmt.renderer(ctx.req)
        acc = StreamAccumulator()
        observer = ToolCallObserver() if ctx.lane is not None else None
        lane_pending = ctx.lane is not None
        status = 200
        try:
            acc.add(first)
            if observer is not None:
                observer.feed(first)
            yield renderer.render(first)
            async for ev in rest:
                acc.add(ev)
                if observer is not None:
                    observer.feed(ev)  # observes only: the bytes sent are unchanged
                chunk = renderer.render(ev)
                if lane_pending and acc.finished and ctx.lane is not None:
                    # Record the turn before the client sees its end, so the client's
                    # next turn finds the lane free instead of 409 session_tier_busy.
                    await self.lanes.finalize(
                        ctx.lane,
                        served_model=served.target.model,
                        response=acc.result(),
                        tool_call_ids=_client_tool_ids(ctx, observer),
                    )
                    lane_pending = False
                yield chunk
            if not acc.finished:
                status = 502
                message = "Upstream stream ended without completing"
                lane_pending = await self._release_failed_lane(ctx, served, observer, lane_pending)
                yield ctx.fmt.stream_error(renderer, 502, message)
        except UpstreamError as err:
            status = err.client_status()
            lane_pending = await self._release_failed_lane(ctx, served, observer, lane_pending)
            yield ctx.fmt.stream_error(renderer, status, "Upstream stream was interrupted")
        finally:
            # Runs on success, on upstream failure and on client disconnect
            # (cancellation): record usage, and commit state only on success.
            if status == 200 and not acc.finished:
                status = 499  # the client went away mid-stream
            resp = acc.result()
            cost, done = self._price(ctx, served.target, resp)
            record_served(
                self.recorder,
                self._served(ctx),
                served.target,
                resp,
                attempts=served.attempts,
                status=status,
                stream=True,
                cost=cost,
                done=done,
            )
            outcome = Outcome(status == 200, served.target, resp, cost, served.fallback, status)
            self.planner.commits.spawn(ctx.plan.scope, self._commit(ctx.plan, outcome))
            if lane_pending and ctx.lane is not None:
                self._spawn(
                    self.lanes.finalize(
                        ctx.lane,
                        served_model=served.target.model,
                        response=resp if status == 200 else None,
                        tool_call_ids=_client_tool_ids(ctx, observer),
                    )
                )
        if _wants_cost(ctx.request):
            yield f": x-orca-cost={cost:.8f}\n\n".encode()

    async def _release_failed_lane(
        self,
        ctx: _Ctx,
        served: dispatch.Served,
        observer: ToolCallObserver | None,
        pending: bool,
    ) -> bool:
        """Record a failed streamed turn before the client sees the error event: a
        client that retries on it must find the lane free, not 409 session_tier_busy.
        Returns whether the lane is still pending (the relay's `finally` then
        releases it, e.g. when this was cancelled by a disconnect)."""
        if not pending or ctx.lane is None:
            return pending
        await self.lanes.finalize(
            ctx.lane,
            served_model=served.target.model,
            response=None,
            tool_call_ids=_client_tool_ids(ctx, observer),
        )
        return False

    # ---- shared tail ---------------------------------------------------------

    def _price(self, ctx: _Ctx, target: Target, resp: ChatResponse) -> tuple[float, float]:
        """The request's cost (charged to a workspace budget) and when it was served."""
        cost = request_cost(resp.usage, target.model_config, target.channel.config.type)
        self.settle(ctx.hold, cost)
        return cost, time.perf_counter()

    def _served(self, ctx: _Ctx) -> ServedRequest:
        """Who asked, by which plan, and when: what the usage record needs of `ctx`."""
        return ServedRequest(
            ctx.request_id,
            ctx.workspace.name,
            ctx.workspace.key_id,
            ctx.request.scope.get("path"),
            ctx.started,
            ctx.upstream_started,
            ctx.plan,
        )

    async def _commit(self, plan: RoutePlan, outcome: Outcome) -> None:
        try:
            await plan.commit(outcome)
        except Exception:
            log.exception("deferred commit failed")

    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def _upstream_failed(self, ctx: _Ctx, err: Exception) -> Response:
        if isinstance(err, UpstreamError) and err.disables_key:
            ctx.lane_credential_failure = True  # a confirmed 401/403: invalidate the lane
        refusal = failures.upstream_refusal(err, self.cfg, self.distributor, ctx.plan.models)
        model = ctx.plan.models[0] if ctx.plan.models else None
        router = ctx.plan.router.name if ctx.plan.router else None
        elapsed = time.perf_counter() - ctx.started
        metrics.observe_request(router, model, None, refusal.status, elapsed)
        failures.record_failure(
            self.recorder,
            request_id=ctx.request_id,
            workspace=ctx.workspace.name,
            plan=ctx.plan,
            status=refusal.status,
            virtual_key=ctx.workspace.key_id,
            stream=ctx.req.stream,
            started=ctx.started,
            error_type=getattr(err, "kind", "no_upstream"),
            path=ctx.request.scope.get("path"),
            **failures.attempt_fields(err),
        )
        self.planner.commits.spawn(
            ctx.plan.scope, self._commit(ctx.plan, Outcome(False, status=refusal.status))
        )
        return self.error_response(ctx.fmt, refusal, {**ctx.headers, **(refusal.headers or {})})

    def _refused(
        self,
        request_id: str,
        workspace: Workspace | None,
        plan: RoutePlan | None,
        err: GatewayError,
        started: float,
        request: Request,
    ) -> None:
        """Count a refusal and log it; after authentication it also gets a usage row
        (an unauthenticated request has no workspace to bill)."""
        path = request.scope.get("path")
        if workspace is None:
            failures.log_refusal(plan, err.status, started, request_id, err.code, path)
            return
        failures.count_refusal(plan, err.status, started)
        failures.record_failure(
            self.recorder,
            request_id=request_id,
            workspace=workspace.name,
            plan=plan,
            status=err.status,
            stream=False,
            started=started,
            error_type=err.code or "refused",
            virtual_key=workspace.key_id,
            path=path,
        )

    def error_response(
        self, fmt: InboundFormat, err: GatewayError, headers: dict[str, str]
    ) -> Response:
        body = fmt.error_body(err.status, err.message, err.code)
        return Response(orjson.dumps(body), err.status, headers, media_type=JSON)

    async def drain(self) -> None:
        """Wait for deferred commits and other background work (graceful shutdown)."""
        await self.planner.commits.drain()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)


class _Ctx:
    """Per-request values threaded through the pipeline."""

    __slots__ = (
        "fmt",
        "headers",
        "hold",
        "hold_handed_off",
        "lane",
        "lane_credential_failure",
        "lane_handed_off",
        "plan",
        "req",
        "request",
        "request_id",
        "started",
        "upstream_started",
        "workspace",
    )

    def __init__(
        self,
        fmt: InboundFormat,
        request: Request,
        request_id: str,
        started: float,
        workspace: Workspace,
        req: ChatRequest,
        plan: RoutePlan,
        headers: dict[str, str],
    ) -> None:
        self.fmt = fmt
        self.request = request
        self.request_id = request_id
        self.started = started
        self.workspace = workspace
        self.req = req
        self.plan = plan
        self.headers = headers
        self.lane: PreparedTurn | None = None
        self.hold = NO_RESERVATION
        self.hold_handed_off = False
        self.lane_handed_off = False
        self.lane_credential_failure = False
        self.upstream_started = started


def _new_request_id() -> str:
    """128 random bits as 32 hex digits, like uuid4().hex without its syscall and
    object: request ids must be unique, not secret (the process's generator is
    seeded from os.urandom)."""
    return f"{random.getrandbits(128):032x}"


def _client_tool_ids(ctx: _Ctx, observer: ToolCallObserver | None) -> tuple[str, ...] | None:
    """The streamed tool-call ids as the client saw them (its next turn answers those)."""
    ids = observer.result() if observer is not None else None
    return None if ids is None else tuple(ctx.fmt.tool_id(i) for i in ids)


def _wants_cost(request: Request) -> bool:
    return request.headers.get("x-orcarouter-include-cost", "").strip().lower() == "true"
