"""The screen kind without MPI: a raw file written as hv_screen writes it (native/bench/screen.c) and the
traces its collectors leave, through the kind's tables, summaries, result and views; the expectations file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hpcvar import expect
from hpcvar.errors import InputFileError
from hpcvar.kinds.screen.job import COMMAND, Screen, ScreenParams
from hpcvar.noise.collector import synth
from hpcvar.noise.formats import write_jtr
from hpcvar.results import read_raw
from hpcvar.results.store import Run
from tests.conftest import run_cli

HOSTS = ["tb-h1", "tb-h2", "tb-h3", "tb-h4"]
MBIT = 1e6 / 8


def params(**over) -> ScreenParams:
    base = dict(nodes=4, ranks_per_node=2, pairs="all", seed=1, rounds=1, check_s=0.1, noise_s=0.5, kernel_s=0.1,
                kernel_quantum_s=1e-3, timer_samples=5, timer_reads=1000, shm_iters=20, lat_iters=20, lat_warmup=2,
                bw_size_bytes=1 << 20, bw_iters=3, bw_warmup=0, partition=None, expect_file=None, expect_text=None,
                costs=True)
    base.update(over)
    return ScreenParams(**base)


def point(f, desc: str, rows: list[list[float]]) -> None:
    f.write(f"#@point {desc}\n")
    for r in rows:
        f.write(",".join(repr(float(x)) for x in r) + "\n")
    f.write(f"#@point_end rows={len(rows)}\n")


def write_screen(run_dir, slow: str = "tb-h2", noisy: str = "tb-h3", rng=None, throttled: dict | None = None) -> None:
    """A run directory as hv_screen leaves it: raw/launch-001.raw and traces/<host>-r0.jtr; with ``throttled``
    (host -> ns), each node's cgroup's throttled time after its ranks' load rows (0 for the hosts not named)."""
    rng = rng or np.random.default_rng(1)
    raw = run_dir / "raw"
    raw.mkdir(parents=True)
    (run_dir / "traces").mkdir()
    size = 1 << 20
    with open(raw / "launch-001.raw", "w") as f:
        f.write("#@hpcvar_raw=1\n#@encoding=csv\n#@program=hv_screen\n")
        f.write(f"#@nodes={','.join(HOSTS)}\n#@boot_ids=b,b,b,b\n#@node_cpus=2,2,2,2\n#@turns=0,1,2,3\n")
        f.write(f"#@kernel_iters=1000\n#@bw_size={size}\n#@columns=kind,node,idx,v0,v1,v2,v3\n")
        for n, h in enumerate(HOSTS):
            point(f, f"item=check node={n} host={h}", [[1, n, 0, 0.0, 2e8, 0, 1e5]])
        for n, h in enumerate(HOSTS):
            slowdown = 1.12 if h == noisy else 1.0
            rows = [[1, n, 0, 1.0e9, 1.0e9, 0, 0.99e9], [1, n, 1, 1.0e9, 1.0e9, 0, 0.005e9], [5, n, 0, 2, 0.5, 0, 0]]
            if throttled is not None:  # kind 9: the throttled ns of the load row (kind 1) of the same rank before it
                ns = throttled.get(h, 0.0)
                rows = [rows[0], [9, n, 0, ns, 1, 0, 0], rows[1], [9, n, 1, ns, 1, 0, 0], rows[2]]
            rows += [[2, n, c, 1e6 * slowdown * (1 + rng.normal(0, 0.002)), k, k * 1e6, 0]
                     for c in range(2) for k in range(60)]
            rows += [[3, n, s, 9.5, 0.4, 0, 0] for s in range(5)] + [[4, n, i, 4e3 + i, 0, 0, 0] for i in range(20)]
            point(f, f"item=node node={n} round=0 host={h}", rows)
            comps = [{"kind": "periodic", "hz": 100.0, "duration_s": 1e-3 if h == noisy else 1e-5, "phase_s": 0.0}]
            write_jtr(synth(comps, 0.5, 2, 2.4e9, n), run_dir / "traces" / f"{h}-r0.jtr")
        for a in range(4):
            for b in range(a + 1, 4):
                f_ab = 0.5 if slow in (HOSTS[a], HOSTS[b]) else 1.0
                rows = [[6, a, i, 40e3 * (1 + rng.normal(0, 0.01)), b, 0, 0] for i in range(20)]
                for d, (s, r) in enumerate(((a, b), (b, a))):
                    rows += [[7, s, i, size / (190 * MBIT * f_ab) * 1e9 + 20e3, d, r, 0] for i in range(3)]
                rows += [[1, a, 0, 0.2e9, 1e9, 0, 0.19e9], [1, b, 0, 0.2e9, 1e9, 0, 0.0e9]]
                point(f, f"item=pair a={a} b={b} host_a={HOSTS[a]} host_b={HOSTS[b]}", rows)


