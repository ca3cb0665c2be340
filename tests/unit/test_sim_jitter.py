"""jitSim: the paper's Figure 2, the reference against the C core, closed forms, bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from hpcvar.errors import UsageError
from hpcvar.noise.trace import CpuTrace
from hpcvar.results.schema import TABLES
from hpcvar.sim import closed_form as cf
from hpcvar.sim import jitter as J
from hpcvar.sim import jitter_ref as R
from hpcvar.sim.synth import synthesize
from tests.conftest import run_cli

# the paper's Figure 2 trace (jitter duration, cycles to next jitter)
FIG2 = [(10, 50), (5, 30), (25, 20), (5, 10), (15, 100), (20, 300), (10, 20), (60, 60), (5, 20), (10, 70)]


def _fig2_offsets():
    tr = R.RefTrace([d for d, _ in FIG2], [g for _, g in FIG2])
    # node 1 starts after the first jitter, node 2 after the jitter of the 7th event
    return tr, [tr.S[0] + 10, tr.S[6] + 10]


def test_figure2_reference():
    tr, offs = _fig2_offsets()
    assert tr.advance(offs[0], 0, 100) == 130
    assert tr.advance(offs[1], 0, 100) == 165
    res = R.simulate([tr], offs, J.Workload(work=100, phases=1, barrier="none"))
    assert res.compute_end == [[130, 165]] and res.total == 165
    assert res.absorbed == [30, 65]


def test_figure2_native():
    _, offs = _fig2_offsets()
    nt = J.NativeTraces([CpuTrace(0, np.array([d for d, _ in FIG2]), np.array([g for _, g in FIG2]))])
    out = J.simulate(nt, J.Workload(work=100, phases=1, barrier="none"), 2,
                     J.Alignment("file", explicit=np.array(offs)), per_task=True, keep_tasks=True)
    assert out.compute_end.tolist() == [[130, 165]] and out.total == 165
    assert out.absorbed.tolist() == [30, 65]


def test_advance_edges():
    tr = R.RefTrace([10, 5], [20, 15])  # S = 0, 30, L = 50
    assert tr.advance(0, 0, 0) == 0  # W = 0 returns t, even inside a jitter
    assert tr.advance(0, 0, 20) == 30  # ends exactly where the next jitter starts: not absorbed
    assert tr.advance(0, 0, 21) == 36  # one more cycle: that jitter is absorbed
    assert tr.advance(0, 3, 1) == 11  # jitter in progress absorbed first
    assert tr.advance(0, 0, 35 * 3) == 150  # three whole laps
    nt = J.NativeTraces([CpuTrace(0, np.array([10, 5]), np.array([20, 15]))])
    for t, w in [(0, 0), (0, 20), (0, 21), (3, 1), (0, 105), (49, 1), (50, 7), (123, 456)]:
        for o in (0, 7, 29, 30, 49):
            assert nt.advance(0, o, t, w)[0] == tr.advance(o, t, w), (o, t, w)


def _random_case(rng: random.Random):
    K = rng.choice([1, 1, 2, 3])
    cpus = []
    for c in range(K):
        E = rng.randint(1, 6)
        d = [rng.choice([0, 0, 1, 3, 10, 40]) for _ in range(E)]
        g = [rng.choice([0, 1, 5, 20, 50]) for _ in range(E)]
        if sum(g) == 0:
            g[0] = rng.randint(1, 30)
        cpus.append(CpuTrace(c, np.array(d), np.array(g)))
    wl = J.Workload(work=rng.choice([0, 1, 7, 30, 100, 500]), phases=rng.randint(1, 4),
                    barrier=rng.choice(["none", "tree"]), arity=rng.randint(1, 5), send=rng.choice([0, 1, 5, 30]),
                    recv=rng.choice([0, 2, 9]), lat_intra=rng.randint(0, 10), lat_inter=rng.randint(0, 50),
                    cores_per_node=K)
    align = J.Alignment(mode=rng.choice(["unsync", "sync", "cosched"]), window=rng.randint(1, 60),
                        origin=rng.randint(0, 100))
    return cpus, wl, align, rng.randint(1, 40), rng.randint(0, 2**64 - 1)


@pytest.mark.parametrize("seed", range(6))
def test_native_equals_reference(seed):
    rng = random.Random(1000 + seed)
    checked = 0
    while checked < 60:
        cpus, wl, align, n, s = _random_case(rng)
        nt = J.NativeTraces(cpus)
        if align.mode == "cosched" and any(align.origin % align.window >= L for L in nt.lengths):
            continue
        rts = [R.RefTrace(c.duration, c.gap) for c in cpus]
        offs = R.offsets(rts, n, align.mode, s, 2, align.window, align.origin)
        out = J.simulate(nt, wl, n, align, s, 2, per_task=True, keep_tasks=True)
        assert out.offsets.tolist() == offs
        ref = R.simulate(rts, offs, wl)
        assert out.total == ref.total
        assert out.phase_end.tolist() == ref.phase_end
        assert out.compute_end.tolist() == ref.compute_end
        assert out.next_start.tolist() == ref.next_start
        assert out.absorbed.tolist() == ref.absorbed
        # two threads, split as finely as the tree allows (grain 1), must give the same integers
        out2 = J.simulate(nt, wl, n, align, s, 2, per_task=True, keep_tasks=True, threads=2, grain=1)
        assert out2.phase_end.tolist() == ref.phase_end
        assert out2.compute_end.tolist() == ref.compute_end
        assert out2.next_start.tolist() == ref.next_start
        assert out2.absorbed.tolist() == ref.absorbed
        assert out2.last_start.tolist() == out.last_start.tolist()
        base = J.simulate(None, wl, n, align)
        rbase = R.simulate(None, offs, wl)
        assert base.total == rbase.total
        checked += 1


@pytest.mark.parametrize("barrier,arity,n,threads,grain", [
    ("tree", 2, 3000, 2, 0), ("tree", 3, 2500, 2, 0), ("tree", 2, 1000, 3, 7), ("tree", 4, 777, 2, 5),
    ("tree", 1, 300, 2, 1), ("none", 2, 2000, 2, 0), ("none", 2, 50, 4, 1)])
def test_threads_equal_one_thread(barrier, arity, n, threads, grain):
    """Threaded runs (the default split and finer ones, partial deepest levels, more threads
    than cores, a chain that stays serial) give the integers of the single-threaded core."""
    rng = random.Random(n * 31 + arity)
    cpus = []
    for c in range(2):
        E = 40
        cpus.append(CpuTrace(c, np.array([rng.choice([0, 3, 50, 400]) for _ in range(E)]),
                             np.array([rng.randint(1, 900) for _ in range(E)])))
    nt = J.NativeTraces(cpus)
    wl = J.Workload(work=700, phases=5, barrier=barrier, arity=arity, send=13, recv=11, lat_intra=3, lat_inter=29,
                    cores_per_node=2)
    al = J.Alignment("unsync")
    one = J.simulate(nt, wl, n, al, 4, 0, per_task=True, keep_tasks=True)
    many = J.simulate(nt, wl, n, al, 4, 0, per_task=True, keep_tasks=True, threads=threads, grain=grain)
    assert one.total > wl.phases * wl.work
    assert many.phase_end.tolist() == one.phase_end.tolist()
    assert np.array_equal(many.compute_end, one.compute_end)
    assert np.array_equal(many.next_start, one.next_start)
    assert np.array_equal(many.absorbed, one.absorbed)
    assert np.array_equal(many.last_start, one.last_start)


def test_threads_bad_count():
    nt = J.NativeTraces([CpuTrace(0, np.array([1]), np.array([5]))])
    with pytest.raises(UsageError):
        J.simulate(nt, J.Workload(work=3, phases=1), 4, J.Alignment("unsync"), threads=0)


def test_tree_order_of_arrival_and_costs():
    """A 3-task binary tree on a jitter-free trace: the closed sum of costs and latencies."""
    rts = [R.RefTrace([0], [10**9])]
    res = R.simulate(rts, [0, 0, 0], J.Workload(work=100, phases=1, barrier="tree", arity=2, send=5, recv=7,
                                                lat_intra=0, lat_inter=11))
    # leaves: finish 100, send 5 -> arrive 116; root: recv 116+7=123, recv 130; sends 135 (-> 146), 140 (-> 151)
    # leaves: receive the release: 146+7=153 and 151+7=158; root starts at 140
    assert res.next_start == [[140, 153, 158]]
    assert res.total == 158


def test_seeds_reproducible_and_replicas_differ():
    tr = synthesize("250Hz:2us", 2.4e9, 1.0, seed=3)
    nt = J.NativeTraces(tr.cpus)
    wl = J.Workload(work=2_400_000, phases=3, barrier="tree")
    a = J.simulate(nt, wl, 50, J.Alignment("unsync"), seed=9, replica=0, keep_tasks=True)
    b = J.simulate(nt, wl, 50, J.Alignment("unsync"), seed=9, replica=0, keep_tasks=True)
    c = J.simulate(nt, wl, 50, J.Alignment("unsync"), seed=9, replica=1, keep_tasks=True)
    assert a.offsets.tolist() == b.offsets.tolist() and a.total == b.total
    assert a.offsets.tolist() != c.offsets.tolist()


def test_synthetic_trace_shape():
    tr = synthesize("250Hz:2us,poisson:1Hz:1ms", 1e9, 10.0, seed=1)
    c = tr.cpus[0]
    assert c.length == 10 * 10**9
    assert (c.gap >= 0).all() and (c.duration > 0).all()
    per = synthesize("100Hz:1ms", 1e6, 1.0, seed=5).cpus[0]
    assert cf.periodic_event([per]) == (1000, 9000)


# ---- closed forms ---------------------------------------------------------------------------------

@pytest.mark.parametrize("d,g,w", [(3, 7, 5), (3, 7, 7), (3, 7, 8), (2, 5, 23), (1, 4, 4), (4, 4, 1)])
def test_delay_distribution_matches_reference(d, g, w):
    tr = R.RefTrace([d], [g])
    brute = [tr.advance(phi, 0, w) - w for phi in range(d + g)]
    assert brute == [cf.delay_at(d, g, w, phi) for phi in range(d + g)]
    v, p = cf.delay_pmf(d, g, w)
    emp = {int(x): brute.count(int(x)) / (d + g) for x in set(brute)}
    assert {int(x): pr for x, pr in zip(v, p, strict=True) if pr > 0} == pytest.approx(emp)


def test_expected_max_exact_by_enumeration():
    d, g, w = 3, 5, 6
    tr = R.RefTrace([d], [g])
    delays = [tr.advance(phi, 0, w) - w for phi in range(d + g)]
    exact = np.mean([max(delays[a], delays[b]) for a in range(d + g) for b in range(d + g)])
    assert cf.expected_max_delay(d, g, w, 2) == pytest.approx(exact)
    # the limit: the detour per phase as tasks grow (W <= g)
    assert cf.expected_max_delay(d, g, 4, 10**6) == pytest.approx(3.0, abs=1e-6)


def test_closed_form_agrees_with_simulation_unsync():
    """Barrier none, unsynchronized, one phase: mean of the simulated max delay vs E[max D]."""
    d, g, w, n = 40, 960, 500, 16
    nt = J.NativeTraces([CpuTrace(0, np.full(50, d), np.full(50, g))])
    wl = J.Workload(work=w, phases=1, barrier="none")
    totals = [J.simulate(nt, wl, n, J.Alignment("unsync"), seed=5, replica=r).total for r in range(400)]
    m, lo, hi = J.mean_ci(totals)
    exp = cf.unsync_none(d, g, w, n)["expected_phase_cycles"]
    assert lo - 1.0 <= exp <= hi + 1.0, (m, lo, hi, exp)


def test_closed_form_sync_and_cosched_exact():
    d, g, w, N = 40, 960, 700, 30
    nt = J.NativeTraces([CpuTrace(0, np.full(20, d), np.full(20, g))])
    wl = J.Workload(work=w, phases=N, barrier="none")
    # co-scheduled with the window = period, origin at phase 100 of the period: deterministic
    out = J.simulate(nt, wl, 64, J.Alignment("cosched", window=d + g, origin=100))
    assert out.total == cf.synced_none(d, g, w, N, phi0=100)["expected_total_cycles"]
    # sync: the expectation over the shared phase; average over many replicas
    totals = [J.simulate(nt, wl, 8, J.Alignment("sync"), seed=2, replica=r).total for r in range(300)]
    m, lo, hi = J.mean_ci(totals)
    assert lo - 1 <= cf.synced_none(d, g, w, N)["expected_total_cycles"] <= hi + 1
    assert cf.synced_none(d, g, w, 10**6)["expected_slowdown"] == pytest.approx(d / g, rel=1e-3)


# ---- the command line -----------------------------------------------------------------------------

@pytest.fixture
def fig2_files(tmp_path):
    t = tmp_path / "fig2.txt"
    t.write_text("# Figure 2 of the paper\n" + "".join(f"{d} {g}\n" for d, g in FIG2))
    tr, offs = _fig2_offsets()
    o = tmp_path / "fig2.off"
    o.write_text("".join(f"{x}\n" for x in offs))
    return t, o


def test_cli_figure2_json_and_per_task(runs_dir, fig2_files, tmp_path):
    t, o = fig2_files
    csv = tmp_path / "tasks.csv"
    r = run_cli(["sim", "jitter", "--trace", str(t), "--freq", "1GHz", "--work", "100", "--barrier", "none",
                 "--phases", "1", "--tasks", "2", "--offsets", str(o), "--per-task", str(csv), "--json",
                 "--no-plots"], check=True)
    res = json.loads(r.stdout)
    assert res["total_cycles"] == 165 and res["baseline_cycles"] == 100
    assert res["slowdown"] == pytest.approx(0.65) and res["phases"] == [165]
    assert csv.read_text().splitlines() == ["task,phase,compute_end,next_start", "0,0,130,165", "1,0,165,165"]


def test_cli_sweep_tables_plots(runs_dir):
    r = run_cli(["sim", "jitter", "--synthetic", "1kHz:25us", "--trace-length", "10s", "--quantum", "1ms",
                 "--barrier", "none", "--phases", "3", "--tasks", "1..64:x4", "--align", "unsync,cosched",
                 "--window", "1ms", "--replicas", "2", "--json", "--plots"], check=True)
    res = json.loads(r.stdout)
    assert [p["tasks"] for p in res["points"]] == [1, 4, 16, 64] * 2
    for p in res["points"]:
        assert p["closed_form"] is not None  # periodic trace, barrier none
    run = next(runs_dir.iterdir())
    assert (run / "jitter.points.parquet").is_file() and (run / "jitter.phases.parquet").is_file()
    assert (run / "plots" / "sweep.png").is_file() and (run / "plots" / "sweep.svg").is_file()


def test_cli_default_draws_no_figures_the_report_draws_them(runs_dir, tmp_path):
    """sim jitter draws no figure by default (matplotlib costs more than a small simulation); the report draws
    the stored run's figures into its own file and leaves the run as it was."""
    run_cli(["sim", "jitter", "--synthetic", "1kHz:25us", "--trace-length", "10s", "--quantum", "1ms",
             "--phases", "2", "--tasks", "1..16:x4", "--json"], check=True)
    run = next(runs_dir.iterdir())
    assert not list(run.glob("plots/*"))
    rep = run_cli(["report", str(run), "-o", str(tmp_path / "r.html")])
    assert rep.returncode == 0, rep.stderr
    html = (tmp_path / "r.html").read_text()
    assert "Slowdown against tasks (log x)" in html and "data:image/png" in html
    assert not list(run.glob("plots/*"))


