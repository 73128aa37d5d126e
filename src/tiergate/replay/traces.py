"""Crash output as developers paste it: dumps, tracebacks, panics, failing builds.

Two families:
- `stack_dump(rng, project, target_chars)` for hard debugging turns: a Go
  goroutine dump, a Python traceback with chained exceptions and log lines, a
  Java exception or thread dump, a Rust panic backtrace, or a Node.js error
  stack, grown frame by frame to about `target_chars`;
- `failing_run(rng, project, ...)` for failure loops: what a build or test
  command prints when it fails (pytest, go test, cargo, jest/tsc, maven), a new
  variant every call.
"""

from __future__ import annotations

import random

from tiergate.replay.texts_common import Project, pascal

_GO_STATES = (
    "semacquire", "chan receive", "chan send", "select", "IO wait", "sync.Mutex.Lock",
    "sync.RWMutex.RLock", "sleep", "runnable", "running", "sync.Cond.Wait",
)  # fmt: skip
_PY_ERRORS = (
    ("KeyError", "'{noun}_id'"),
    ("AttributeError", "'NoneType' object has no attribute '{var}'"),
    ("RuntimeError", "dictionary changed size during iteration"),
    ("ValueError", "invalid literal for int() with base 10: '{noun}'"),
    ("TimeoutError", ""),
    ("sqlalchemy.exc.OperationalError", "(psycopg.errors.DeadlockDetected) deadlock detected"),
    ("asyncio.exceptions.CancelledError", ""),
    ("AssertionError", "{noun} sequence went backwards: 1042 < 1043"),
)
_JAVA_ERRORS = (
    "java.util.ConcurrentModificationException",
    "java.lang.IllegalStateException: {noun} already committed",
    'java.lang.NullPointerException: Cannot invoke "{Type}.getId()" because "{var}" is null',
    "java.util.concurrent.TimeoutException: {noun} lock not acquired within 30000 ms",
    "org.springframework.dao.CannotAcquireLockException: could not execute statement",
    "java.lang.OutOfMemoryError: Java heap space",
)
_RUST_PANICS = (
    "called `Option::unwrap()` on a `None` value",
    "called `Result::unwrap()` on an `Err` value: Io(Kind(BrokenPipe))",
    "index out of bounds: the len is {n} but the index is {n}",
    "already borrowed: BorrowMutError",
    "attempt to subtract with overflow",
    "{noun} map invariant violated: duplicate key",
)
_JS_ERRORS = (
    "TypeError: Cannot read properties of undefined (reading '{var}')",
    "RangeError: Maximum call stack size exceeded",
    "Error: connect ECONNRESET 10.0.3.17:5432",
    "Error: Transaction already closed: {noun} rollback failed",
    "UnhandledPromiseRejection: {Type} lock timeout after 5000ms",
)


def _hex(rng: random.Random, width: int = 10) -> str:
    return f"0x{rng.getrandbits(4 * width):0{width}x}"


def _fill(rng: random.Random, p: Project, text: str) -> str:
    return text.format(noun=p.noun(), var=p.var(), Type=p.type_name(), n=rng.randint(2, 900))


def _go_frame(rng: random.Random, p: Project) -> str:
    pkg = rng.choice(p.facts["dirs"]).split("/")[-1]
    recv = pascal(p.noun())
    fn = pascal(p.func()) if rng.random() < 0.5 else p.func()
    path = f"/src/{p.repo}/{rng.choice(p.facts['dirs'])}/{p.noun()}.go"
    return (
        f"{p.module()}/{pkg}.(*{recv}).{fn}({_hex(rng)}, {{{_hex(rng, 6)}, {_hex(rng)}}})\n"
        f"\t{path}:{rng.randint(20, 900)} +{_hex(rng, 3)}"
    )


def _go_runtime_frame(rng: random.Random) -> str:
    return rng.choice(
        (
            f"sync.runtime_SemacquireMutex({_hex(rng)}, 0x0, 0x1)\n"
            f"\t/usr/local/go/src/runtime/sema.go:77 +{_hex(rng, 2)}",
            f"sync.(*Mutex).lockSlow({_hex(rng)})\n\t/usr/local/go/src/sync/mutex.go:171 +0x15d",
            f"runtime.gopark({_hex(rng)}, {_hex(rng)}, 0x0?, 0x0?, 0x0?)\n"
            "\t/usr/local/go/src/runtime/proc.go:398 +0xce",
            f"runtime.chanrecv({_hex(rng)}, {_hex(rng)}, 0x1)\n"
            "\t/usr/local/go/src/runtime/chan.go:583 +0x3cd",
            f"runtime.selectgo({_hex(rng)}, {_hex(rng)}, 0x0?, 0x0, 0x3?, 0x1)\n"
            "\t/usr/local/go/src/runtime/select.go:327 +0x7be",
            f"net/http.(*conn).serve({_hex(rng)}, {{0xb1c2a8, {_hex(rng)}}})\n"
            "\t/usr/local/go/src/net/http/server.go:2009 +0x8ad",
        )
    )


