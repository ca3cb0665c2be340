"""hpcvar screen on the testbed (root): it names exactly the faults made, and nothing on a clean testbed.

- 4 hosts at 200 mbit, h2's link at half the rate (--rate-of) and h3 throttled 1 ms of every 10 ms through its
  cpu cgroup (--cpu-noise-of): the screen names exactly h2 (its link) and h3 (noise, compute, with the quota as
  their cause), exit 3; the same through srun on the testbed's Slurm (every process slurmd starts on h3 is in
  h3's group);
- the same testbed without faults: 5 screens in a row name nothing, exit 0;
- a slow CPU (--cpu-quota-of h4=60%) and cross traffic into h1 (from a fifth host that is not screened):
  each found and attributed to its host.

The screens are short (2 rounds of 0.4 s of noise and 0.2 s of kernel per node, 1 MiB x 3 per direction):
screening is quick by design. A screen disturbed by other jobs on this machine answers UNRELIABLE (exit 4)
rather than naming a host wrongly; such an attempt counts as disturbed (tests.conftest.best_of_quiet_attempts),
while a DEGRADED finding naming a host without a fault fails every attempt.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import best_of_quiet_attempts, run_cli
from tests.testbed.conftest import up_testbed

pytestmark = [pytest.mark.root, pytest.mark.mpi]

SCREEN = ["screen", "--rounds", "2", "--check", "0.2s", "--noise", "0.4s", "--kernel", "0.2s", "--bw-size", "1MiB",
          "--bw-iters", "3", "--lat-iters", "50", "--shm-iters", "100", "--timer-samples", "20", "--timeout", "150s",
          "--json"]
FAULTS = ["--rate-of", "h2=100mbit", "--cpu-noise-of", "h3=1ms/10ms"]
# a quota'd host is named by its timings (the quota their cause) or by its throttled share (cpu.stat)
CPU_METRICS = {"noise_fraction", "compute_rate", "cpu_throttled"}
LINK_METRICS = {"link_bandwidth", "link_latency"}
LINK_LATENCY = frozenset({"link_latency"})


def screen(env: dict, *extra: str) -> dict:
    t0 = time.monotonic()
    res = run_cli([*SCREEN, *extra], env=env, timeout=300)
    assert res.returncode in (0, 3, 4), res.stdout[-3000:] + res.stderr[-3000:]
    out = json.loads(res.stdout)
    out["rc"], out["elapsed_s"] = res.returncode, time.monotonic() - t0
    return out


def named(out: dict, status: str = "degraded") -> dict[str, set[str]]:
    """host -> metrics of its findings (pairs name both ends)."""
    got: dict[str, set[str]] = {}
    for f in out["findings"]:
        if f["status"] == status:
            for h in f["hosts"].split(","):
                got.setdefault(h, set()).add(f["metric"])
    return got


def _z(f: dict) -> str:
    """A finding's z; null in the JSON (NaN: a finding judged by a bound, with no others to compare) as '-'."""
    return "-" if f["z"] is None else f"{f['z']:+.1f}"


def report(what: str, out: dict) -> None:
    """The figures the issue asks for: duration, each finding's z against the threshold, the largest z."""
    zs = ", ".join(f"{f['where']} {f['metric']} z {_z(f)} ({f['status']})" for f in out["findings"])
    print(f"\n{what}: exit {out['rc']} in {out['elapsed_s']:.1f} s; {zs or 'no finding'}; largest z "
          f"{_z(out['largest_z'])} ({out['largest_z']['metric']} {out['largest_z']['where']}); "
          f"{out['answer']['line'][:300]}")


def latency_detail(out: dict) -> str:
    """Every link's 8-byte latency in its three measurements (before and after its bandwidth test, the recheck
    after every pair) and its load: what a latency finding rested on."""
    return "; ".join(f"{r['src']}-{r['dst']} {r['first'] / 1e3:.2f}/{r['second'] / 1e3:.2f}/{r['later'] / 1e3:.2f} us "
                     f"load {r['load_pct']:.0f}%" for r in out["link_metrics"] if r["metric"] == "link_latency")


