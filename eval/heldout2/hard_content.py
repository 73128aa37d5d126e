# ruff: noqa: E501  (hand-written transcript text: long lines read as they appear in a terminal)
"""Hand-written content of the hard scenarios: one entry per kind of hard problem.

Each kind gives several task wordings (vague ones hide the difficulty, explicit
ones state it), the code the agent reads, hypotheses it tries, the failures that
survive its edits (several distinct ones, so error diversity can grow), and the
final fix. Placeholders: {pkg} package, {m} module name, {root} checkout.
"""

from __future__ import annotations

from typing import Any

KINDS: dict[str, dict[str, Any]] = {
    "pool_race": {
        "edits": [
            (
                "            conn, since = self._idle.pop()",
                "            with self._lock:\n                conn, since = self._idle.pop()",
            ),
            (
                "        self._idle.append((conn, time.monotonic()))",
                "        with self._lock:\n            self._idle.append((conn, time.monotonic()))",
            ),
            (
                "        conn = self._factory()",
                "        try:\n            conn = self._factory()\n        except BaseException:\n            self._sem.release()\n            raise",
            ),
            (
                "        for conn, since in list(self._idle):",
                "        with self._lock:\n            stale = [(c, s) for c, s in self._idle if now - s > self._idle_timeout]\n        for conn, since in stale:",
            ),
        ],
        "trace": [
            "acquire conn=0x7f3a idle=2 in_use=3 sem=1",
            "reap conn=0x7f3a age=0.0014s -> close",
            "release conn=0x7f3a (already idle!)",
            "acquire conn=0x7f41 idle=0 in_use=4 sem=0",
            "retry wrapper: release after error conn=0x7f3a",
        ],
        "vague": [
            "Intermittent `ConnectionResetError` from {pkg}.{m} under load. Happens maybe once per "
            "few thousand requests in prod, never locally.",
            "Our workers occasionally hang forever in `Pool.acquire()`; the process has to be killed. "
            "No traceback. Version 2.3.1.",
        ],
        "explicit": [
            "There is a race in the connection pool in {pkg}/{m}.py: two threads can check out the "
            "same connection when `release()` and `acquire()` interleave with the idle reaper. Fix "
            "it without serialising every acquire behind one global lock (throughput matters).",
        ],
        "file": "src/{pkg}/{m}.py",
        "code": [
            "class Pool:\n    def __init__(self, factory, size=10, idle_timeout=30.0):\n"
            "        self._factory = factory\n        self._idle = collections.deque()\n"
            "        self._in_use = set()\n        self._lock = threading.Lock()\n"
            "        self._sem = threading.BoundedSemaphore(size)\n        self._idle_timeout = idle_timeout",
            "    def acquire(self, timeout=None):\n        if not self._sem.acquire(timeout=timeout):\n"
            "            raise PoolTimeout(self._size)\n        while self._idle:\n"
            "            conn, since = self._idle.pop()\n            if conn.alive():\n"
            "                self._in_use.add(conn)\n                return conn\n"
            "            conn.close()\n        conn = self._factory()\n        with self._lock:\n"
            "            self._in_use.add(conn)\n        return conn",
            "    def _reap(self):\n        now = time.monotonic()\n        for conn, since in list(self._idle):\n"
            "            if now - since > self._idle_timeout:\n                self._idle.remove((conn, since))\n"
            "                conn.close()",
            "    def release(self, conn):\n        self._in_use.discard(conn)\n"
            "        self._idle.append((conn, time.monotonic()))\n        self._sem.release()",
        ],
        "repro": "python - <<'PY'\nimport threading, random, time\nfrom {pkg}.{m} import Pool\nfrom tests.fakes import FakeConn\n"
        "p = Pool(FakeConn, size=4, idle_timeout=0.001)\nerrors = []\ndef work():\n    for _ in range(2000):\n"
        "        c = p.acquire(timeout=2)\n        try:\n            c.ping()\n        except Exception as e:\n"
        "            errors.append(repr(e))\n        finally:\n            p.release(c)\n"
        "ts = [threading.Thread(target=work) for _ in range(8)]\n[t.start() for t in ts]; [t.join() for t in ts]\n"
        "print(len(errors), errors[:3])\nPY",
        "failures": [
            "7 ['ConnectionResetError(\"conn 0x7f3a closed by reaper\")', 'ConnectionResetError(\"conn 0x7f3a closed by reaper\")', 'ConnectionResetError(\"conn 0x7f41 closed by reaper\")']",
            "2 ['ConnectionResetError(\"conn 0x7f12 closed by reaper\")', 'ValueError(\"deque.remove(x): x not in deque\")']",
            'Exception in thread Thread-5 (work):\nTraceback (most recent call last):\n  File "/usr/lib/python3.11/threading.py", line 1045, in _bootstrap_inner\n    self.run()\n  File "<stdin>", line 9, in work\n  File "{root}/src/{pkg}/{m}.py", line 48, in acquire\n    raise PoolTimeout(self._size)\n{pkg}.errors.PoolTimeout: pool exhausted (size=4)\n0 []',
            '0 []\n(hung for 120s, interrupted)\n^CTraceback (most recent call last):\n  File "<stdin>", line 17, in <module>\n  File "/usr/lib/python3.11/threading.py", line 1119, in join\n    self._wait_for_tstate_lock()\nKeyboardInterrupt',
            "RuntimeError: Set changed size during iteration\n3 ['ConnectionResetError(\"conn 0x7f9c closed by reaper\")']",
        ],
        "hypotheses": [
            "The reaper iterates a snapshot of `_idle` but `acquire` pops from the live deque without the lock, so the reaper can close a connection that acquire just handed out. Let me take the lock around the pop.",
            "Holding the lock in acquire() is not enough: release() appends without it, so the reaper's `remove` can race with `append`. I'll guard release too.",
            "Still failing. Maybe the problem is the semaphore: if `_factory()` raises, the permit is never returned and the pool slowly shrinks — that would explain the hangs rather than the resets.",
            "The resets persist with the lock everywhere, so the reaper must be closing connections that are *already checked out*. A connection is in `_idle` and `_in_use` at the same time if release() runs twice for the same conn. Let me add an assertion.",
            "Let me revert the global-lock change; it masks the symptom (throughput halves) and the assertion shows the real problem is the double release from the retry wrapper.",
        ],
        "fix_old": "    def release(self, conn):\n        self._in_use.discard(conn)",
        "fix_new": "    def release(self, conn):\n        with self._lock:\n            if conn not in self._in_use:\n                return  # double release from a retry path: ignore, never re-idle\n            self._in_use.remove(conn)\n            self._idle.append((conn, time.monotonic()))\n        self._sem.release()\n        return\n        self._in_use.discard(conn)",
        "pass": "0 []",
        "test": "tests/test_{m}.py",
    },
    "billing_precision": {
        "edits": [
            (
                "    return round(subtotal + tax, 2)",
                "    return (subtotal + tax).quantize(CENT, rounding=ROUND_HALF_UP)",
            ),
            (
                "    tax = subtotal * item.tax_rate",
                "    tax = subtotal * Decimal(str(item.tax_rate))",
            ),
            (
                "    return round(gross * (1 - discount), 2)",
                "    return (gross * (1 - Decimal(str(discount)))).quantize(CENT, ROUND_HALF_UP)",
            ),
            (
                "    return math.fsum(i.unit_price * i.quantity * (1 + i.tax_rate)",
                "    return sum((invoice_total(inv.items) for inv in invoices), Decimal(0))",
            ),
        ],
        "trace": [
            "line sku=A-1 subtotal=59.97 tax=5.3223375 total=65.2923375 rounded=65.29",
            "line sku=B-7 raw=0.015 repr=0.01499999999999999944 rounded=0.01",
            "invoice INV-2023-0412 v1 total=118.27 v2 total=118.28",
            "report fsum=2318440.113 invoices=2318437.55 diff=2.563",
        ],
        "vague": [
            "Invoice totals are off by a cent for some customers compared with the line items. "
            "Example attached: 3 line items of 19.99 with 8.875% tax.",
            "The monthly report and the invoices disagree on revenue by a few dollars over ~40k "
            "invoices. Which one is right?",
        ],
        "explicit": [
            "Rounding in {pkg}.{m} is inconsistent: we round per line in one path and per invoice "
            "in another, with binary floats, and half-even vs half-up differs between them. Make "
            "totals exact and consistent (Decimal, one rounding rule, documented), keeping stored "
            "historical invoices reproducible.",
        ],
        "file": "src/{pkg}/{m}.py",
        "code": [
            "def line_total(item):\n    subtotal = item.unit_price * item.quantity\n"
            "    tax = subtotal * item.tax_rate\n    return round(subtotal + tax, 2)",
            "def invoice_total(items, discount=0.0):\n    gross = sum(line_total(i) for i in items)\n"
            "    return round(gross * (1 - discount), 2)",
            "def monthly_revenue(invoices):\n    # fast path used by the report\n"
            "    return math.fsum(i.unit_price * i.quantity * (1 + i.tax_rate)\n"
            "                     for inv in invoices for i in inv.items)",
        ],
        "repro": 'python -c "from {pkg}.{m} import *; from decimal import Decimal as D; '
        'print(invoice_total(sample_items()), sum(D(str(line_total(i))) for i in sample_items()))"',
        "failures": [
            "65.3 65.31",
            "AssertionError: assert Decimal('65.30') == Decimal('65.31')",
            "TypeError: unsupported operand type(s) for *: 'decimal.Decimal' and 'float'",
            "decimal.InvalidOperation: [<class 'decimal.InvalidOperation'>]",
            "AssertionError: historical invoice INV-2023-0412 changed: 118.27 -> 118.28",
        ],
        "hypotheses": [
            "`round()` on floats is half-even on the binary value: 65.305 is really 65.30499999... Using Decimal with ROUND_HALF_UP should make per-line rounding match the invoice.",
            "Decimal arithmetic now fails because `tax_rate` still comes in as float from the ORM. Converting via `Decimal(str(x))` avoids importing binary noise.",
            "The totals now match per invoice, but the report path uses fsum over unrounded lines, so it will never equal the sum of rounded invoices. Which rule is canonical? The docs say invoices are the legal document, so the report must sum rounded invoice totals.",
            "Changing the rounding mode broke reproducibility of stored invoices issued before the change. We need a versioned rounding policy stored with each invoice.",
            "Discount is applied after rounding lines, so a 10% discount on three lines differs from discounting each line. The contract says discount applies to the pre-tax subtotal — the current code applies it to the taxed total, which is a second bug.",
        ],
        "fix_old": "def line_total(item):\n    subtotal = item.unit_price * item.quantity",
        "fix_new": "def line_total(item, policy=ROUNDING_V2):\n    subtotal = to_dec(item.unit_price) * item.quantity\n    if policy is ROUNDING_V1:\n        return legacy_line_total(item)",
        "pass": "65.31 65.31",
        "test": "tests/test_{m}.py",
    },
    "ws_state_machine": {
        "edits": [
            (
                "        elif self.state is State.CLOSING and self._close_sent_acked:",
                "        elif self.state is State.CLOSING:",
            ),
            (
                "            self._loop.create_task(self._send_frame(Opcode.CLOSE, code))",
                "            await self._writer_drained()\n            await self._send_frame(Opcode.CLOSE, code)",
            ),
            (
                "        self._unacked.pop(seq, None)",
                "        for s in [s for s in self._unacked if s <= seq]:\n            del self._unacked[s]",
            ),
        ],
        "trace": [
            "conn=3 OPEN -> CLOSING (local close)",
            "conn=3 recv CLOSE in CLOSING acked=False (ignored)",
            "conn=5 ack seq=42 token=t42",
            "conn=5 ack seq=41 token=t41 (went backwards)",
            "conn=3 writer still has 2 frames queued at close",
        ],
        "vague": [
            "Clients sometimes never get the close frame and sit in CLOSING until the 60s timeout. "
            "Only seen behind the nginx proxy.",
            "After a reconnect, messages are occasionally delivered twice. Using {pkg} 4.1 with resume enabled.",
        ],
        "explicit": [
            "The connection state machine in {pkg}/{m}.py violates the close handshake (RFC 6455 "
            "7.1.2): when both sides send close concurrently we never transition CLOSING -> CLOSED, "
            "and resume tokens are issued before the ack, so a reconnect replays acked frames. Fix "
            "both, with tests for the interleavings.",
        ],
        "file": "src/{pkg}/{m}.py",
        "code": [
            "class State(enum.Enum):\n    CONNECTING = 0\n    OPEN = 1\n    CLOSING = 2\n    CLOSED = 3",
            "    async def close(self, code=1000):\n        if self.state is State.OPEN:\n"
            "            self.state = State.CLOSING\n            await self._send_frame(Opcode.CLOSE, code)\n"
            "        await self._closed.wait()",
            "    def _on_close_frame(self, code):\n        if self.state is State.OPEN:\n"
            "            self.state = State.CLOSING\n            self._loop.create_task(self._send_frame(Opcode.CLOSE, code))\n"
            "        elif self.state is State.CLOSING and self._close_sent_acked:\n"
            "            self._finish_close()",
            "    def _on_ack(self, seq):\n        self._resume_token = self._mint_token(seq)\n"
            "        self._unacked.pop(seq, None)",
        ],
        "repro": "pytest -q tests/test_{m}.py -k 'close or resume' -p no:randomly --count=50",
        "failures": [
            "FAILED tests/test_{m}.py::test_simultaneous_close[23] - asyncio.exceptions.TimeoutError\n1 failed, 49 passed in 63.2s",
            "FAILED tests/test_{m}.py::test_resume_after_drop - AssertionError: assert [41, 42, 42, 43] == [41, 42, 43]\n1 failed, 99 passed",
            "FAILED tests/test_{m}.py::test_close_during_send - RuntimeError: send on CLOSED connection\n2 failed, 48 passed",
            "FAILED tests/test_{m}.py::test_simultaneous_close[7] - AssertionError: state is State.CLOSING, expected State.CLOSED\nFAILED tests/test_{m}.py::test_resume_after_drop - assert 3 == 2",
            "ERROR tests/test_{m}.py::test_ping_pong - Task was destroyed but it is pending!\n1 error, 49 passed",
        ],
        "hypotheses": [
            "When we receive CLOSE while already CLOSING (we sent ours first), `_close_sent_acked` is false because the peer's close *is* the ack. The branch should finish the close unconditionally in CLOSING.",
            "That fixed the simultaneous close but now `close()` during an in-flight send raises. The writer task needs to drain before we transition; the state change and the send are not atomic with respect to other coroutines.",
            "The duplicate delivery: the token is minted from `seq` on ack, but acks can arrive out of order across the reconnect boundary, so the token can move backwards. It must be monotonic: max(acked).",
            "Reverting the drain change: it introduced a pending-task warning because the writer is awaited from the reader callback. Better to model close as an explicit transition table so each (state, event) pair is handled once.",
        ],
        "fix_old": "    def _on_ack(self, seq):\n        self._resume_token = self._mint_token(seq)",
        "fix_new": "    def _on_ack(self, seq):\n        self._acked_upto = max(self._acked_upto, seq)\n        self._resume_token = self._mint_token(self._acked_upto)",
        "pass": "100 passed in 71.4s",
        "test": "tests/test_{m}.py",
    },
    "perf_regression": {
        "edits": [
            ("            if row not in out:", "            if row not in set(out):"),
            (
                "    return sorted(out, key=key) if key else out",
                "    return sorted(out, key=key) if key else out  # stable sort keeps batch order",
            ),
            (
                "        return hash((self.id, tuple(sorted(self.fields.items()))))",
                "        return hash(self.id)",
            ),
        ],
        "trace": [
            "batch=17 rows=12000 dedup_ms=4210",
            "batch=18 rows=12000 dedup_ms=4488",
            "sort key calls=3418231 parse_ts_ms=11203",
            "rss=3.9GiB after canonical json",
        ],
        "vague": [
            "`{pkg} export` got much slower between 1.8 and 1.9: 40s -> 9 min on our 200k-row dataset.",
            "The nightly job that calls `{pkg}.{m}.merge_batches` now times out. Nothing in the changelog looks related.",
        ],
        "explicit": [
            "Performance regression in {pkg}.{m}.merge_batches since 1.9 (quadratic on the number of "
            "batches). Profile it, find the regression, and fix it without changing output order "
            "(which downstream checksums depend on).",
        ],
        "file": "src/{pkg}/{m}.py",
        "code": [
            "def merge_batches(batches, key=None):\n    out = []\n    for batch in batches:\n"
            "        for row in batch:\n            if row not in out:\n                out.append(row)\n"
            "    return sorted(out, key=key) if key else out",
            "class Row:\n    __slots__ = ('id', 'fields', '_hash')\n    def __eq__(self, other):\n"
            "        return self.id == other.id and self.fields == other.fields\n"
            "    def __hash__(self):\n        return hash((self.id, tuple(sorted(self.fields.items()))))",
        ],
        "repro": "python -m cProfile -s cumtime -m {pkg} export --input bench/rows_200k.jsonl --out /tmp/o.csv 2>&1 | head -25",
        "failures": [
            "         1984222573 function calls in 531.2 seconds\n\n   Ordered by: cumulative time\n\n   ncalls  tottime  percall  cumtime  percall filename:lineno(function)\n        1    0.000    0.000  531.210  531.210 {{built-in method builtins.exec}}\n        1    0.912    0.912  529.870  529.870 {m}.py:88(merge_batches)\n1983920001  318.442    0.000  498.113    0.000 {m}.py:41(__eq__)\n   200000    0.402    0.000    1.118    0.000 {m}.py:45(__hash__)",
            "real\t6m48.102s\nuser\t6m47.511s\nsys\t0m0.402s",
            "AssertionError: checksum mismatch: expected 9f31c2e7 got 1b07aa40 (row order changed)",
            "real\t0m52.883s\nuser\t0m51.970s\nsys\t0m0.610s\nMemoryError",
            "TypeError: unhashable type: 'dict'",
        ],
        "hypotheses": [
            "`row not in out` is a linear scan over a list, so the dedup is O(n^2). 1.9 replaced a set with a list to preserve order. A dict keyed by the row keeps insertion order and is O(1).",
            "Using a set of rows broke output order, which the checksums depend on. Need order-preserving dedup: `dict.fromkeys`.",
            "`dict.fromkeys(rows)` fails because some rows carry nested dict fields, and `__hash__` only sorts the top level. Hash on a canonical JSON form instead?",
            "Canonical JSON per row is slow and memory-hungry (MemoryError at 200k). The ids are unique per source batch; dedup on (batch source, id) plus a content digest only on collision.",
            "py-spy shows a second hotspot: `sorted(out, key=key)` with key=lambda r: r.fields['ts'] parses the timestamp string every comparison. Precompute once.",
        ],
        "fix_old": "    out = []\n    for batch in batches:\n        for row in batch:\n            if row not in out:\n                out.append(row)",
        "fix_new": "    seen = {}\n    for batch in batches:\n        for row in batch:\n            seen.setdefault(row.dedup_key(), row)\n    out = list(seen.values())",
        "pass": "real\t0m37.214s\nuser\t0m36.551s\nsys\t0m0.588s\nchecksum ok: 9f31c2e7",
        "test": "tests/test_{m}.py",
    },
    "flaky_tests": {
        "edits": [
            (
                "    return {pkg}.{m}.Store(_CACHE_DIR)",
                "    return {pkg}.{m}.Store(tempfile.mkdtemp())",
            ),
            (
                "    nxt = job.next_run(datetime.now())",
                "    nxt = job.next_run(datetime.now(ZoneInfo('Europe/Berlin')))",
            ),
            ("    for i in range(5):", "    store.clear()\n    for i in range(5):"),
        ],
        "trace": [
            "seed=3 order: test_eviction_order after test_touch_refreshes",
            "seed=5 order: test_schedule_next_run first; now=2024-03-31T01:30+01:00",
            "store dir=/tmp/tmpq3k1 entries_before_test=1",
        ],
        "vague": [
            "CI is red about one run in five, always somewhere in tests/test_{m}.py, different test each time. Please make it stable.",
            "`test_schedule_next_run` fails on the CI runners in the early morning only.",
        ],
        "explicit": [
            "tests/test_{m}.py is flaky: tests share a module-level cache and a tmp dir, depend on "
            "execution order (pytest-randomly exposes it), and one test depends on local time "
            "around DST. Make them deterministic without weakening what they check.",
        ],
        "file": "tests/test_{m}.py",
        "code": [
            "_CACHE_DIR = tempfile.mkdtemp()\n\n@pytest.fixture\ndef store():\n"
            "    return {pkg}.{m}.Store(_CACHE_DIR)",
            "def test_schedule_next_run():\n    job = Job(cron='30 2 * * *', tz='Europe/Berlin')\n"
            "    nxt = job.next_run(datetime.now())\n    assert nxt - datetime.now() < timedelta(days=1)",
            "def test_eviction_order(store):\n    for i in range(5):\n        store.put(f'k{{i}}', i)\n"
            "    assert list(store.keys()) == ['k1', 'k2', 'k3', 'k4', 'k0']",
        ],
        "repro": "for s in 1 2 3 4 5 6 7 8; do pytest -q -p randomly -p 'randomly' -p no:cacheprovider tests/test_{m}.py -p randomly --randomly-seed=$s 2>&1 | tail -1; done",
        "failures": [
            "12 passed in 0.41s\n1 failed, 11 passed in 0.44s\n12 passed in 0.39s\n12 passed in 0.40s\n1 failed, 11 passed in 0.45s\n12 passed in 0.41s\n12 passed in 0.42s\n12 passed in 0.38s",
            "12 passed in 0.41s\n12 passed in 0.40s\n2 failed, 10 passed in 0.47s\n12 passed in 0.39s\n12 passed in 0.41s\n12 passed in 0.40s\n1 failed, 11 passed in 0.43s\n12 passed in 0.40s",
            "FAILED tests/test_{m}.py::test_schedule_next_run - TypeError: can't subtract offset-naive and offset-aware datetimes",
            "FAILED tests/test_{m}.py::test_eviction_order - AssertionError: assert ['k0', 'k1', 'k2', 'k3', 'k4'] == ['k1', 'k2', 'k3', 'k4', 'k0']",
            "FAILED tests/test_{m}.py::test_schedule_next_run[2024-03-31T01:30] - AssertionError: assert datetime.timedelta(days=1, seconds=3600) < datetime.timedelta(days=1)",
        ],
        "hypotheses": [
            "The shared `_CACHE_DIR` survives between tests, so whichever test runs first leaves entries behind. Switching the fixture to `tmp_path` should isolate them.",
            "tmp_path fixed one failure but seed 3 still fails: test_eviction_order assumes the LRU touched k0 in a previous test. It must touch k0 itself.",
            "The schedule test compares against `datetime.now()` twice with a naive datetime; around DST the next 02:30 Berlin does not exist. Freeze the clock and use aware datetimes.",
            "Making now() aware raised TypeError inside Job.next_run, which itself mixes naive and aware values — so the flaky test was hiding a real bug in next_run on DST transitions.",
        ],
        "fix_old": "_CACHE_DIR = tempfile.mkdtemp()\n\n@pytest.fixture\ndef store():\n    return {pkg}.{m}.Store(_CACHE_DIR)",
        "fix_new": "@pytest.fixture\ndef store(tmp_path):\n    return {pkg}.{m}.Store(tmp_path / 'cache')",
        "pass": "12 passed in 0.40s\n12 passed in 0.41s\n12 passed in 0.39s\n12 passed in 0.42s\n12 passed in 0.40s\n12 passed in 0.41s\n12 passed in 0.40s\n12 passed in 0.41s",
        "test": "tests/test_{m}.py",
    },
    "orm_migration": {
        "edits": [
            (
                "        return [dict(r) for r in rows]",
                "        return [r._asdict() for r in rows]",
            ),
            (
                "    engine.execute(users.update().where(users.c.id == uid).values(name=name))",
                "    with engine.connect() as conn:\n        conn.execute(users.update().where(users.c.id == uid).values(name=name))",
            ),
            (
                "    return session.query(User).filter_by(id=user_id).first()",
                "    return session.scalars(select(User).filter_by(id=user_id)).first()",
            ),
        ],
        "trace": [
            "BEGIN (implicit)",
            "UPDATE users SET name=? WHERE users.id = ?",
            "ROLLBACK",
            "SELECT users.name FROM users WHERE users.id = ? -> 'old-name'",
        ],
        "vague": [
            "Please bump SQLAlchemy to 2.0; we're pinned to 1.4 and it blocks other upgrades.",
            "Upgrade pydantic to v2. The test suite should pass afterwards.",
        ],
        "explicit": [
            "Migrate {pkg} from SQLAlchemy 1.4 to 2.0 style: `session.query` to `select()`, "
            "autocommit removal, `Row` no longer behaving like a dict, and the `relationship` "
            "lazy-load semantics under async sessions. Keep the public API and the Alembic history "
            "intact; there is an implicit-commit dependency in {m}.py we must preserve.",
        ],
        "file": "src/{pkg}/{m}.py",
        "code": [
            "def get_user(session, user_id):\n    return session.query(User).filter_by(id=user_id).first()",
            "def list_active(engine):\n    with engine.connect() as conn:\n"
            "        rows = conn.execute(text('SELECT id, email FROM users WHERE active'))\n"
            "        return [dict(r) for r in rows]",
            "def rename(engine, uid, name):\n    engine.execute(users.update().where(users.c.id == uid).values(name=name))",
        ],
        "repro": "pip install -q 'sqlalchemy>=2.0' && pytest -q -x tests 2>&1 | tail -15",
        "failures": [
            "FAILED tests/test_{m}.py::test_list_active - TypeError: cannot convert dictionary update sequence element #0 to a sequence\n1 failed, 37 passed",
            "FAILED tests/test_{m}.py::test_rename - AttributeError: 'Engine' object has no attribute 'execute'\n1 failed, 58 passed",
            "FAILED tests/test_api.py::test_rename_visible - AssertionError: assert 'old-name' == 'new-name'\n1 failed, 140 passed",
            "FAILED tests/test_async.py::test_user_orders - sqlalchemy.exc.MissingGreenlet: greenlet_spawn has not been called; can't call await_only() here. Was IO attempted in an unexpected place?",
            "ERROR tests/test_migrations.py::test_alembic_head - sqlalchemy.exc.ArgumentError: Textual SQL expression 'version_num' should be explicitly declared as text('version_num')",
        ],
        "hypotheses": [
            "`Row` is a named tuple in 2.0; `dict(r)` must become `r._asdict()` or use `.mappings()`.",
            "`Engine.execute` is gone; use `with engine.begin() as conn:` so the statement commits — `connect()` would silently roll back.",
            "test_rename_visible fails because the API reads through another connection and the write was never committed: 1.4 autocommitted DML through `engine.execute`. The `begin()` block must wrap the same unit of work as before.",
            "The async test hits a lazy load on `user.orders` outside the greenlet. 2.0 with AsyncSession needs `selectinload` or `lazy='raise'` to surface these; changing the relationship default would alter the public API, so add explicit loader options at the query sites.",
        ],
        "fix_old": "def rename(engine, uid, name):\n    engine.execute(",
        "fix_new": "def rename(engine, uid, name):\n    with engine.begin() as conn:  # 1.4 autocommitted this DML; keep that contract\n        conn.execute(",
        "pass": "212 passed, 3 skipped in 41.77s",
        "test": "tests",
    },
    "cache_refactor": {
        "edits": [
            ("_REGISTRY: list[Codec] = []", "from {pkg}.{m}.codecs import _REGISTRY"),
            ("DEFAULT = Envelope.empty()", "from {pkg}.{m}.envelope import DEFAULT"),
            (
                "@register\nclass JsonCodec(Codec):",
                "@register  # keep first: first match wins\nclass JsonCodec(Codec):",
            ),
        ],
        "trace": [
            "import {pkg}.{m}.msgpack_codec (registers msgpack)",
            "import {pkg}.{m}.json_codec (registers json)",
            "DEFAULT id=0x7f01 in {pkg}.{m}.envelope",
            "DEFAULT id=0x7f9a in {pkg}.{m}",
        ],
        "vague": [
            "Split {pkg}/{m}.py (2,400 lines) into a package. Pure refactor, no behaviour change.",
            "Move the serializers out of {pkg}.{m} into their own module so plugins can import them without pulling in the server.",
        ],
        "explicit": [
            "Refactor {pkg}.{m} into a package while preserving subtle invariants: registration "
            "order of the codecs (first match wins), the module-level singleton identity that "
            "plugins compare with `is`, pickle paths of persisted objects (`{pkg}.{m}.Envelope`), "
            "and import-time side effects other modules rely on.",
        ],
        "file": "src/{pkg}/{m}.py",
        "code": [
            "_REGISTRY: list[Codec] = []\n\ndef register(codec):\n    _REGISTRY.append(codec)\n    return codec",
            "@register\nclass JsonCodec(Codec):\n    name = 'json'\n\n@register\nclass MsgpackCodec(Codec):\n    name = 'msgpack'",
            "DEFAULT = Envelope.empty()\n\ndef encode(obj):\n    for c in _REGISTRY:\n        if c.accepts(obj):\n            return c.encode(obj)",
        ],
        "repro": "pytest -q tests 2>&1 | tail -12",
        "failures": [
            "FAILED tests/test_plugins.py::test_plugin_default_identity - assert <Envelope empty> is <Envelope empty>\n1 failed, 311 passed",
            "FAILED tests/test_persist.py::test_load_v3_snapshot - ModuleNotFoundError: No module named '{pkg}.{m}.envelope'; '{pkg}.{m}' is not a package\n1 failed",
            "FAILED tests/test_codecs.py::test_first_match_wins - AssertionError: assert 'msgpack' == 'json'\n2 failed, 310 passed",
            "ImportError: cannot import name 'register' from partially initialized module '{pkg}.{m}' (most likely due to a circular import)",
            "FAILED tests/test_persist.py::test_load_v3_snapshot - AttributeError: Can't get attribute 'Envelope' on <module '{pkg}.{m}.core'>",
        ],
        "hypotheses": [
            "The plugin test compares `DEFAULT is` the one it imported. After the split, `DEFAULT` is created twice because both the shim and the new module execute `Envelope.empty()`. The shim must re-export, not recreate.",
            "Codec order flipped because the package `__init__` imports msgpack before json alphabetically. Registration order is an invariant: import the submodules explicitly in the old order.",
            "Old pickles reference `{pkg}.{m}.Envelope`. With `{m}` now a package, that path still resolves if `__init__` re-exports Envelope, but pickle needs the class's `__module__` to match for *new* dumps to stay loadable by old readers. Set `Envelope.__module__` back?",
            "Circular import: serializers import `register` from the package, the package imports serializers. Move `register` and `_REGISTRY` to a leaf module `registry.py` that imports nothing.",
        ],
        "fix_old": "_REGISTRY: list[Codec] = []",
        "fix_new": "from {pkg}.{m}.registry import _REGISTRY, register  # leaf module: no import cycle",
        "pass": "312 passed in 18.02s",
        "test": "tests",
    },
}