def _go_dump(rng: random.Random, p: Project, target: int) -> str:
    head = rng.choice(
        (
            "fatal error: all goroutines are asleep - deadlock!\n",
            f"panic: sync: negative WaitGroup counter\n\ngoroutine {rng.randint(1, 99)} "
            "[running]:\n",
            f"panic: send on closed channel\n\ngoroutine {rng.randint(1, 99)} [running]:\n",
            "SIGQUIT: quit\nPC=0x46d8a1 m=0 sigcode=0\n",
            f"panic: runtime error: invalid memory address or nil pointer dereference\n"
            f"[signal SIGSEGV: segmentation violation code=0x1 addr=0x18 pc={_hex(rng, 6)}]\n",
        )
    )
    parts = [head]
    size = len(head)
    gid = rng.randint(5, 60)
    while size < target:
        state = rng.choice(_GO_STATES)
        mins = f", {rng.randint(1, 14)} minutes" if rng.random() < 0.5 else ""
        frames = [_go_runtime_frame(rng) for _ in range(rng.randint(1, 2))]
        frames += [_go_frame(rng, p) for _ in range(rng.randint(2, 5))]
        creator = _go_frame(rng, p).replace("(*", "created by (*", 1)
        block = f"\ngoroutine {gid} [{state}{mins}]:\n" + "\n".join(frames) + "\n" + creator + "\n"
        parts.append(block)
        size += len(block)
        gid += rng.randint(1, 9)
    return "".join(parts)


def _py_frame(rng: random.Random, p: Project) -> str:
    path = f"/app/{p.file()}" if p.lang == "python" else f"/app/src/app/{p.noun()}.py"
    call = rng.choice(
        (
            f"result = self.{p.func()}({p.var()})",
            f"await self._{p.func()}({p.var()}, timeout={rng.randint(1, 30)})",
            f"for {p.var()} in self.{p.var()}.values():",
            f"return {p.func()}(session, {p.var()}=({p.var()}))",
            "with self._lock:",
            f"{p.var()} = payload['{p.noun()}']",
        )
    )
    return f'  File "{path}", line {rng.randint(12, 800)}, in {p.func()}\n    {call}'


def _py_trace(rng: random.Random, p: Project, target: int) -> str:
    parts: list[str] = []
    size = 0
    while size < target:
        if rng.random() < 0.4:
            ts = f"2026-08-{rng.randint(10, 28)}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
            line = (
                f"{ts}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z ERROR "
                f"[{p.repo}.{p.noun()}] worker-{rng.randint(1, 16)} {p.func()} failed "
                f"tenant={rng.randint(100, 999)} attempt={rng.randint(1, 5)}\n"
            )
            parts.append(line)
            size += len(line)
        frames = "\n".join(_py_frame(rng, p) for _ in range(rng.randint(3, 8)))
        name, msg = rng.choice(_PY_ERRORS)
        tail = f"{name}: {_fill(rng, p, msg)}" if msg else name
        block = f"Traceback (most recent call last):\n{frames}\n{tail}\n"
        if rng.random() < 0.35:
            block += "\nDuring handling of the above exception, another exception occurred:\n\n"
        parts.append(block)
        size += len(block)
    return "".join(parts)


