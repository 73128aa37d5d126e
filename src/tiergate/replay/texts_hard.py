"""Prose of hard turns and failure loops.

A hard turn is what a developer writes when a problem is genuinely difficult:
a symptom, what they already tried, a hypothesis, a precise ask, and the pasted
evidence (see traces.py and source.py). Sentences are drawn from several
independent banks and filled from the session's `Project`, so the paragraphs
vary in length, order and wording. Not every hard turn argues about proofs:
some are terse ("still broken, here's the new dump").
"""

from __future__ import annotations

import random

from tiergate.replay.texts_common import Project

SYMPTOMS = (
    "Under load the {svc} starts returning stale {noun}s, roughly once every {n} thousand "
    "requests.",
    "We see intermittent deadlocks in {func} after the {noun} refactor landed.",
    "The p99 latency of {func} jumped from {a} ms to {b} ms and I can't see why.",
    "About one in {n} nightly runs of the {noun} reconcile ends with duplicated rows.",
    "The {svc} leaks memory slowly: RSS grows by ~{a} MB per hour until the pod is OOM-killed.",
    "Two replicas occasionally both believe they hold the {noun} lease.",
    "After a failover the {noun} offsets sometimes go backwards and we reprocess events.",
    "The integration test for {func} is flaky: it fails {n} times out of 200 on CI, never locally.",
    "Throughput of the {noun} pipeline collapses once the queue has more than {b} items.",
    "Every few hours a worker hangs forever inside {func}; the goroutine dump is below.",
    "{func} sometimes returns a {noun} that belongs to a different tenant.",
    "Since we enabled the second cache layer, invalidation of {noun}s is unreliable.",
)
CONTEXT = (
    "It only happens with more than {n} concurrent clients.",
    "I can't reproduce it locally; it shows up in staging with {k} replicas.",
    "Retries are enabled and the {noun} writes are supposed to be idempotent.",
    "We already tried increasing the pool size and adding a mutex around {func}; neither helped.",
    "The bug appeared after we switched {func} to the batched API.",
    "Rolling back the last deploy makes it disappear, but that deploy touched forty files.",
    "The database is Postgres 16 with READ COMMITTED isolation.",
    "The {noun} cache is shared between the HTTP handlers and the background {noun2} worker.",
    "CPU is fine; the stalls line up with GC pauses only some of the time.",
    "Timeouts are {a} ms on the client and {b} ms on the server side.",
)
HYPOTHESES = (
    "My hypothesis is that {func} and {func2} race on the {noun} map when a flush overlaps a read.",
    "I suspect the lock ordering between the {noun} lock and the {noun2} lock is inconsistent.",
    "Maybe the retry path re-enqueues a {noun} after the context is cancelled, so it is processed "
    "twice.",
    "I think the cache invalidation is not atomic with the write, so a reader can observe the old "
    "value.",
    "Could the channel be closed while a sender is still inside the select?",
    "It might be that the read lock is upgraded to a write lock, which can deadlock two readers.",
    "Perhaps the ack arrives before the {noun} is persisted, and a crash in between loses it.",
    "I wonder whether the batching changes the order of {noun} updates per tenant.",
)
ASKS = (
    "Can you analyse the interleaving step by step and explain why the invariant that every "
    "{noun} is acknowledged exactly once breaks?",
    "Please reason about the possible race conditions here and tell me which one matches the dump.",
    "What is the root cause? Walk me through the sequence of events that leads to this state.",
    "Explain why this deadlocks and propose a lock ordering that is provably free of cycles.",
    "Compare the two fixes I have in mind, a global lock versus per-tenant queues, and the "
    "trade-offs "
    "for throughput and correctness.",
    "Is the memory ordering here actually guaranteed, or does it rely on the current scheduler?",
    "What is the worst-case complexity of {func} after this change, and can we keep it O(n log n)?",
    "Help me find a counterexample to my assumption that {func} is idempotent.",
    "Which edge cases does the current retry logic miss, and how should it handle a partial "
    "failure?",
    "Why does the test only fail under -race / high parallelism? Diagnose it before changing code.",
    "Can you prove that the fix preserves the ordering guarantee per tenant?",
    "Investigate the dump and tell me which goroutine/thread holds the lock everyone waits on.",
)
CONSTRAINTS = (
    "We can't change the public API.",
    "The fix must be backwards compatible with {k}.x clients.",
    "Please don't just add a global mutex; throughput matters here.",
    "Keep the batching, it saved us a lot of write load.",
    "A fix that needs a schema migration is fine if it is online.",
    "I'd rather understand it fully before we patch anything.",
)
FOLLOWUPS = (
    "That didn't fix it. With your patch applied the same thing happens, here is the new output:",
    "Closer, but now a different thread is stuck. New dump:",
    "The test still fails intermittently, {n} out of 200 runs. Latest trace:",
    "Your explanation makes sense, but the numbers don't match: we only have {k} workers. "
    "Here is the relevant code so you can check the locking:",
    "I added the logging you suggested. This is what it printed right before the hang:",
    "Here's the full {file} so you can see how {func} is called:",
    "Ok, I think the lock is not the problem. Look at this trace from production instead:",
    "We deployed the change to one canary and it crashed within ten minutes:",
)


