"""Real runs of hpcvar bench ace on the local MPI (kept tiny: 2 cores are shared)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from hpcvar.results import Run, resolve_run
from hpcvar.results.rawio import raw_bytes, raw_files
from tests.conftest import run_cli

pytestmark = pytest.mark.mpi


def test_two_ranks_busy_wait_and_every_cycle_stored(runs_dir):
    # alpha = 125 us, beta = 0, blocking pairs (m = 2): T_comm = 250 us, load 20% -> T_comp = 1 ms
    res = run_cli(["bench", "ace", "--np", "2", "--timeout", "120s", "--json", "--ea",
                   "pattern=pairs,size=1KiB,load=20,cycles=50,alpha=125us,beta=0ns/B"], check=True, timeout=180)
    (ea,) = json.loads(res.stdout)["eas"]
    assert ea["t_comm_s"] == pytest.approx(250e-6) and ea["t_comp_s"] == pytest.approx(1e-3)
    assert ea["t_run_s"] == pytest.approx(50 * 1.25e-3)
    assert math.isfinite(ea["error_pct"]) and ea["measured_t_run_s"] > 0
    assert ea["error_pct"] == pytest.approx((ea["measured_t_run_s"] - ea["t_run_s"]) / ea["t_run_s"] * 100)
    assert ea["no_mixing"] and not ea["alpha_beta_measured"]
    run = Run.open(resolve_run("latest"))
    cyc = run.read_table("ace.cycles")
    assert len(cyc) == 2 * 50
    assert sorted(cyc.groupby("rank")["cycle"].apply(list).iloc[0]) == list(range(50))
    for col in ("t_comp_ns", "t_comm_ns", "t_barr_ns"):
        assert np.isfinite(cyc[col]).all() and (cyc[col] >= 0).all()
    # the spin never stops early; its typical cycle is within 1% of the request (the mean can
    # carry a preemption on a loaded machine: reported, not asserted)
    assert (cyc["t_comp_ns"] >= cyc["t_comp_req_ns"] - 1.0).all()
    rel = (cyc["t_comp_ns"] - 1e6) / 1e6
    assert abs(float(np.median(rel))) < 0.01
    assert abs(ea["comp_error_median_pct"]) < 1.0
    assert (run.path / "plots" / "ace_error_vs_load.png").is_file()
    assert (run.path / "plots" / "ace_dist_ea0.svg").is_file()
    from hpcvar.kinds.ace.views import section

    sec = section(run)
    assert len(sec.headlines) == 2 and len(sec.figures) == 2 and sec.tables


def test_phase1_fresh_per_point_and_repeats(runs_dir):
    res = run_cli(["bench", "ace", "--np", "2", "--timeout", "120s", "--json", "--loads", "50", "--repeat", "2",
                   "--bench-iters", "5", "--ea", "pattern=ring,mode=nonblocking,size=4KiB,cycles=20"],
                  check=True, timeout=240)
    out = json.loads(res.stdout)
    assert [(e["point"], e["repeat"]) for e in out["eas"]] == [(0, 0), (1, 1)]
    run = Run.open(resolve_run("latest"))
    assert len(run.info["launches"]) == 2  # one launch, hence one phase 1, per point
    fits = run.read_table("ace.fits")
    summ = run.read_table("ace.summary")
    assert len(fits) == 2 * 2
    bench = run.read_table("ace.bench")
    for r in summ.itertuples():
        mine = fits[fits["point"] == r.point]
        # Python recomputes every process's fit from the raw samples; the native program used their average,
        # unless that line predicts a non-positive time at the EA's size (5 noisy iterations can do that):
        # then it used the measured mean time per message at that size, averaged over the processes
        a, b = mine["alpha_ns"].mean(), mine["beta_ns_per_byte"].mean()
        assert bool(r.fit_fallback) == (a + b * r.size_bytes <= 0)
        if r.fit_fallback:
            at = bench[(bench["point"] == r.point) & (bench["size_bytes"] == r.size_bytes)]
            per_proc = at.groupby("rank")["t_comm_ns"].mean() / r.messages_per_cycle
            assert r.alpha_ns == pytest.approx(per_proc.mean(), rel=1e-6) and r.beta_ns_per_byte == 0
            assert any("phase-1 line predicted a non-positive time" in w for w in run.info["warnings"])
        else:
            assert a == pytest.approx(r.alpha_ns, rel=1e-6, abs=1e-3)
            assert b == pytest.approx(r.beta_ns_per_byte, rel=1e-6, abs=1e-9)
        assert r.native_t_comm_ns == pytest.approx(r.pred_t_comm_ns, rel=1e-6, abs=1e-3)
    assert set(bench["size_bytes"]) == {0, 1024, 2048, 4096} and len(bench) == 2 * 2 * 4 * 5
    (var,) = out["variability"]
    assert var["runs"] == 2 and var["comm_within_var_ns2"] > 0 and math.isfinite(var["comm_between_var_ns2"])


def test_two_eas_at_once_report_separately(runs_dir):
    res = run_cli(["bench", "ace", "--np", "4", "--timeout", "150s", "--json", "--bench-iters", "3",
                   "--ea", "name=p2p,pattern=pairs,size=1KiB,load=50,cycles=10",
                   "--ea", "name=coll,pattern=alltoall,mode=nonblocking,size=1KiB,load=50,cycles=10"],
                  check=True, timeout=240)
    p2p, coll = json.loads(res.stdout)["eas"]
    assert (p2p["name"], coll["name"]) == ("p2p", "coll")
    assert p2p["messages_per_cycle"] == 2 and coll["messages_per_cycle"] == 1
    assert p2p["no_mixing"] and coll["no_mixing"]  # each EA received only its own bytes
    for e in (p2p, coll):
        assert math.isfinite(e["error_pct"]) and e["measured_t_run_s"] > 0
    cyc = Run.open(resolve_run("latest")).read_table("ace.cycles")
    ranks = cyc.groupby("name")["world_rank"].apply(lambda s: sorted(set(s)))
    assert ranks["p2p"] == [0, 1] and ranks["coll"] == [2, 3]
    assert (cyc.groupby("name").size() == 2 * 10).all()


@pytest.mark.parametrize("eas,ms", [
    (["pattern=cart2d,mode=blocking,periodic=yes"], [8]),
    (["pattern=ring,mode=blocking,ranks=2", "pattern=bcast,mode=nonblocking,ranks=2"], [2, 1]),
    (["pattern=allreduce,mode=blocking,ranks=2", "pattern=pairs,mode=nonblocking,ranks=2"], [1, 1]),
])
def test_every_pattern_runs_without_mixing(runs_dir, eas, ms):
    """Each pattern's kernel completes and receives only its EA's bytes (fixed alpha/beta: no phase 1)."""
    args = ["bench", "ace", "--np", "4", "--timeout", "120s", "--json"]
    for e in eas:
        args += ["--ea", e + ",size=2KiB,load=50,cycles=5,alpha=10us,beta=1ns/B"]
    out = json.loads(run_cli(args, check=True, timeout=200).stdout)["eas"]
    assert [e["messages_per_cycle"] for e in out] == ms
    for e in out:
        assert e["no_mixing"] and math.isfinite(e["error_pct"]) and e["measured_t_run_s"] > 0


def _point_keys(raw_path) -> tuple[list[str], list[str], list[tuple]]:
    """The #@columns, the keys of the #@point line and the identifying columns of every row."""
    lines = raw_bytes(raw_path).decode().splitlines()
    cols = next(x for x in lines if x.startswith("#@columns=")).split("=", 1)[1].split(",")
    keys = [kv.split("=", 1)[0] for kv in next(x for x in lines if x.startswith("#@point ")).split()[1:]]
    rows = sorted(tuple(x.split(",")[:6]) for x in lines if x and not x.startswith("#"))
    return cols, keys, rows


