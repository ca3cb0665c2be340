"""Soak: N x 'characterize --quick' on the testbed with cross traffic and injected noise running, then
'testbed down'; checks that every run is complete or cleanly failed, nothing hung, and nothing is left:
no process, namespace, link, tracefs instance or temporary file (docs/robustness.md).

    sudo .venv/bin/python benchmarks/soak.py --count 5     # ~10+ min of both cores
    sudo .venv/bin/python benchmarks/soak.py --count 1     # one round

Uses its own prefix (sk-), subnet and state file, so it can run beside another testbed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PREFIX, SUBNET = "sk-", "10.219.41.0/24"


def hpcvar(args, env, timeout=1800, check=False):
    res = subprocess.run([sys.executable, "-m", "hpcvar", *args], env=env, capture_output=True, text=True,
                         timeout=timeout)
    if check and res.returncode != 0:
        raise SystemExit(f"hpcvar {' '.join(args)} failed: {res.stderr[-2000:]}")
    return res


def leftovers(tmp: Path) -> list[str]:
    out = []
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    out += [f"namespace {n.split()[0]}" for n in ns.splitlines() if n.startswith(PREFIX)]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    out += [f"link {ln.split(':')[1].strip()}" for ln in links.splitlines() if f" {PREFIX}" in ln]
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                # children inherit the soak's environment (its state file and runs directory) even when
                # their command line does not name them: the injector, traffic endpoints, MPI ranks
                environ = (d / "environ").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if (str(tmp) in cmd or str(tmp) in environ) and int(d.name) != os.getpid():
                out.append(f"process {d.name}: {cmd[:150]}")
    inst = Path("/sys/kernel/tracing/instances")
    if inst.is_dir():
        out += [f"tracefs instance {p.name}" for p in inst.glob("hpcvar-*")]
    out += [f"temporary file {p}" for p in tmp.rglob("*.tmp")]
    return out


def outcome(res) -> tuple[str | None, dict[str, str]]:
    """The characterize run's status (from its run.json) and its failed steps with their first error line."""
    if res is None:
        return None, {}
    try:
        out = json.loads(res.stdout)
        info = json.loads((Path(out["run"]) / "run.json").read_text())
    except (ValueError, KeyError, TypeError, OSError):
        m = re.search(r"error: .*", res.stderr)
        return None, {"(characterize)": m.group()[:200] if m else res.stderr.strip()[-200:]}
    steps = info.get("steps") or {}
    failed = {k: (v.get("error") or "").splitlines()[0][:200] if v.get("error") else v.get("status")
              for k, v in steps.items() if isinstance(v, dict) and v.get("status") != "complete"}
    return info.get("status"), failed


def soak(count: int, tmp: Path) -> dict:
    env = dict(os.environ, HPCVAR_TESTBED_STATE=str(tmp / "state.json"), HPCVAR_RUNS=str(tmp / "runs"))
    hpcvar(["testbed", "up", "--hosts", "4", "--rate", "1gbit", "--prefix", PREFIX, "--subnet", SUBNET], env,
           timeout=120, check=True)
    rounds, t0 = [], time.monotonic()
    try:
        for i in range(count):
            noise = hpcvar(["testbed", "noise", "--from", "h3", "--to", "h4", "--rate", "200mbit", "--duration",
                            "600s", "--background"], env, timeout=60)
            cpu = str(sorted(os.sched_getaffinity(0))[-1])
            inj = subprocess.Popen([sys.executable, "-m", "hpcvar", "noise", "inject", "--cpus", cpu, "--period",
                                    "10ms", "--burn", "100us", "--time", "600s"], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            t = time.monotonic()
            try:
                res = hpcvar(["characterize", "--quick", "--launcher", "testbed", "--np", "2", "--json"], env)
            except subprocess.TimeoutExpired:
                res = None
            inj.terminate()
            inj.wait(30)
            status, failed_steps = outcome(res)
            # clean: complete, or failed the documented way (exit 1 or 2, the run recorded as failed, one
            # 'error:' per failed step), never a traceback, a signal or a hang; the warnings characterize
            # prints first (ranks sharing cores) are not failures
            ok = res is not None and "Traceback" not in res.stderr and (
                (res.returncode == 0 and status == "complete") or (res.returncode in (1, 2) and status != "running"))
            rounds.append({"round": i + 1, "seconds": round(time.monotonic() - t), "exit": None if res is None else
                           res.returncode, "status": status, "clean": ok, "failed_steps": failed_steps,
                           "noise_exit": noise.returncode,
                           "stderr": "" if res is None or ok else res.stderr.strip()[-300:]})
            print(json.dumps(rounds[-1]), flush=True)
    finally:
        hpcvar(["testbed", "down"], env, timeout=120)
    time.sleep(2)
    runs = [json.loads(p.read_text()) for p in (tmp / "runs").rglob("run.json")]
    bad_runs = [r["id"] for r in runs if r["status"] not in ("complete", "failed", "interrupted")]
    return {"rounds": rounds, "seconds": round(time.monotonic() - t0), "runs": len(runs),
            "runs_not_finished": bad_runs, "leftovers": leftovers(tmp)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=5, help="characterize --quick rounds (default 5)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("soak: needs root (network namespaces)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="hpcvar-soak-") as d:
        out = soak(a.count, Path(d))
    print(json.dumps(out, indent=2))
    ok = all(r["clean"] for r in out["rounds"]) and not out["runs_not_finished"] and not out["leftovers"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
