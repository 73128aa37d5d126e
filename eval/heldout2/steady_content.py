# ruff: noqa: E501  (hand-written transcript text: long lines read as they appear in a terminal)
"""Hand-written content of the steady hard sessions: concurrency and distributed-protocol work.

Each kind gives task wordings (which state the difficulty), design reasoning the
agent writes down, the files it touches, its tests, and the central code it writes.
"""

from __future__ import annotations

from typing import Any

#: Steady sessions: conceptually hard work that proceeds without errors.
STEADY: dict[str, dict[str, Any]] = {
    "raft_log": {
        "task": [
            "Implement log matching and commit-index advancement for the Raft module in {pkg}/{m}.py: AppendEntries consistency check with conflict truncation, and a leader may only commit entries from its current term (Figure 8 of the paper).",
            "Our Raft implementation lacks the conflict-index optimisation for AppendEntries rejections; followers walk back one entry per RPC. Add ConflictTerm/ConflictIndex as in the extended paper, keeping safety.",
        ],
        "design": [
            "A follower must reject AppendEntries if it has no entry at prevLogIndex with prevLogTerm; on conflict it deletes the existing entry and all that follow, but never truncates entries that match — otherwise a delayed RPC could remove committed entries.",
            "The leader advances commitIndex to N only if a majority has matchIndex >= N *and* log[N].term == currentTerm. Counting replicas for an older-term entry is the Figure 8 bug: it can be overwritten after a leader change.",
            "For the rejection hint, the follower returns the term of its conflicting entry and the first index of that term; the leader then searches its own log for the last entry of ConflictTerm and sets nextIndex just after it, or to ConflictIndex if it has none.",
            "Persisting currentTerm/votedFor/log before replying is required for safety; I will keep the existing fsync hook and call it before the response is built.",
        ],
        "files": ["src/{pkg}/{m}.py", "tests/test_{m}_log.py"],
        "tests": [
            "test_append_rejects_mismatch",
            "test_truncate_only_on_conflict",
            "test_commit_current_term_only",
            "test_figure8_scenario",
            "test_conflict_hint_fast_backtrack",
        ],
    },
    "vector_clock_crdt": {
        "task": [
            "Add an OR-Set CRDT to {pkg}.{m} for the collaborative tag lists: concurrent add and remove of the same tag must converge (add wins), merges must be commutative, associative and idempotent. Include property tests.",
            "Replace last-writer-wins in {pkg}/{m}.py with version vectors so concurrent edits are detected instead of silently dropped; expose siblings to the caller.",
        ],
        "design": [
            "Each add gets a unique dot (replica id, counter). Remove records the dots it has observed, not the element, so a concurrent add with an unseen dot survives the merge — that is what makes add-wins hold.",
            "Merge is the union of dots minus the union of tombstoned dots; union is commutative/associative/idempotent, so the whole merge is, as long as dots are never reused. Counters must therefore be persisted before a dot is handed out.",
            "Tombstones grow without bound; compaction is safe only for dots every replica has acknowledged (causal stability). I'll keep a per-replica acknowledged vector and drop tombstones dominated by its minimum.",
            "Comparing version vectors: a dominates b iff every entry >= and one >. Neither dominating means concurrent, and both values must be kept as siblings.",
        ],
        "files": ["src/{pkg}/{m}.py", "tests/test_{m}_crdt.py"],
        "tests": [
            "test_merge_commutative",
            "test_merge_idempotent",
            "test_add_wins_concurrent_remove",
            "test_tombstone_compaction_after_stability",
            "test_siblings_on_concurrent_write",
        ],
    },
    "lease_fencing": {
        "task": [
            "Leader election in {pkg}.{m} uses a Redis lock with a TTL; a paused leader can still write after its lease expires. Add fencing tokens end-to-end: monotonically increasing token with each lease, checked by the storage layer.",
        ],
        "design": [
            "A TTL lock alone cannot be safe: GC pauses or clock jumps let an old holder act after expiry. The store must reject writes carrying a token lower than the highest it has seen — the check must be atomic with the write.",
            "The token comes from INCR on a separate key in the same MULTI as the SET NX PX, so two leaders can never hold the same token.",
            "Renewal must not mint a new token, or writes in flight from the same leader would be rejected; only acquisition does.",
            "Monotonic clock for local lease bookkeeping: subtract a safety margin for drift, stop acting at expiry - margin, and never rely on wall-clock comparisons between nodes.",
        ],
        "files": ["src/{pkg}/{m}.py", "src/{pkg}/storage.py", "tests/test_{m}_fencing.py"],
        "tests": [
            "test_token_increases_on_acquire",
            "test_renew_keeps_token",
            "test_stale_token_write_rejected",
            "test_paused_leader_cannot_write",
            "test_concurrent_acquire_single_winner",
        ],
    },
    "mvcc_snapshot": {
        "task": [
            "Implement snapshot isolation for {pkg}'s in-memory store ({m}.py): readers see a consistent snapshot, writers detect write-write conflicts at commit (first committer wins), and old versions are garbage-collected once no snapshot can see them.",
        ],
        "design": [
            "Every version carries (begin_ts, end_ts). A transaction with snapshot ts S sees the version with begin_ts <= S < end_ts. Commit assigns a commit ts from a single counter under a short critical section.",
            "First-committer-wins: at commit, for each key written, if the latest committed version has begin_ts > S, another transaction committed after our snapshot — abort. This check and the install must be atomic per key set.",
            "Write skew is still possible under SI (two doctors on call); document it rather than pretending this is serializable.",
            "GC horizon is the minimum snapshot ts of active transactions; versions with end_ts <= horizon are unreachable. Tracking active snapshots in a heap keeps the minimum O(log n).",
        ],
        "files": ["src/{pkg}/{m}.py", "tests/test_{m}_mvcc.py"],
        "tests": [
            "test_reader_sees_snapshot",
            "test_first_committer_wins",
            "test_no_dirty_reads",
            "test_gc_respects_active_snapshots",
            "test_write_skew_documented",
        ],
    },
    "ring_buffer": {
        "task": [
            "Write a single-producer/multi-consumer ring buffer for {pkg}.{m} on top of shared memory (multiprocessing.shared_memory), with sequence numbers so slow consumers detect overruns instead of reading torn records.",
            "Our asyncio fan-out in {pkg}/{m}.py needs backpressure: a bounded broadcast channel where a slow subscriber cannot block others, lags are reported, and cancellation never loses the wake-up of other waiters.",
        ],
        "design": [
            "Use a seqlock per slot: the writer increments the slot sequence to odd, writes, then to even. A reader copies the payload and re-reads the sequence; a change or an odd value means a torn read, retry.",
            "Consumers keep their own cursor; if head - cursor > capacity the consumer has been overrun and must jump to head - capacity and report the lag rather than read stale data.",
            "Memory ordering: CPython gives no fences, but struct writes through a memoryview are sequenced in one process; across processes we rely on the sequence read-after-copy pattern, which tolerates reordering by retrying.",
            "Cancellation: a waiter that is cancelled after being notified must pass the notification on, otherwise another waiter sleeps forever — the classic lost wake-up.",
        ],
        "files": ["src/{pkg}/{m}.py", "tests/test_{m}_ring.py"],
        "tests": [
            "test_single_reader_in_order",
            "test_overrun_detected",
            "test_torn_read_retried",
            "test_cancelled_waiter_passes_wakeup",
            "test_many_consumers_independent",
        ],
    },
    "two_phase_commit": {
        "task": [
            "Make the cross-shard transfer in {pkg}.{m} crash-safe: two-phase commit with a durable coordinator log and participant recovery (in-doubt transactions resolved by asking the coordinator).",
        ],
        "design": [
            "A participant that voted YES must not unilaterally abort: it is in-doubt until it learns the outcome. So the prepare record (with the undo/redo data) must be durable before the YES is sent.",
            "The coordinator logs COMMIT before sending any commit message; if it crashes after, recovery replays commit to all participants. If it crashes before logging, presumed abort is safe.",
            "Recovery on a participant: scan for PREPARED without outcome, query the coordinator; retries must be idempotent, keyed by transaction id.",
            "Blocking is inherent in 2PC when the coordinator is down; document the timeout behaviour and expose in-doubt transactions in the admin endpoint.",
        ],
        "files": ["src/{pkg}/{m}.py", "src/{pkg}/txlog.py", "tests/test_{m}_2pc.py"],
        "tests": [
            "test_commit_all_yes",
            "test_abort_on_no_vote",
            "test_participant_recovers_in_doubt",
            "test_coordinator_crash_after_commit_log",
            "test_idempotent_commit_delivery",
        ],
    },
}

