"""Per-host CPU faults on the testbed: a slow CPU or periodic throttling, through the cgroup v1 ``cpu`` controller.

The testbed's hosts share this machine's CPUs, so noise injected on a CPU disturbs every host whose processes
run there (../shared/CLUSTER-FACTS.md). What is specific to one host is the CPU time *its* processes get: CFS
bandwidth control gives a group of processes at most ``cpu.cfs_quota_us`` of CPU time per ``cpu.cfs_period_us``
(summed over its threads); a group that used its quota waits, every thread of it, until the period ends.

- ``--cpu-quota-of h2=50%`` (period 100 ms, the kernel's default): h2's processes together get 50% of the
  machine's CPUs, e.g. 100 ms per 100 ms on 2 CPUs. Work that keeps every CPU busy runs at half speed; one
  thread alone on a 2-CPU machine is not slowed (it can use only one CPU anyway). ``h2=50%/10ms`` sets the
  period.
- ``--cpu-noise-of h3=1ms/10ms``: periodic throttling, the shape of OS noise: when h3's processes keep every
  CPU busy they lose about 1 ms of every 10 ms (quota = 9 ms x CPUs per 10 ms period), a 100 Hz train of
  1 ms detours on every CPU at once.

As soon as one host has a fault, every host gets a group ``hpcvar-<namespace>`` in the ``cpu`` hierarchy (with
a quota only on the faulty ones): CFS shares a CPU between groups as between single tasks, so hosts in groups
and hosts outside would be scheduled differently under contention; all in groups, they differ by the quota only.
Processes join their host's group before they enter the host: the launcher's ``mpiexec`` (``in_host_argv``),
the ssh-like agent that starts MPI daemons on the other hosts, ``testbed exec``, the cross-traffic processes,
and the host's slurmd (whose steps inherit it).
``ip netns exec`` mounts a fresh /sys, which hides /sys/fs/cgroup, so the hierarchy is also bind-mounted at
``<state dir>/cgroup-cpu``, a path every namespace of the testbed sees; that is the path the agent writes to.

The plan records the mount and the groups before anything is created; ``down`` moves any process left in a
group back to the root group, removes the groups and unmounts, also after a killed ``up``.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

from hpcvar import units
from hpcvar.errors import MissingToolError, UsageError

GROUP_PREFIX = "hpcvar-"
DEFAULT_PERIOD_US = 100_000  # the kernel's default cfs period
MIN_PERIOD_US, MAX_PERIOD_US = 1_000, 1_000_000  # what cpu.cfs_period_us accepts
MIN_QUOTA_US = 1_000  # the smallest cpu.cfs_quota_us the kernel accepts
MOUNT_DIR = "cgroup-cpu"


def _host_name(name: str, nhosts: int, flag: str) -> str:
    m = re.fullmatch(r"h(\d+)", name)
    if not m or not 1 <= int(m.group(1)) <= nhosts:
        raise UsageError(f"'{name}' is not a host of this testbed", flag, f"Hosts are h1..h{nhosts}")
    return name


def _period_us(text: str, flag: str) -> int:
    period = int(round(units.parse_time(text, flag) * 1e6))
    if not MIN_PERIOD_US <= period <= MAX_PERIOD_US:
        raise UsageError(f"period {text} is outside 1ms..1s (what cpu.cfs_period_us takes)", flag,
                         "Give a period such as 10ms or 100ms")
    return period


def _quota_us(share: float, period_us: int, ncpus: int, flag: str) -> int:
    quota = int(round(share * period_us * ncpus))
    if quota < MIN_QUOTA_US:
        raise UsageError(f"the quota would be {quota} us per period, below the kernel's 1 ms", flag,
                         "Give a larger share or a longer period")
    return quota


def parse_cpu_quota_of(items, nhosts: int, ncpus: int) -> dict[str, tuple[int, int]]:
    """``['h2=50%', 'h3=80%/10ms']`` -> {host: (period_us, quota_us)}; the share is of the machine's ``ncpus``."""
    out = {}
    for item in items:
        name, sep, spec = item.partition("=")
        if not sep:
            raise UsageError(f"'{item}' is not HOST=SHARE", "--cpu-quota-of", "Write it as h2=50% or h2=50%/10ms")
        name = _host_name(name.strip(), nhosts, "--cpu-quota-of")
        share_text, _, period_text = spec.partition("/")
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*%\s*", share_text)
        if not m or not 0 < float(m.group(1)) < 100:
            raise UsageError(f"'{share_text}' is not a share between 0% and 100%", "--cpu-quota-of",
                             "Write it as h2=50% (its processes together get half of the machine's CPUs)")
        period = _period_us(period_text, "--cpu-quota-of") if period_text else DEFAULT_PERIOD_US
        out[name] = (period, _quota_us(float(m.group(1)) / 100.0, period, ncpus, "--cpu-quota-of"))
    return out


