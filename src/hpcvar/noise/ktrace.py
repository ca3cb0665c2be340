"""Kernel tracepoints from tracefs for 'hpcvar noise record --attribute'.

``require_tracefs()`` checks root, tracefs (mounting it at /sys/kernel/tracing when it is not mounted),
instances, the ``x86-tsc`` trace clock and the events; every failure names ``--attribute`` and the remedy.
``TraceSession`` is a private tracefs instance ``instances/hpcvar-<pid>`` (the global buffer is never
touched): trace clock ``x86-tsc`` (raw TSC cycles, the collector's clock), ``tracing_cpumask`` = the
recorded CPUs, a per-CPU buffer of ``buffer_kb`` on those CPUs, overwrite off (a full buffer drops the
newest events and counts them, so the recorded part starts at the beginning), the events of
``wanted_events()``. It is removed on leaving the ``with`` block, also on an error or Ctrl-C / SIGTERM
(which hpcvar turns into KeyboardInterrupt); instances left by killed hpcvar processes are removed too.

``parse_trace()`` reads the text of ``per_cpu/cpuN/trace`` (read after tracing stopped: no consuming
reader races the writer); ``kernel_intervals()`` pairs entries with exits into intervals named like
``irq 0 timer``, ``softirq TIMER``, ``local_timer`` or ``sched_switch to kworker/0:1``.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpcvar.errors import HpcvarError, UsageError

FLAG = "--attribute"
TRACEFS = Path("/sys/kernel/tracing")
CLOCK = "x86-tsc"
PREFIX = "hpcvar-"
BASE_EVENTS = ("irq:irq_handler_entry", "irq:irq_handler_exit", "irq:softirq_entry", "irq:softirq_exit",
               "sched:sched_switch")
OPTIONAL_EVENTS = ("nmi:nmi_handler",)  # one record at the end of each NMI handler, with its delta_ns
MIN_BUFFER_KB, MAX_BUFFER_KB = 4096, 256 * 1024
BUFFER_KB_PER_S = 1024  # ~30,000 events/s per CPU at ~35 bytes each

_REMEDY_ROOT = "Run as root (e.g. sudo hpcvar noise record --attribute ...), or leave out --attribute"
_REMEDY_MOUNT = ("Mount it as root: mount -t tracefs nodev /sys/kernel/tracing (a kernel with CONFIG_TRACING), "
                 "or leave out --attribute")


def tracefs_mounts(mounts_file: str = "/proc/mounts") -> list[Path]:
    """Mount points of tracefs, /sys/kernel/tracing first."""
    try:
        text = Path(mounts_file).read_text()
    except OSError:
        return []
    out = [Path(p[1]) for p in (line.split() for line in text.splitlines()) if len(p) > 2 and p[2] == "tracefs"]
    return sorted(set(out), key=lambda p: (p != TRACEFS, str(p)))


def _mem_available_kb() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def buffer_kb_for(duration_s: float, ncpus: int = 1) -> int:
    """Per-CPU ring buffer size for a recording of ``duration_s`` on ``ncpus`` CPUs: BUFFER_KB_PER_S per second
    (at least MIN_BUFFER_KB, at most MAX_BUFFER_KB), and all buffers together at most a quarter of the
    available memory. A full buffer drops the newest events; the report counts them."""
    kb = min(max(MIN_BUFFER_KB, BUFFER_KB_PER_S * duration_s + 2048), MAX_BUFFER_KB)
    avail = _mem_available_kb()
    if avail:
        kb = min(kb, max(MIN_BUFFER_KB, avail // 4 // max(ncpus, 1)))
    return int(kb)


def require_tracefs(flag: str = FLAG, mount: bool = True) -> Path:
    """The tracefs root for --attribute, or a UsageError naming ``flag`` and the remedy. Never falls back."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        raise UsageError("time-aligned attribution reads kernel tracepoints (tracefs), which needs root", flag,
                         _REMEDY_ROOT)
    mounts = tracefs_mounts()
    if not mounts:
        if not mount:
            raise UsageError("tracefs is not mounted", flag, _REMEDY_MOUNT)
        try:
            res = subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True, text=True,
                                 timeout=30)
            why = res.stderr.strip() or f"exit code {res.returncode}"
        except (OSError, subprocess.TimeoutExpired) as e:
            why = str(e)
        mounts = tracefs_mounts()
        if not mounts:
            raise UsageError(f"tracefs is not mounted and mounting it at {TRACEFS} failed ({why})", flag,
                             _REMEDY_MOUNT)
    root = mounts[0]
    if not (root / "instances").is_dir():
        raise UsageError(f"the tracefs at {root} has no instances/ directory (kernel too old)", flag,
                         "Use a kernel with tracefs instances (4.x or later), or leave out --attribute")
    clocks = _read(root / "trace_clock").replace("[", " ").replace("]", " ").split()
    if CLOCK not in clocks:
        raise UsageError(f"the trace clock '{CLOCK}' is not available here (clocks: {', '.join(clocks)}); "
                         "the collector's timestamps are TSC cycles", flag, "Use an x86 machine, or leave out "
                         "--attribute")
    have = set(_read(root / "available_events").split())
    missing = [e for e in BASE_EVENTS if e not in have]
    if missing:
        raise UsageError(f"the kernel lacks the tracepoints {', '.join(missing)}", flag,
                         "Use a kernel with CONFIG_TRACING and irq/sched events, or leave out --attribute")
    return root