def only_faults(out: dict, allowed: dict[str, set[str]], excused: frozenset[str] = frozenset()) -> None:
    """What no disturbance excuses: a DEGRADED finding that involves no faulty host (a node finding on a healthy
    host, a pair of two healthy hosts). A pair with one faulty end may come out slow under other jobs' load, when
    the fault shows in some of its node's pairs only; the exact check (names_exactly) is the quiet one's. Findings
    on the ``excused`` metrics are left to that check."""
    for f in out["findings"]:
        hosts = set(f["hosts"].split(","))
        if f["status"] == "degraded" and f["metric"] not in excused:
            assert hosts & set(allowed), (f["where"], f["metric"], out["answer"]["line"])
            if f["scope"] == "node":
                assert f["metric"] in allowed[f["where"]], (f["where"], f["metric"], out["answer"]["line"])


def disturbed(out) -> str | None:
    """What the screen itself measured of other jobs' load (its UNRELIABLE reasons: load, a finding not reproduced
    in its second measurement, or one whose interval the machine's noise stretched to the others'), for one
    screen or several."""
    outs = out if isinstance(out, list) else [out]
    load = [r for o in outs for r in o["answer"]["reasons"]
            if "other processes used" in r or "hypervisor" in r or "a transient" in r or "cannot be told" in r]
    return f"the screen measured load: {load[0][:160]}" if load else None


def names_exactly(out: dict, expected: dict[str, set[str]]) -> None:
    got = named(out)
    # every finding with its z and the others' median: a fault that was not named shows how far it was
    seen = "; ".join(f"{f['where']} {f['metric']} {f['status']} z {_z(f)} value {f.get('value')} others "
                     f"{f.get('rest_median')}" for f in out["findings"])
    assert out["rc"] == 3, out["answer"]["line"]
    assert set(got) == set(expected), f"{out['answer']['line']} | findings: {seen}"
    for host, metrics in expected.items():
        assert got[host] & metrics, (host, got[host], out["answer"]["line"])


def quota_named(out: dict, host: str) -> None:
    """The faulty host's CPU findings name its cgroup's CPU quota as their cause, or it is named for its throttled
    share itself (hv_screen reads cpu.stat of the ranks' group, through the testbed's bind mount of the
    hierarchy); no other host was throttled."""
    cpu = [f for f in out["findings"] if f["where"] == host and f["status"] == "degraded" and f["metric"] in
           CPU_METRICS]
    assert cpu and all(f["metric"] == "cpu_throttled" or "CPU quota throttled its processes" in f["cause"]
                       for f in cpu), out["findings"]
    thr = {(r["host"], r["metric"]): r["throttled_pct"] for r in out["node_metrics"] if r["metric"] in CPU_METRICS}
    assert all(v == 0.0 for (h, _), v in thr.items() if h != host), thr
    # the throttled share as a node metric of its own: at or over its bound on the host, exactly 0 elsewhere
    share = {r["host"]: r["value"] for r in out["node_metrics"] if r["metric"] == "cpu_throttled"}
    assert share[host] >= 1.0 and all(v == 0.0 for h, v in share.items() if h != host), share


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    with up_testbed(tmp_path_factory, "scf-", 4, "200mbit", *FAULTS) as env:
        yield {**env, "HPCVAR_RUNS": str(tmp_path_factory.mktemp("screen-runs"))}


def test_screen_names_the_slow_link_and_the_noisy_host(faulty):
    hosts = {"scf-h2": LINK_METRICS, "scf-h3": CPU_METRICS}

    def check(out):
        names_exactly(out, hosts)
        link = [f for f in out["findings"] if f["where"] == "scf-h2" and f["metric"] == "link_bandwidth"]
        assert link and link[0]["scope"] == "node" and link[0]["side"] == "both", out["findings"]
        assert 0.4 < link[0]["ratio"] < 0.6 and link[0]["cost"] > 0.5  # half the rate; the ring pays for it
        quota_named(out, "scf-h3")

    out = best_of_quiet_attempts(lambda: screen(faulty, "--launcher", "testbed"), check, tries=2,
                                 always=lambda o: only_faults(o, hosts), what="the screen of a faulty testbed",
                                 disturbed=disturbed)
    report("faulty testbed", out)
    assert out["turns"] == 4  # the hosts share this machine's CPUs: measured in turns


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    with up_testbed(tmp_path_factory, "scc-", 4, "200mbit") as env:
        yield {**env, "HPCVAR_RUNS": str(tmp_path_factory.mktemp("screen-runs"))}


