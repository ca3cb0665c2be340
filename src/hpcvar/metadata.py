"""Metadata collected automatically for every run (DESIGN.md, after pyperf).

Host, CPU model and frequency, governor, kernel, cores, virtualization,
isolation settings, hpcvar version and git SHA, the build's MPI and the timer
probe. Every reader tolerates missing files: a field that cannot be known is
None, never guessed.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hpcvar import __version__
from hpcvar._native import build_info, find_program
from hpcvar.errors import MissingToolError


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


STEAL_WARN_PCT = 10.0


def cpu_ticks() -> tuple[int, int] | None:
    """(steal, total) clock ticks of all CPUs so far, from /proc/stat's "cpu" line; None where there is none."""
    line = (_read("/proc/stat") or "").split("\n", 1)[0].split()
    if len(line) < 9 or line[0] != "cpu":
        return None
    v = [int(x) for x in line[1:9]]  # user nice system idle iowait irq softirq steal (guest is inside user)
    return v[7], sum(v)


def steal_pct(start: tuple[int, int] | None, end: tuple[int, int] | None = None) -> float | None:
    """The share (%) of all CPUs' time that the hypervisor took (steal) between two ``cpu_ticks()``."""
    end = end if end is not None else cpu_ticks()
    if start is None or end is None or end[1] <= start[1]:
        return None
    return 100.0 * (end[0] - start[0]) / (end[1] - start[1])


def steal_warning(pct: float | None) -> str | None:
    if pct is None or pct < STEAL_WARN_PCT:
        return None
    return (f"the hypervisor took {pct:.0f}% of the CPUs' time during the measurement (steal time): timings and "
            "rates are disturbed; repeat the run when the host is quieter")


LOAD_WARN_PCT = 10.0  # other processes' share of the CPUs above which a measurement is disturbed


@dataclass
class LoadMark:
    """What this machine's CPUs did up to now (/proc/stat, every CPU) and this process's own CPU time with that
    of its waited-for descendants (getrusage): two marks give other processes' share of the CPUs between them."""

    busy_s: float  # user + nice + system of every CPU: processes (interrupts are noise, not load)
    total_s: float
    steal_s: float
    own_s: float
    wall_s: float

    @classmethod
    def now(cls) -> LoadMark | None:
        import resource
        import time

        line = (_read("/proc/stat") or "").split("\n", 1)[0].split()
        if len(line) < 9 or line[0] != "cpu":
            return None
        tick = os.sysconf("SC_CLK_TCK")
        v = [int(x) / tick for x in line[1:9]]
        own = 0.0
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
            u = resource.getrusage(who)
            own += u.ru_utime + u.ru_stime
        return cls(v[0] + v[1] + v[2], sum(v), v[7], own, time.monotonic())

    def since(self, start: LoadMark) -> dict:
        """{others_pct, steal_pct, seconds}: other processes' and the hypervisor's share of all CPUs."""
        total = self.total_s - start.total_s
        if total <= 0:
            return {"others_pct": float("nan"), "steal_pct": float("nan"), "seconds": self.wall_s - start.wall_s}
        others = (self.busy_s - start.busy_s) - (self.own_s - start.own_s)
        return {"others_pct": max(0.0, 100.0 * others / total), "steal_pct": 100.0 * (self.steal_s - start.steal_s)
                / total, "seconds": round(self.wall_s - start.wall_s, 3)}


def load_check(seconds: float = 0.5) -> dict | None:
    """Other processes' share of this machine's CPUs over ``seconds`` of sleep (hpcvar's own processes idle):
    the check before measuring. None where /proc/stat is missing."""
    import time

    a = LoadMark.now()
    time.sleep(seconds)
    z = LoadMark.now()
    return z.since(a) if a and z else None


def load_warning(load: dict | None, when: str) -> str | None:
    """A warning with its remedy when other processes or the hypervisor took too much of the CPUs."""
    if not load:
        return None
    parts = []
    if load["others_pct"] > LOAD_WARN_PCT:
        parts.append(f"other processes used {load['others_pct']:.0f}% of this machine's CPUs")
    if load["steal_pct"] > STEAL_WARN_PCT:
        parts.append(f"the hypervisor took {load['steal_pct']:.0f}%")
    if not parts:
        return None
    return f"{when}, {' and '.join(parts)} (over {LOAD_WARN_PCT:g}%): what is measured includes their load; " \
           "measure when the machine is idle"


def cpu_model() -> str | None:
    text = _read("/proc/cpuinfo") or ""
    m = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return m.group(1).strip() if m else platform.processor() or None


def cpu_flags() -> set[str]:
    text = _read("/proc/cpuinfo") or ""
    m = re.search(r"^flags\s*:\s*(.+)$", text, re.M)
    return set(m.group(1).split()) if m else set()


