"""Source excerpts in five languages, assembled from idiomatic function shapes.

`source_excerpt(rng, project, target_chars)` concatenates functions until the
excerpt reaches the requested size: small (a file view in an easy turn) or
3-8 KB (the code a developer pastes into a hard question). Each shape takes
its names from the session's `Project`, so excerpts differ between sessions.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from tiergate.replay.texts_common import Project, pascal

Shape = Callable[[random.Random, Project], str]
_DOCS = (
    "Keeps the {noun} index in sync with the upstream store.",
    "Batches {noun} writes so the store sees one round trip per flush.",
    "Write-behind buffer for {noun} updates.",
    "Coalesces concurrent {noun} updates per key.",
)


def _go_worker(rng: random.Random, p: Project) -> str:
    t, f, v, n = pascal(p.noun()), p.func(), p.var(), p.noun()
    return f"""func (s *{t}Pool) {pascal(f)}(ctx context.Context, {v} *{t}) error {{
	s.mu.Lock()
	if s.closed {{
		s.mu.Unlock()
		return errPoolClosed
	}}
	s.pending[{v}.ID] = {v}
	s.mu.Unlock()

	select {{
	case s.jobs <- {v}:
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.pending, {v}.ID)
		s.mu.Unlock()
		return ctx.Err()
	}}
	// the {n} is acknowledged by the worker once it is flushed
	return nil
}}
"""


def _go_loop(rng: random.Random, p: Project) -> str:
    t, v, n = pascal(p.noun()), p.var(), rng.randint(2, 64)
    return f"""func (s *{t}Pool) run(ctx context.Context) {{
	defer s.wg.Done()
	ticker := time.NewTicker({n} * time.Millisecond)
	defer ticker.Stop()
	for {{
		select {{
		case {v}, ok := <-s.jobs:
			if !ok {{
				return
			}}
			if err := s.{p.func()}(ctx, {v}); err != nil {{
				s.log.Warn("{p.noun()} failed", "id", {v}.ID, "err", err)
				s.retry <- {v}
				continue
			}}
			s.ack({v}.ID)
		case <-ticker.C:
			s.{p.func()}Stale(time.Now())
		case <-ctx.Done():
			return
		}}
	}}
}}
"""


def _py_service(rng: random.Random, p: Project) -> str:
    c, f, v = p.type_name(), p.func(), p.var()
    return f'''class {c}:
    """{rng.choice(_DOCS).format(noun=p.noun())}"""

    def __init__(self, store, *, max_batch: int = {rng.choice((50, 100, 500))}) -> None:
        self._store = store
        self._lock = asyncio.Lock()
        self._pending: dict[str, {pascal(p.noun())}] = {{}}
        self._max_batch = max_batch

    async def {f}(self, {v}: {pascal(p.noun())}) -> None:
        async with self._lock:
            self._pending[{v}.key] = {v}
            if len(self._pending) < self._max_batch:
                return
            batch, self._pending = self._pending, {{}}
        await self._flush(batch)

    async def _flush(self, batch: dict[str, {pascal(p.noun())}]) -> None:
        for key, item in batch.items():
            try:
                await self._store.put(key, item.to_dict())
            except StoreError as exc:
                log.warning("put %s failed: %s", key, exc)
                self._pending.setdefault(key, item)
'''


def _py_function(rng: random.Random, p: Project) -> str:
    f, v, n = p.func(), p.var(), p.noun()
    return f'''def {f}({v}, *, limit=None, since=None):
    rows = []
    seen = set()
    for row in {v}:
        if since is not None and row["{n}_ts"] < since:
            continue
        key = (row["tenant_id"], row["{n}_id"])
        if key in seen:
            continue
        seen.add(key)
        rows.append(row)
        if limit is not None and len(rows) >= limit:
            break
    return sorted(rows, key=lambda r: r["{n}_ts"])
'''


def _java_class(rng: random.Random, p: Project) -> str:
    c, f, v, t = p.type_name(), p.func(), p.var(), pascal(p.noun())
    return f"""public final class {c} {{
    private final Map<String, {t}> cache = new HashMap<>();
    private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();

    public {t} {f}(String id) {{
        lock.readLock().lock();
        try {{
            {t} {v} = cache.get(id);
            if ({v} != null && !{v}.isExpired()) {{
                return {v};
            }}
        }} finally {{
            lock.readLock().unlock();
        }}
        lock.writeLock().lock();
        try {{
            {t} fresh = repository.load(id);
            cache.put(id, fresh);
            return fresh;
        }} finally {{
            lock.writeLock().unlock();
        }}
    }}

    public synchronized void evictAll(Collection<String> ids) {{
        for (String id : ids) {{
            cache.remove(id);
        }}
    }}
}}
"""


def _rust_fn(rng: random.Random, p: Project) -> str:
    t, f, v = pascal(p.noun()), p.func(), p.var()
    return f"""impl {t}Router {{
    pub async fn {f}(&self, key: &[u8]) -> Result<Option<{t}>, RouterError> {{
        let shard = self.shard_for(key);
        let guard = self.shards[shard].read().await;
        if let Some({v}) = guard.get(key) {{
            if !{v}.is_expired(Instant::now()) {{
                return Ok(Some({v}.clone()));
            }}
        }}
        drop(guard);
        let mut guard = self.shards[shard].write().await;
        let fresh = self.backend.fetch(key).await?;
        if let Some(ref value) = fresh {{
            guard.insert(key.to_vec(), value.clone());
        }}
        Ok(fresh)
    }}
}}
"""


def _ts_service(rng: random.Random, p: Project) -> str:
    c, f, v = p.type_name(), p.func(), p.var()
    return f"""export class {c} {{
  private inflight = new Map<string, Promise<{pascal(p.noun())}>>();

  constructor(private readonly db: Db, private readonly cache: Cache) {{}}

  async {f}(id: string): Promise<{pascal(p.noun())}> {{
    const cached = await this.cache.get(id);
    if (cached) return cached;
    const pending = this.inflight.get(id);
    if (pending) return pending;
    const {v} = this.db
      .query("SELECT * FROM {p.noun()}s WHERE id = $1", [id])
      .then((rows) => rows[0])
      .finally(() => this.inflight.delete(id));
    this.inflight.set(id, {v});
    const value = await {v};
    await this.cache.set(id, value, {{ ttlMs: {rng.choice((500, 5000, 60000))} }});
    return value;
  }}
}}
"""


def _go_handler(rng: random.Random, p: Project) -> str:
    t, n, v = pascal(p.noun()), p.noun(), p.var()
    return f"""// handle{t} serves GET /v1/{n}s/{{id}}.
