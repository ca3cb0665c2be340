"""Nothing outlives hpcvar: how every program hpcvar starts ends when hpcvar ends, ``kill -9`` included.

Two mechanisms, because MPI ranks are not hpcvar's children (they are children of hydra proxies, Open MPI
daemons or slurmstepd):

- **Parent-death signal** (``preexec``): every process hpcvar starts directly (mpiexec, srun, the noise
  collector and injector, cross-traffic senders and receivers, a traced application) gets
  ``prctl(PR_SET_PDEATHSIG)`` between fork and exec, so the kernel signals it when hpcvar dies. Launchers get
  SIGTERM, on which mpiexec and srun tear their job down (srun cancels the Slurm step); helpers get SIGKILL.
- **Watchdog in the native programs** (``watch_env``, native/common/hv_watch.c): hpcvar puts its pid, the
  process start time, the machine's boot id and its pid namespace into the environment
  (``HPCVAR_WATCH_*``). Every native program (MPI benchmarks through ``hv_ctx_init``, the collector, the
  injector) that finds itself on the same machine and in the same pid namespace opens a pidfd on that
  process and starts a thread blocked in ``poll`` on it (no periodic wake-up, so nothing is added to what
  is measured); when hpcvar is gone the program prints one line and exits. Ranks on other machines (srun
  across nodes) have another boot id and rely on srun's SIGTERM instead.

Tracefs instances of ``noise record --attribute`` carry the pid of their hpcvar and are removed by the next
session when that pid is gone (hpcvar.noise.ktrace.TraceSession).
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
WATCH_PID, WATCH_START, WATCH_BOOT, WATCH_PIDNS = ("HPCVAR_WATCH_PID", "HPCVAR_WATCH_START", "HPCVAR_WATCH_BOOT",
                                                   "HPCVAR_WATCH_PIDNS")
BOOT_ID = "/proc/sys/kernel/random/boot_id"

_libc = None


def _prctl():
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            _libc = False
    return getattr(_libc, "prctl", None) if _libc else None


def preexec(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` giving the child ``sig`` when the calling thread of hpcvar dies (None off Linux).

    Runs in the child between fork and exec: after prctl it checks that its parent is still hpcvar (the
    parent may have died before prctl took effect) and exits at once otherwise."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def _set() -> None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return _set


def start_time(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat (clock ticks since boot): with the pid, names one process for good."""
    try:
        text = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def running(pid: int, start: str) -> bool:
    """Whether the process ``pid`` that started at ``start`` (``start_time``) still runs: not when it is gone, its
    pid reused, or it is a zombie (exited; its parent has not reaped it yet)."""
    try:
        text = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    fields = text.rpartition(")")[2].split()
    return len(fields) > 19 and fields[19] == start and fields[0] not in ("Z", "X")


def _read(path: str) -> str | None:
    try:
        return open(path).read().strip()
    except OSError:
        return None


def _pidns() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def watch_env() -> dict[str, str]:
    """The variables by which native programs watch this hpcvar process (empty where /proc is missing)."""
    pid = os.getpid()
    start, boot, ns = start_time(pid), _read(BOOT_ID), _pidns()
    if not (start and boot and ns):
        return {}
    return {WATCH_PID: str(pid), WATCH_START: start, WATCH_BOOT: boot, WATCH_PIDNS: ns}


def popen_guard(sig: int = signal.SIGKILL, env: dict[str, str] | None = None) -> dict:
    """Keyword arguments for subprocess.Popen / run: the parent-death signal and the watched environment."""
    e = dict(os.environ if env is None else env)
    e.update(watch_env())
    return {"preexec_fn": preexec(sig), "env": e}
