"""jitSim driver: the C core (native/sim/jitsim.c) through ctypes, offsets, replicas, results.

Semantics: docs/jitter-sim.md; reference: hpcvar.sim.jitter_ref (identical integers).
Memory: the core holds 64 bytes per task (hv_js_task) plus the trace as 16 bytes per
event. After a run the driver summarizes the per-task absorbed jitter and waiting
(quantiles) from views of that array; only --per-task output keeps per-task arrays.
"""

from __future__ import annotations

import ctypes
import functools
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from hpcvar.errors import HpcvarError, UsageError
from hpcvar.noise import COSCHED, SYNC, UNSYNC
from hpcvar.noise.trace import CpuTrace, JitterTrace

if TYPE_CHECKING:
    from hpcvar.sim.jitter_nodes import MeasuredAlignment

# a task's state in the core (native/sim/jitsim.h): its hot part (hv_js_task: its time or mailbox m, its cached
# event) and its cold part (hv_js_cursor: its absorbed jitter, its offset)
TASK_DTYPE = np.dtype([("m", "<i8"), ("gstart", "<i8"), ("end", "<i8"), ("hint", "<i4"), ("lap", "<i4")])
CURSOR_DTYPE = np.dtype([("absorbed", "<i8"), ("offset", "<i8")])
TASK_BYTES = TASK_DTYPE.itemsize + CURSOR_DTYPE.itemsize  # 48
DRIVER_BYTES_PER_TASK = 0  # the summaries are computed inside the task array (_summaries_in_place)
ALIGN_CODES = {UNSYNC: 0, SYNC: 1, COSCHED: 2}  # the C core's codes (native/sim/jitsim.h)
BARRIER_CODES = {"none": 0, "tree": 1}


class _Trace(ctypes.Structure):
    _fields_ = [("ev", ctypes.c_void_p), ("n", ctypes.c_int64), ("length", ctypes.c_int64),
                ("compute", ctypes.c_int64)]


class _Config(ctypes.Structure):
    _fields_ = [("ntasks", ctypes.c_int64), ("phases", ctypes.c_int64), ("work", ctypes.c_int64),
                ("send", ctypes.c_int64), ("recv", ctypes.c_int64), ("lat_intra", ctypes.c_int64),
                ("lat_inter", ctypes.c_int64), ("barrier", ctypes.c_int32), ("arity", ctypes.c_int32),
                ("cores", ctypes.c_int32), ("nojitter", ctypes.c_int32), ("trace_nodes", ctypes.c_int32),
                ("pad", ctypes.c_int32), ("traces", ctypes.c_void_p),
                ("tasks", ctypes.c_void_p), ("cursors", ctypes.c_void_p), ("phase_end", ctypes.c_void_p),
                ("compute_end", ctypes.c_void_p), ("next_start", ctypes.c_void_p)]


@functools.cache
def lib() -> ctypes.CDLL:
    from hpcvar._native import find_library

    so = ctypes.CDLL(str(find_library("libhv_jitsim.so")))
    so.hv_js_task_size.restype = ctypes.c_int
    so.hv_js_cursor_size.restype = ctypes.c_int
    so.hv_js_advance.restype = ctypes.c_int64
    so.hv_js_advance.argtypes = [ctypes.POINTER(_Trace), ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                 ctypes.POINTER(ctypes.c_int32)]
    so.hv_js_offsets.restype = ctypes.c_int
    so.hv_js_offsets.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32,
                                 ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int64, ctypes.c_int64]
    so.hv_js_simulate.restype = ctypes.c_int
    so.hv_js_alloc.restype = ctypes.c_void_p
    so.hv_js_alloc.argtypes = [ctypes.c_int64]
    so.hv_js_free.restype = None
    so.hv_js_free.argtypes = [ctypes.c_void_p]
    so.hv_js_simulate.argtypes = [ctypes.POINTER(_Config)]
    so.hv_js_simulate_threads.restype = ctypes.c_int
    so.hv_js_simulate_threads.argtypes = [ctypes.POINTER(_Config), ctypes.c_int32, ctypes.c_int64]
    if (so.hv_js_task_size(), so.hv_js_cursor_size()) != (TASK_DTYPE.itemsize, CURSOR_DTYPE.itemsize):
        raise HpcvarError(f"libhv_jitsim.so has a task layout of {so.hv_js_task_size()} + {so.hv_js_cursor_size()} "
                          f"bytes, expected {TASK_DTYPE.itemsize} + {CURSOR_DTYPE.itemsize}", None,
                          "Rebuild hpcvar (make install) so that the library matches the Python code")
    return so