def wanted_events(root: Path) -> list[str]:
    """The base irq/softirq/sched_switch events, every ``irq_vectors:*_entry/_exit`` pair and nmi_handler
    where available."""
    have = set(_read(root / "available_events").split())
    vec = sorted(e for e in have if e.startswith("irq_vectors:") and e.endswith("_entry")
                 and e[:-len("_entry")] + "_exit" in have)
    return ([e for e in BASE_EVENTS if e in have] + [x for e in vec for x in (e, e[:-len("_entry")] + "_exit")]
            + [e for e in OPTIONAL_EVENTS if e in have])


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as e:
        raise HpcvarError(f"cannot read {path}: {e.strerror}", FLAG, _REMEDY_MOUNT) from None


def cpumask_hex(cpus: list[int]) -> str:
    """tracing_cpumask form: hex, comma-separated 32-bit groups (most significant first)."""
    mask = 0
    for c in cpus:
        mask |= 1 << c
    h = f"{mask:x}"
    h = h.zfill((len(h) + 7) // 8 * 8)
    return ",".join(h[i:i + 8] for i in range(0, len(h), 8))


def parse_stats(text: str) -> dict:
    """per_cpu/cpuN/stats -> {'entries', 'overrun', 'commit_overrun', 'dropped', 'read', 'lost'}."""
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        key = {"entries": "entries", "overrun": "overrun", "commit overrun": "commit_overrun",
               "dropped events": "dropped", "read events": "read"}.get(k.strip())
        if key:
            try:
                out[key] = int(v.split()[0])
            except (ValueError, IndexError):
                pass
    out["lost"] = out.get("overrun", 0) + out.get("commit_overrun", 0) + out.get("dropped", 0)
    return out


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class TraceSession:
    """A private tracefs instance on ``cpus``; use as ``with TraceSession(...) as s: s.start(); ...; s.stop()``."""

    root: Path
    cpus: list[int]
    buffer_kb: int
    events: list[str] = field(default_factory=list)
    path: Path | None = None
    removed: list[str] = field(default_factory=list)  # stale instances removed on entry

    def __enter__(self) -> TraceSession:
        inst = self.root / "instances"
        for d in inst.glob(PREFIX + "*"):
            pid = d.name[len(PREFIX):]
            if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
                self._remove(d)
                self.removed.append(d.name)
        self.path = inst / f"{PREFIX}{os.getpid()}"
        if self.path.exists():  # left by an earlier session of this process
            self._remove(self.path)
        try:
            self.path.mkdir()
        except OSError as e:
            raise HpcvarError(f"cannot create the tracefs instance {self.path}: {e.strerror}", FLAG,
                              _REMEDY_ROOT) from None
        try:
            self.events = self.events or wanted_events(self.root)
            self._write("tracing_on", "0")
            self._write("trace_clock", CLOCK)
            self._write("options/overwrite", "0")
            self._write("tracing_cpumask", cpumask_hex(self.cpus))
            self._write("buffer_size_kb", "4")  # the CPUs not recorded keep almost nothing
            for c in self.cpus:
                self._write(f"per_cpu/cpu{c}/buffer_size_kb", str(self.buffer_kb))
            for ev in self.events:
                self._write(f"events/{ev.replace(':', '/')}/enable", "1")
            self._write("trace", "")  # clear
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close(quiet=exc[0] is not None)

    def _write(self, rel: str, value: str) -> None:
        assert self.path is not None  # set on entering the session
        p = self.path / rel
        try:
            with open(p, "w") as f:
                f.write(value)
        except OSError as e:
            raise HpcvarError(f"cannot write '{value}' to {p}: {e.strerror}", FLAG,
                              "Check that tracefs is writable (root) and the buffer size fits in memory") from None

    def start(self) -> None:
        self._write("tracing_on", "1")

    def stop(self) -> None:
        self._write("tracing_on", "0")

    def stats(self, cpu: int) -> dict:
        assert self.path is not None
        return parse_stats(_read(self.path / f"per_cpu/cpu{cpu}/stats"))

    def read(self, cpu: int) -> str:
        """The text of this CPU's buffer (non-consuming; call after stop())."""
        assert self.path is not None
        return _read(self.path / f"per_cpu/cpu{cpu}/trace")

    @staticmethod
    def _remove(path: Path) -> None:
        for rel in ("tracing_on", "events/enable"):
            try:
                with open(path / rel, "w") as f:
                    f.write("0")
            except OSError:
                pass
        for _ in range(50):
            try:
                path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as e:
                if e.errno != errno.EBUSY:
                    raise
                time.sleep(0.1)
        path.rmdir()

    def close(self, quiet: bool = False) -> None:
        """Remove the instance (idempotent). With ``quiet`` a failure does not mask the error being raised."""
        if self.path is None or not self.path.exists():
            return
        try:
            self._remove(self.path)
        except OSError as e:
            if not quiet:
                raise HpcvarError(f"cannot remove the tracefs instance {self.path}: {e.strerror}", FLAG,
                                  f"Remove it by hand: rmdir {self.path}") from None


# ---- the text of per_cpu/cpuN/trace ---------------------------------------------------------------------
_LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+"
                   r"(?:(?P<flags>[^\s\d][^\s]*)\s+)?(?P<ts>\d+(?:\.\d+)?):\s+(?P<name>\w+):\s?(?P<args>.*)$")


