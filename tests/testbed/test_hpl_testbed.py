"""Linpack on the testbed (root): HPL as Debian's hpcc runs it, traced on 4 shaped hosts, its section cut
out of the trace and replayed with every model and mapping (issue 18; the paper validates on HPL).

One placement runs here (rank r on host r, a 1 x 4 grid with the increasing-ring broadcast: task n sends
to n + 1); benchmarks/hpl_replay.py runs both placements, draws the paper's figures and measures the
tracer's overhead (docs/replay.md, "Linpack"). hpcc runs its whole suite before HPL, so this test takes
about 40 seconds (idle ranks yield; they used to busy-poll 2 cores). Needs `apt-get install hpcc
libopenmpi-dev` (skipped with that remedy otherwise).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import DEBIAN_OMPI_ENV, best_of_quiet_attempts, build_native_against, run_cli
from tests.testbed.conftest import up_testbed

pytestmark = pytest.mark.root

RATE = "1gbit"
MODELS = ("none", "gige", "myrinet", "maxmin")


@pytest.fixture(scope="module")
def hpl_env(tmp_path_factory):
    if not shutil.which("hpcc") or not Path("/usr/bin/mpicc").exists():
        pytest.skip("needs Debian's hpcc and Open MPI: apt-get install hpcc libopenmpi-dev")
    bindir = build_native_against("/usr/bin/mpicc", ["hv_trace", "hv_latency"], tmp_path_factory.mktemp("ompi-hpl"))
    with up_testbed(tmp_path_factory, "hvhp-", 4, RATE, "--ranks-per-host", "1") as env:
        # 4 hosts on this machine's 2 cores: idle ranks yield (benchmarks/hpl_replay.py, YIELD_ENV)
        yield {**env, **DEBIAN_OMPI_ENV, "OMPI_MCA_mpi_yield_when_idle": "1", "HPCVAR_NATIVE_DIR": str(bindir),
               "lib": str(bindir / "libhv_trace.so")}


def _network(env) -> tuple[float, float, float]:
    """(8 B latency s, 4 MiB bandwidth B/s, bytes in flight when a 1 MiB MPI_Send returned) between 2 hosts."""
    out = json.loads(run_cli(["bench", "latency", "--launcher", "testbed", "--np", "2", "--ranks-per-node", "1",
                              "--sizes", "8,1MiB,4MiB", "--iters", "10", "--min-iters", "10", "--warmup", "2",
                              "--json"], env=env, check=True, timeout=180).stdout)
    by = {s["size"]: s for s in out["sizes"]}
    alpha = by[8]["median_ns"] * 1e-9
    buffered = by[1 << 20]["buffered_bytes"]
    assert 0 < buffered <= 1 << 20  # Open MPI's TCP sends return before their data has arrived
    return alpha, (4 << 20) / (by[4 << 20]["median_ns"] * 1e-9 - alpha), buffered


def _trace_hpcc(env, tmp_path) -> Path:
    from hpcvar.launch.base import LaunchSpec
    from hpcvar.testbed.launcher import TestbedLauncher
    from hpcvar.traces.hpcc import hpcc_input, hpl_results

    run = tmp_path / "hpcc"
    shutil.rmtree(run, ignore_errors=True)
    (run / "raw").mkdir(parents=True)
    (run / "hpccinf.txt").write_text(hpcc_input(1500, 80, 1, 4, "1rg"))
    argv, _ = TestbedLauncher(map_by="host", ranks_per_host=1, mpiexec="/usr/bin/mpirun",
                              state_path=env["HPCVAR_TESTBED_STATE"]).command(
        LaunchSpec(np=4, exe=Path(shutil.which("hpcc") or "hpcc"), args=[],
                   env={"LD_PRELOAD": env["lib"], "HV_TRACE_DIR": str(run / "raw")}))
    full = run / "hpcc.trace"
    res = run_cli(["trace", "-o", str(full), "--raw-dir", str(run / "raw"), "--timeout", "400s", "--json", "--",
                   *argv], env=env, timeout=480, cwd=run)
    assert res.returncode == 0, res.stderr[-3000:]
    hpl = hpl_results(run / "hpccoutf.txt")[-1]
    assert (hpl.n, hpl.p, hpl.q) == (1500, 1, 4) and hpl.time_s > 0
    assert "PASSED" in (run / "hpccoutf.txt").read_text()  # HPL's residual check
    part = run / "hpl.trace"
    res = run_cli(["trace", "cut", str(full), "-o", str(part), "--after-collective", "-1", "--json"], env=env)
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    # HPL calls no MPI collective: its section is point-to-point only, every task sends and receives; it waits for
    # a panel by spinning on MPI_Iprobe (HPL_bcast_1ring): a probe row before the receive, the spin as poll time
    assert s["ntasks"] == 4 and set(s["ops"]) == {"init", "finalize", "send", "recv", "probe"}, s["ops"]
    assert all(0 < t["mpi_s"] < t["span_s"] for t in s["tasks"]), s["tasks"]
    assert sum(t["poll_s"] for t in s["tasks"]) > 0, s["tasks"]
    return part


def test_hpl_traced_on_the_testbed_and_replayed(hpl_env, tmp_path, runs_dir):
    env = dict(hpl_env, HPCVAR_RUNS=str(runs_dir))

    def measure():
        alpha, bw, buf = _network(env)
        part = _trace_hpcc(env, tmp_path)
        ran = json.loads(run_cli(["sim", "app", str(part), "--nodes", "4", "--cores-per-node", "1", "--bandwidth",
                                  f"{bw:.6g}B/s", "--latency", f"{alpha:.6g}s", "--send-buffer", str(int(buf)),
                                  "--rndv-first", "64KiB",  # Open MPI's btl_tcp_rndv_eager_limit
                                  "--mapping", "rrn", "--model",
                                  ",".join(MODELS), "--json"], env=env, check=True, timeout=300).stdout)
        e = {r["model"]: r["mean_e_abs_pct"] for r in ran["runs"]}
        # the same without the send buffer: every send completes with its transfer
        zero = json.loads(run_cli(["sim", "app", str(part), "--nodes", "4", "--cores-per-node", "1", "--bandwidth",
                                   f"{bw:.6g}B/s", "--latency", f"{alpha:.6g}s", "--mapping", "rrn", "--model",
                                   "none", "--no-plots", "--json"], env=env, check=True, timeout=300).stdout)
        e["none, no send buffer"] = zero["runs"][0]["mean_e_abs_pct"]
        print(f"HPL on the testbed ({RATE}; {alpha * 1e6:.1f} us, {bw / 1e6:.2f} MB/s, send buffer {buf / 1024:.0f} "
              "KiB): mean E_abs "
              + ", ".join(f"{m} {v:.1f} %" for m, v in e.items()))
        # the same trace on 4 nodes of 2 cores: rrp puts ring neighbours 0-1 and 2-3 on one node
        what_if = json.loads(run_cli(["sim", "app", str(part), "--nodes", "4", "--cores-per-node", "2",
                                      "--bandwidth", f"{bw:.6g}B/s", "--latency", f"{alpha:.6g}s", "--mapping",
                                      "rrn,rrp,random", "--model", "maxmin", "--replicas", "3", "--json"],
                                     env=env, check=True, timeout=300).stdout)
        comm = {r["mapping"]: sum(t["comm_s"] for t in r["tasks"]) for r in what_if["runs"]}
        print("predicted communication time by mapping (4 x 2): "
              + ", ".join(f"{m} {v:.3f} s" for m, v in comm.items()))
        return e, comm

    def checks(m):
        e, comm = m
        # loose (N = 1500 at 1 gbit here: 6.3 and 20.9 % in two runs; at 200 mbit and N = 2000 the benchmark
        # gives 0.2-3.5 %: docs/replay.md "Linpack"); a replay that is wrong in kind (units, mapping, a lost
        # transfer) is off by far more
        assert min(e[k] for k in MODELS) < 40
        assert comm["rrp"] < comm["rrn"]
        # Open MPI's TCP sends return with up to a socket buffer still to send: the measured send buffer
        # predicted better than completing every send with its transfer (71.0 % in the 6.3 % run). Since traces
        # hold probes and polls, one CI run of two found the opposite on both its traces (31.4 % with the buffer,
        # 7.7 and 10.8 % without): an open question of issue 28, reported here, not hidden
        if e["none"] >= e["none, no send buffer"]:
            pytest.xfail(f"the send buffer predicted worse than none ({e['none']:.1f} % against "
                         f"{e['none, no send buffer']:.1f} %): open in issue 28")

    best_of_quiet_attempts(measure, checks, tries=2, what="HPL traced on the testbed and replayed")
