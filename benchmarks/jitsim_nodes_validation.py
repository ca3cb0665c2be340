"""jitSim on several nodes: predicted against measured slowdown of a bulk-synchronous workload under noise injected
on every node at one phase ("aligned") and at shifted phases, from a recording made on every node at once.

Root only (network-namespace testbed; run it under the machine-wide lock, docs/testbed.md). Steps, for each host
count of --hosts (2 to 4 testbed hosts, one rank each):

1. baseline: ``hpcvar bench bsp --launcher testbed|srun --np H`` (ranks SCHED_FIFO --rt-prio, pinned, barrier
   tree, waiting by sleeping: --wait), then ``hpcvar noise record --launcher ... --np H --method timer`` (every
   node at once, one time base);
2. --repeat rounds: per injection, ``hpcvar noise inject --at-clock --phase P`` on every host (host k on CPU (k-1)
   mod 2, FIFO 50) and meanwhile one repetition of ``bench bsp --baseline <1>`` (in the first round also
   ``noise record``: the recording under injection, with its alignment verdict); then a baseline repetition again.
   Each round's slowdown is (T/N)/(T0/N0) - 1 against the mean of the baselines just before and after it
   (``round_slowdowns``), and the measured slowdown is their mean with its 95% CI over the rounds;
3. ``hpcvar sim jitter --trace <recording> --tasks H --cores-per-node 1 --align unsync,sync,measured`` on both
   recordings: predicted slowdown = T_pred(injected) / T_pred(baseline) - 1 per alignment.

What bsp measures on the testbed, and why the comparison is fair (docs/jitter-sim.md, "Several nodes"): the
hosts share this machine's 2 CPUs. Rank r runs pinned on CPU r mod 2, the CPU its host's injector bursts on, so a
rank sees the bursts of every host that injects on its CPU: that is its node's noise here, and it is what its
host's collector records on that CPU (the timer collector sleeps: it sees every burst and takes no CPU). The
simulation therefore takes, for host k, the recorded trace of CPU (k-1) mod 2 (a copy of the recording with that
CPU only: ``rank_cpu_recording``). With more ranks than CPUs, two ranks share each CPU: at the same SCHED_FIFO
priority, and waiting for the barrier asleep (bsp --wait sleep), they compute one after the other, so the CPU
does 2 W of work per phase and a burst on it delays both: the simulated quantum is the work a rank did per phase in
the baseline (its median compute time: W as calibrated takes about 1.06 W here) times the ranks per CPU, and the
barrier's hops are CPU work (``barrier_hop``).

    sudo flock /tmp/hpcvar-root.lock .venv/bin/python benchmarks/jitsim_nodes_validation.py \\
        [--hosts 2,4] [--launcher testbed|srun] [--quantum 1ms] [--phases 1000] [--repeat 5] [--record 4s] \\
        [--keep DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HPCVAR = [sys.executable, "-m", "hpcvar"]
# A phase longer than this was stopped by RT throttling (kernel.sched_rt_runtime_us: real-time threads that fill a
# CPU are stopped for the rest of each second once they used 95 % of it: stops of 25-70 ms here, about once a
# second per repetition); no injected burst (2 ms) makes a phase this long. bsp's ranks fill the CPUs at SCHED_FIFO,
# the recordings' collectors sleep, so the stops are in the measurements only (and not as often in the baseline as
# under injection): the comparison leaves those phases out of both measurements.
STALL_S = 0.02
PERIOD, BURN = "20ms", "2ms"
INJECTIONS = {"aligned": (0, 0, 0, 0), "shifted": (0, 7, 13, 3)}  # ms, host k at phases[k-1]: as the tests
ALIGNS = ("unsync", "sync", "measured")


def hv(args: list[str], env: dict, timeout: float = 600, json_out: bool = True) -> dict:
    print("$ hpcvar " + " ".join(args), file=sys.stderr, flush=True)
    res = subprocess.run([*HPCVAR, *args, *(["--json"] if json_out else [])], env=env, stdout=subprocess.PIPE,
                         text=True, timeout=timeout)
    if res.returncode:
        raise SystemExit(f"hpcvar {' '.join(args)} failed with exit status {res.returncode}")
    return json.loads(res.stdout) if json_out else {}


class Injectors:
    """``noise inject --at-clock`` on hosts 1..H (host k on CPU (k-1) mod ncpu at its phase), stopped on exit."""

    def __init__(self, env: dict, hosts: int, phases_ms: tuple, seconds: float, ncpu: int):
        self.procs = []
        for k in range(1, hosts + 1):
            args = ["testbed", "exec", f"h{k}", "--", *HPCVAR, "noise", "inject", "--cpus",
                    str((k - 1) % ncpu), "--period", PERIOD, "--burn", BURN, "--time", f"{seconds:.0f}s",
                    "--at-clock", "--phase", f"{phases_ms[k - 1]}ms", "--rt-prio", "50"]
            print("$ hpcvar " + " ".join(args) + " &", file=sys.stderr, flush=True)
            self.procs.append(subprocess.Popen([*HPCVAR, *args], env=env, stdout=subprocess.DEVNULL,
                                               start_new_session=True))

    def __enter__(self):
        time.sleep(1.5)
        dead = [p.returncode for p in self.procs if p.poll() is not None]
        if dead:
            self.__exit__()
            raise SystemExit(f"an injector stopped at once (exit status {dead[0]})")
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, 15)
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait()


def bsp(a, env: dict, hosts: int, baseline: str | None = None) -> dict:
    """One repetition of bsp (a round's), with the first baseline's calibration (its work iterations) after it."""
    args = ["bench", "bsp", "--launcher", a.launcher, "--np", str(hosts), "--quantum", a.quantum, "--phases",
            str(a.phases), "--repeat", "1", "--rt-prio", str(a.rt_prio), "--barrier", "tree", "--wait",
            a.wait, "--timeout", "600s"]
    args += ["--map-by", "host"] if a.launcher == "testbed" else ["--ranks-per-node", "1"]
    return hv(args + (["--baseline", baseline] if baseline else []), env, timeout=900)


def unstopped(run: str) -> tuple[list[float], int]:
    """Per repetition of a bsp run, its mean phase time (s) without the phases RT throttling stopped; and how many
    phases were left out."""
    from hpcvar.kinds.bsp.job import global_phases
    from hpcvar.results import Run

    means, stopped = [], 0
    for _, df in Run.open(run).read_table("bsp.phases").groupby("rep"):
        d = global_phases(df) * 1e-9
        keep = d < STALL_S
        stopped += int((~keep).sum())
        means.append(float(d[keep].mean()))
    return means, stopped


def round_slowdowns(injected: list[float], baselines: list[float]) -> list[float]:
    """Round r's slowdown: its injected run's time per phase over the mean of the baselines run just before and just
    after it (baselines[r], baselines[r + 1]), minus 1. The rounds interleave baseline and injected runs so that
    what drifts during the experiment (this machine's speed moved the baseline's phases by -1 % to +4 % between runs
    half a minute apart) is in both sides of each ratio, and a linear drift cancels; the spread of the rounds then
    holds the drift that does not cancel, which a ratio to one baseline run hid."""
    if len(baselines) != len(injected) + 1:
        raise ValueError(f"{len(injected)} rounds need {len(injected) + 1} baselines, not {len(baselines)}")
    return [t / ((baselines[r] + baselines[r + 1]) / 2) - 1.0 for r, t in enumerate(injected)]


def slowdown(runs: list[str], bases: list[str]) -> dict:
    """The measured slowdown (T/N)/(T0/N0) - 1 without the phases RT throttling stopped: per round
    (``round_slowdowns``), and their mean with its 95% CI over the rounds (bench bsp's bootstrap interval)."""
    import numpy as np

    from hpcvar.sim.jitter import mean_ci  # bench bsp's: the bootstrap interval over the repetitions

    inj = [unstopped(r) for r in runs]
    base = [unstopped(b) for b in bases]
    rounds = round_slowdowns([m[0] for m, _ in inj], [m[0] for m, _ in base])
    m, lo, hi = mean_ci(np.asarray(rounds))
    return {"slowdown": m, "ci": [lo, hi], "rounds": rounds, "stopped": sum(s for _, s in inj),
            "baseline_stopped": sum(s for _, s in base),
            "baseline_per_phase_s": float(np.mean([t[0] for t, _ in base]))}


def record(a, env: dict, hosts: int) -> dict:
    return hv(["noise", "record", "--launcher", a.launcher, "--np", str(hosts), "--duration", a.record, "--method",
               "timer", "--threshold", a.threshold, "--rt-prio", "20", "--min-detour", "500us", "--no-plots"], env,
              timeout=300)


def rank_cpu_recording(run: Path, ncpu: int) -> Path:
    """A copy of a multi-node recording in which node k (rank k) keeps only the trace of CPU k mod ncpu, the CPU
    its rank ran on (bsp --pin), so that ``sim jitter --cores-per-node 1`` replays what each rank saw."""
    from hpcvar.noise.formats import read_jtr, write_jtr
    from hpcvar.noise.trace import JitterTrace
    from hpcvar.results import read_raw

    out = run.with_name(run.name + "-rankcpu")
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(run, out)
    raw = read_raw(run / "raw" / "sync.raw")
    hosts = raw.meta.get("hosts", "").split(",")
    for rank, host in enumerate(hosts):
        p = out / "traces" / f"{host}.jtr"
        tr = read_jtr(p)
        want = rank % ncpu
        keep = [c for c in tr.cpus if c.cpu == want]
        if not keep:
            raise SystemExit(f"{p} has no trace of CPU {want}")
        write_jtr(JitterTrace(tr.freq_hz, keep, dict(tr.meta)), p)
    return out


def simulate(a, env: dict, recording: Path, hosts: int, quantum: str, hop: tuple[str, str]) -> dict:
    out = hv(["sim", "jitter", "--trace", str(recording), "--tasks", str(hosts), "--cores-per-node", "1",
              "--quantum", quantum, "--phases", str(a.phases), "--barrier", "tree", "--send-cycles", hop[0],
              "--recv-cycles", hop[0], "--latency-inter", hop[1], "--align", ",".join(ALIGNS), "--replicas",
              str(a.replicas), "--seed", "1", "--no-plots"], env, timeout=600)
    return {p["config"].split()[-1]: p for p in out["points"]}


def barrier_hop(base_runs: list[str], hosts: int, work_s: float) -> tuple[str, str]:
    """jitSim's barrier costs (S = R, wire latency) per tree hop. The hop is the baseline's time per phase (without
    RT throttling's stops) beyond its work, over the 2 x depth hops of the binary tree's critical path. On the
    testbed all of it is CPU work that a burst delays: the hosts' "wire" is the kernel's TCP/IP work on the sender's
    and the receiver's CPUs (veth pairs on one machine), and a rank waiting at the barrier sleeps (bsp --wait
    sleep:20us) and must wake, on its CPU, to see a message. So S = R = half the hop and no wire time (before
    2026-11-28: S = R = half the one-way latency of bench latency, the rest as wire time that no burst delays)."""
    import numpy as np

    depth = max(1, hosts.bit_length() - 1)  # children of i are 2i+1, 2i+2: floor(log2(H)) levels below the root
    per_phase = float(np.mean([t for run in base_runs for t in unstopped(run)[0]]))
    hop = max(0.0, per_phase - work_s) / (2 * depth)
    return f"{hop / 2 * 1e9:.0f}ns", "0ns"


def work_per_rank_s(base_runs: list[str]) -> float:
    """What a rank's quantum took in the baselines: the median of bsp's per-phase compute times (the work is
    calibrated in iterations; on the testbed, two ranks to a CPU, 1 ms of it takes about 1.06 ms)."""
    import numpy as np

    from hpcvar.results import Run

    return float(np.median(np.concatenate([Run.open(r).read_table("bsp.phases")["compute_ns"].to_numpy()
                                           for r in base_runs]))) * 1e-9


def one_host_count(a, env: dict, hosts: int, ncpu: int) -> list[dict]:
    """--repeat rounds, interleaved: baseline, every injection, baseline, every injection, ..., baseline (one bsp
    repetition each, all with the first baseline's calibration); a recording of the baseline after the first one,
    and of each injection in the first round."""
    from hpcvar import units

    per_cpu = -(-hosts // ncpu)  # ranks sharing a CPU (pinned r mod ncpu), computing one after the other
    first = bsp(a, env, hosts)
    base_rec = rank_cpu_recording(Path(record(a, env, hosts)["run"]), ncpu)
    seconds = 30 + 3 * a.phases * units.parse_time(a.quantum, "--quantum") * per_cpu \
        + units.parse_time(a.record, "--record") + 30
    bases, meas, recs = [first["run"]], {name: [] for name in INJECTIONS}, {}
    for r in range(a.repeat):
        for name, phases in INJECTIONS.items():
            with Injectors(env, hosts, phases, seconds, ncpu):
                meas[name].append(bsp(a, env, hosts, baseline=first["run"]))
                if r == 0:
                    recs[name] = record(a, env, hosts)
        bases.append(bsp(a, env, hosts, baseline=first["run"])["run"])
    work_s = work_per_rank_s(bases) * per_cpu  # the quantum as the ranks computed it, per CPU
    quantum = f"{work_s * 1e6:.1f}us"
    hop = barrier_hop(bases, hosts, work_s)
    pred_base = simulate(a, env, base_rec, hosts, quantum, hop)
    rows = []
    for name, phases in INJECTIONS.items():
        rec = recs[name]
        pred = simulate(a, env, rank_cpu_recording(Path(rec["run"]), ncpu), hosts, quantum, hop)
        un = slowdown([m["run"] for m in meas[name]], bases)
        own = [m["slowdown"] for m in meas[name]]  # bsp's own figure: against the first baseline, stops included
        row = {"hosts": hosts, "injection": name, "phases_ms": list(phases[:hosts]), "ranks_per_cpu": per_cpu,
               "simulated_quantum": quantum, "send_recv": hop[0], "wire": hop[1],
               "baseline_per_phase_ns": un["baseline_per_phase_s"] * 1e9, "verdict": rec["alignment"]["verdict"],
               "bsp_slowdown": float(sum(own) / len(own)), "bsp_slowdown_range": [min(own), max(own)],
               "measured_runs": [m["run"] for m in meas[name]], "recording": rec["run"], "baseline_runs": bases,
               "measured_slowdown": un["slowdown"], "measured_slowdown_ci": un["ci"], "rounds": un["rounds"],
               "stopped_phases": un["stopped"], "baseline_stopped_phases": un["baseline_stopped"]}
        for al in ALIGNS:
            row[f"predicted_{al}"] = pred[al]["total_cycles"] / pred_base[al]["total_cycles"] - 1.0
            # the baseline recording's own noise (0 on a quiet machine), and the prediction against no noise at all
            row[f"baseline_recording_{al}"] = pred_base[al]["slowdown"]
            row[f"predicted_{al}_vs_none"] = pred[al]["total_cycles"] / pred_base[al]["baseline_cycles"] - 1.0
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def up(a, work: Path) -> dict:
    env = dict(os.environ, HPCVAR_TESTBED_STATE=str(work / "testbed.json"), HPCVAR_RUNS=str(work / "runs"))
    hv(["testbed", "up", "--hosts", str(max(a.hosts)), "--rate", "1gbit", "--prefix", a.prefix, "--owner-pid",
        str(os.getpid()), *(["--slurm"] if a.launcher == "srun" else [])], env, timeout=300, json_out=False)
    if a.launcher == "srun":
        env.update(hv(["testbed", "env"], env))
    return env


def pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def report(rows: list[dict]) -> None:
    print("\n| hosts | injection (verdict) | measured [95% CI] | unsync | sync | measured alignment "
          "| per round | bsp's own: vs the first baseline, stops included [range] |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        lo, hi = r["measured_slowdown_ci"]
        inside = {al: lo <= r[f"predicted_{al}"] <= hi for al in ALIGNS}
        cells = [pct(r[f"predicted_{al}"]) + ("" if inside[al] else " (out)") for al in ALIGNS]
        blo, bhi = r["bsp_slowdown_range"]
        print(f"| {r['hosts']} | {r['injection']} ({r['verdict']}) | {pct(r['measured_slowdown'])} [{pct(lo)}, "
              f"{pct(hi)}] | " + " | ".join(cells) + " | " + " ".join(pct(x) for x in r["rounds"])
              + f" | {pct(r['bsp_slowdown'])} [{pct(blo)}, {pct(bhi)}] |")
    print("measured: without the phases RT throttling stopped (longer than "
          f"{STALL_S * 1e3:g} ms: " + ", ".join(f"{r['hosts']} hosts {r['injection']} {r['stopped_phases']}"
                                             for r in rows) + f"; baselines {rows[0]['baseline_stopped_phases']}"
          + (f", {rows[-1]['baseline_stopped_phases']}" if len(rows) > 2 else "") + ")")


def report_vs_none(rows: list[dict]) -> None:
    """The predictions are against the baseline recording's. Where that recording held noise the baseline bsp run
    did not see (other users' jobs come and go), they are low by that much: its own predicted slowdown, and the
    predictions against no noise beside it."""
    print("\n| hosts | injection | baseline recording alone: unsync, sync, measured | against no noise: unsync | sync "
          "| measured alignment |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        lo, hi = r["measured_slowdown_ci"]
        cells = [pct(r[f"predicted_{al}_vs_none"]) + ("" if lo <= r[f"predicted_{al}_vs_none"] <= hi else " (out)")
                 for al in ALIGNS]
        print(f"| {r['hosts']} | {r['injection']} | " + ", ".join(pct(r[f"baseline_recording_{al}"]) for al in ALIGNS)
              + " | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="2,4", help="host counts, 2 to 4")
    ap.add_argument("--launcher", choices=["testbed", "srun"], default="testbed")
    ap.add_argument("--quantum", default="1ms")
    ap.add_argument("--phases", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5,
                    help="rounds: a baseline and every injection, one bsp repetition each, interleaved (and a last "
                         "baseline)")
    ap.add_argument("--record", default="4s", help="length of each recording")
    ap.add_argument("--threshold", default="500us",
                    help="noise record --threshold: the shortest lateness of the timer collectors recorded; the "
                         "injected bursts last 2 ms, what is shorter here is the collectors' own wake-up latency (8 "
                         "collector threads on 2 CPUs) and other users' real-time jobs, which come and go")
    ap.add_argument("--replicas", type=int, default=20)
    ap.add_argument("--rt-prio", type=int, default=10, help="SCHED_FIFO priority of the ranks (below the injectors')")
    ap.add_argument("--wait", default="sleep:20us", help="bench bsp --wait: how ranks wait at the barrier")
    ap.add_argument("--prefix", default="jnv-")
    ap.add_argument("--keep", type=Path, default=None, help="keep the runs here")
    ap.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    ap.add_argument("--shifted", default=None, metavar="MS,MS,MS,MS",
                    help="the shifted injection's phase of each host in ms (default 0,7,13,3, as the tests)")
    a = ap.parse_args()
    if a.shifted:
        ph = tuple(int(x) for x in a.shifted.split(","))
        if len(ph) != 4 or not all(0 <= x < 20 for x in ph):
            raise SystemExit("--shifted: four phases in ms, each in [0, 20)")
        INJECTIONS["shifted"] = ph
    a.hosts = [int(h) for h in a.hosts.split(",")]
    if os.geteuid() != 0 or not all(2 <= h <= 4 for h in a.hosts):
        raise SystemExit("needs root (the testbed) and host counts of 2 to 4")
    work = a.keep or Path(tempfile.mkdtemp(prefix="hv_jnv_"))
    work.mkdir(parents=True, exist_ok=True)
    ncpu = os.cpu_count() or 2
    print(f"load average {os.getloadavg()[0]:.2f} on {ncpu} CPUs", flush=True)
    env = up(a, work)
    rows = []
    try:
        for h in a.hosts:
            rows += one_host_count(a, env, h, ncpu)
    finally:
        hv(["testbed", "down"], env, timeout=300, json_out=False)
    print(f"W = {a.quantum}, N = {a.phases}, {a.repeat} repetitions, {a.replicas} simulated replicas, launcher "
          f"{a.launcher}; bursts {BURN} every {PERIOD}; load average {os.getloadavg()[0]:.2f} at the end")
    report(rows)
    report_vs_none(rows)
    if a.out:
        a.out.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"runs in {work / 'runs'}")


if __name__ == "__main__":
    main()
