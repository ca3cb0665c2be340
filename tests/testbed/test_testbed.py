"""The real testbed (root): shaped rates, incast, latency across hosts, up/down without leftovers.

One testbed (3 hosts, 200 mbit, jumbo frames) is brought up once for the module
and always torn down. Jumbo frames keep TCP/IP headers below 1% of the bytes
counted by tbf, so one stream can reach the shaped rate within the 5% checked
here (at MTU 1500 the headers alone take 4.4%; see docs/testbed.md).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcvar.errors import UsageError
from hpcvar.testbed import netns
from hpcvar.testbed.noise import Flow, run_flows
from hpcvar.testbed.plan import load_state, make_plan
from tests.conftest import best_of_quiet_attempts, mpi_available, run_cli

pytestmark = pytest.mark.root

RATE = 200e6
PREFIX = "hvt-"  # not the default prefix: a user's testbed on this machine is never touched


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    state = tmp_path_factory.mktemp("testbed") / "state.json"
    try:
        netns.up(make_plan(3, RATE, prefix=PREFIX, mtu=9000), state)
        yield state
    finally:
        netns.down(state)
        assert not any(netns.leftovers(PREFIX).values()), netns.leftovers(PREFIX)


def bench(state, runs_dir, *args) -> dict:
    res = run_cli(["bench", "latency", "--launcher", "testbed", "--sizes", "8,4MiB", "--warmup", "2",
                   "--min-iters", "5", "--time-per-size", "1s", "--timeout", "90s", "--json", *args],
                  env={"HPCVAR_TESTBED_STATE": str(state), "HPCVAR_RUNS": str(runs_dir)}, timeout=150, check=True)
    return {s["size"]: s for s in json.loads(res.stdout)["sizes"]}


def cross_host(testbed, runs_dir) -> tuple[dict, int]:
    """Ranks 0 and 1 on h1 and h2: the sizes measured, and the bytes h1's link carried meanwhile."""
    if not mpi_available():
        pytest.skip("hpcvar was built without MPI")
    before = netns.qdisc_counters(f"{PREFIX}h1", f"{PREFIX}eth0")["bytes"]
    sizes = bench(testbed, runs_dir)
    after = netns.qdisc_counters(f"{PREFIX}h1", f"{PREFIX}eth0")["bytes"]
    return sizes, after - before


def test_single_stream_gets_the_shaped_rate(testbed, tmp_path):
    def within_5pct(m):
        bw_bps = m[0][4 << 20]["bw_bytes_per_s"] * 8
        assert abs(bw_bps - RATE) / RATE <= 0.05, f"{bw_bps / 1e6:.1f} Mbit/s at 4 MiB, shaped at {RATE / 1e6:.0f}"

    def crossed_the_link(m):
        # the MPI traffic really crossed h1's shaped link (not /dev/shm): every measured 4 MiB message did
        assert m[1] >= m[0][4 << 20]["n"] * (4 << 20)

    best_of_quiet_attempts(lambda: cross_host(testbed, tmp_path / f"runs{time.monotonic_ns()}"), within_5pct,
                           always=crossed_the_link, what="one 4 MiB stream across h1's link")


def test_cross_host_latency_is_above_same_host(testbed, tmp_path):
    same = bench(testbed, tmp_path / "runs", "--ranks-per-node", "2")  # both ranks on h1: shared memory
    cross = cross_host(testbed, tmp_path / "runs")[0]
    # the least disturbed round trips (min) do not depend on the machine's load as medians do
    assert cross[8]["min_ns"] > 3 * same[8]["min_ns"], (cross[8], same[8])
    assert cross[8]["median_ns"] > same[8]["median_ns"]


def test_two_into_one_share_the_receivers_link(testbed):
    """Two senders into h1 share h1's 200 mbit download link: on every attempt they carry at most 110% of
    the rate (the bridge port's shaping holds) and split what they carry fairly (each 35-65%); on a quiet
    host they carry 90-110% of it. A busy host only lowers the total: two CI runs got 59 + 61 and 68 + 78
    Mbit/s, both split fairly, and one run here got 58 + 53 with 43% of the CPUs taken by the hypervisor."""
    def measure():
        res = run_flows(testbed, [Flow("h2", "h1"), Flow("h3", "h1")], 3.0)
        rates = [f["measured_bps"] for f in res["flows"]]
        assert all(r is not None for r in rates), res
        return rates

    def ceiling_and_split(rates):
        total = sum(rates)
        assert total <= 1.1 * RATE, [x / 1e6 for x in rates]
        for r in rates:
            assert 0.35 * total <= r <= 0.65 * total, [x / 1e6 for x in rates]

    def fills_the_link(rates):
        assert abs(sum(rates) - RATE) / RATE <= 0.1, f"{' + '.join(f'{x / 1e6:.1f}' for x in rates)} Mbit/s"

    best_of_quiet_attempts(measure, fills_the_link, always=ceiling_and_split, what="two flows into h1")


