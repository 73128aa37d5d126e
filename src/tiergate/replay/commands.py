"""The `tiergate replay` commands: replay, export, report (parsers in tiergate.replay_cli)."""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from tiergate.replay.corpus import CorpusError, write_corpus
from tiergate.replay.generator import DEFAULT_SEED, DEFAULT_SESSIONS, generate_corpus

if TYPE_CHECKING:
    from tiergate.replay.pipeline import Prepared

Progress = Callable[[int], None]


@contextmanager
def progress_bar(total: int, enabled: bool, desc: str) -> Iterator[Progress]:
    """A tqdm bar on stderr counting replayed turns (silent when disabled or not a TTY)."""
    from tqdm import tqdm

    bar = tqdm(
        total=total,
        unit="turn",
        desc=desc,
        disable=not enabled,
        file=sys.stderr,
        dynamic_ncols=True,
        mininterval=0.5,
    )
    try:
        yield bar.update
    finally:
        bar.close()


def _show_progress(args: argparse.Namespace) -> bool:
    return not args.no_progress and sys.stderr.isatty()


def _load(args: argparse.Namespace) -> tuple[list[dict[str, Any]], str] | None:
    from tiergate.replay.pipeline import load_or_generate

    try:
        return load_or_generate(args.corpus, args.seed, args.sessions)
    except CorpusError as err:
        print(f"{args.corpus}: {len(err.problems)} problem(s):", file=sys.stderr)
        for p in err.problems[:20]:
            print(f"  - {p}", file=sys.stderr)
        return None
    except OSError as err:
        print(f"{args.corpus}: cannot read ({err.strerror})", file=sys.stderr)
        return None


def _prepare(corpus: list[dict[str, Any]], source: str, bar: Progress) -> Prepared | None:
    """Facts of every turn; a request the codec rejects is reported, not raised."""
    from tiergate.formats.errors import FormatError
    from tiergate.replay.pipeline import prepare

    try:
        return prepare(corpus, source, bar)
    except FormatError as err:
        print(
            f"corpus: {err.message}" + (f" (at {err.param})" if err.param else ""), file=sys.stderr
        )
        return None


def cmd_export(args: argparse.Namespace) -> int:
    corpus = generate_corpus(args.seed, args.sessions)
    if args.out == "-":
        write_corpus(corpus, sys.stdout.buffer)
    else:
        with open(args.out, "wb") as fh:
            n = write_corpus(corpus, fh)
        print(f"wrote {n} sessions to {args.out}", file=sys.stderr)
    return 0


def _pairs(items: list[str], flag: str) -> dict[str, str] | None:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"{flag} takes KEY=VALUE, got {item!r}", file=sys.stderr)
            return None
        out[key] = value
    return out


def _prefixed(sessions: Iterable[dict[str, Any]], prefix: str) -> Iterator[dict[str, Any]]:
    for doc in sessions:
        doc["session_id"] = f"{prefix}/{doc['session_id']}"
        yield doc


