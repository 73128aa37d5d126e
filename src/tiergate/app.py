"""ASGI app factory: wires config, state, providers, routing and the pipeline."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tiergate import db, memtrace, metrics, tracing
from tiergate.api.admin import admin_routes
from tiergate.api.admin_common import AdminContext, TokenCheck, admin_token_from
from tiergate.api.codex_models import codex_catalog
from tiergate.api.codex_models import instructions as codex_instructions
from tiergate.api.dashboard import dashboard_mount
from tiergate.api.feedback import handle_feedback
from tiergate.api.metrics_http import metrics_endpoint
from tiergate.api.openapi import openapi_document
from tiergate.api.outcomes import handle_outcome
from tiergate.app_state import AppState
from tiergate.config import GatewayConfig, source_document
from tiergate.config_secrets import SecretsAtRest
from tiergate.config_store import (
    ConfigRepository,
    ConfigSync,
    MemoryConfigRepository,
    SqlConfigRepository,
)
from tiergate.gateway.asgi import GatewayApp
from tiergate.gateway.auth import TokenTable
from tiergate.gateway.count_tokens import count_tokens_endpoint
from tiergate.gateway.embeddings import embeddings_endpoint
from tiergate.gateway.errors import GatewayError
from tiergate.gateway.inbound import ANTHROPIC, OPENAI, RESPONSES
from tiergate.gateway.key_probe import KeyProber
from tiergate.gateway.lanes import LaneGlue, make_session_tiers
from tiergate.gateway.pipeline import Gateway
from tiergate.gateway.planner import Planner
from tiergate.providers.adapters import make_providers
from tiergate.providers.http import UpstreamHTTP
from tiergate.providers.network import UpstreamNetwork
from tiergate.recorder import Recorder
from tiergate.routing.distributor import Distributor
from tiergate.server_secret import ServerSecret, resolve_secret
from tiergate.state import make_store
from tiergate.state_upgrade import SecretMismatch, from_document, upgrade
from tiergate.virtual_keys_store import (
    KeyRepository,
    MemoryKeyRepository,
    SqlKeyRepository,
    VirtualKeys,
)

log = logging.getLogger(__name__)


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status, media_type="application/json")


async def start_stored_state(
    engine: Any,
    secret: ServerSecret,
    repo: KeyRepository,
    keys: VirtualKeys,
    seed: Mapping[str, Any],
) -> None:
    """Upgrade an older release's rows, import keys a YAML declares, load the keys.
    A wrong server secret stops start-up; an unreachable database does not."""
    try:
        if engine is not None and isinstance(repo, SqlKeyRepository):
            await upgrade(engine, secret, repo)
        declared = [
            from_document(str(ws.get("name")), vk, secret.key)
            for ws in seed.get("workspaces") or []
            if isinstance(ws, dict)
            for vk in ws.get("virtual_keys") or []
            if isinstance(vk, dict) and "id" in vk and "sha256" in vk
        ]
        if declared:
            await repo.import_keys(declared)
        await keys.refresh()
    except SecretMismatch as err:
        log.error("%s", err)
        raise
    except Exception as err:  # noqa: BLE001 - the key follower retries every poll
        log.warning("virtual keys not loaded at start-up", extra={"error": type(err).__name__})


def create_app(
    cfg: GatewayConfig,
    *,
    spool_path: str | None = None,
    env: Mapping[str, str] | None = None,
) -> GatewayApp:
    """Build the gateway ASGI app. Nothing touches the network until start-up.

    `env` (default os.environ) supplies TIERGATE_ADMIN_TOKEN and ${VAR}
    expansion when a stored config version is loaded.
    """
    env = dict(os.environ if env is None else env)
    tracing.setup_from_env(env)  # OpenTelemetry, only when asked for and installed
    http = UpstreamHTTP(
        connect_timeout=cfg.server.connect_timeout_seconds,
        read_timeout=cfg.server.request_timeout_seconds,
        network=UpstreamNetwork.from_env(env, cfg.channels),  # proxies, CA bundles
        history_bytes=cfg.server.history_cache_bytes,
    )
    distributor = Distributor.from_config(cfg)
    engine = db.make_engine(cfg.database.url) if cfg.database.url else None
    recorder = Recorder(engine, spool_path, prepare=db.ensure_schema)
    store = make_store(cfg.state)
    tiers = make_session_tiers(cfg)
    # where state lives (docs/operator.md): keys in their own table, digests keyed
    secret = resolve_secret(env, cfg.database.url)
    key_repo = SqlKeyRepository(engine) if engine is not None else MemoryKeyRepository()
    keys = VirtualKeys(key_repo, secret.key)
    gateway = Gateway(
        cfg,
        TokenTable(cfg.workspaces, keys),
        distributor,
        make_providers(http),
        Planner(cfg, distributor, store, recorder),
        recorder,
        LaneGlue(tiers, distributor, cfg),
    )
    state = AppState(cfg, gateway, http, recorder, store)
    metrics.HISTORY_CACHES.sources = lambda: {
        "decode": gateway.intake.body_memo,
        "parse": gateway.intake.message_memo,
        "encode": http.encoder,
    }
    prober = KeyProber(lambda: (gateway.distributor, gateway.providers))

    def apply_config(new_cfg: GatewayConfig, reenabled: frozenset[tuple[str, str]]) -> None:
        gateway.reload(new_cfg, reenabled)
        http.network.set_channels(new_cfg.channels)
        state.cfg = new_cfg

    seed = source_document(cfg)
    repo: ConfigRepository = (
        SecretsAtRest.for_seed(SqlConfigRepository(engine), seed, secret.key)
        if engine is not None
        else MemoryConfigRepository()
    )
    sync = ConfigSync(
        repo,
        store,
        seed,
        apply_config,
        poll_seconds=cfg.server.config_poll_seconds,
        env=env,
        hash_key=secret.key,
    )
    state.config_sync = sync
    admin = AdminContext(
        state,
        sync,
        engine,
        TokenCheck(admin_token_from(cfg, env)),
        TokenCheck(cfg.server.metrics_token),
    )

    async def chat_completions(request: Request) -> Response:
        return await gateway.handle(OPENAI, request)

    async def messages(request: Request) -> Response:
        return await gateway.handle(ANTHROPIC, request)

    async def responses(request: Request) -> Response:
        return await gateway.handle(RESPONSES, request)

    async def count_tokens(request: Request) -> Response:
        return await count_tokens_endpoint(gateway, request)

    async def embeddings(request: Request) -> Response:
        return await embeddings_endpoint(gateway, request)

    async def explain(request: Request) -> Response:
        named = {"anthropic": ANTHROPIC, "responses": RESPONSES}
        fmt = named.get(request.query_params.get("format", ""), OPENAI)
        return await gateway.explain(fmt, request)

    async def models(request: Request) -> Response:
        try:
            gateway.authenticate(request)
        except GatewayError as err:
            return gateway.error_response(OPENAI, err, {})
        live = gateway.cfg  # follows live config reloads
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "tiergate"}
            for name in live.exposed_models()
        ]
        data += [
            {"id": f"orcarouter/{r.name}", "object": "model", "created": 0, "owned_by": "router"}
            for r in live.routers
            if r.enabled
        ]
        body: dict[str, Any] = {"object": "list", "data": data}
        text = codex_instructions(live) if "client_version" in request.query_params else None
        if text is not None:  # Codex CLI asking, and the operator named its instructions
            body["models"] = codex_catalog(live, text)
        return _json(body)

    async def feedback(request: Request) -> Response:
        return await handle_feedback(gateway, engine, recorder, request)

    async def outcomes(request: Request) -> Response:
        return await handle_outcome(gateway, engine, recorder, request)

    async def prometheus(request: Request) -> Response:
        return await metrics_endpoint(admin, request)

    async def openapi(request: Request) -> Response:
        return _json(openapi_document())

    async def healthz(request: Request) -> Response:
        return _json({"status": "ok"})

    async def readyz(request: Request) -> Response:
        checks: dict[str, str] = {}
        ok = True
        if engine is not None:
            try:
                async with engine.connect() as conn:
                    await conn.exec_driver_sql("SELECT 1")
                checks["database"] = "ok"
            except Exception:  # noqa: BLE001
                checks["database"] = "unreachable"
                ok = False
        nodes: dict[str, bool] | None = None
        try:
            per_node = getattr(store, "ping_nodes", None)  # a cluster: every primary
            nodes = await per_node() if per_node is not None else None
            if nodes is None:
                alive = await store.ping()
            else:
                alive = bool(nodes) and all(nodes.values())
        except Exception:  # noqa: BLE001
            alive = False
        checks["state"] = "ok" if alive else "unreachable"
        ok = ok and alive
        body: dict[str, Any] = {"status": "ready" if ok else "not_ready", "checks": checks}
        if nodes is not None:  # which primary is down, by address
            body["state_nodes"] = {n: "ok" if up else "unreachable" for n, up in nodes.items()}
        return _json(body, 200 if ok else 503)

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        fmt = ANTHROPIC if request.url.path.startswith("/v1/messages") else OPENAI
        message = "Not found" if status == 404 else "Method not allowed"
        # A 405 names the allowed methods (RFC 9110 requires the Allow header).
        headers = dict(exc.headers or {}) if isinstance(exc, HTTPException) else {}
        return gateway.error_response(fmt, GatewayError(status, message, None), headers)

    async def server_error(request: Request, exc: Exception) -> Response:
        log.error("unhandled error", extra={"error": type(exc).__name__})
        fmt = ANTHROPIC if request.url.path.startswith("/v1/messages") else OPENAI
        return gateway.error_response(fmt, GatewayError(500, "Internal gateway error", None), {})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if engine is not None:
            try:
                applied = await db.ensure_schema(engine)  # additive, as `tiergate db migrate`
            except db.SchemaOutdated as err:  # reachable but behind: never drop rows
                log.error("database schema out of date", extra={"detail": str(err)})
                raise
            except Exception as err:  # noqa: BLE001 - rows spool until the DB answers
                log.warning(
                    "database not reachable at start-up", extra={"error": type(err).__name__}
                )
            else:
                recorder.schema_ready = True
                if applied:
                    log.info("database migrated", extra={"applied": applied})
        await start_stored_state(engine, secret, key_repo, keys, seed)
        try:
            await sync.bootstrap()  # file-versus-database precedence (config_store)
        except Exception as err:  # noqa: BLE001 - the poll retries; the file config serves
            log.warning("stored config not loaded at start-up", extra={"error": type(err).__name__})
        sync.start()
        keys.start()
        recorder.start()
        prober.start()
        tracer = memtrace.start_from_env()  # debug aid, off unless TIERGATE_MEMTRACE is set
        try:
            yield
        finally:
            if tracer is not None:
                tracer.stop()
            await prober.close()
            await keys.close()
            await sync.close()
            await gateway.drain()
            await tiers.close()  # a last try at completions the lane store missed
            await recorder.close()
            await http.close()
            await store.close()
            if tiers.store is not None:
                await tiers.store.close()
            if engine is not None:
                await engine.dispose()

    app = GatewayApp(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/orcarouter/explain", explain, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/v1/feedback", feedback, methods=["POST"]),
            Route("/v1/outcomes", outcomes, methods=["POST"]),
            Route("/metrics", prometheus, methods=["GET"]),
            Route("/openapi.json", openapi, methods=["GET"]),
            *admin_routes(admin),
            dashboard_mount(),  # static pages; data comes from /admin/api with the token
        ],
        exception_handlers={404: not_found, 405: not_found, Exception: server_error},
        lifespan=lifespan,
    )
    app.state.tiergate = state
    app.gateway = gateway  # the completion endpoints skip Starlette's routing (asgi.py)
    return app
