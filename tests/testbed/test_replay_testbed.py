"""Application replay against the testbed (root): trace a communication-heavy MPI program of ours on 4
shaped hosts, replay it with the gige model and with maxmin, and report E_abs per model.

The program (examples/replay/conflicts.c) has fan-in, fan-out, ring and 2-into-1 phases of 2 MiB
messages. The replay uses the testbed's measured point-to-point parameters (hpcvar bench latency on two
hosts: 8 B one-way latency, 4 MiB bandwidth). gige uses the paper's parameters unless a fitted file is
given in HPCVAR_GIGE_PARAMS (hpcvar model fit). Runs in well under 2 minutes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from hpcvar._native import build_info, find_library
from tests.conftest import best_of_quiet_attempts, run_cli
from tests.testbed.conftest import up_testbed

pytestmark = pytest.mark.root

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    with up_testbed(tmp_path_factory, "hvrp-", 4, "200mbit", "--ranks-per-host", "1") as env:
        yield env


def _conflicts(tmp_path) -> Path:
    mpicc = Path(build_info()["mpi_bindir"]) / "mpicc"
    exe = tmp_path / "conflicts"
    subprocess.run([str(mpicc), "-O2", "-o", str(exe), str(ROOT / "examples/replay/conflicts.c")], check=True,
                   timeout=120)
    return exe


def _measure(env, ranks_per_node: int) -> tuple[float, float]:
    """(one-way 8 B latency in s, 4 MiB bandwidth in B/s) of 2 ranks on 2 hosts (1 per node) or on one (2)."""
    lat = json.loads(run_cli(["bench", "latency", "--launcher", "testbed", "--np", "2", "--ranks-per-node",
                              str(ranks_per_node), "--sizes", "8,4MiB", "--iters", "5", "--min-iters", "5",
                              "--warmup", "1", "--json"], env=env, check=True, timeout=120).stdout)
    by = {s["size"]: s for s in lat["sizes"]}
    alpha = by[8]["median_ns"] * 1e-9
    return alpha, (4 << 20) / (by[4 << 20]["median_ns"] * 1e-9 - alpha)


def _trace(env, state, exe, tmp_path, ranks_per_host: int) -> Path:
    """'hpcvar trace -o APP.trace -- <launcher and application>' with the testbed launcher's command."""
    from hpcvar.launch.base import LaunchSpec
    from hpcvar.testbed.launcher import TestbedLauncher

    raw = tmp_path / f"raw{ranks_per_host}"
    shutil.rmtree(raw, ignore_errors=True)  # a new attempt traces afresh
    raw.mkdir()
    lib = str(find_library("libhv_trace.so").resolve())
    argv, _ = TestbedLauncher(ranks_per_host=ranks_per_host, state_path=state).command(
        LaunchSpec(np=4, exe=exe, args=["3", str(2 << 20)], env={"LD_PRELOAD": lib, "HV_TRACE_DIR": str(raw)}))
    out = tmp_path / f"conflicts{ranks_per_host}.trace"
    res = run_cli(["trace", "-o", str(out), "--raw-dir", str(raw), "--timeout", "90s", "--json", "--", *argv],
                  env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    assert s["ntasks"] == 4 and s["ops"]["sendrecv"] == 12 and s["ops"]["allreduce"] == 12
    return out


def test_trace_on_testbed_and_replay_with_gige_and_maxmin(testbed, tmp_path, runs_dir):
    import os

    env = dict(testbed, HPCVAR_RUNS=str(runs_dir))
    exe = _conflicts(tmp_path)

    def measure():
        # measured network parameters of the testbed: 8 B latency and 4 MiB bandwidth between two hosts
        alpha, bw = _measure(env, 1)
        out = _trace(env, testbed["HPCVAR_TESTBED_STATE"], exe, tmp_path, 1)
        args = ["sim", "app", str(out), "--nodes", "4", "--cores-per-node", "1", "--bandwidth", f"{bw:.6g}B/s",
                "--latency", f"{alpha:.6g}s", "--mapping", "rrn", "--json"]
        gige_params = os.environ.get("HPCVAR_GIGE_PARAMS")
        res = run_cli(args + ["--model", "none,gige,maxmin"] + (["--params", gige_params] if gige_params else []),
                      env=env, timeout=120)
        assert res.returncode == 0, res.stderr
        sim = json.loads(res.stdout)
        e = {r["model"]: r["mean_e_abs_pct"] for r in sim["runs"]}
        print(f"testbed replay: bandwidth {bw:.4g} B/s, latency {alpha * 1e6:.1f} us; mean E_abs per model: "
              + ", ".join(f"{m} {v:.1f} %" for m, v in e.items()))
        for r in sim["runs"]:
            print(r["model"], [(t["task"], round(t["comm_s"], 3), round(t["measured_comm_s"], 3),
                                round(t["e_abs_pct"], 1)) for t in r["tasks"]])
        return bw, e

    def below_the_link(m):
        assert m[0] < 26e6, m[0]  # 200 Mbit/s = 25e6 B/s: no measurement may exceed the shaped link

    def issue_checks(m):
        bw, e = m
        assert 15e6 < bw, bw  # 200 Mbit/s minus TCP/IP headers
        # the program's conflicts matter: the model without sharing is far off, max-min fair sharing (what
        # tbf on both link ends does to TCP flows) is close
        assert e["none"] > 30
        assert e["maxmin"] < 15
        assert e["maxmin"] < e["gige"] < e["none"]

    best_of_quiet_attempts(measure, issue_checks, tries=2, always=below_the_link,
                           what="the testbed trace replayed per model")


def test_replay_with_the_placement_that_ran_beats_the_other(testbed, tmp_path, runs_dir):
    """4 ranks on 2 hosts (ranks 0,1 on h1 and 2,3 on h2: rrp's placement), replayed on 2 nodes x 2 cores with
    rrp and with rrn under maxmin: the mapping that ran predicts the measured communication time better."""
    # about 20 s
    env = dict(testbed, HPCVAR_RUNS=str(runs_dir))
    exe = _conflicts(tmp_path)

    def measure():
        alpha, bw = _measure(env, 1)
        shm_alpha, shm_bw = _measure(env, 2)  # both ranks on h1: shared memory, as ranks 0 and 1 of the trace
        out = _trace(env, testbed["HPCVAR_TESTBED_STATE"], exe, tmp_path, 2)
        res = run_cli(["sim", "app", str(out), "--nodes", "2", "--cores-per-node", "2", "--bandwidth", f"{bw:.6g}B/s",
                       "--latency", f"{alpha:.6g}s", "--shm-bandwidth", f"{shm_bw:.6g}B/s", "--shm-latency",
                       f"{shm_alpha:.6g}s", "--mapping", "rrp,rrn", "--model", "maxmin", "--json"], env=env,
                      timeout=120)
        assert res.returncode == 0, res.stderr
        runs = json.loads(res.stdout)["runs"]
        e = {r["mapping"]: r["mean_e_abs_pct"] for r in runs}
        for r in runs:
            print(r["mapping"], [(t["task"], round(t["comm_s"], 3), round(t["measured_comm_s"], 3),
                                  round(t["e_abs_pct"], 1)) for t in r["tasks"]])
        print(f"testbed replay by mapping (maxmin; network {bw:.4g} B/s, {alpha * 1e6:.1f} us; shared memory "
              f"{shm_bw:.4g} B/s, {shm_alpha * 1e6:.2f} us): " + ", ".join(f"{m} {v:.1f} %" for m, v in e.items()))
        return runs, e

    def issue_checks(m):
        runs, e = m
        # the mapping changes the prediction (rrn sends the ring's and the pairs' messages over the network)
        # and the placement that ran is the better prediction (3 runs here: rrp 9.2-10.6 %, rrn 14.7-16.7 %)
        comm = {r["mapping"]: sum(t["comm_s"] for t in r["tasks"]) for r in runs}
        assert comm["rrp"] < 0.85 * comm["rrn"]
        assert e["rrp"] < 15
        assert e["rrp"] < e["rrn"]

    best_of_quiet_attempts(measure, issue_checks, tries=2, what="the testbed trace replayed per mapping")