def test_background_noise_stops_by_itself(testbed):
    res = run_flows(testbed, [Flow("h3", "h2", 3e8, 0.05, 0.2)], 1.0, port=47100, background=True)
    assert load_state(testbed).noise[-1]["pids"] == res["pids"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(netns._alive(p) for p in res["pids"]):
        time.sleep(0.2)
    for p in res["pids"]:
        try:
            os.waitpid(p, os.WNOHANG)
        except ChildProcessError:
            pass
    assert not any(netns._alive(p) for p in res["pids"])
    assert netns.qdisc_counters(f"{PREFIX}h3", f"{PREFIX}eth0")["bytes"] > 1e6


def test_hosts_are_isolated_and_exec_runs_inside(testbed):
    res = run_cli(["testbed", "exec", "--state", str(testbed), "h2", "--", "sh", "-c", "hostname; ip -4 -o addr; "
                   "ip route"], timeout=60, check=True)
    plan = load_state(testbed)
    assert res.stdout.splitlines()[0] == f"{PREFIX}h2"
    assert f"{plan.host('h2').addr}/24" in res.stdout and "default" not in res.stdout
    st = netns.status(testbed)
    assert st["status"] == "up" and all(h["exists"] and h["link"] == "UP" for h in st["hosts"])
    assert st["hosts"][0]["upload"]["kind"] == "tbf" and st["hosts"][0]["download"]["kind"] == "tbf"


def test_up_twice_down_twice_and_after_a_killed_up(tmp_path):
    prefix = "hvu-"
    state = tmp_path / "state.json"
    try:
        netns.up(make_plan(2, 1e9, prefix=prefix, switches=2), state)
        with pytest.raises(UsageError, match="a testbed is up and recorded"):
            netns.up(make_plan(2, 1e9, prefix=prefix), state)  # never replaced silently
        netns.up(make_plan(2, 1e9, prefix=prefix), state, replace=True)  # replaces the first
        assert len(netns.leftovers(prefix)["namespaces"]) == 3
        assert sorted(netns.down(state)) == [f"{prefix}h1", f"{prefix}h2", f"{prefix}sw"]
        assert netns.down(state) == []
        assert not any(netns.leftovers(prefix).values()), netns.leftovers(prefix)
        # kill an up in the middle: the state is recorded before anything is created
        code = ("from hpcvar.testbed import netns, plan; import pathlib; "
                f"netns.up(plan.make_plan(40, 1e9, prefix='{prefix}'), pathlib.Path('{state}'))")
        proc = subprocess.Popen([sys.executable, "-c", code])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(netns.leftovers(prefix)["namespaces"]) < 3:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert load_state(state).status == "creating" and netns.leftovers(prefix)["namespaces"]
        netns.down(state)
        assert not any(netns.leftovers(prefix).values()), netns.leftovers(prefix)
        assert not state.exists() and not (tmp_path / "agent").exists()
    finally:
        netns.down(state)


def test_cpu_fault_throttles_only_that_hosts_processes_and_down_removes_it(tmp_path):
    """--cpu-noise-of: what runs in the faulty host (testbed exec, the agent) is in its cpu cgroup and is
    throttled when it keeps both CPUs busy; another host's processes are not; down removes group and mount, also
    when up died after making them (the plan records them first) and a process of the host is still running."""
    from hpcvar.testbed import cgroups
    from hpcvar.testbed.plan import place_cgroups, save_state, with_cpu_faults

    prefix, state = "hvc-", tmp_path / "state.json"
    env = {"HPCVAR_TESTBED_STATE": str(state)}
    spin = 'for i in 1 2; do timeout 0.5 sh -c "while :; do :; done" & done; wait'
    try:
        # 2 ms of CPU per 10 ms for the whole host: two spinning shells exceed it whatever else runs here
        run_cli(["testbed", "up", "--hosts", "2", "--prefix", prefix, "--cpu-noise-of", "h2=9ms/10ms"], env=env,
                check=True, timeout=120)
        plan = load_state(state)
        group = Path(plan.hosts[1].cgroup)
        assert (group / "cpu.cfs_period_us").read_text().strip() == "10000"
        cg = run_cli(["testbed", "exec", "h2", "--", "cat", "/proc/self/cgroup"], env=env, check=True).stdout
        assert f"{cgroups.GROUP_PREFIX}{prefix}h2" in cg
        h1 = run_cli(["testbed", "exec", "h1", "--", "cat", "/proc/self/cgroup"], env=env, check=True).stdout
        assert f"{cgroups.GROUP_PREFIX}{prefix}h1" in h1  # a group without a quota
        assert (Path(plan.hosts[0].cgroup) / "cpu.cfs_quota_us").read_text().strip() == "-1"
        agent = subprocess.run([plan.agent, "h2", "cat /proc/self/cgroup"], capture_output=True, text=True,
                               check=True).stdout
        assert f"{cgroups.GROUP_PREFIX}{prefix}h2" in agent  # what MPI daemons started on h2 run in
        run_cli(["testbed", "exec", "h2", "--", "sh", "-c", spin], env=env, check=True)
        stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
        assert int(stat["nr_throttled"]) > 0, stat
        # the noise collector reads its group's throttled time (through the bind mount: the host's /sys hides
        # /sys/fs/cgroup); h1's group has no quota. The native collector alone: a whole 'hpcvar noise record'
        # (Python, its analysis and figures) at 2 ms of CPU per 10 ms took over 120 s in one CI run
        from hpcvar._native import find_program
        from hpcvar.noise.analysis import attribution
        from hpcvar.noise.formats import read_jtr

        for host, throttled in (("h2", True), ("h1", False)):
            jtr = tmp_path / f"{host}.jtr"
            run_cli(["testbed", "exec", host, "--", str(find_program("hv_noise_collect")), "--cpus", "0,1",
                     "--duration", "1", "--threshold-ns", "1000", "--max-events", "1000000", "--out", str(jtr)],
                    env=env, check=True, timeout=120)
            trace = read_jtr(jtr)
            att = attribution(trace)
            share = att["cgroup_throttled_s"] / (att["window_s"] * len(trace.cpus))
            assert (share > 0.3) if throttled else (share == 0.0), (host, att["cgroup_throttled_s"])
        # a process of h2 still running at down; then an up that died after creating the groups
        bg = subprocess.Popen([sys.executable, "-m", "hpcvar", "testbed", "exec", "h2", "--", "sleep", "60"],
                              env={**os.environ, **env})
        time.sleep(0.5)
        run_cli(["testbed", "down"], env=env, check=True, timeout=120)
        bg.wait(timeout=10)
        assert not group.exists() and not any(netns.leftovers(prefix, state).values()), netns.leftovers(prefix, state)
        half = with_cpu_faults(make_plan(2, 1e9, prefix=prefix), {"h1": (100_000, 100_000)})
        place_cgroups(half, state)
        half.status = "creating"
        save_state(state, half)
        cgroups.setup(half, lambda m: None)
        assert Path(half.hosts[0].cgroup).is_dir()
        run_cli(["testbed", "down"], env=env, check=True, timeout=120)
        assert not any(netns.leftovers(prefix, state).values()), netns.leftovers(prefix, state)
    finally:
        run_cli(["testbed", "down"], env=env, timeout=120)


def test_a_testbed_owned_by_a_killed_process_is_taken_down(tmp_path):
    """up --owner-pid: the owner killed with SIGKILL (no cleanup of its own), the watcher takes the testbed down;
    a 'down' by hand before that stops the watcher too (issue #32: hpl_replay's testbed after kill -9)."""
    state = tmp_path / "state.json"
    env = {"HPCVAR_TESTBED_STATE": str(state)}
    for kill_owner in (True, False):
        owner = subprocess.Popen(["sleep", "60"])
        try:
            run_cli(["testbed", "up", "--hosts", "2", "--prefix", "hvo-", "--owner-pid", str(owner.pid)], env=env,
                    check=True, timeout=120)
            watcher = json.loads(netns.owner_path(state).read_text())["watcher_pid"]
            assert netns.leftovers("hvo-", state)["namespaces"]
            if kill_owner:
                owner.kill()
            else:
                run_cli(["testbed", "down"], env=env, check=True, timeout=120)
            deadline = time.monotonic() + 15
            while (any(netns.leftovers("hvo-", state).values()) or state.exists()) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not any(netns.leftovers("hvo-", state).values()) and not state.exists()
            assert not netns.owner_path(state).exists()
            deadline = time.monotonic() + 5
            while os.path.exists(f"/proc/{watcher}") and time.monotonic() < deadline:
                time.sleep(0.1)
            stat = open(f"/proc/{watcher}/stat").read().split() if os.path.exists(f"/proc/{watcher}") else ["", "", "X"]
            assert stat[2] in ("Z", "X"), f"the watcher {watcher} is still running"
        finally:
            owner.kill()
            run_cli(["testbed", "down"], env=env, timeout=120)