def in_vm() -> bool | None:
    """True when the CPU reports a hypervisor (cpuinfo flag), None when unknown."""
    flags = cpu_flags()
    if not flags:
        return None
    return "hypervisor" in flags


def mem_available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (None where unknown): the limit memory checks use."""
    text = _read("/proc/meminfo") or ""
    m = re.search(r"^MemAvailable:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) * 1024 if m else None


def governor() -> str | None:
    return _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")


def cpu_mhz() -> float | None:
    text = _read("/proc/cpuinfo") or ""
    m = re.search(r"^cpu MHz\s*:\s*([0-9.]+)$", text, re.M)
    return float(m.group(1)) if m else None


def isolation() -> dict:
    cmdline = _read("/proc/cmdline") or ""
    out = {}
    for key in ("isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity"):
        m = re.search(rf"\b{key}=(\S+)", cmdline)
        out[key] = m.group(1) if m else None
    return out


def smt_active() -> bool | None:
    v = _read("/sys/devices/system/cpu/smt/active")
    return None if v is None else v == "1"


def clocksource() -> str | None:
    return _read("/sys/devices/system/clocksource/clocksource0/current_clocksource")


def _git_dir(start: Path) -> Path | None:
    """The git directory of the checkout holding ``start`` (a worktree's ``.git`` file names its own)."""
    for d in (start, *start.parents):
        g = d / ".git"
        if g.is_dir():
            return g
        if g.is_file():
            text = g.read_text().strip()
            if text.startswith("gitdir:"):
                p = Path(text[len("gitdir:"):].strip())
                return p if p.is_absolute() else (d / p).resolve()
    return None


def _is_sha(text: str) -> bool:
    return len(text) == 40 and all(c in "0123456789abcdef" for c in text)


@functools.cache
def git_sha() -> str | None:
    """The git SHA of the hpcvar source tree, when it is a checkout: HEAD resolved through the ref files and
    packed-refs as git does (what ``git rev-parse HEAD`` prints, without starting git: 15-20 ms of every
    command's start-up, issue 30)."""
    return sha_of_checkout(Path(__file__).resolve().parent)


def sha_of_checkout(start: Path) -> str | None:
    """HEAD's SHA of the checkout holding ``start`` (None: not one, or unreadable)."""
    try:
        g = _git_dir(start)
        if g is None:
            return None
        head = (g / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head if _is_sha(head) else None
        ref = head[len("ref:"):].strip()
        common = (g / (g / "commondir").read_text().strip()).resolve() if (g / "commondir").is_file() else g
        for base in dict.fromkeys((g, common)):
            if (base / ref).is_file():
                sha = (base / ref).read_text().strip()
                return sha if _is_sha(sha) else None
        packed = common / "packed-refs"
        for line in packed.read_text().splitlines() if packed.is_file() else []:
            sha, _, name = line.partition(" ")
            if name.strip() == ref and _is_sha(sha):
                return sha
    except (OSError, UnicodeDecodeError):
        return None
    return None


@functools.cache
def timer_probe() -> dict:
    """Calibrated TSC frequency and timer resolution/cost from the hv_probe program."""
    try:
        exe = find_program("hv_probe")
    except MissingToolError:
        return {}
    try:
        out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    info = {}
    for line in out.stdout.splitlines():
        k, _, v = line.partition("=")
        try:
            info[k] = float(v) if "." in v or v.isdigit() else v
        except ValueError:
            info[k] = v
    return info


def collect(extra: dict | None = None, timer: bool = True) -> dict:
    """All machine metadata of this host (the one running hpcvar). ``timer=False`` leaves out the timer probe
    (``timer_probe`` is then {}): a simulation times nothing with the host's clocks, and the probe runs a
    program for about 0.25 s, longer than a small simulation."""
    u = platform.uname()
    meta = {
        "host": socket.gethostname(),
        "kernel": f"{u.system} {u.release}",
        "kernel_version": u.version,
        "arch": u.machine,
        "cpu_model": cpu_model(),
        "cpu_mhz": cpu_mhz(),
        "cores": os.cpu_count(),
        "cores_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "governor": governor(),
        "virtualized": in_vm(),
        "smt_active": smt_active(),
        "clocksource": clocksource(),
        "tcp_congestion_control": (_read("/proc/sys/net/ipv4/tcp_congestion_control") or "").strip() or None,
        "isolation": isolation(),
        "python": platform.python_version(),
        "hpcvar_version": __version__,
        "git_sha": git_sha(),
        "build": build_info(),
        "timer_probe": timer_probe() if timer else {},
    }
    if extra:
        meta.update(extra)
    return meta


def machine_key(meta: dict) -> tuple:
    """What must match for two runs to be 'the same machine' (compare refuses otherwise)."""
    return (meta.get("host"), meta.get("cpu_model"), meta.get("cores"))