def test_cli_threads_auto(runs_dir):
    """--threads auto (the default, stored as 0) gives the integers of one thread, on a tree wide enough to
    split over two threads; a count that is not one is refused naming the flag."""
    args = ["sim", "jitter", "--synthetic", "1kHz:25us,poisson:50Hz:200us", "--trace-length", "10s", "--quantum",
            "1ms", "--send-cycles", "500", "--recv-cycles", "500", "--phases", "3", "--tasks", "4096", "--json"]
    auto = json.loads(run_cli(args, check=True).stdout)
    one = json.loads(run_cli(args + ["--threads", "1"], check=True).stdout)
    keys = ("total_cycles_each", "baseline_cycles", "phases", "absorbed_cycles", "waiting_cycles")
    assert [[p[k] for k in keys] for p in auto["points"]] == [[p[k] for k in keys] for p in one["points"]]
    stored = sorted(json.loads((d / "run.json").read_text())["params"]["threads"] for d in runs_dir.iterdir())
    assert stored == [0, 1]
    r = run_cli(args + ["--threads", "two"])
    assert r.returncode == 2 and "--threads" in r.stderr and "auto" in r.stderr


def test_cli_threads_same_results(runs_dir):
    args = ["sim", "jitter", "--synthetic", "1kHz:25us,poisson:50Hz:200us", "--trace-length", "10s", "--quantum",
            "1ms", "--barrier", "tree", "--send-cycles", "500", "--recv-cycles", "500", "--latency-inter", "2us",
            "--phases", "3", "--tasks", "100,2048", "--replicas", "2", "--json", "--no-plots"]
    one = json.loads(run_cli(args, check=True).stdout)
    two = json.loads(run_cli(args + ["--threads", "2"], check=True).stdout)
    for p1, p2 in zip(one["points"], two["points"], strict=True):
        assert p1["total_cycles_each"] == p2["total_cycles_each"] and p1["phases"] == p2["phases"]
        assert p1["absorbed_cycles"] == p2["absorbed_cycles"] and p1["waiting_cycles"] == p2["waiting_cycles"]
    assert one["points"][-1]["slowdown"] > 0


