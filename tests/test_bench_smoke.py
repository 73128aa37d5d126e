"""Tiny runs of every benchmark in bench/ (--quick), so they cannot rot.

Each runs as its own command, exactly as documented, with real processes on
loopback, and writes its JSON to a temporary directory; the assertions check
that the figures exist and are sane, not that they are fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import REDIS_URL, service_address, service_reachable

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def _redis_up() -> bool:
    """Whether the Redis variants run: at TIERGATE_TEST_REDIS_URL, whatever its port.
    Down is a failure under TIERGATE_REQUIRE_SERVICES=1, not a quiet --no-redis."""
    if service_reachable(REDIS_URL, 6379):
        return True
    if os.environ.get("TIERGATE_REQUIRE_SERVICES") == "1":
        host, port = service_address(REDIS_URL, 6379)
        pytest.fail(f"Redis is not reachable at {host}:{port} and TIERGATE_REQUIRE_SERVICES=1")
    return False


def run_bench(script: str, out: Path, *args: str, timeout: float = 60) -> dict[str, Any]:
    env = {**os.environ, "TIERGATE_BENCH_OUT": str(out), "TIERGATE_BENCH_REDIS_URL": REDIS_URL}
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick", *args],
        capture_output=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout.decode()[-2000:] + proc.stderr.decode()[-3000:]
    assert b"JSON: " in proc.stdout
    name = proc.stdout.decode().rsplit("JSON: ", 1)[1].strip()
    data: dict[str, Any] = json.loads(Path(name).read_text())
    return data


def test_overhead_measures_direct_and_through_side_by_side(tmp_path: Path) -> None:
    data = run_bench("bench_overhead.py", tmp_path)
    target = data["targets"]["tiergate agent/memory"]
    modes = {(p["mode"], p["concurrency"]) for p in target["points"]}
    assert modes == {("nonstream", 1), ("nonstream", 4), ("stream", 1), ("stream", 4)}
    for p in target["points"]:
        assert p["errors"] == 0 and p["non_200"] == 0
        assert p["direct"]["n"] > 0 and p["through"]["n"] > 0
        assert p["through"]["p50_ms"] > 0 and p["loadgen_cpu_us_per_req"] > 0
    assert target["sweep"]["max_rps"] > 0
    assert data["machine"]["nproc"] >= 1


def test_bodies_bench_grows_the_body_and_replays_a_session(tmp_path: Path) -> None:
    """bench_bodies.py without a corpus: generated bodies of each size, and the
    whole-session replay, every request answered 200 through the gateway."""
    data = run_bench("bench_bodies.py", tmp_path, timeout=120)
    target = data["targets"]["tiergate agent/memory"]
    sizes = [p["bytes"] for p in target["points"]]
    assert [p["kb"] for p in target["points"]] == [10, 100]
    assert sizes[0] >= 10 * 1024 and sizes[1] >= 100 * 1024
    for p in [*target["points"], *target["session"]]:
        assert p["non_200"] == 0 and p["through"]["n"] > 0 and p["source"] != "real"
    assert [p["kb"] for p in target["session"]] == [2, 10]  # turns, in order
    assert set(data["copy_floor_us"]) == {"10", "100"}
    for name in ("bare relay (streaming)", "bare relay (store and forward)"):
        relay = data["targets"][name]  # the floors: same bodies, same run
        for p in [*relay["points"], *relay["session"]]:
            assert p["non_200"] == 0 and p["through"]["n"] > 0
        assert [p["kb"] for p in relay["session"]] == [2, 10]
    assert set(target["growth"]) >= {"ratio", "ratio_net_of_relay", "relay_growth_ms"}


def test_cache_pollution_bench_times_a_redis_call_after_each_copy(tmp_path: Path) -> None:
    if not _redis_up():
        pytest.skip(f"Redis is not reachable at {REDIS_URL}")
    data = run_bench("bench_cache_pollution.py", tmp_path)
    runs = data["cpu_us_by_touch_kb"]
    assert set(runs) == {"0", "450", "900", "1800"}
    assert all(v > 0 for values in runs.values() for v in values)


def test_gc_pause_bench_times_the_collections_of_a_served_archived_tree(tmp_path: Path) -> None:
    """bench_gc_pauses.py --quick: HEAD archived and served as deployed, sessions
    replayed over HTTP, and the gateway's own collections timed and read back."""
    if not _redis_up():
        pytest.skip(f"Redis is not reachable at {REDIS_URL}")
    data = run_bench("bench_gc_pauses.py", tmp_path, "--trees", "HEAD", timeout=120)
    (run,) = data["runs"]
    assert run["tree"] == "HEAD" and run["commit"]
    assert run["requests"] == 24 and 0 < run["p50_ms"] <= run["p99_ms"] <= run["max_ms"]
    young = run["gc"]["0"]  # 24 agent turns allocate enough for young passes
    assert young["passes"] >= 1 and 0 < young["max_ms"] <= young["total_ms"]