func (h *Handler) handle{t}(w http.ResponseWriter, r *http.Request) {{
	id := chi.URLParam(r, "id")
	{v}, err := h.store.Get{t}(r.Context(), id)
	switch {{
	case errors.Is(err, sql.ErrNoRows):
		http.Error(w, "{n} not found", http.StatusNotFound)
		return
	case err != nil:
		h.log.Error("get {n}", "id", id, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode({v}); err != nil {{
		h.log.Warn("encode {n}", "err", err)
	}}
}}
"""


def _py_dataclass(rng: random.Random, p: Project) -> str:
    t, n, f = pascal(p.noun()), p.noun(), p.func()
    return f"""@dataclass(frozen=True)
class {t}:
    id: str
    tenant_id: int
    {n}_ts: datetime
    payload: Mapping[str, Any] = field(default_factory=dict)


async def {f}(pool: asyncpg.Pool, tenant_id: int, since: datetime) -> list[{t}]:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT id, tenant_id, {n}_ts, payload FROM {n}s "
            "WHERE tenant_id = $1 AND {n}_ts > $2 ORDER BY {n}_ts",
            tenant_id,
            since,
        )
    return [{t}(**dict(r)) for r in rows]
"""


def _java_service(rng: random.Random, p: Project) -> str:
    t, f, n = pascal(p.noun()), p.func(), p.noun()
    return f"""@Service
public class {t}Service {{
    private static final Logger log = LoggerFactory.getLogger({t}Service.class);
    private final {t}Repository repository;
    private final ExecutorService executor = Executors.newFixedThreadPool({rng.choice((4, 8, 16))});

    public CompletableFuture<List<{t}>> {f}(long tenantId, Instant since) {{
        return CompletableFuture.supplyAsync(() -> repository.findByTenant(tenantId), executor)
            .thenApply(list -> list.stream()
                .filter(x -> x.getUpdatedAt().isAfter(since))
                .sorted(Comparator.comparing({t}::getUpdatedAt))
                .collect(Collectors.toList()))
            .exceptionally(ex -> {{
                log.warn("{n} lookup failed for tenant {{}}", tenantId, ex);
                return List.of();
            }});
    }}
}}
"""


def _rust_struct(rng: random.Random, p: Project) -> str:
    t, f = pascal(p.noun()), p.func()
    return f"""#[derive(Debug, Clone)]
pub struct {t}Queue {{
    inner: Arc<Mutex<VecDeque<{t}>>>,
    notify: Arc<Notify>,
    capacity: usize,
}}

impl {t}Queue {{
    pub fn push(&self, item: {t}) -> Result<(), QueueFull> {{
        let mut q = self.inner.lock().unwrap();
        if q.len() >= self.capacity {{
            return Err(QueueFull);
        }}
        q.push_back(item);
        self.notify.notify_one();
        Ok(())
    }}

    pub async fn {f}(&self) -> {t} {{
        loop {{
            if let Some(item) = self.inner.lock().unwrap().pop_front() {{
                return item;
            }}
            self.notify.notified().await;
        }}
    }}
}}
"""


def _ts_route(rng: random.Random, p: Project) -> str:
    n, f, t = p.noun(), p.func(), pascal(p.noun())
    action = rng.choice(("retry", "cancel", "refresh", "sync"))
    return f"""router.post("/{n}s/:id/{action}", async (req, res, next) => {{
  try {{
    const {n} = await {f}(req.params.id, {{ tenant: req.user.tenantId }});
    if (!{n}) {{
      return res.status(404).json({{ error: "{n} not found" }});
    }}
    await queue.publish("{n}.updated", {{ id: {n}.id, at: Date.now() }});
    res.json({n});
  }} catch (err) {{
    logger.error({{ err, id: req.params.id }}, "{t} update failed");
    next(err);
  }}
}});
"""


SHAPES: dict[str, tuple[Shape, ...]] = {
    "go": (_go_worker, _go_loop, _go_handler),
    "python": (_py_service, _py_function, _py_dataclass),
    "java": (_java_class, _java_service),
    "rust": (_rust_fn, _rust_struct),
    "typescript": (_ts_service, _ts_route),
}


def source_excerpt(rng: random.Random, p: Project, target_chars: int) -> str:
    """Functions of the project's language until about `target_chars` characters."""
    out: list[str] = []
    size = 0
    while size < target_chars:
        block = rng.choice(SHAPES[p.lang])(rng, p)
        out.append(block)
        size += len(block) + 1
    text = "\n".join(out)
    if len(text) > target_chars * 1.3:  # a view shows part of a file: cut at a line
        cut = text.rfind("\n", 0, int(target_chars * 1.1))
        text = text[: max(cut, 1)]
    return text


def numbered(text: str, start: int = 1) -> str:
    """`cat -n` style, the way file views come back from tools."""
    return "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(text.splitlines(), start))