def cmd_import(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from tiergate.replay.importers import ImportStats, UnknownFormat, import_sessions
    from tiergate.replay.importers.labels import Labels, load_labels

    buckets, only = _pairs(args.bucket, "--bucket"), _pairs(args.only, "--only")
    if buckets is None or only is None:
        return 2
    labels: Labels | None = None
    if args.labels:
        try:
            labels = load_labels(
                args.labels, args.label_key, args.label_column, args.hard_label, buckets, only
            )
        except (OSError, ValueError) as err:
            print(f"--labels: {err}", file=sys.stderr)
            return 2
    stats = ImportStats()
    out = sys.stdout.buffer if args.out == "-" else open(args.out, "wb")  # noqa: SIM115
    bar = tqdm(unit="file", desc="import", disable=not _show_progress(args), file=sys.stderr)
    try:
        sessions = import_sessions(
            args.paths,
            args.format,
            labels,
            keep_unlabelled=not args.labelled_only,
            stats=stats,
            progress=bar.update,
        )
        if args.id_prefix:
            sessions = _prefixed(sessions, args.id_prefix)
        write_corpus(sessions, out)
    except UnknownFormat as err:
        print(err, file=sys.stderr)
        return 2
    finally:
        bar.close()
        if out is not sys.stdout.buffer:
            out.close()
    print(
        f"imported {stats.sessions} sessions from {stats.files} inputs"
        + (f" ({stats.skipped_unlabelled} unlabelled left out)" if stats.skipped_unlabelled else "")
        + (f" ({stats.skipped_empty} with no model call)" if stats.skipped_empty else ""),
        file=sys.stderr,
    )
    for problem in stats.failed[:20]:
        print(f"  skipped {problem}", file=sys.stderr)
    return 1 if stats.failed and not stats.sessions else 0


def cmd_replay(args: argparse.Namespace) -> int:
    from tiergate.replay.pipeline import run_policies, store_for

    loaded = _load(args)
    if loaded is None:
        return 2
    corpus, source = loaded
    try:
        store_factory, _ = store_for(args.state)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    from tiergate.replay.experiments import policy_list

    turns = sum(len(d["turns"]) for d in corpus)
    runs = len(policy_list(args.policy)) + (1 if args.e2e else 0)
    with progress_bar(turns * (1 + runs), _show_progress(args), "replay") as bar:
        prep = _prepare(corpus, source, bar)
        if prep is None:
            return 2
        doc = asyncio.run(
            run_policies(prep, args.policy, store_factory, args.e2e, args.e2e_sessions, bar)
        )
    print(summary_table(doc["policies"]))
    if "e2e" in doc:
        e = doc["e2e"]
        print(
            f"e2e: {e['requests']} requests, billed ${e['billed_usd']['total']:.4f}, "
            f"model ${e['model_usd']['total']:.4f}, cache hit rate billed "
            f"{100 * e['cache_hit_rate']['billed']:.1f}% / model "
            f"{100 * e['cache_hit_rate']['model']:.1f}%"
        )
    if args.json:
        _write_json(doc, args.json)
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from tiergate.replay import experiments as ex
    from tiergate.replay.costmodel import CostModel
    from tiergate.replay.explain import as_json, render, select, session_traces
    from tiergate.replay.harness import run_policy

    loaded = _load(args)
    if loaded is None:
        return 2
    corpus, source = loaded
    turns = sum(len(d["turns"]) for d in corpus)
    with progress_bar(2 * turns, _show_progress(args), "explain") as bar:
        prep = _prepare(corpus, source, bar)
        if prep is None:
            return 2
        [policy] = ex.policy_list([args.policy])
        run = asyncio.run(run_policy(prep.facts, policy, CostModel(), progress=bar))
    traces = session_traces(run)
    chosen = select(traces, args.session, args.all, args.limit)
    if args.session and not chosen:
        print(f"no session id contains {', '.join(args.session)}", file=sys.stderr)
        return 1
    print(render(chosen, len(traces), sum(t.escalated for t in traces)))
    if args.json:
        _write_json({"policy": args.policy, "sessions": as_json(chosen)}, args.json)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from tiergate.replay import figures
    from tiergate.replay.pipeline import REPORT_ENGINE_RUNS, run_report, store_for
    from tiergate.replay.report import metrics_document, render

    loaded = _load(args)
    if loaded is None:
        return 2
    corpus, source = loaded
    try:
        store_factory, label = store_for(args.state)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    out = Path(args.out)
    turns = sum(len(d["turns"]) for d in corpus)
    total = turns * (1 + REPORT_ENGINE_RUNS + (0 if args.no_e2e else 1))
    with progress_bar(total, _show_progress(args), "report") as bar:
        prep = _prepare(corpus, source, bar)
        if prep is None:
            return 2
        results = asyncio.run(
            run_report(
                prep,
                store_factory,
                label,
                not args.no_e2e,
                args.e2e_sessions,
                bar,
                only=args.only,
            )
        )
    results["command"] = _report_command(args)
    made = figures.write_all(results, out / "figures")
    (out / "replay.md").write_text(render(results, made), encoding="utf-8")
    metrics_path = Path(args.metrics) if args.metrics else out / "replay-metrics.json"
    _write_json(metrics_document(results), str(metrics_path))
    print(
        f"wrote {out / 'replay.md'}, {len(made)} figures, {metrics_path} "
        f"in {results['runtime_seconds']:.0f} s",
        file=sys.stderr,
    )
    for t in results["targets"]:
        print(f"  [{'met' if t['met'] else 'NOT met'}] {t['target']}: {t['result']}")
    return 0


def _report_command(args: argparse.Namespace) -> str:
    """The command line that reproduces this report (for the report's last section)."""
    parts = ["tiergate", "replay", "report"]
    if args.corpus:
        parts += ["--corpus", args.corpus]
    elif args.seed != DEFAULT_SEED or args.sessions != DEFAULT_SESSIONS:
        parts += ["--seed", str(args.seed), "--sessions", str(args.sessions)]
    if args.state != "memory":
        parts += ["--state", "URL"]
    if args.only:
        parts += ["--only", *args.only]
    if args.no_e2e:
        parts.append("--no-e2e")
    elif args.e2e_sessions:
        parts += ["--e2e-sessions", str(args.e2e_sessions)]
    out = os.path.relpath(args.out) if Path(args.out).is_absolute() else args.out
    parts += ["--out", out if not out.startswith("..") else args.out]
    return " ".join(shlex.quote(p) for p in parts)


def _write_json(doc: dict[str, Any], path: str) -> None:
    from tiergate.replay.report import public

    data = orjson.dumps(public(doc), option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    if path == "-":
        sys.stdout.buffer.write(data + b"\n")
    else:
        Path(path).write_bytes(data + b"\n")


def summary_table(policies: dict[str, Any]) -> str:
    """A compact fixed-width table of the headline metrics per policy."""
    head = (
        f"{'policy':<26}{'$/1k sess':>11}{'coverage':>10}{'strong':>8}{'escal.':>8}{'FP':>5}"
        f"{'missed':>8}{'latency':>9}{'cache':>8}"
    )
    lines = [head, "-" * len(head)]
    for name, p in policies.items():
        lat = p["escalation_latency_turns"]
        lines.append(
            f"{name:<26}{p['cost_per_1k_sessions']:>11.2f}"
            f"{100 * (p['hard_turn_coverage'] or 0):>9.1f}%"
            f"{100 * (p['strong_turn_share'] or 0):>7.1f}%"
            f"{p['sessions_escalated']:>8}{p['false_positive_sessions']:>5}{p['missed_sessions']:>8}"
            f"{'-' if lat is None else f'{lat:.2f}':>9}{100 * (p['cache_hit_rate'] or 0):>7.1f}%"
        )
    if "escalation" in policies:
        lines.append(
            "escalation = the engine as shipped (share caps on); "
            "escalation-uncapped = the same without share caps"
        )
    return "\n".join(lines)


def cmd_counterfactual(args: argparse.Namespace) -> int:
    from tiergate.replay.counterfactual_run import run_command

    return run_command(args, progress_bar, _show_progress(args))