def test_session_growth_takes_away_what_the_bare_relay_grew() -> None:
    """The turn-200 ratio, raw and net of the relay's own growth over the same turns."""
    session_growth = _bench_module("bench_bodies").session_growth

    def pts(*ms: float) -> list[dict[str, Any]]:
        return [{"kb": t, "added_p50_ms": m} for t, m in zip((2, 100, 200), ms, strict=False)]

    growth = session_growth(pts(1.0, 1.2, 1.5), pts(0.1, 0.2, 0.4))
    assert growth is not None
    assert growth["ratio"] == pytest.approx(1.5)
    assert growth["relay_growth_ms"] == pytest.approx(0.3)
    assert growth["ratio_net_of_relay"] == pytest.approx(1.2)
    assert "ratio_net_of_relay" not in (session_growth(pts(1.0, 2.0), None) or {})
    assert session_growth(pts(1.0), None) is None  # one turn: nothing to compare
    assert session_growth(pts(0.0, 1.0), None) is None  # nothing added at the first turn


def test_engine_counts_store_round_trips_and_depth(tmp_path: Path) -> None:
    data = run_bench("bench_engine.py", tmp_path, *([] if _redis_up() else ["--no-redis"]))
    memory = data["per_turn"][0]
    assert memory["state"] == "memory" and memory["store_calls_per_request"] >= 1
    assert memory["plan_us_p50"] > 0
    assert data["depth"]["turn_200"]["messages"] > data["depth"]["turn_2"]["messages"]
    assert data["depth"]["plan_ratio"] > 0
    assert all(r["turns_per_s"] > 0 for r in data["replay"])
    modes = data["cap_modes"][0]
    assert modes["admit_plan_us_p50"] > 0 and modes["suppress_plan_us_p50"] > 0
    assert modes["turns"] == memory["turns"]
    if _redis_up():
        redis = data["per_turn"][1]
        assert redis["wire_round_trips_plan"] >= 1  # the counter sees real Redis traffic


def test_scale_fleet_keeps_pins_and_the_share_cap(tmp_path: Path, redis_url: str) -> None:
    data = run_bench("bench_scale.py", tmp_path)
    (fleet,) = data["fleets"]
    assert fleet["processes"] == 2 and fleet["errors"] == 0 and fleet["requests"] > 0
    assert fleet["pins_hold"], fleet["pins"]
    assert fleet["strong_share_after_warmup_pct"] <= data["cap_percent"] + 10


def test_memory_reports_rss_and_redis_bytes_per_session(tmp_path: Path) -> None:
    data = run_bench("bench_memory.py", tmp_path, *([] if _redis_up() else ["--no-redis"]))
    m = data["memory"]
    assert m["rss_idle_mb"] > 10 and m["sessions"] == 200
    assert m["rss_after_sessions_mb"] >= m["rss_idle_mb"] * 0.9
    if _redis_up():
        r = data["redis"]
        assert r["sessions"] == 100 and r["keys_per_session"] >= 1 and r["bytes_per_session"] > 0


def test_difficulty_bench_compares_the_scans_with_their_reference(tmp_path: Path) -> None:
    data = run_bench("bench_difficulty.py", tmp_path)
    assert {r["text"] for r in data["scans"]} and data["depth"]
    for row in data["scans"]:
        assert row["scan_text"]["plain_us"] > 0 and row["scan_text"]["fast_us"] > 0


def test_litellm_peer_is_optional_and_stays_on_loopback(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import bench_litellm
    finally:
        sys.path.remove(str(BENCH))
    exe, note = bench_litellm.ensure_venv(tmp_path / "no-venv", install=False)
    assert exe is None and "not installed" in note
    cfg = bench_litellm.litellm_config("http://127.0.0.1:4010")
    assert cfg["model_list"][0]["litellm_params"]["api_base"] == "http://127.0.0.1:4010/v1"
    assert bench_litellm.OFFLINE_ENV["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench_litellm.py"), "--help"], capture_output=True, timeout=30
    )
    assert proc.returncode == 0 and b"--litellm-venv" in proc.stdout


@pytest.mark.parametrize(
    "script",
    [
        "bench_overhead.py",
        "bench_engine.py",
        "bench_scale.py",
        "bench_memory.py",
        "profile_gateway.py",
        "profile_request.py",
        "bench_stack.py",
        "report.py",
        "bench_affinity.py",
        "bench_difficulty.py",
        "bench_request_scorer.py",
        "bench_cluster.py",
        "bench_bodies.py",
        "bench_session_cpu.py",
        "revocation.py",
        "count_instructions.py",
        "bench_cache_pollution.py",
        "bare_proxy.py",
        "bench_gc_pauses.py",
        "count_served.py",
        "bench_served_cpu.py",
    ],
)
def test_every_benchmark_has_help(script: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), "--help"], capture_output=True, timeout=30
    )
    assert proc.returncode == 0 and b"--" in proc.stdout