def parse_cpu_noise_of(items, nhosts: int, ncpus: int) -> dict[str, tuple[int, int]]:
    """``['h3=1ms/10ms']`` (lose 1 ms of every 10 ms) -> {host: (period_us, quota_us)}."""
    out = {}
    for item in items:
        name, sep, spec = item.partition("=")
        lost_text, slash, period_text = spec.partition("/")
        if not sep or not slash:
            raise UsageError(f"'{item}' is not HOST=LOST/PERIOD", "--cpu-noise-of",
                             "Write it as h3=1ms/10ms (lose 1 ms of every 10 ms)")
        name = _host_name(name.strip(), nhosts, "--cpu-noise-of")
        period = _period_us(period_text, "--cpu-noise-of")
        lost = int(round(units.parse_time(lost_text, "--cpu-noise-of") * 1e6))
        if not 0 < lost < period:
            raise UsageError(f"{lost_text} lost per {period_text} is not less than the period", "--cpu-noise-of",
                             "Lose less than the period, e.g. h3=1ms/10ms")
        out[name] = (period, _quota_us((period - lost) / period, period, ncpus, "--cpu-noise-of"))
    return out


def cpu_hierarchy(mountinfo: str | None = None) -> Path:
    """Where the cgroup v1 hierarchy with the ``cpu`` controller is mounted (from /proc/self/mountinfo)."""
    text = mountinfo if mountinfo is not None else Path("/proc/self/mountinfo").read_text()
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if sep and len(fields) >= 5 and len(rest) >= 3 and rest[0] == "cgroup" and "cpu" in rest[2].split(","):
            return Path(fields[4])
    raise MissingToolError("this kernel has no cgroup v1 'cpu' controller mounted, which per-host CPU faults need",
                           "--cpu-quota-of", "Mount it (mkdir -p /sys/fs/cgroup/cpu && mount -t cgroup -o cpu cgroup "
                                             "/sys/fs/cgroup/cpu) or leave out --cpu-quota-of / --cpu-noise-of")


def group_name(ns: str) -> str:
    return f"{GROUP_PREFIX}{ns}"


def mount_path(state_path: Path) -> Path:
    return Path(state_path).parent / MOUNT_DIR


def join_argv(group_dir: str, argv: list[str]) -> list[str]:
    """``argv`` started inside the group (its children inherit it): a shell writes its own pid into the group's
    cgroup.procs, then becomes ``argv``. Unchanged without a group."""
    if not group_dir:
        return argv
    return ["sh", "-c", 'echo $$ > "$0" || exit 255; exec "$@"', f"{group_dir}/cgroup.procs", *argv]


def _sh(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=20)


def setup(plan, say) -> None:
    """Mount the hierarchy where the namespaces see it, create the faulty hosts' groups, set their bandwidth."""
    from hpcvar.testbed.netns import TestbedError

    hosts = [h for h in plan.hosts if h.cgroup]
    if not hosts:
        return
    mnt = Path(plan.cgroup_mount)
    mnt.mkdir(parents=True, exist_ok=True)
    if not os.path.ismount(mnt):
        res = _sh(["mount", "--bind", str(cpu_hierarchy()), str(mnt)])
        if res.returncode != 0:
            raise TestbedError(f"cannot bind-mount the cpu cgroup hierarchy on {mnt}: {res.stderr.strip()}",
                               "--cpu-quota-of", "Check that the state directory is on a local file system")
    for h in hosts:
        g = Path(h.cgroup)
        g.mkdir(exist_ok=True)
        if not h.cpu_quota_us:
            continue  # a group without a quota: scheduled as the faulty hosts' groups are
        try:
            (g / "cpu.cfs_period_us").write_text(str(h.cpu_period_us))
            (g / "cpu.cfs_quota_us").write_text(str(h.cpu_quota_us))
        except OSError as e:
            raise TestbedError(f"cannot set the CPU bandwidth of {h.name} in {g}: {e.strerror}", "--cpu-quota-of",
                               "Check that the kernel has CFS bandwidth control (CONFIG_CFS_BANDWIDTH)") from None
        say(f"host {h.name}: its processes get {h.cpu_quota_us / 1000:g} ms of CPU per "
            f"{h.cpu_period_us / 1000:g} ms (cgroup {g.name})")


def teardown(plan, say) -> None:
    """Remove the groups the plan names (processes still in one go back to the root group) and the mount."""
    if not plan.cgroup_mount:
        return
    mnt = Path(plan.cgroup_mount)
    if mnt.name != MOUNT_DIR:
        return  # never anything but the mount this module made
    for h in plan.hosts:
        if h.cgroup and Path(h.cgroup).parent == mnt and Path(h.cgroup).name.startswith(GROUP_PREFIX):
            _remove_group(Path(h.cgroup), mnt, say)
    if os.path.ismount(mnt):
        _sh(["umount", "-l", str(mnt)])
    try:
        mnt.rmdir()
    except OSError:
        pass


def _remove_group(g: Path, root: Path, say) -> None:
    deadline = time.monotonic() + 3.0
    while g.is_dir():
        try:
            g.rmdir()
            say(f"removed cgroup {g.name}")
            return
        except OSError:
            pass
        try:
            for pid in (g / "cgroup.procs").read_text().split():
                try:
                    (root / "cgroup.procs").write_text(pid)
                except OSError:
                    continue  # gone meanwhile
        except OSError:
            return
        if time.monotonic() > deadline:
            say(f"cgroup {g} could not be removed")
            return
        time.sleep(0.05)


def leftovers(prefix: str) -> list[str]:
    """Groups of testbeds with ``prefix`` that still exist."""
    try:
        root = cpu_hierarchy()
    except (MissingToolError, OSError):
        return []
    return sorted(str(p) for p in root.glob(f"{GROUP_PREFIX}{prefix}*") if p.is_dir())