@pytest.mark.parametrize("args,flag", [
    (["--arity", "0"], "--arity"),
    (["--tasks", "3"], "fig2.off"),
    (["--tasks", "1"], "fig2.off"),
    (["--align", "cosched"], "--window"),
    (["--tasks", "200G", "--offsets", None], "--tasks"),
    (["--threads", "0"], "--threads"),
])
def test_cli_bad_input(runs_dir, fig2_files, args, flag):
    t, o = fig2_files
    base = ["sim", "jitter", "--trace", str(t), "--freq", "1GHz", "--work", "100", "--barrier", "none",
            "--no-plots"]
    if "--offsets" not in args:
        base += ["--offsets", str(o)] if args[0] == "--tasks" else []
    else:
        args = args[:2]
    r = run_cli(base + args)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: ") and flag in r.stderr


def test_cli_empty_and_zero_compute_trace(runs_dir, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    r = run_cli(["sim", "jitter", "--trace", str(empty), "--freq", "1GHz", "--tasks", "2"])
    assert r.returncode == 2 and "empty.txt" in r.stderr
    zero = tmp_path / "zero.txt"
    zero.write_text("5 0\n7 0\n")
    r = run_cli(["sim", "jitter", "--trace", str(zero), "--freq", "1GHz", "--tasks", "2"])
    assert r.returncode == 2 and "compute" in r.stderr


def test_cli_wrap_warning(runs_dir, tmp_path):
    t = tmp_path / "small.txt"
    t.write_text("10 90\n")
    r = run_cli(["sim", "jitter", "--trace", str(t), "--freq", "1GHz", "--work", "500", "--tasks", "4",
                 "--phases", "2", "--no-plots", "--json"], check=True)
    res = json.loads(r.stdout)
    # the warnings live in the run (run.json), and go to stderr beside machine-readable output, once each
    stored = json.loads((Path(res["run"]) / "run.json").read_text())["warnings"]
    assert any("wrap" in w for w in stored) and any("covers" in w for w in stored)
    assert [ln.removeprefix("warning: ") for ln in r.stderr.splitlines() if ln.startswith("warning: ")] == stored
    shown = run_cli(["runs", "show", res["run"]], check=True).stdout
    assert all(shown.count(w) == 1 for w in stored)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 8, 9, 16, 17, 33, 1000, 9 * 65537 + 3])