def _java_trace(rng: random.Random, p: Project, target: int) -> str:
    pkg = f"com.{p.org}.{p.repo.replace('-', '')}"
    parts: list[str] = []
    size = 0
    while size < target:
        if rng.random() < 0.4:
            block = (
                f'"{p.noun()}-worker-{rng.randint(1, 32)}" #{rng.randint(20, 300)} prio=5 '
                f"os_prio=0 tid={_hex(rng, 16)} nid={_hex(rng, 4)} waiting for monitor entry\n"
                "   java.lang.Thread.State: BLOCKED (on object monitor)\n"
            )
            for _ in range(rng.randint(3, 7)):
                cls, fn, file = p.type_name(), p.func(), p.type_name()
                block += f"\tat {pkg}.{cls}.{fn}({file}.java:{rng.randint(20, 700)})\n"
            block += f"\t- waiting to lock <{_hex(rng, 16)}> (a {pkg}.{p.type_name()})\n"
            block += f"\t- locked <{_hex(rng, 16)}> (a java.lang.Object)\n\n"
        else:
            head = 'Exception in thread "main" ' if not parts else "Caused by: "
            block = head + _fill(rng, p, rng.choice(_JAVA_ERRORS)) + "\n"
            for _ in range(rng.randint(4, 10)):
                cls = p.type_name()
                block += f"\tat {pkg}.{cls}.{p.func()}({cls}.java:{rng.randint(20, 900)})\n"
            block += f"\t... {rng.randint(5, 40)} more\n"
        parts.append(block)
        size += len(block)
    return "".join(parts)


def _rust_trace(rng: random.Random, p: Project, target: int) -> str:
    msg = _fill(rng, p, rng.choice(_RUST_PANICS))
    path = f"{rng.choice(p.facts['dirs'])}/{p.noun()}.rs"
    parts = [
        "thread 'tokio-runtime-worker' panicked at "
        f"{path}:{rng.randint(10, 600)}:{rng.randint(5, 60)}:\n"
        f"{msg}\nstack backtrace:\n"
    ]
    size = len(parts[0])
    i = 0
    while size < target:
        crate = p.repo.replace("-", "_")
        frame = rng.choice(
            (
                f"{crate}::{p.noun()}::{pascal(p.noun())}::{p.func()}",
                f"<{crate}::{p.noun()}::{pascal(p.noun())} as core::future::future::Future>::poll",
                "tokio::runtime::task::harness::Harness<T,S>::poll",
                "core::panicking::panic_fmt",
                f"{crate}::{p.noun()}::{p.func()}::{{{{closure}}}}",
            )
        )
        where = f"{path}:{rng.randint(10, 900)}:{rng.randint(5, 60)}"
        line = f"  {i:>3}: {frame}\n             at ./{where}\n"
        parts.append(line)
        size += len(line)
        i += 1
    return "".join(parts)


def _js_trace(rng: random.Random, p: Project, target: int) -> str:
    parts: list[str] = []
    size = 0
    while size < target:
        block = _fill(rng, p, rng.choice(_JS_ERRORS)) + "\n"
        for _ in range(rng.randint(4, 9)):
            block += (
                f"    at {p.type_name()}.{p.func()} (/app/dist/{p.noun()}.js:"
                f"{rng.randint(10, 900)}:{rng.randint(3, 60)})\n"
            )
        block += rng.choice(
            (
                "    at async Promise.all (index 3)\n",
                "    at process.processTicksAndRejections "
                "(node:internal/process/task_queues:95:5)\n",
            )
        )
        parts.append(block)
        size += len(block)
    return "".join(parts)


_DUMPERS = {
    "go": _go_dump,
    "python": _py_trace,
    "java": _java_trace,
    "rust": _rust_trace,
    "typescript": _js_trace,
}


def stack_dump(rng: random.Random, p: Project, target_chars: int) -> str:
    """A crash dump in the project's language (sometimes a service it calls)."""
    lang = p.lang if rng.random() < 0.85 else rng.choice(tuple(_DUMPERS))
    return _DUMPERS[lang](rng, p, target_chars)


# ---- failing builds and tests (failure loops) ------------------------------------


def failing_run(rng: random.Random, p: Project, attempt: int) -> str:
    """A failed build or test run; `attempt` varies the details turn by turn.

    Agent harnesses differ in whether they append the exit code to a command's
    output; about half do here, so some failures show only the tool's own text.
    """
    out = _failing_output(rng, p, attempt)
    if rng.random() < 0.5:
        out += rng.choice(("\nexit code: 1", "\n[process exited with code 1]", "\nexit status 2"))
    return out