def test_session_cpu_bench_replays_sessions_with_the_memos_on_and_off(tmp_path: Path) -> None:
    """bench_session_cpu.py: every mode's sessions answered 200, a CPU reading per turn."""
    data = run_bench("bench_session_cpu.py", tmp_path, "--state", "memory", timeout=120)
    assert data["non_200"] == 0
    modes = ("memos", "no-body", "none")
    assert set(data["cpu_us"]) == {f"{f}/{m}" for f in ("openai", "anthropic") for m in modes}
    assert all(len(row) == 14 and min(row) > 0 for rows in data["cpu_us"].values() for row in rows)


def test_session_cpu_staggered_times_a_young_session_beside_an_old_one(tmp_path: Path) -> None:
    """--staggered: ten timed turns of each session of the pair, all answered 200."""
    data = run_bench(
        "bench_session_cpu.py",
        tmp_path,
        "--state",
        "memory",
        "--staggered",
        "--modes",
        "memos",
        "--format",
        "openai",
        timeout=120,
    )
    assert data["non_200"] == 0 and len(data["cpu_us"]["openai/memos"][0]) == 22
    (pair,) = data["staggered_us"]["openai/memos"]
    assert len(pair["old"]) == len(pair["young"]) == 10 and min(pair["old"] + pair["young"]) > 0


def test_session_cpu_alike_runs_sessions_of_one_agent_at_once(tmp_path: Path) -> None:
    """--alike 3: three sessions of one agent, turn by turn, a row each, all 200."""
    data = run_bench(
        "bench_session_cpu.py",
        tmp_path,
        "--state",
        "memory",
        "--alike",
        "3",
        "--modes",
        "memos",
        "--format",
        "openai",
        timeout=120,
    )
    assert data["non_200"] == 0
    rows = data["cpu_us"]["openai/memos x 3 alike"]
    assert len(rows) == 3 and all(len(row) == 14 and min(row) > 0 for row in rows)


def test_session_cpu_claude_code_shape_offers_many_tools_and_a_long_system_prompt(
    tmp_path: Path,
) -> None:
    """--tools / --system-kb: Claude Code's request shape, every turn answered 200,
    the first body carrying the system prompt and the tools asked for."""
    data = run_bench(
        "bench_session_cpu.py",
        tmp_path,
        "--state",
        "memory",
        "--modes",
        "memos",
        "--format",
        "anthropic",
        "--upstream",
        "anthropic",
        "--tools",
        "20",
        "--system-kb",
        "60",
        timeout=120,
    )
    assert data["non_200"] == 0 and len(data["cpu_us"]["anthropic/memos"][0]) == 14
    assert data["sizes"]["anthropic"][0] > 60 * 1024 + 20 * 1500


def test_instruction_counts_compare_an_archived_tree_with_the_working_tree(tmp_path: Path) -> None:
    """count_instructions.py --quick: HEAD unpacked by git archive and the working
    tree each drive profile_request.py to the end (no valgrind in the smoke run)."""
    data = run_bench(
        "count_instructions.py", tmp_path, "--trees", "HEAD", ".", "--state", "memory", timeout=120
    )
    assert [row["tree"] for row in data["trees"]] == ["HEAD", "."]
    assert all(row["runs"] == [] and row["commit"] for row in data["trees"])


def test_served_counts_send_each_turn_through_a_served_tree(tmp_path: Path) -> None:
    """count_served.py --quick: HEAD archived and served as deployed answers each
    turn's body (no valgrind in the smoke run)."""
    data = run_bench("count_served.py", tmp_path, "--trees", "HEAD", timeout=120)
    assert [(r["turn"], r["kb"] > 400) for r in data["rows"]] == [(2, False), (200, True)]


def test_served_cpu_alternates_trees_block_by_block(tmp_path: Path) -> None:
    """bench_served_cpu.py --quick: two trees served at once, a CPU reading per block."""
    data = run_bench("bench_served_cpu.py", tmp_path, "--trees", "HEAD", ".", timeout=120)
    assert [(r["turn"], len(r["blocks_us"])) for r in data["rows"]] == [(2, 2), (200, 2)] * 2
    assert all(us > 0 for r in data["rows"] for us in r["blocks_us"])