def test_summaries_in_place_equal_the_plain_ones(n):
    """The per-task quantiles computed inside the task arrays (no per-task temporary: the core's bytes per task
    are all the memory per task) equal numpy's on copies, for sizes around the packing's chunk size."""
    rng = np.random.default_rng(n)
    tasks, cursors = np.zeros(n, J.TASK_DTYPE), np.zeros(n, J.CURSOR_DTYPE)
    tasks["m"] = rng.integers(0, 10**12, n)
    tasks["end"] = rng.integers(0, 10**6, n)
    cursors["absorbed"] = rng.integers(0, 10**6, n)
    cursors["offset"] = rng.integers(0, 10**6, n)
    wl = J.Workload(work=1000, phases=3, barrier="tree", arity=2, send=5, recv=5)
    want_a = J.quantiles(cursors["absorbed"].copy())
    want_w = J.quantiles(tasks["m"] - wl.busy_per_task(n) - cursors["absorbed"])
    assert J._summaries_in_place(tasks, cursors, wl) == (want_a, want_w)


def test_params_are_parsed_by_the_command_line_and_stored(runs_dir, tmp_path):
    """sim jitter's run.json params are its JitterParams (spans with their unit), read back by from_json."""
    from hpcvar.kinds.sim_jitter.job import JitterParams, Span, parse_span

    assert parse_span("1200", "--send-cycles") == Span(cycles=1200)
    assert parse_span("2us", "--send-cycles") == Span(seconds=2e-6)
    assert Span(seconds=2e-6).to_cycles(2e9) == 4000 and Span(cycles=7).to_cycles(1e9) == 7
    out = json.loads(run_cli(["sim", "jitter", "--synthetic", "250Hz:2us", "--tasks", "1,2", "--phases", "3",
                              "--duration", "2s", "--quantum", "2ms", "--send-cycles", "1us", "--freq", "1GHz",
                              "--align", "unsync,cosched", "--window", "10ms", "--no-plots", "--json"],
                             check=True).stdout)
    stored = json.loads((Path(out["run"]) / "run.json").read_text())["params"]
    p = JitterParams.from_json(stored)
    assert p.tasks == (1, 2) and p.align == ("unsync", "cosched") and p.duration_s == 2.0 and p.freq_hz == 1e9
    assert p.work == Span(seconds=2e-3) and p.send == Span(seconds=1e-6) and p.window == Span(seconds=10e-3)
    assert p.to_json() == stored
    # what the spans resolved to at the trace's frequency is in the result
    assert out["work_cycles"] == 2_000_000 and out["send_cycles"] == 1000 and out["window_cycles"] == 10_000_000