def _failing_output(rng: random.Random, p: Project, attempt: int) -> str:
    test, f, n = p.test_name(), p.file(), rng.randint(10, 300)
    got, want = rng.randint(0, 99), rng.randint(100, 199)
    if p.lang == "python":
        frames = "\n".join(_py_frame(rng, p) for _ in range(rng.randint(2, 5)))
        return (
            "============================= test session starts ==============================\n"
            f"collected {n} items\n\n{p.test_file()} ..F{'.' * rng.randint(2, 30)}\n\n"
            "=================================== FAILURES ===================================\n"
            f"_____________________________ {test} _____________________________\n\n"
            f"{frames}\nE       AssertionError: assert {got} == {want}\n\n"
            f"{p.test_file()}:{rng.randint(20, 300)}: AssertionError\n"
            "=========================== short test summary info ============================\n"
            f"FAILED {p.test_file()}::{test} - AssertionError: assert {got} == {want}\n"
            f"========================= 1 failed, {n - 1} passed in {rng.uniform(0.5, 9):.2f}s "
            "=========================\n"
        )
    if p.lang == "go":
        if rng.random() < 0.4:
            return (
                f"# {p.module()}/{rng.choice(p.facts['dirs'])}\n"
                f"./{p.noun()}.go:{rng.randint(10, 400)}:{rng.randint(2, 40)}: undefined: "
                f"{p.func()}\n"
                f"./{p.noun()}.go:{rng.randint(10, 400)}:{rng.randint(2, 40)}: cannot use "
                f"{p.var()} "
                f"(variable of type *{p.type_name()}) as {p.type_name()} value in argument\n"
            )
        return (
            f"--- FAIL: {test} ({rng.uniform(0, 2):.2f}s)\n"
            f"    {p.noun()}_test.go:{rng.randint(20, 300)}: got {got}, want {want} (attempt "
            f"{attempt})\n"
            f"panic: runtime error: index out of range [{rng.randint(3, 9)}] with length "
            f"{rng.randint(0, 3)} [recovered]\n"
            + _go_dump(rng, p, 600)
            + f"FAIL\t{p.module()}/{rng.choice(p.facts['dirs'])}\t"
            f"{rng.uniform(0.1, 3):.3f}s\nFAIL\n"
        )
    if p.lang == "rust":
        if rng.random() < 0.5:
            return (
                f"error[E0{rng.choice((382, 499, 502, 308, 597))}]: borrow of moved value: "
                f"`{p.var()}`\n"
                f"  --> {f}:{rng.randint(10, 500)}:{rng.randint(5, 40)}\n   |\n"
                f"{rng.randint(10, 99)} |     let {p.var()} = {p.var()};\n"
                f"   |         - value moved here\n\n"
                f"error: could not compile `{p.repo}` (lib) due to {rng.randint(1, 4)} previous "
                "errors\n"
            )
        return (
            f"running {n} tests\ntest {p.noun()}::tests::{test} ... FAILED\n\nfailures:\n\n"
            + _rust_trace(rng, p, 500)
            + f"\nfailures:\n    {p.noun()}::tests::{test}\n\n"
            f"test result: FAILED. {n - 1} passed; 1 failed; 0 ignored\n"
            "error: test failed, to rerun pass `--lib`\n"
        )
    if p.lang == "java":
        return (
            f"[ERROR] Tests run: {n}, Failures: 1, Errors: 0, Skipped: 0\n"
            f"[ERROR] {p.type_name()}Test.{test}  Time elapsed: {rng.uniform(0, 2):.3f} s  <<< "
            "FAILURE!\n"
            f"org.opentest4j.AssertionFailedError: expected: <{want}> but was: <{got}>\n"
            + _java_trace(rng, p, 500)
            + "[ERROR] BUILD FAILURE\n"
        )
    if rng.random() < 0.35:
        return (
            f"{f}({rng.randint(5, 300)},{rng.randint(3, 40)}): error TS2339: Property "
            f"'{p.var()}' does not exist on type '{p.type_name()} | undefined'.\n"
            f"{f}({rng.randint(5, 300)},{rng.randint(3, 40)}): error TS2345: Argument of type "
            f"'string' is not assignable to parameter of type 'number'.\n"
            f"Found 2 errors in the same file, starting at: {f}\n"
        )
    return (
        f"FAIL {p.test_file()}\n  ● {p.type_name()} > {test}\n\n"
        f"    expect(received).toEqual(expected)\n\n    Expected: {want}\n    Received: {got}\n\n"
        + _js_trace(rng, p, 400)
        + f"\nTests:       1 failed, {n - 1} passed, {n} total\n"
    )


def lint_errors(rng: random.Random, p: Project) -> str:
    """A second failing tool result (linter) some failure-loop turns carry."""
    f = p.file()
    kinds = ("unused variable", "shadowed declaration", "unreachable code", "missing return")
    lines = [
        f"{f}:{rng.randint(5, 400)}:{rng.randint(1, 60)}: error: {rng.choice(kinds)} `{p.var()}`"
        for _ in range(rng.randint(1, 4))
    ]
    return "\n".join(lines) + f"\nexit status {rng.choice((1, 2))}"