def stored(tmp_path, p: ScreenParams, **kw) -> Run:
    """The run the job would store: tables, summaries and result through the kind's Benchmark."""
    run = Run.create(COMMAND, p.to_json(), tmp_path / "runs", ["hpcvar", "screen"], {})
    write_screen(run.path, **kw)
    bench = Screen()
    raws = [read_raw(f) for f in sorted((run.path / "raw").glob("*.raw"))]
    t = bench.tables(raws, p)
    t.update(bench.summaries(t, p))
    for name, df in t.items():
        run.write_table(name, df)
    run.info["result"] = bench.result(t, p)
    run.info["warnings"] = bench.warnings(t, p)
    run.finish("complete", run.info["result"])
    return Run.open(run.path)


def test_the_kind_names_the_slow_link_and_the_noisy_node_with_costs(tmp_path):
    run = stored(tmp_path, params())
    res = run.info["result"]
    assert res["answer"]["status"] == "DEGRADED" and res["answer"]["exit_code"] == 3
    got = {(f["where"], f["metric"], f["scope"]) for f in res["findings"]}
    assert got == {("tb-h2", "link_bandwidth", "node"), ("tb-h3", "noise_fraction", "node"),
                   ("tb-h3", "compute_rate", "node")}, got
    costs = {f["metric"]: f for f in res["findings"]}
    assert costs["link_bandwidth"]["cost"] == pytest.approx(1.0, rel=0.1)  # the half-rate link paces the ring
    assert costs["noise_fraction"]["cost"] > 0.05 and "jitSim" in costs["noise_fraction"]["cost_text"]
    assert costs["compute_rate"]["cost"] == pytest.approx(0.12, abs=0.01)
    assert res["nodes"] == HOSTS and res["turns"] == 4 and res["pairs"] == 6
    assert any("4 turns" in w for w in run.info["warnings"])
    # validity: the node items' "others" are the busy time minus both ranks' own time: 0.5%
    nm = run.read_table("screen.node_metrics")
    assert nm["valid"].all()


def test_views_render_draw_and_report(tmp_path):
    from rich.console import Console

    from hpcvar.kinds.screen import views
    from hpcvar.report.document import write_report

    run = stored(tmp_path, params())
    c = Console(record=True, width=200)
    views.render(c, run)
    text = c.export_text()
    assert text.splitlines()[0].startswith("DEGRADED: tb-h2's link bandwidth both ways")
    assert "Bandwidth (Mbit/s)" in text and "Findings" in text
    paths = views.plots(run)
    assert {p.name for p in paths} == {"screen_bandwidth.png", "screen_latency.png", "screen_nodes.png"}
    sec = views.section(run)
    assert sec.headlines[0].status == "bad" and len(sec.figures) == 3
    assert views.metrics(run)
    out = write_report([run], tmp_path / "r.md", "t")
    assert "DEGRADED" in out.read_text()


# ---- expectations ------------------------------------------------------------------------------------------
SITE = """version = 1

[[expect]]
name = "testbed"
hosts = ["tb-h[1-4]"]
link_bandwidth = { min = "180mbit" }
noise_fraction = { max = "5%" }

[[expect]]
name = "everything else"
link_latency = { value = "15us", tolerance = "50%" }
"""


def test_expectations_judge_the_bad_side_within_ci_and_name_the_line(tmp_path):
    exp = expect.parse(SITE, "site.toml")
    obs = [expect.Observation("link_bandwidth", ("tb-h1", "tb-h2"), 95 * MBIT, 94 * MBIT, 96 * MBIT),
           expect.Observation("link_bandwidth", ("tb-h1", "tb-h3"), 190 * MBIT, 189 * MBIT, 191 * MBIT),
           expect.Observation("link_bandwidth", ("tb-h1", "tb-h3"), 175 * MBIT, 170 * MBIT, 185 * MBIT),
           expect.Observation("link_bandwidth", ("tb-h1", "other"), 95 * MBIT),  # not covered: no group
           expect.Observation("link_latency", ("x", "y"), 30e3, 29e3, 31e3),
           expect.Observation("link_latency", ("x", "y"), 5e3, 4e3, 6e3)]  # faster: fine
    checks = expect.judge(exp, obs)
    assert [c["status"] for c in checks] == ["failed", "passed", "within its CI", "failed", "passed"]
    assert checks[0]["source"] == "site.toml:6" and checks[3]["source"] == "site.toml:11"
    assert checks[3]["bound"] == "<= 22.5 us" and checks[3]["group"] == "everything else"
    assert "tb-h1->tb-h2's link bandwidth 95 Mbit/s is outside the expected >= 180 Mbit/s" in \
        expect.failure_text(checks[0])