def _native_buffer(nbytes: int):
    """Zeroed memory from hv_js_alloc (2 MiB aligned, huge pages where allowed), freed with the returned object."""
    nbytes = max(nbytes, 1)
    so = lib()
    ptr = so.hv_js_alloc(nbytes)
    if not ptr:
        raise HpcvarError(f"cannot allocate {nbytes} bytes for the simulation", "--tasks", "Simulate fewer tasks")
    buf = (ctypes.c_char * nbytes).from_address(ptr)
    weakref.finalize(buf, so.hv_js_free, ptr)
    return buf


def native_empty(shape, dtype) -> np.ndarray:
    """A zeroed array in memory from hv_js_alloc (2 MiB aligned, huge pages where allowed), freed with it."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    return np.frombuffer(_native_buffer(count * dtype.itemsize), dtype=dtype, count=count).reshape(shape)


def native_tasks(ntasks: int) -> tuple[np.ndarray, np.ndarray]:
    """The hot and the cold part of ``ntasks`` tasks (TASK_DTYPE, CURSOR_DTYPE) in one allocation."""
    buf = _native_buffer(ntasks * TASK_BYTES)
    hot = np.frombuffer(buf, dtype=TASK_DTYPE, count=ntasks)
    cold = np.frombuffer(buf, dtype=CURSOR_DTYPE, count=ntasks, offset=ntasks * TASK_DTYPE.itemsize)
    return hot, cold


class NativeTraces:
    """The CPU traces in the core's cumulative form (end = S_{k+1}, cend = C_{k+1}), 16 bytes per event."""

    def __init__(self, cpus: list[CpuTrace]):
        self.events = []
        self.lengths, self.computes = [], []
        arr = (_Trace * len(cpus))()
        for j, c in enumerate(cpus):
            ev = native_empty((c.events, 2), np.int64)
            np.cumsum(c.duration + c.gap, out=ev[:, 0])
            np.cumsum(c.gap, out=ev[:, 1])
            self.events.append(ev)
            arr[j].ev = ev.ctypes.data
            arr[j].n = c.events
            arr[j].length = int(ev[-1, 0])
            arr[j].compute = int(ev[-1, 1])
            self.lengths.append(int(ev[-1, 0]))
            self.computes.append(int(ev[-1, 1]))
        self.arr = arr
        self.count = len(cpus)

    def nbytes(self) -> int:
        return sum(e.nbytes for e in self.events)

    def advance(self, cpu: int, o: int, t: int, w: int, hint: int = -1) -> tuple[int, int]:
        h = ctypes.c_int32(hint)
        t2 = lib().hv_js_advance(ctypes.byref(self.arr[cpu]), o, t, w, ctypes.byref(h))
        return int(t2), h.value


def core_traces(trace: JitterTrace, cores_per_node: int) -> list[CpuTrace]:
    """The trace of each core of a node: core j uses CPU j mod C of the trace."""
    return [trace.cpus[j % len(trace.cpus)] for j in range(cores_per_node)]