def test_a_latency_run_gives_the_costs(runs_dir, tmp_path):
    """run:REF takes a 'bench latency' run's smallest-size median one-way latency (halved for S and R)."""
    import pandas as pd

    from hpcvar.kinds.sim_jitter.job import Span, parse_span
    from hpcvar.results.store import Run

    run = Run.create("bench latency", {}, runs_dir, ["hpcvar"])
    run.write_table("latency.summary", pd.DataFrame({c: [0.0, 0.0] for c in TABLES["latency.summary"]}
                                                    | {"size_bytes": [0, 8], "median_ns": [2000.0, 2500.0]}))
    send, inter = parse_span(f"run:{run.path}", "--send-cycles"), parse_span(f"run:{run.path}", "--latency-inter")
    assert send.source == inter.source == str(run.path) and send.cycles is None
    assert send.seconds == pytest.approx(1e-6, rel=1e-12) and inter.seconds == pytest.approx(2e-6, rel=1e-12)
    assert isinstance(send, Span) and send.to_cycles(2e9) == 2000
    with pytest.raises(UsageError, match="not a 'bench latency' run"):
        other = Run.create("bench bsp", {}, runs_dir, ["hpcvar"])
        parse_span(f"run:{other.path}", "--send-cycles")


def test_one_replica_has_no_interval_and_intervals_stay_above_t0(tmp_path):
    """Issue #27: '--replicas 1' printed an interval (0.15%..0.15%), and few spread replicas gave slowdown
    intervals below zero. One replica: "n = 1", no bounds (NaN, null in the JSON); several: the interval of the
    mean never leaves the replicas' range, so never below T0 (a slowdown below zero is impossible)."""
    env = {"HPCVAR_RUNS": str(tmp_path / "runs")}
    args = ["sim", "jitter", "--synthetic", "poisson:300Hz:200us", "--duration", "10s", "--tasks", "1,64",
            "--phases", "5", "--no-plots"]
    one = run_cli(args + ["--replicas", "1"], env=env, check=True).stdout
    assert "n = 1" in one and ".." not in one.split("95% CI")[1], one
    res = json.loads(run_cli(args + ["--replicas", "1", "--json"], env=env, check=True).stdout)
    assert all(p["slowdown_ci"] == [None, None] for p in res["points"])  # NaN in run.json: null in standard JSON
    m, lo, hi = J.mean_ci([100.0, 100.0, 100.0, 190.0])  # one slow replica: Student-t gave lo = 6.8 < 100
    assert 100.0 <= lo <= m <= hi <= 190.0
    res = json.loads(run_cli(args + ["--replicas", "3", "--json"], env=env, check=True).stdout)
    for p in res["points"]:
        lo, hi = p["slowdown_ci"]
        assert 0.0 <= lo <= p["slowdown"] <= hi, p
