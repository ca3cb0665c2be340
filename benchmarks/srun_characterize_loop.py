"""N consecutive quick characterizations in an sbatch job of 4 nodes, on a testbed with a real Slurm (issue #32).

Each round is exactly what a site's nightly job does:

    sbatch -N 4 --exclusive --wait --wrap "hpcvar characterize --quick --launcher srun --ranks-per-node 1 --json"

and the round passes when sbatch exits with characterize's answer (0 OK, 3 DEGRADED, 4 UNRELIABLE) and every
step of the characterization is complete. The script prints
one line per round (status, duration, the steps that did not complete with their error) and the totals, and
counts the PMI requests that slurmstepd logged as cut ("value not properly terminated", the failure that MPICH
started with srun --mpi=pmi2 met at random: docs/cluster.md). Root only; its own prefix, subnet and state file.

    sudo .venv/bin/python benchmarks/srun_characterize_loop.py --rounds 30     # ~1 h on 2 cores
    sudo .venv/bin/python benchmarks/srun_characterize_loop.py --rounds 3 --steps latency,ace,noise
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PREFIX, SUBNET = "sl-", "10.219.43.0/24"


def hpcvar(args: list[str], env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcvar", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def cut_requests(slurm_dir: Path) -> int:
    return sum(p.read_text(errors="replace").count("not properly terminated")
               for p in (slurm_dir / "log").glob("slurmd-*"))


def _elapsed_s(run_dir: str) -> float:
    """The characterization's own duration (run.json's start and end; sbatch --wait polls the job's state only
    every few seconds, so its wall time is coarse)."""
    import datetime as dt

    info = json.loads((Path(run_dir) / "run.json").read_text())
    t = [dt.datetime.fromisoformat(info[k].replace("Z", "+00:00")) for k in ("started_utc", "ended_utc")]
    return (t[1] - t[0]).total_seconds()


def one_round(k: int, env: dict, work: Path, steps: str | None) -> tuple[bool, float, str]:
    out, log = work / f"round{k}.json", work / f"round{k}.log"
    cmd = [sys.executable, "-m", "hpcvar", "characterize", "--quick", "--launcher", "srun", "--ranks-per-node", "1",
           "--json", *(["--steps", steps] if steps else [])]
    res = subprocess.run(["sbatch", "-N", "4", "--exclusive", "--wait", "--time=30", "-o", str(log), "--wrap",
                          " ".join(cmd) + f" > {out}"], env=env, capture_output=True, text=True, timeout=2400)
    took = float("nan")
    # characterize's exit code is its answer: 0 OK, 3 DEGRADED, 4 UNRELIABLE (a 2-core VM under 4 nodes is often
    # one of those); the round is judged by its steps, any other code is a failure
    if res.returncode not in (0, 3, 4) or not out.exists() or not out.read_text().strip():
        tail = log.read_text(errors="replace")[-600:] if log.exists() else res.stderr[-600:]
        return False, took, f"sbatch exit {res.returncode}: {tail!r}"
    result = json.loads(out.read_text())
    took = _elapsed_s(result["run"])
    bad = {s["name"]: s.get("error") or s.get("status") for s in result["steps"] if s["status"] != "complete"}
    return not bad, took, "; ".join(f"{n}: {why}" for n, why in bad.items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--steps", default=None, help="characterize --steps (default: every step of --quick)")
    ap.add_argument("--keep", default=None, help="keep the runs and logs in this directory")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (network namespaces, Slurm daemons)")
    work = Path(a.keep or tempfile.mkdtemp(prefix="hv_srunloop_"))
    work.mkdir(parents=True, exist_ok=True)
    state = work / "testbed.json"
    env = dict(os.environ, HPCVAR_TESTBED_STATE=str(state), HPCVAR_RUNS=str(work / "runs"))
    up = hpcvar(["testbed", "up", "--hosts", "4", "--rate", "200mbit", "--slurm", "--prefix", PREFIX, "--subnet",
                 SUBNET, "--owner-pid", str(os.getpid())], env, timeout=180)
    if up.returncode != 0:
        raise SystemExit(f"testbed up failed: {up.stderr[-2000:]}")
    try:
        env.update(json.loads(hpcvar(["testbed", "env", "--json"], env).stdout))
        slurm_dir = Path(env["SLURM_CONF"]).parent
        passed, times = 0, []
        for k in range(1, a.rounds + 1):
            ok, took, why = one_round(k, env, work, a.steps)
            passed += ok
            times.append(took)
            print(f"round {k:2d}/{a.rounds}: {'complete' if ok else 'FAILED'} in {took:6.1f} s"
                  + (f"  {why}" if why else ""), flush=True)
        done = sorted(t for t in times if t == t)
        span = f"median {done[len(done) // 2]:.1f} s, max {done[-1]:.1f} s" if done else "none finished"
        print(f"{passed} of {a.rounds} rounds completed every step; characterization time {span}; PMI requests "
              f"slurmstepd logged as cut: {cut_requests(slurm_dir)}")
    finally:
        hpcvar(["testbed", "down"], env, timeout=180)


if __name__ == "__main__":
    main()