@dataclass
class TraceRecord:
    ts: int  # TSC cycles (trace_clock x86-tsc)
    cpu: int
    name: str
    args: str
    pid: int = -1  # the task running when the event fired
    comm: str = ""


def parse_trace(text: str, where: str = "trace") -> list[TraceRecord]:
    """Records of a tracefs text buffer; comment lines skipped. A timestamp with a decimal point means a
    clock other than x86-tsc: an error, since it cannot be aligned with TSC cycles."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#") or line.startswith("CPU:") or "LOST" in line[:40]:
            continue
        m = _LINE.match(line)
        if not m:
            continue
        ts = m.group("ts")
        if "." in ts:
            raise HpcvarError(f"{where}: timestamps are not in cycles ('{ts}')", FLAG,
                              f"The trace clock must be {CLOCK}; this is a bug in hpcvar")
        out.append(TraceRecord(int(ts), int(m.group("cpu")), m.group("name"), m.group("args"), int(m.group("pid")),
                               m.group("comm")))
    return out


_KV = re.compile(r"(\w+)=(\S+)")
_SWITCH = re.compile(r"prev_comm=(?P<pc>.*?) prev_pid=(?P<pp>\d+) .*?==> next_comm=(?P<nc>.*?) next_pid=(?P<np>\d+)")
_ACTION = re.compile(r"action=(\w+)")
_NMI = re.compile(r"^(?P<fn>\S+?)(?:\+0x[0-9a-f]+/0x[0-9a-f]+)?\(\) delta_ns: (?P<ns>\d+)")


def kernel_intervals(records: list[TraceRecord], tids: set[int] | None = None,
                     comm: str = "hv_noise_collec", cycles_per_ns: float | None = None) -> list[dict]:
    """Pair entries with exits (per CPU) into ``{cpu, source, kind, start, end, complete}``.

    irq_handler_entry/exit (by irq number) -> ``irq N name``; softirq_entry/exit (by vector) ->
    ``softirq ACTION``; irq_vectors X_entry/X_exit -> ``X`` (``local_timer``, ``reschedule``...). Different
    sources nest; one source does not nest in itself, so an entry while the same source is open means the
    exit was lost. sched_switch away from a collector thread (``tids``, else by ``comm``) until the switch
    back -> ``sched_switch to NEXT_COMM``; a record from the collector's own context (or another switch
    away) while it is away means the switch back was lost. Whatever lost its other end becomes a point at
    the end that was seen (``complete`` False): it still names the detour it falls in, but never spans
    others. nmi_handler (recorded as the handler returns, with its duration) -> ``nmi HANDLER`` from
    ts - delta_ns x ``cycles_per_ns`` to ts. Times are those of the records (TSC cycles).
    """
    by_cpu: dict[int, list[TraceRecord]] = {}
    for r in records:
        by_cpu.setdefault(r.cpu, []).append(r)
    out: list[dict] = []
    for cpu, recs in sorted(by_cpu.items()):
        recs.sort(key=lambda r: r.ts)
        _CpuIntervals(cpu, out, tids, comm, cycles_per_ns).run(recs)
    out.sort(key=lambda x: (x["cpu"], x["start"], x["end"]))
    return out


def _source_of(r: TraceRecord) -> tuple[tuple, str, str] | None:
    """(the key that pairs an entry with its exit, the source's name, its kind) of an irq, softirq or vector
    record; None for others."""
    n = r.name
    kv = dict(_KV.findall(r.args))
    if n in ("irq_handler_entry", "irq_handler_exit"):
        return ("irq", kv.get("irq")), f"irq {kv.get('irq', '?')} {kv.get('name', '')}".strip(), "irq"
    if n in ("softirq_entry", "softirq_exit"):
        a = _ACTION.search(r.args)
        return ("softirq", kv.get("vec")), f"softirq {a.group(1) if a else kv.get('vec', '?')}", "softirq"
    if n.endswith("_entry") or n.endswith("_exit"):
        key = ("vector", n.rsplit("_", 1)[0])
        return key, key[1], "vector"
    return None


class _CpuIntervals:
    """The intervals of one CPU's records (see kernel_intervals): the sources open, the collector's absence."""

    def __init__(self, cpu: int, out: list[dict], tids: set[int] | None, comm: str, cycles_per_ns: float | None):
        self.cpu, self.out, self.tids, self.comm, self.cycles_per_ns = cpu, out, tids, comm, cycles_per_ns
        self.open_: dict[tuple, tuple[int, str, str]] = {}
        self.away: tuple[int, str] | None = None

    def ours(self, pid: int, name: str) -> bool:
        return pid in self.tids if self.tids else name.startswith(self.comm)

    def emit(self, source: str, kind: str, start: int, end: int, complete: bool) -> None:
        self.out.append({"cpu": self.cpu, "source": source, "kind": kind, "start": start, "end": end,
                         "complete": complete})

    def lost_switch_back(self) -> None:
        assert self.away is not None
        self.emit(f"sched_switch to {self.away[1]}", "sched", self.away[0], self.away[0], False)
        self.away = None

    def run(self, recs: list[TraceRecord]) -> None:
        for r in recs:
            if r.name == "sched_switch":
                self.switch(r)
                continue
            if self.away is not None and self.ours(r.pid, r.comm):  # running again: the switch back was lost
                self.lost_switch_back()
            if r.name == "nmi_handler":
                self.nmi(r)
            else:
                self.entry_or_exit(r)
        for t0, src, k in self.open_.values():
            self.emit(src, k, t0, t0, False)
        if self.away is not None:
            self.lost_switch_back()

    def switch(self, r: TraceRecord) -> None:
        m = _SWITCH.search(r.args)
        if not m:
            return
        if self.ours(int(m.group("pp")), m.group("pc")):
            if self.away is not None:  # we never saw the switch back
                self.lost_switch_back()
            self.away = (r.ts, m.group("nc"))
        elif self.ours(int(m.group("np")), m.group("nc")) and self.away is not None:
            self.emit(f"sched_switch to {self.away[1]}", "sched", self.away[0], r.ts, True)
            self.away = None

    def nmi(self, r: TraceRecord) -> None:
        m = _NMI.match(r.args)
        if m:
            d = int(int(m.group("ns")) * self.cycles_per_ns) if self.cycles_per_ns else 0
            self.emit(f"nmi {m.group('fn')}", "nmi", r.ts - d, r.ts, bool(self.cycles_per_ns))

    def entry_or_exit(self, r: TraceRecord) -> None:
        found = _source_of(r)
        if found is None:
            return
        key, source, kind = found
        if r.name.endswith("_entry"):
            if key in self.open_:  # its exit was lost
                t0, src, k = self.open_[key]
                self.emit(src, k, t0, t0, False)
            self.open_[key] = (r.ts, source, kind)
        elif key in self.open_:
            t0, src, k = self.open_.pop(key)
            self.emit(src, k, t0, r.ts, True)
        else:  # its entry was lost (or came before tracing started)
            self.emit(source, kind, r.ts, r.ts, False)


__all__ = ["require_tracefs", "TraceSession", "parse_trace", "kernel_intervals", "wanted_events", "buffer_kb_for",
           "cpumask_hex", "parse_stats", "tracefs_mounts"]
