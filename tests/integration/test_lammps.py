"""A real MPI application that nobody here wrote: Debian's LAMMPS (on Debian's Open MPI), traced with the
PMPI tracer, replayed with this machine's measured parameters (E_abs per task), and the tracer's overhead
measured by paired runs. Needs `apt-get install lammps libopenmpi-dev` (.ci/run installs them as root);
skipped with the reason otherwise. The long, statistically resolved overhead measurement is
benchmarks/trace_overhead_lammps.py (docs/replay.md)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from benchmarks.trace_overhead_lammps import machine_params, run_once, sim_args, stalls
from tests.conftest import best_of_quiet_attempts, build_native_against, hpcvar_cmd

pytestmark = pytest.mark.mpi

ROOT = Path(__file__).resolve().parents[2]
LJ = ROOT / "examples/replay/in.lj"
STEPS = "300"  # traced and replayed
OVERHEAD_STEPS = "1000"
MPIRUN, MPICC = "/usr/bin/mpirun", "/usr/bin/mpicc"
OMPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def _lammps_cmd(steps: str = STEPS) -> list[str]:
    return [MPIRUN, "-n", "2", "--bind-to", "none", "lmp", "-in", str(LJ), "-var", "steps", steps]


@pytest.fixture(scope="module")
def ompi_bin(tmp_path_factory) -> Path:
    """The tracer and hv_latency built against Debian's Open MPI (what LAMMPS links), as users do."""
    missing = [t for t in ("lmp", MPIRUN, MPICC) if not shutil.which(t)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not found: apt-get install lammps libopenmpi-dev")
    return build_native_against(MPICC, ["hv_trace", "hv_latency"], tmp_path_factory.mktemp("ompi-build"))


def _hpcvar(args: list[str], env: dict, timeout: float = 300) -> dict:
    cut = args.index("--") if "--" in args else len(args)  # options go before the application's command
    argv = hpcvar_cmd() + args[:cut] + ["--json"] + args[cut:]
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def traced(ompi_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("lammps")
    env = dict(os.environ, **OMPI_ENV, HPCVAR_NATIVE_DIR=str(ompi_bin), HPCVAR_RUNS=str(d / "runs"))
    out = _hpcvar(["trace", "-o", str(d / "lj.trace"), "--timeout", "5m", "--", *_lammps_cmd(),
                   "-log", str(d / "log.lammps"), "-screen", "none"], env)
    return out, d / "lj.trace", env


def test_lammps_is_traced_on_every_rank(traced):
    s, path, _ = traced
    assert s["ntasks"] == 2 and s["timed"] and path.is_file()
    # LAMMPS' LJ melt exchanges ghost atoms point to point and reduces thermo output and neighbor checks
    assert s["ops"].get("allreduce", 0) > 0, s["ops"]
    p2p = sum(v for k, v in s["ops"].items() if k in ("send", "recv", "isend", "irecv", "sendrecv"))
    assert p2p > 1000, s["ops"]
    for t in s["tasks"]:
        assert 0 < t["mpi_s"] < t["span_s"], t


def test_lammps_replayed_with_this_machines_parameters(traced, ompi_bin):
    """The machine's point-to-point parameters measured with hv_latency on the same Open MPI
    (benchmarks/trace_overhead_lammps.machine_params: alpha from 8 B; Open MPI's eager limit; above it the
    bandwidth and rendezvous latency of the line through 8 KiB and 64 KiB), the trace replayed on 1 node x 2
    cores with --breakdown, and the predicted communication time per task set against the traced one (E_abs);
    the breakdown's kinds add up to S_m and S_p on this real trace."""
    _, path, env = traced

    def replay():
        m = machine_params(env, "1s")
        sim = _hpcvar(["sim", "app", str(path), "--nodes", "1", "--cores-per-node", "2", *sim_args(m, "rndv"),
                       "--mapping", "rrp", "--model", "none", "--no-plots", "--breakdown", "--phases", "4"], env)
        (run,) = sim["runs"]
        print(f"LAMMPS {STEPS} steps, 2 ranks: alpha {m['alpha_s'] * 1e6:.2f} us, above {m['eager']} B "
              f"{m['bw_rndv'] / 1e6:.0f} MB/s and rendezvous latency {m['rndv_s'] * 1e6:.2f} us; "
              + ", ".join(f"task {t['task']}: measured {t['measured_comm_s']:.4f} s, predicted "
                          f"{t['comm_s']:.4f} s, E_abs {t['e_abs_pct']:.1f}%" for t in run["tasks"]))
        run["breakdown"] = sim["breakdown"]["rows"]
        run["stalls"] = stalls(path)  # printed: the time both ranks sat in MPI at once
        return run

    def sound(run):
        e = [t["e_abs_pct"] for t in run["tasks"]]
        assert len(e) == 2 and all(np.isfinite(e))
        for t in run["tasks"]:
            assert t["comm_s"] > 0 and t["measured_comm_s"] > 0 and t["total_s"] > 0
            rows = [r for r in run["breakdown"] if r["task"] == t["task"]]
            assert sum(r["measured_s"] for r in rows) == pytest.approx(t["measured_comm_s"], rel=1e-9)
            assert sum(r["predicted_s"] for r in rows) == pytest.approx(t["comm_s"], rel=1e-9)
            assert {r["kind"] for r in rows} >= {"send", "irecv", "wait", "allreduce"}

    def close(run):
        # with the rendezvous latency the error left is the time both ranks sat stalled in MPI at once (other
        # jobs on the machine; no network model has it): 1000-step runs here, quiet: E_abs 1-4%, error minus
        # that time within +-13% of S_m; disturbed (LAMMPS 2-9x slower): E_abs 10-84%, the error within 5 ms or
        # 16 ms (of 0.2-4 s) of that time (docs/replay.md). Bound: 40% of S_m plus that time
        for t in run["tasks"]:
            err = abs(t["comm_s"] - t["measured_comm_s"])
            assert err < 0.4 * t["measured_comm_s"] + run["stalls"][t["task"]]["both_s"], (t, run["stalls"])

    best_of_quiet_attempts(replay, close, always=sound, what="LAMMPS replayed with freshly measured parameters")


def test_lammps_tracer_overhead_is_small(ompi_bin, tmp_path):
    """Three pairs of runs of 1000 steps without and with the tracer, the order alternating; LAMMPS' own loop
    time. The paired median is printed; it must stay far from a slowdown (single pairs of 300-step runs
    differ by -18% to +11% here; the 1% target is resolved by the benchmark, which takes minutes: -2.2%
    [-5.4%, +0.4%] at 3000 steps, docs/replay.md)."""
    env = dict(os.environ, **OMPI_ENV)
    attempt = itertools.count()  # a fresh file per attempt

    def pairs():
        raw = tmp_path / f"raw{next(attempt)}"
        raw.mkdir()
        ratios = []
        for rep in range(3):
            loops = {}
            for mode in ("plain", "traced") if rep % 2 == 0 else ("traced", "plain"):
                e = dict(env)
                if mode == "traced":
                    e.update(LD_PRELOAD=str(ompi_bin / "libhv_trace.so"), HV_TRACE_DIR=str(raw))
                loops[mode] = run_once(_lammps_cmd(OVERHEAD_STEPS), e, tmp_path / f"log.{mode}.{rep}", 300)[0]
            ratios.append(loops["traced"] / loops["plain"])
        over = (float(np.median(ratios)) - 1) * 100
        print(f"tracer overhead on LAMMPS ({OVERHEAD_STEPS} steps, 2 ranks, 3 pairs): median {over:+.1f}% "
              f"(pairs: {', '.join(f'{(r - 1) * 100:+.1f}%' for r in ratios)})")
        return raw, over, ratios

    def traced_every_rank(r):
        assert len(list(r[0].glob("rank.*.hvt"))) == 2  # the traced runs really were traced

    def small(r):
        assert r[1] < 15, r[2]

    best_of_quiet_attempts(pairs, small, always=traced_every_rank, what="3 pairs of LAMMPS runs with and without "
                           "the tracer")