def test_five_clean_screens_in_a_row_name_nothing(clean):
    """A latency finding on a clean testbed is retried with five new screens (up to 3 sets), any other finding
    fails at once: the 4 hosts share one VM's 2 vCPUs, and one CI run saw every link of scc-h1 at 7.2 us against
    the others' 5.16 us (z +5.3) in all three of their measurements, a state of the machine that lasted the
    screen (load normal, no steal) and was gone in the next CI runs. Bandwidth findings have never come from a
    clean testbed; one compute finding did (scc-h3 0.925x, z -4.9, while the VM lost 8-12% to the hypervisor's
    exits), before a node finding had to show in every round: such a one is suspect now (UNRELIABLE, a
    transient), and the attempt disturbed."""
    def five():
        return [screen(clean, "--launcher", "testbed") for _ in range(5)]

    def check(outs):
        assert [o["rc"] for o in outs] == [0] * 5, [f"{o['answer']['line']} | {latency_detail(o)}" for o in outs]

    outs = best_of_quiet_attempts(five, check, tries=3, what="five clean screens", disturbed=disturbed,
                                  always=lambda outs: [only_faults(o, {}, LINK_LATENCY) for o in outs])
    for k, o in enumerate(outs):
        report(f"clean screen {k + 1}", o)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    missing = [t for t in ("slurmctld", "slurmd", "munged", "srun") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: apt-get install slurmctld slurmd slurm-client munge "
                    "libpmix-dev")
    with up_testbed(tmp_path_factory, "scs-", 4, "200mbit", "--slurm", *FAULTS) as env:
        res = run_cli(["testbed", "env", "--json"], env=env, check=True)
        yield {**env, **json.loads(res.stdout), "HPCVAR_RUNS": str(tmp_path_factory.mktemp("screen-runs"))}


def test_screen_through_srun_names_them_too(slurm):
    hosts = {"scs-h2": LINK_METRICS, "scs-h3": CPU_METRICS}
    env = {k: v for k, v in slurm.items() if k != "SLURM_JOB_ID"}
    out = best_of_quiet_attempts(lambda: screen(env, "--launcher", "srun", "--nodes", "4"),
                                 lambda o: (names_exactly(o, hosts), quota_named(o, "scs-h3")), tries=2,
                                 always=lambda o: only_faults(o, hosts), what="the screen through srun",
                                 disturbed=disturbed)
    report("srun on the testbed's Slurm", out)


@pytest.fixture(scope="module")
def cross(tmp_path_factory):
    # 60% of the 2 CPUs: the collector and the kernel, on both CPUs, lose 40%; one spinning rank (a ping-pong)
    # stays under the quota. At 50% (one CPU's worth) h4's ranks were throttled in some ping-pongs too, and one of
    # its pairs (not all) came out slow: named as that pair, with its other end (docs/screen.md, attribution).
    with up_testbed(tmp_path_factory, "scx-", 5, "200mbit", "--cpu-quota-of", "h4=60%") as env:
        yield {**env, "HPCVAR_RUNS": str(tmp_path_factory.mktemp("screen-runs"))}


def test_a_slow_cpu_and_cross_traffic_are_each_their_hosts(cross):
    """h4's processes get 60% of the machine's CPUs; h5 (not screened) sends 100 Mbit/s to h1 all along: the
    screen of h1..h4 names h4 for its CPU and h1 for what its link receives, nothing else. The traffic's
    processes load the CPUs the whole time (about 12% here): a load every node and link had cannot make one
    stand out, so the findings stand (DEGRADED), the load named beside them."""
    hosts = {"scx-h1": LINK_METRICS, "scx-h4": CPU_METRICS}

    def measure():
        run_cli(["testbed", "noise", "--from", "h5", "--to", "h1", "--rate", "100mbit", "--duration", "60s",
                 "--background"], env=cross, check=True)
        try:
            return screen(cross, "--launcher", "testbed", "--nodes", "4")
        finally:
            _stop_noise(cross)

    def check(out):
        names_exactly(out, hosts)
        link = [f for f in out["findings"] if f["where"] == "scx-h1" and f["metric"] == "link_bandwidth"]
        assert link and link[0]["side"] == "receive", out["findings"]
        quota_named(out, "scx-h4")

    out = best_of_quiet_attempts(measure, check, tries=2,
                                 always=lambda o: only_faults(o, hosts), what="cross traffic and a slow CPU",
                                 disturbed=disturbed)
    report("cross traffic on h1, h4 at 50% CPU", out)


def _stop_noise(env: dict) -> None:
    """Stop the background traffic (it would stop by itself after its duration) before the next attempt."""
    import signal

    from hpcvar.testbed.plan import load_state

    plan = load_state(Path(env["HPCVAR_TESTBED_STATE"]))
    for entry in plan.noise if plan else []:
        for pid in entry.get("pids", []):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    time.sleep(0.5)