def test_expectations_errors_name_the_file_line_and_key(tmp_path):
    cases = {'version = 1\n[[expect]]\nhosts = ["a"]\n\nlink_latency = { max = "2" }\n': ("site.toml:5", "no unit"),
             'version = 1\n[[expect]]\nlink_speed = { min = "1gbit" }\n': ("site.toml:3", "link_speed"),
             'version = 1\n[[expect]]\nnoise_fraction = { max = "2%", most = 1 }\n': ("site.toml:3", "most"),
             'version = 2\n[[expect]]\n': ("site.toml:1", "version"),
             'version = 1\n[[expect]\n': ("site.toml:2:9", "TOML"),
             'version = 1\n': ("site.toml", "no [[expect]]")}
    for text, (where, what) in cases.items():
        with pytest.raises(InputFileError) as e:
            expect.parse(text, "site.toml")
        assert e.value.where == where and what in e.value.what, (text, e.value.render())


def test_hostlists_and_patterns():
    assert expect.expand_hostlist("cn[01-03,10]") == ["cn01", "cn02", "cn03", "cn10"]
    assert expect.host_matches("gpu7", "gpu*") and not expect.host_matches("cn04", "cn[01-03]")
    g = expect.parse('version=1\n[[expect]]\npartition="batch"\nnoise_fraction={max="1%"}\n').groups[0]
    assert g.matches(("n",), "batch") and not g.matches(("n",), None)


def test_expect_from_a_screen_reads_back_and_passes_the_same_run(tmp_path, runs_dir):
    """hpcvar expect --from a screen: every bound derived says how; the good nodes pass their own bounds and a
    screen judged against them flags the faulty ones."""
    good = stored(tmp_path / "good", params(), slow="none", noisy="none")
    out = tmp_path / "site.toml"
    res = run_cli(["expect", "--from", str(good.path), "-o", str(out)], check=True)
    assert "written to" in res.stdout
    text = out.read_text()
    assert "how = " in text and "5.19 x MAD'" in text and "link_bandwidth = { min = " in text
    exp = expect.load(out)
    checks = expect.judge(exp, expect.observations_of(good))
    assert checks and all(c["status"] != "failed" for c in checks), [c for c in checks if c["status"] == "failed"]
    # from a screen that found something, the outliers are left out: the bound is the healthy links' and nodes'
    from_bad = run_cli(["expect", "--from", str(stored(tmp_path / "b0", params()).path)], check=True).stdout
    line = next(x for x in from_bad.splitlines() if x.startswith("link_bandwidth"))
    assert "(6 outliers or disturbed left out) 190 Mbit/s" in line, line
    bad = stored(tmp_path / "bad", params(expect_file=str(out), expect_text=text))
    failed = {(c["where"], c["metric"]) for c in bad.info["result"]["expectations"] if c["status"] == "failed"}
    assert ("tb-h3", "noise_fraction") in failed and ("tb-h1->tb-h2", "link_bandwidth") in failed
    assert json.loads(run_cli(["runs", "show", str(bad.path), "--json"], check=True).stdout)


def test_screen_cli_refuses_bad_input_before_measuring(tmp_path):
    bad = tmp_path / "x.toml"
    bad.write_text('version = 1\n[[expect]]\nnoise_fraction = { max = "two" }\n')
    res = run_cli(["screen", "--launcher", "local", "--expect", str(bad)])
    assert res.returncode == 2 and f"({bad}:3)" in res.stderr, res.stderr
    res = run_cli(["screen", "--launcher", "local", "--pairs", "random:0"])
    assert res.returncode == 2 and "(--pairs)" in res.stderr, res.stderr


def test_report_and_compare_take_expectations(tmp_path, runs_dir):
    good = stored(tmp_path / "good", params(), slow="none", noisy="none")
    site = tmp_path / "site.toml"
    run_cli(["expect", "--from", str(good.path), "-o", str(site)], check=True)
    bad = stored(tmp_path / "bad", params())
    res = run_cli(["report", str(bad.path), "--expect", str(site), "-o", str(tmp_path / "r.md")])
    assert res.returncode == 3 and res.stdout.startswith("DEGRADED: "), res.stdout + res.stderr
    md = (tmp_path / "r.md").read_text()
    assert "Expectations (" in md and "| failed | tb-h3 | noise_fraction |" in md
    res = run_cli(["report", str(good.path), "--expect", str(site), "-o", str(tmp_path / "g.md")])
    assert res.returncode == 0 and res.stdout.startswith("OK: "), res.stdout + res.stderr
    res = run_cli(["compare", str(good.path), str(bad.path), "--expect", str(site), "--json"])
    out = json.loads(res.stdout)
    assert res.returncode == 3 and any("tb-h1->tb-h2" in f for f in out["expectations_failed"]), out