@dataclass
class Workload:
    """One BSP workload in cycles (docs/jitter-sim.md)."""

    work: int
    phases: int
    barrier: str = "tree"
    arity: int = 2
    send: int = 0
    recv: int = 0
    lat_intra: int = 0
    lat_inter: int = 0
    cores_per_node: int = 1
    trace_nodes: int = 1  # nodes recorded: node j of the simulation uses recorded node j mod trace_nodes

    def busy_per_task(self, ntasks: int) -> np.ndarray:
        """CPU work each task executes over the run (W, S and R; no jitter, no waiting)."""
        busy = np.zeros(ntasks, dtype=np.int64)
        self.subtract_busy(busy)
        busy *= -1
        return busy

    def subtract_busy(self, t: np.ndarray) -> None:
        """``t -= busy_per_task(len(t))`` in place, by piecewise constant slices (no per-task temporary: the
        summaries of a run stay within the core's memory per task)."""
        n, ph = len(t), self.phases
        t -= self.work * ph
        if self.barrier == "tree" and n > 0:
            # task i has min(k, max(0, n - (k i + 1))) children, and a parent if i > 0
            k, sr = self.arity, self.send + self.recv
            t[1:] -= sr * ph
            full = max(0, (n - 1 - k) // k + 1) if n - 1 >= k else 0  # tasks with k children
            t[:full] -= k * sr * ph
            if full < n:
                t[full] -= max(0, min(k, n - (k * full + 1))) * sr * ph


@dataclass
class Alignment:
    mode: str = "unsync"  # unsync | sync | cosched | file | measured
    window: int = 0
    origin: int = 0
    explicit: np.ndarray | None = None  # one offset per task (mode "file")
    measured: MeasuredAlignment | None = None  # mode "measured": offsets per replica from the recording


@dataclass
class Outcome:
    """One simulation (one replica) or the no-jitter baseline."""

    total: int
    phase_end: np.ndarray
    absorbed: np.ndarray | None = None
    last_start: np.ndarray | None = None
    compute_end: np.ndarray | None = None  # [phase, task]
    next_start: np.ndarray | None = None
    elapsed_s: float = 0.0  # wall time of the C core
    cpu_s: float = 0.0  # CPU time of the process during the C core (all its threads): robust to a busy machine
    offsets: np.ndarray | None = None
    absorbed_q: dict = field(default_factory=dict)  # quantiles over tasks of the absorbed jitter (cycles)
    waiting_q: dict = field(default_factory=dict)  # quantiles over tasks of the waiting (cycles)


def memory_estimate(ntasks: int, phases: int, per_task_out: bool, trace_bytes: int) -> int:
    """Bytes the simulation of ``ntasks`` needs (core + transient summaries + optional per-task output + trace)."""
    b = ntasks * (TASK_BYTES + DRIVER_BYTES_PER_TASK) + trace_bytes
    if per_task_out:
        b += 2 * 8 * ntasks * phases
    return b


MAX_THREADS = 1024  # the core's limit


def simulate(traces: NativeTraces | None, wl: Workload, ntasks: int, align: Alignment, seed: int = 0,  # noqa: PLR0913
             replica: int = 0, per_task: bool = False, keep_tasks: bool = False, threads: int = 1,
             grain: int = 0, space: tuple[np.ndarray, np.ndarray] | None = None, summaries: bool = True) -> Outcome:
    """One run of the C core. traces=None simulates the same workload without jitter (T0).

    threads > 1 runs the phases on that many POSIX threads (identical results); grain is the
    least work per thread (tasks, or tree nodes at the split level; 0: the core's default).
    With one thread, grain is the most tasks per subtree block of a tree (0: the core's
    default, 4096; a grain of at least the task count gives the plain sweeps): same results.
    ``space``: the task arrays of an earlier run of as many tasks (native_tasks), reused (the core resets
    them; their first touch costs more than a small run); ``summaries``: the quantiles over tasks of the
    absorbed jitter and of the waiting (the baseline needs none).
    """
    if not 1 <= threads <= MAX_THREADS:
        raise UsageError(f"{threads} threads", "--threads", f"Give 1 to {MAX_THREADS} threads")
    so = lib()
    tasks, cursors = space if space is not None else native_tasks(ntasks)
    if traces is not None:
        if align.mode == "file":
            cursors["offset"] = align.explicit
        elif align.mode == "measured":
            assert align.measured is not None  # mode "measured" comes with its offsets
            cursors["offset"] = align.measured.offsets(ntasks, wl.cores_per_node, seed, replica)
        else:
            rc = so.hv_js_offsets(ctypes.addressof(traces.arr), traces.count, cursors.ctypes.data, ntasks,
                                  ALIGN_CODES[align.mode], seed & (2**64 - 1), replica, align.window, align.origin)
            if rc:
                raise UsageError("the co-scheduler window origin lies beyond the end of the trace", "--window-origin",
                                 "Give an origin inside the trace")
    phase_end = np.zeros(max(wl.phases, 1), dtype=np.int64)
    ce = ns = None
    if per_task:
        ce = np.zeros((wl.phases, ntasks), dtype=np.int64)
        ns = np.zeros((wl.phases, ntasks), dtype=np.int64)
    cfg = _Config(ntasks=ntasks, phases=wl.phases, work=wl.work, send=wl.send, recv=wl.recv,
                  lat_intra=wl.lat_intra, lat_inter=wl.lat_inter, barrier=BARRIER_CODES[wl.barrier],
                  arity=wl.arity, cores=wl.cores_per_node,
                  nojitter=1 if traces is None else 0, trace_nodes=wl.trace_nodes, pad=0,
                  traces=ctypes.addressof(traces.arr) if traces is not None else None,
                  tasks=tasks.ctypes.data, cursors=cursors.ctypes.data, phase_end=phase_end.ctypes.data,
                  compute_end=ce.ctypes.data if ce is not None else None,
                  next_start=ns.ctypes.data if ns is not None else None)
    t0, c0 = time.perf_counter(), time.process_time()
    rc = so.hv_js_simulate_threads(ctypes.byref(cfg), threads, grain)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    if rc == -1:
        raise HpcvarError("the simulator ran out of memory", "--tasks", "Simulate fewer tasks")
    if rc != 0:
        raise HpcvarError(f"the simulator refused its configuration (code {rc})", None,
                          "This is a bug in the checks of hpcvar sim jitter; please report it")
    phase_end = phase_end[: wl.phases]
    out = Outcome(total=int(phase_end[-1]) if wl.phases else 0, phase_end=phase_end, elapsed_s=elapsed,
                  cpu_s=cpu, compute_end=ce, next_start=ns)
    if keep_tasks:
        out.absorbed = cursors["absorbed"].copy()
        out.last_start = tasks["m"].copy()
        out.offsets = cursors["offset"].copy() if traces is not None else None
    if summaries:
        out.absorbed_q, out.waiting_q = _summaries_in_place(tasks, cursors, wl)
    return out


def _summaries_in_place(tasks: np.ndarray, cursors: np.ndarray, wl: Workload) -> tuple[dict, dict]:
    """Quantiles of the absorbed jitter and of the waiting per task, computed inside the task arrays, which are
    destroyed: numpy selects only on contiguous data (a field of the task records is strided and would be copied,
    8 more bytes per task), so each field is packed to the front of its array first. Both are the first field
    of their records: a record's field is read before anything is written over it."""
    n = len(tasks)
    waiting = tasks["m"]  # the last phase's start
    waiting -= cursors["absorbed"]
    wl.subtract_busy(waiting)
    absorbed = _pack(cursors.view(np.int64), 0, cursors.dtype.itemsize // 8, 0, n)
    waiting = _pack(tasks.view(np.int64), 0, tasks.dtype.itemsize // 8, 0, n)
    return quantiles(absorbed, in_place=True), quantiles(waiting, in_place=True)


def _pack(flat: np.ndarray, field: int, stride: int, start: int, n: int, chunk: int = 1 << 16) -> np.ndarray:
    """flat[j] = flat[j * stride + field] for j in start..n-1, in ascending chunks: a destination never lies
    after its source, so nothing is overwritten before it is read. Returns flat[:n]."""
    for i in range(start, n, chunk):
        j = min(n, i + chunk)
        flat[i:j] = flat[i * stride + field: j * stride + field: stride]
    return flat[:n]


# ---- statistics over replicas ----------------------------------------------------------------------

def mean_ci(values) -> tuple[float, float, float]:
    """Mean over replicas and its 95% confidence interval: the bootstrap percentile interval of the mean
    (hpcvar.stats.summary's resamples and seed). One replica has no interval (NaN, NaN). A percentile interval
    stays inside the replicas' range, so the interval of a makespan never goes below the jitter-free T0 (every
    replica's T >= T0): a Student-t interval did with few, spread replicas (slowdown intervals below zero)."""
    v = np.asarray(values, dtype=float)
    m = float(v.mean())
    if v.size < 2:
        return m, float("nan"), float("nan")
    if np.all(v == v[0]):
        return m, m, m
    from scipy import stats as sps

    from hpcvar.stats.summary import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED

    res = sps.bootstrap((v,), np.mean, confidence_level=0.95, n_resamples=BOOTSTRAP_RESAMPLES, method="percentile",
                        vectorized=True, random_state=np.random.default_rng(BOOTSTRAP_SEED))
    return m, float(res.confidence_interval.low), float(res.confidence_interval.high)


QUANTILES = (("mean", None), ("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))


def quantiles(x: np.ndarray, in_place: bool = False) -> dict:
    """Mean, p50, p90, p99 and max; ``in_place`` lets the percentiles reorder ``x`` instead of copying it."""
    x = np.asarray(x)
    out = {"mean": float(x.mean())}
    qs = np.percentile(x, [50, 90, 99, 100], overwrite_input=in_place)
    out.update({"p50": float(qs[0]), "p90": float(qs[1]), "p99": float(qs[2]), "max": float(qs[3])})
    return out


@dataclass
class PointResult:
    config: str
    tasks: int
    replicas: list[Outcome]
    baseline: Outcome
    wl: Workload
    extra: dict = field(default_factory=dict)

    def summary(self, freq_hz: float, trace_len_min: int) -> dict:
        totals = [o.total for o in self.replicas]
        m, lo, hi = mean_ci(totals)
        t0 = self.baseline.total
        pure = self.wl.phases * self.wl.work
        absorbed = [o.absorbed_q for o in self.replicas]
        waiting = [o.waiting_q for o in self.replicas]
        elapsed = sum(o.elapsed_s for o in self.replicas)
        tp = self.tasks * self.wl.phases * len(self.replicas) / elapsed if elapsed > 0 else float("inf")
        phases = np.diff(np.concatenate([[0], self.replicas[0].phase_end])) if self.wl.phases else np.array([])
        return {
            "config": self.config, "tasks": self.tasks, "replicas": len(totals),
            "total_cycles": m, "total_ci_cycles": [lo, hi], "total_cycles_each": totals,
            "baseline_cycles": t0,
            "slowdown": m / t0 - 1 if t0 else float("nan"),
            "slowdown_ci": [lo / t0 - 1, hi / t0 - 1] if t0 else [float("nan")] * 2,
            "slowdown_vs_compute": m / pure - 1 if pure else float("nan"),
            "total_s": m / freq_hz,
            "phases": [int(x) for x in phases],
            "phase_mean_cycles": float(m / self.wl.phases) if self.wl.phases else 0.0,
            "coverage": m / trace_len_min,
            "absorbed_cycles": {k: float(np.mean([a[k] for a in absorbed])) for k, _ in QUANTILES},
            "waiting_cycles": {k: float(np.mean([a[k] for a in waiting])) for k, _ in QUANTILES},
            "sim_elapsed_s": elapsed,
            "task_phases_per_s": tp,
            **self.extra,
        }


def run_point(traces: NativeTraces, wl: Workload, ntasks: int, align: Alignment, seed: int, replicas: int,
              config: str, per_task: bool = False, threads: int = 1) -> PointResult:
    """Every replica and the jitter-free baseline, in one set of task arrays."""
    space = native_tasks(ntasks)
    outs = [simulate(traces, wl, ntasks, align, seed, r, per_task=per_task and r == 0, threads=threads,
                     space=space) for r in range(replicas)]
    base = simulate(None, wl, ntasks, align, threads=threads, space=space, summaries=False)
    return PointResult(config=config, tasks=ntasks, replicas=outs, baseline=base, wl=wl)


def auto_threads() -> int:
    """The CPUs this process may run on (the core splits a run among threads only when it is large enough)."""
    import os

    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_THREADS))