def test_instruction_count_is_read_from_callgrind_output(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import count_instructions
    finally:
        sys.path.remove(str(BENCH))
    out = tmp_path / "callgrind.out"
    out.write_bytes(b"# callgrind format\nversion: 1\nevents: Ir\nsummary: 3670123\n\nfn=x\n1 5\n")
    assert count_instructions.instructions(out) == 3670123
    out.write_bytes(b"events: Ir\ntotals: 42\n")
    assert count_instructions.instructions(out) == 42
    out.write_bytes(b"events: Ir\n")
    with pytest.raises(ValueError):
        count_instructions.instructions(out)


def _bench_module(name: str) -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(BENCH))


def test_cache_events_and_the_cycle_estimate_are_read_from_callgrind_output(
    tmp_path: Path,
) -> None:
    count_instructions = _bench_module("count_instructions")
    out = tmp_path / "callgrind.out"
    out.write_bytes(
        b"events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\nsummary: 1000 300 200 1 2 3 0 4 5\n"
    )
    got = count_instructions.events(out)
    assert got == {
        "Ir": 1000, "Dr": 300, "Dw": 200, "I1mr": 1, "D1mr": 2, "D1mw": 3,
        "ILmr": 0, "DLmr": 4, "DLmw": 5,
    }  # fmt: skip
    assert count_instructions.instructions(out) == 1000
    assert count_instructions.estimated_cycles(got) == 1000 + 10 * 6 + 100 * 9
    low = {"Ir": 100, "DLmr": 7}
    assert count_instructions.per_request(low, {"Ir": 400, "DLmr": 13}, 3) == {
        "Ir": 100.0,
        "DLmr": 2.0,
    }


def test_each_bench_session_gets_tool_outputs_of_its_own() -> None:
    """The gateway remembers what it read from a tool output by its text, so two
    sessions of one template must not share outputs (or the second is flattered)."""
    session_cpu = _bench_module("bench_session_cpu")
    bodies = session_cpu.session("openai", 14, 0.5, "m")
    first, second = session_cpu.own_outputs(bodies), session_cpu.own_outputs(bodies)
    assert [len(b) for b in first] == [len(b) for b in bodies] == [len(b) for b in second]
    for a, b, original in zip(first[1:], second[1:], bodies[1:], strict=True):
        assert a != b and session_cpu._OUTPUT in original and session_cpu._OUTPUT not in a
        outputs = [m["content"] for m in json.loads(a)["messages"] if m["role"] == "tool"]
        assert outputs and all(o.split(" ", 1)[0] != "out" for o in outputs)


def test_session_turn_counting_runs_the_three_sends_without_valgrind(tmp_path: Path) -> None:
    """count_instructions.py --session-turns --quick: the base, long and young
    runs of bench_session_cpu.py --count all answered (no valgrind in the smoke run)."""
    data = run_bench(
        "count_instructions.py",
        tmp_path,
        "--trees",
        ".",
        "--state",
        "memory",
        "--session-turns",
        "22",
        timeout=180,
    )
    assert data["args"]["session_turns"] == 22
    (row,) = data["trees"]
    assert row["tree"] == "." and row["Ir"] == {"young": None, "old": None, "ratio": None}


@pytest.mark.parametrize("mode", ["cpu", "sample", "count"])
def test_request_profile_runs_the_agent_pipeline_in_process(mode: str) -> None:
    """bench/profile_request.py: every request through the ASGI app is answered 200."""
    args = ["--mode", mode, "--requests", "20", "--warmup", "5", "--repeat", "1"]
    proc = subprocess.run(
        [sys.executable, str(BENCH / "profile_request.py"), *args],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout.decode()[-2000:]
    out = proc.stdout.decode()
    if mode == "sample":
        assert "samples" in out and "inclusive %" in out
    else:
        data = json.loads(out.strip().splitlines()[-1])
        assert set(data["statuses"]) == {"200"}
        assert mode != "cpu" or data["cpu_us_per_req"][0] > 0


def test_affinity_bench_prints_hit_rate_and_cost_with_and_without() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench_affinity.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| affinity-off |" in proc.stdout and "| affinity-on |" in proc.stdout
    assert "affinity saves" in proc.stdout


def test_request_scorer_bench_reports_both_scorers(tmp_path: Path) -> None:
    script = str(BENCH / "bench_request_scorer.py")
    proc = subprocess.run(
        [sys.executable, script, "--quick", "--data", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "mmlu_short" in proc.stdout and "lexical p50" in proc.stdout
    assert "corpus median skipped" in proc.stdout


def test_cluster_bench_compares_both_layouts(tmp_path: Path) -> None:
    from redis_cluster_support import require_redis_tools

    require_redis_tools()
    data = run_bench("bench_cluster.py", tmp_path, timeout=120)
    slot, tags = data["layouts"]["single-slot"], data["layouts"]["hash-tags"]
    assert sum(1 for n in slot["nodes"] if n["keys"]) == 1  # everything on one primary
    assert all(n["keys"] for n in tags["nodes"])  # sessions on every primary
    assert slot["calls_per_request"] == 2 and tags["calls_per_request"] == 6