def test_raw_layout_matches_a_file_from_before_the_flat_options(runs_dir):
    """The same run as tests/data/ace_ba3e1d1 (written by the hv_ace that parsed EA text) gives the same
    columns, #@point keys and rows (phase, ea, rank, world_rank, iter, size)."""
    old = Path(__file__).resolve().parents[1] / "data" / "ace_ba3e1d1" / "launch-001.raw"
    run_cli(["bench", "ace", "--np", "4", "--timeout", "120s", "--bench-iters", "2",
             "--ea", "name=p2p,pattern=pairs,size=1KiB,load=50,cycles=4",
             "--ea", "name=coll,pattern=allreduce,mode=nonblocking,size=512,load=50,cycles=4,alpha=10us,beta=1ns/B"],
            check=True, timeout=200)
    run = Run.open(resolve_run("latest"))
    (new,) = raw_files(run.path / "raw", "launch-*.raw")
    assert _point_keys(new) == _point_keys(old)
    summ = run.read_table("ace.summary")
    assert summ["native_t_comm_ns"].tolist()[1] == pytest.approx(10512.0)  # 1 x (10 us + 1 ns/B x 512 B)


def test_native_second_line_of_defence_names_the_option(tmp_path):
    """hv_ace re-checks the flat options' ranges and lengths and names the option (Python validated first)."""
    import subprocess

    from hpcvar._native import build_info, find_program

    prog = find_program("hv_ace", needs_mpi=True)
    mpiexec = Path(build_info()["mpi_bindir"]) / "mpiexec"
    good = {"--ea-name": "a", "--ea-first": "0", "--ea-ranks": "2", "--ea-pattern": "0", "--ea-mode": "0",
            "--ea-size": "8", "--ea-cycles": "1", "--ea-load": "50", "--ea-msgs": "2", "--ea-dims": "0,0,0",
            "--ea-periodic": "0", "--ea-fixed": "1", "--ea-alpha-ns": "1", "--ea-beta-ns": "0",
            "--ea-bench-count": "0", "--bench-iters": "1", "--bench-warmup": "0", "--out": str(tmp_path / "x.raw")}

    def run(**change):
        opts = {**good, **{"--" + k.replace("_", "-"): v for k, v in change.items()}}
        argv = [str(mpiexec), "-n", "2", str(prog)] + [x for kv in opts.items() for x in kv]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    assert run().returncode == 0
    for change, needle in [({"ea_pattern": "7"}, "--ea-pattern"), ({"ea_size": "8,8"}, "--ea-size holds 2 values"),
                           ({"ea_load": "150"}, "--ea-load"), ({"ea_name": "a b"}, "--ea-name"),
                           ({"ea_dims": "2,1,0"}, "needs 0 sides"), ({"ea_ranks": "3"}, "even number of ranks"),
                           ({"ea_fixed": "0"}, "phase 1 needs 2 to 32 bench sizes")]:
        for _ in range(3):  # mpiexec can lose an aborting rank's last stderr line: the message gets 3 tries
            res = run(**change)
            assert res.returncode != 0, change  # the refusal itself never
            if needle in res.stderr + res.stdout:
                break
        assert needle in res.stderr + res.stdout, (change, res.stderr[-500:])