def _fill(rng: random.Random, p: Project, text: str) -> str:
    return text.format(
        svc=f"{p.repo} service",
        noun=p.noun(),
        noun2=p.noun(),
        func=p.func(),
        func2=p.func(),
        file=p.file(),
        n=rng.randint(2, 40),
        k=rng.randint(2, 12),
        a=rng.randint(20, 400),
        b=rng.randint(500, 9000),
    )


def hard_prose(rng: random.Random, p: Project, *, first: bool) -> str:
    """The prose around a pasted artefact: a full problem statement or a follow-up."""
    if first or rng.random() < 0.35:
        parts = [_fill(rng, p, rng.choice(SYMPTOMS))]
        parts += [_fill(rng, p, s) for s in rng.sample(CONTEXT, rng.randint(1, 3))]
        if rng.random() < 0.8:
            parts.append(_fill(rng, p, rng.choice(HYPOTHESES)))
        parts += [_fill(rng, p, s) for s in rng.sample(ASKS, rng.randint(1, 2))]
        if rng.random() < 0.5:
            parts.append(_fill(rng, p, rng.choice(CONSTRAINTS)))
        return " ".join(parts)
    text = _fill(rng, p, rng.choice(FOLLOWUPS))
    if rng.random() < 0.6:
        text = _fill(rng, p, rng.choice(ASKS)) + " " + text
    return text


def hard_reply(rng: random.Random, p: Project) -> str:
    """The assistant's analysis before it reads code or proposes a patch."""
    opening = rng.choice(
        (
            "Looking at the dump, several goroutines are parked on the same mutex.",
            "The traceback shows the failure happens after the retry path re-enters {func}.",
            "Two threads hold locks in opposite order here.",
            "The stale reads line up with the window between the write and the invalidation.",
            "The panic comes from the shard map being mutated while an iterator is alive.",
        )
    )
    middle = rng.choice(
        (
            "Before changing anything I want to read {file} to confirm how the lock is taken.",
            "I'll check where {func} is called from and whether the context is propagated.",
            "Let me look at the test to see which interleaving it exercises.",
            "I'll add a regression test that forces this ordering, then fix the code.",
        )
    )
    return _fill(rng, p, opening + " " + middle)


FAILURE_PROMPTS = (
    "still failing, fix it",
    "The build is still broken. Please fix.",
    "tests fail again, fix it",
    "same error, try again",
    "It still doesn't compile.",
    "please fix the failing test",
    "Still red on CI. Fix it please.",
    "nope, still failing",
    "Keep going until the tests pass.",
)
FAILURE_TASKS = (
    "Add pagination to the {noun} listing endpoint in {file}.",
    "Make {func} accept an optional {noun} filter.",
    "Port {func} to the new {noun} client API.",
    "Add a cache in front of {func}.",
    "Implement the {noun} export in CSV format.",
    "Make the {noun} IDs in {file} typed instead of plain strings.",
)


def failure_task(rng: random.Random, p: Project) -> str:
    return _fill(rng, p, rng.choice(FAILURE_TASKS))


def failure_reply(rng: random.Random, p: Project) -> str:
    return _fill(
        rng,
        p,
        rng.choice(
            (
                "The failure is in {func}; I'll adjust the {noun} handling and rerun the tests.",
                "I see, the type of the {noun} field changed. Updating {file} and running the "
                "build.",
                "My previous edit missed a call site. Fixing it now.",
                "The assertion expects the old ordering; I'll change the sort in {func}.",
                "Let me try a different approach for {func} and run the suite again.",
            )
        ),
    )