#: The central piece of code each steady session writes (module) and one test of it.
STEADY_CODE: dict[str, tuple[str, str]] = {
    "raft_log": (
        "    def handle_append(self, req):\n        if req.term < self.current_term:\n"
        "            return AppendResult(self.current_term, False, *self._conflict_hint(req))\n"
        "        self._become_follower(req.term, req.leader_id)\n"
        "        if req.prev_index > self.last_index() or (\n"
        "            req.prev_index and self.log[req.prev_index - 1].term != req.prev_term\n        ):\n"
        "            return AppendResult(self.current_term, False, *self._conflict_hint(req))\n"
        "        for offset, entry in enumerate(req.entries):\n            idx = req.prev_index + offset + 1\n"
        "            if idx <= self.last_index() and self.log[idx - 1].term != entry.term:\n"
        "                del self.log[idx - 1:]  # truncate only on a real conflict\n"
        "            if idx > self.last_index():\n                self.log.append(entry)\n"
        "        if req.leader_commit > self.commit_index:\n"
        "            self.commit_index = min(req.leader_commit, req.prev_index + len(req.entries))\n"
        "        self._persist()\n        return AppendResult(self.current_term, True, None, None)",
        "def test_commit_current_term_only(cluster):\n    leader = cluster.elect('n1', term=2)\n"
        "    leader.log.append(Entry(term=1, cmd='x'))  # left over from term 1\n"
        "    cluster.replicate(to=['n2'])\n    leader.advance_commit()\n"
        "    assert leader.commit_index == 0  # majority on an old-term entry is not enough\n"
        "    leader.propose('y')\n    cluster.replicate(to=['n2'])\n    leader.advance_commit()\n"
        "    assert leader.commit_index == 2",
    ),
    "vector_clock_crdt": (
        "    def merge(self, other: 'ORSet') -> 'ORSet':\n        out = ORSet(self.replica)\n"
        "        out.dots = {e: (self.dots.get(e, set()) | other.dots.get(e, set())) - (self.tomb | other.tomb)\n"
        "                    for e in self.dots.keys() | other.dots.keys()}\n"
        "        out.dots = {e: d for e, d in out.dots.items() if d}\n        out.tomb = self.tomb | other.tomb\n"
        "        out.clock = self.clock.join(other.clock)\n        return out",
        "@given(ops=st.lists(op_strategy(), max_size=40))\ndef test_merge_commutative(ops):\n"
        "    a, b = replay(ops, 'a'), replay(list(reversed(ops)), 'b')\n"
        "    assert a.merge(b).elements() == b.merge(a).elements()",
    ),
    "lease_fencing": (
        "ACQUIRE = '''\nif redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n"
        "  return redis.call('INCR', KEYS[2])\nend\nreturn nil\n'''\n\n"
        "    def write(self, key, value, token):\n        with self._db.begin() as tx:\n"
        "            seen = tx.execute('SELECT max_token FROM fences WHERE name = ? FOR UPDATE', (self.name,)).scalar()\n"
        "            if token < seen:\n                raise StaleLeader(token, seen)\n"
        "            tx.execute('UPDATE fences SET max_token = ? WHERE name = ?', (token, self.name))\n"
        "            tx.execute('INSERT INTO kv VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v', (key, value))",
        "def test_paused_leader_cannot_write(clock, store):\n    old = Lease(store, 'jobs').acquire()\n"
        "    clock.advance(LEASE_MS + 1)  # GC pause longer than the lease\n    new = Lease(store, 'jobs').acquire()\n"
        "    store.write('k', 'new', new.token)\n    with pytest.raises(StaleLeader):\n        store.write('k', 'old', old.token)",
    ),
    "mvcc_snapshot": (
        "    def commit(self, tx):\n        with self._commit_mu:\n            for key in tx.writes:\n"
        "                head = self._versions[key][-1] if self._versions.get(key) else None\n"
        "                if head is not None and head.begin_ts > tx.snapshot_ts:\n"
        "                    raise WriteConflict(key)  # first committer wins\n"
        "            ts = next(self._clock)\n            for key, value in tx.writes.items():\n"
        "                chain = self._versions.setdefault(key, [])\n                if chain:\n"
        "                    chain[-1].end_ts = ts\n                chain.append(Version(value, begin_ts=ts, end_ts=INF))\n"
        "        self._active.discard(tx.snapshot_ts)",
        "def test_first_committer_wins(store):\n    t1, t2 = store.begin(), store.begin()\n"
        "    t1.put('x', 1); t2.put('x', 2)\n    store.commit(t1)\n    with pytest.raises(WriteConflict):\n        store.commit(t2)",
    ),
    "ring_buffer": (
        "    def read(self, cursor):\n        while True:\n            slot = cursor % self.capacity\n"
        "            s1 = self._seq[slot]\n            if s1 & 1:\n                continue  # writer in progress\n"
        "            if s1 // 2 != cursor // self.capacity + 1:\n"
        "                if self.head - cursor > self.capacity:\n                    raise Overrun(self.head - self.capacity)\n"
        "                return None\n            data = bytes(self._buf[slot * self.size:(slot + 1) * self.size])\n"
        "            if self._seq[slot] == s1:\n                return data  # no torn read",
        "def test_cancelled_waiter_passes_wakeup():\n    async def main():\n        ch = Broadcast(capacity=4)\n"
        "        w1 = asyncio.create_task(ch.subscribe().recv())\n        w2 = asyncio.create_task(ch.subscribe().recv())\n"
        "        await asyncio.sleep(0)\n        ch.send(b'x')\n        w1.cancel()\n        assert await w2 == b'x'\n    asyncio.run(main())",
    ),
    "two_phase_commit": (
        "    def prepare(self, txid, ops):\n        undo = [self._store.snapshot(op.key) for op in ops]\n"
        "        self._log.append(Record('PREPARED', txid, ops=ops, undo=undo))\n"
        "        self._log.fsync()  # durable before the YES vote leaves this process\n        return Vote.YES\n\n"
        "    def recover(self):\n        for rec in self._log.in_doubt():\n"
        "            outcome = self._coordinator.outcome(rec.txid)  # idempotent query\n"
        "            (self.commit if outcome == 'COMMIT' else self.abort)(rec.txid)",
        "def test_participant_recovers_in_doubt(tmp_path):\n    p = Participant(tmp_path)\n"
        "    p.prepare('tx1', [Put('a', 1)])\n    p = Participant(tmp_path)  # crash and restart\n"
        "    p._coordinator = FakeCoordinator({'tx1': 'COMMIT'})\n    p.recover()\n    assert p.get('a') == 1",
    ),
}