def test_points_resume_and_argv(tmp_path):
    """What a resumed screen measures: only the items without a complete raw point; the argv names them."""
    from hpcvar.bench.runner import _complete_keys

    p = params(rounds=1, check_s=0.1)
    bench = Screen()
    pts = bench.points(p)
    assert len(pts) == 4 + 4 + 6  # checks, node items, the 6 pairs of 4 nodes
    write_screen(tmp_path)
    raws = [read_raw(f) for f in (tmp_path / "raw").glob("*.raw")]
    done = _complete_keys(bench, raws)
    assert all(bench.point_key(pt) in done for pt in pts)
    pending = [pt for pt in pts if pt["item"] == "pair" and pt["a"] == 0] + \
              [pt for pt in pts if pt["item"] == "node" and pt["node"] == 3]
    argv = bench.argv(p, pending)
    assert argv[argv.index("--check-s") + 1] == "0.0"  # the load check is done
    assert argv[argv.index("--todo-nodes") + 1] == "3" and argv[argv.index("--pair-a") + 1] == "0,0,0"
    rounds = [int(x) for x in argv[argv.index("--pair-round") + 1].split(",")]
    assert rounds == sorted(rounds)  # hv_screen takes the rounds in order


def test_a_throttled_node_is_named_costed_shown_exported_and_bounded(tmp_path, runs_dir):
    """A node whose processes' cgroup a CPU quota throttled 3% of its CPU time, its timings like the others': the
    screen names it (cpu_throttled, with what it costs), the Nodes table shows the share, Prometheus gets it, and
    an expectations file derived from a good screen bounds it at 1%."""
    from rich.console import Console

    from hpcvar.kinds.screen import views

    run = stored(tmp_path / "thr", params(), slow="none", noisy="none", throttled={"tb-h4": 0.03e9})
    res = run.info["result"]
    assert [(f["where"], f["metric"], f["status"]) for f in res["findings"]] == [("tb-h4", "cpu_throttled",
                                                                                   "degraded")]
    assert res["findings"][0]["cost"] == pytest.approx(3 / 97) and res["answer"]["exit_code"] == 3
    c = Console(record=True, width=220)
    views.render(c, run)
    text = c.export_text()
    assert "throttled" in text.split("Nodes")[1].splitlines()[2] and "3%" in text, text
    # the per-node figure gains a panel for the throttled share (3 panels, 2.6 inches each, against 2)
    import matplotlib.image as mpimg

    tall = mpimg.imread(next(p for p in views.plots(run) if p.name == "screen_nodes.png")).shape[0]
    plain = stored(tmp_path / "plain", params(), slow="none", noisy="none", throttled={})
    short = mpimg.imread(next(p for p in views.plots(plain) if p.name == "screen_nodes.png")).shape[0]
    assert tall / short == pytest.approx(3 / 2, rel=0.1), (tall, short)
    prom = run_cli(["export", "prometheus", str(run.path)], check=True).stdout
    assert 'hpcvar_node_cpu_throttled_ratio{node="tb-h4"} 0.03' in prom, prom
    # 'hpcvar history' follows each node's share (a series per node, its node items' shares as samples)
    from hpcvar.compare import metrics_of

    ms = metrics_of(run)
    assert list(ms["screen tb-h4 CPU time throttled"].samples) == pytest.approx([3.0])
    assert list(ms["screen tb-h1 CPU time throttled"].samples) == [0.0]
    assert ms["screen tb-h4 CPU time throttled"].higher_is_worse
    assert ms["screen tb-h4 CPU time throttled"].floor == 1.0  # the screen names a quota from 1 %: history's floor
    assert not any("throttled" in n for n in metrics_of(stored(tmp_path / "blind", params(), slow="none",
                                                                  noisy="none")))  # no cpu.stat: no series
    good = stored(tmp_path / "good", params(), slow="none", noisy="none", throttled={})
    derived = run_cli(["expect", "--from", str(good.path)], check=True).stdout
    assert 'cpu_throttled = { max = "1%"' in derived, derived
    checks = expect.judge(expect.parse(derived, "derived"), expect.observations_of(run))
    assert [c["where"] for c in checks if c["status"] == "failed" and c["metric"] == "cpu_throttled"] == ["tb-h4"]


def test_csv_and_json_of_a_stored_screen(tmp_path):
    run = stored(tmp_path, params())
    csv = run_cli(["runs", "show", str(run.path), "--format", "csv"], check=True).stdout
    assert "# screen.findings" in csv and "# screen.node_metrics" in csv and "rest_median" in csv
    out = json.loads(run_cli(["runs", "show", str(run.path), "--json"], check=True).stdout)
    assert out["result"]["answer"]["status"] == "DEGRADED"
