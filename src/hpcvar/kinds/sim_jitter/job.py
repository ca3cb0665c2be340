"""``hpcvar sim jitter``: jitSim, N phases of (compute W, barrier) for many tasks on jitter traces
(docs/jitter-sim.md). ``job(JitterParams, ctx) -> Run``, called by the command line and by ``hpcvar
characterize``; the command line parses every value with its unit (``parse_span``) before it gets here."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hpcvar import metadata, units
from hpcvar.errors import InputFileError, UsageError
from hpcvar.noise import ALIGNMENTS, COSCHED, MEASURED, SYNC, UNSYNC
from hpcvar.results import Run
from hpcvar.results.context import JobContext
from hpcvar.results.kinds import draw_plots
from hpcvar.results.params import Params
from hpcvar.results.store import atomic_write_text, prefetch_arrow, run_lifecycle
from hpcvar.sim import closed_form as cf
from hpcvar.sim import jitter as J
from hpcvar.sim.synth import synthesize

COMMAND = "sim jitter"
_PLAIN_INT = re.compile(r"\d+")
PER_TASK_MAX_ROWS = 50_000_000
DEFAULT_TASKS = tuple(1 << k for k in range(11))  # 1..1K, the command line's default


@dataclass(frozen=True)
class Span:
    """A length that becomes cycles at the traces' frequency: given in ``cycles``, or in ``seconds`` (converted
    with the frequency); ``source``: the 'bench latency' run it was measured in (``run:REF``)."""

    cycles: int | None = None
    seconds: float | None = None
    source: str | None = None

    def to_cycles(self, freq_hz: float) -> int:
        return self.cycles if self.cycles is not None else int(round((self.seconds or 0.0) * freq_hz))


@dataclass(frozen=True)
class JitterParams(Params):
    """``hpcvar sim jitter``'s parameters (run.json ``params``)."""

    traces: tuple[str, ...] = ()  # .jtr / two-column text files, or run directories of multi-node recordings
    synthetics: tuple[str, ...] = ()  # synthetic trace specs ('250Hz:2us,poisson:0.1Hz:1ms'), checked
    duration_s: float = 3600.0  # length of a synthetic trace
    freq_hz: float | None = None  # cycles per second of text traces (and of synthetic ones; None: 2.4 GHz)
    align: tuple[str, ...] = (UNSYNC,)  # hpcvar.noise.ALIGNMENTS, compared when several
    window: Span | None = None  # the co-scheduler window (align cosched)
    window_origin: Span | None = None  # the start of one window
    offsets_path: str | None = None  # explicit offsets, one trace position (cycles) per task
    seed: int = 1
    replicas: int = 1
    cores_per_node: int | None = None  # None: the trace's CPU count
    work: Span = field(default_factory=lambda: Span(seconds=1e-3))  # the compute quantum W per phase
    barrier: str = "tree"  # tree | none
    arity: int = 2
    send: Span = field(default_factory=lambda: Span(cycles=0))  # S: CPU cost of a send
    recv: Span = field(default_factory=lambda: Span(cycles=0))  # R: CPU cost of a receive
    latency_intra: Span = field(default_factory=lambda: Span(cycles=0))  # wire time inside a node
    latency_inter: Span = field(default_factory=lambda: Span(cycles=0))  # wire time between nodes
    phases: int = 10
    tasks: tuple[int, ...] = DEFAULT_TASKS
    per_task_path: str | None = None  # CSV of replica 0's per-task times (one task count)
    plots: bool = False  # draw the figures now (else the report draws them when it needs them)
    threads: int = 0  # threads of the core (0: one per CPU this process may use; same results for any count)

    @classmethod
    def _decode(cls, doc: dict[str, Any], where: str) -> dict[str, Any]:
        spans = ("window", "window_origin", "work", "send", "recv", "latency_intra", "latency_inter")
        return {k: (Span(**v) if k in spans and isinstance(v, dict) else v) for k, v in doc.items()}


def parse_span(text: str, flag: str, runs_dir: str | None = None) -> Span:
    """``--send-cycles`` and the like: a plain integer (cycles), a time with its unit (2us), or run:REF, a
    'bench latency' run's 0-byte (smallest size) median one-way latency; --send-cycles and --recv-cycles take
    half of it (the paper halves the MPI stack latency)."""
    text = text.strip()
    if _PLAIN_INT.fullmatch(text):
        return Span(cycles=int(text))
    if text.startswith("run:"):
        return _from_latency_run(text[4:], flag, runs_dir)
    return Span(seconds=units.parse_time(text, flag))


def _from_latency_run(ref: str, flag: str, runs_dir: str | None) -> Span:
    from hpcvar.results import resolve_run

    run = Run.open(resolve_run(ref, runs_dir))
    if run.info.get("command") != "bench latency" or not run.has_table("latency.summary"):
        raise UsageError(f"run {run.id} is not a 'bench latency' run with a summary", flag,
                         "Give run:<a bench latency run>, cycles, or a time such as 2us")
    summ = run.read_table("latency.summary").sort_values("size_bytes")
    ns = float(summ["median_ns"].iloc[0])
    if flag in ("--send-cycles", "--recv-cycles"):
        ns /= 2.0
    return Span(seconds=ns * 1e-9, source=str(run.path))


def job(params: JitterParams, ctx: JobContext) -> Run:
    """Simulate every trace x alignment at every task count; every check is made before the run is created.
    Warnings (a trace too short for the work, tasks that see the same jitter again) go into the run."""
    _check(params)
    loaded, recordings, f0 = _load_traces(params)
    w_cycles, wl_base, win, origin = _workload(params, f0)
    warnings: list[str] = []
    configs = _configs(loaded, recordings, params.align, params.cores_per_node, w_cycles, win, origin, warnings)
    _check_memory(configs, params.tasks, params.phases, params.per_task_path)
    run = ctx.create_run(COMMAND, params, metadata.collect({}, timer=False))
    # its tables are written after the C work: the import runs meanwhile (not before the traces are read or
    # synthesized: while the import holds the GIL, that Python work waits for it, docs/replay.md)
    prefetch_arrow()
    with run_lifecycle(run):  # complete on return; failed, or interrupted (Ctrl-C, SIGTERM), on any exception
        phase_rows, summaries = _simulate(run, configs, params, wl_base, win, origin, f0, warnings)
        run.write_table("jitter.phases", columns(phase_rows, PHASE_COLUMNS))
        for w in warnings:
            run.warn(w)
        head = summaries[-1] if len(configs) == 1 else [s for s in summaries if s["config"] == configs[0][0]][-1]
        run.info["result"] = {
            "command": COMMAND, "freq_hz": f0, "work_cycles": w_cycles, "phases_n": params.phases,
            "barrier": params.barrier, "arity": params.arity, "send_cycles": wl_base["send"],
            "recv_cycles": wl_base["recv"], "latency_intra_cycles": wl_base["lat_intra"],
            "latency_inter_cycles": wl_base["lat_inter"], "window_cycles": win, "window_origin_cycles": origin,
            "total_cycles": head["total_cycles"], "baseline_cycles": head["baseline_cycles"],
            "slowdown": head["slowdown"], "phases": head["phases"], "points": summaries, "run": str(run.path)}
        if params.plots:
            run.info["result"]["plots"] = draw_plots(run)
    return run


def _check(p: JitterParams) -> None:
    """Refuse inconsistent parameters (naming the flag)."""
    if p.arity < 1:
        raise UsageError(f"arity {p.arity} is below 1", "--arity", "A k-ary tree needs k >= 1 (2: binary)")
    if not 0 <= p.threads <= J.MAX_THREADS:
        raise UsageError(f"{p.threads} threads", "--threads",
                         f"Give 1 to {J.MAX_THREADS} (1: no extra threads), or auto (one per CPU)")
    if p.phases < 1:
        raise UsageError(f"{p.phases} phases", "--phases", "Simulate at least one phase")
    if not p.traces and not p.synthetics:
        raise UsageError("no trace", "--trace", "Give --trace FILE or --synthetic SPEC")
    for a in p.align:
        if a not in ALIGNMENTS:
            raise UsageError(f"unknown alignment '{a}'", "--align", f"Use {', '.join(ALIGNMENTS)}")
    if p.offsets_path and (len(p.tasks) != 1 or len(p.traces) + len(p.synthetics) != 1):
        raise UsageError("--offsets gives one position per task of one run", "--offsets",
                         "Use it with a single --tasks count and a single trace")
    if COSCHED in p.align and p.window is None:
        raise UsageError("--align cosched needs the window length", "--window", "Give --window 10ms (or cycles)")
    if p.window is not None and COSCHED not in p.align:
        raise UsageError("--window is only for --align cosched", "--window", "Add --align cosched")
    if not p.tasks or min(p.tasks) < 1:
        raise UsageError("a task count below 1", "--tasks", "Give task counts >= 1")
    if p.per_task_path and len(p.tasks) != 1:
        raise UsageError("--per-task writes one task count", "--per-task", "Give a single --tasks value")


def _load_traces(p: JitterParams):
    """The traces to replay: (label, JitterTrace) each, the multi-node recordings by label, and the common
    frequency (traces of other frequencies are refused)."""
    loaded = []  # (label, JitterTrace)
    recordings = {}  # label -> the nodes of a multi-node recording
    for path in p.traces:
        nodes = _load_nodes(path)
        if nodes is not None:
            label = Path(path).name
            recordings[label] = nodes
            loaded.append((label, nodes[0].trace))
            continue
        tr = _load_trace(path, p.freq_hz)
        tr.validate(path)
        loaded.append((Path(path).stem, tr))
    if MEASURED in p.align and not recordings:
        raise UsageError("--align measured needs a multi-node recording", "--align",
                         "Give --trace RUN_DIR of 'hpcvar noise record --launcher srun|testbed'")
    for k, spec in enumerate(p.synthetics):
        loaded.append((spec if len(spec) <= 24 else f"synthetic{k + 1}",
                       synthesize(spec, p.freq_hz or 2.4e9, p.duration_s, seed=p.seed + k)))
    f0 = loaded[0][1].freq_hz
    for label, tr in loaded[1:]:
        if abs(tr.freq_hz - f0) > 1e-6 * f0:
            raise UsageError(f"trace '{label}' is at {tr.freq_hz:g} Hz, the first at {f0:g} Hz", "--trace",
                             "Compare traces of one frequency (cycles must mean the same)")
    return loaded, recordings, f0


def _workload(p: JitterParams, f0: float):
    """The work per phase in cycles, the workload's parameters, the co-scheduler window and its origin."""
    w_cycles = p.work.to_cycles(f0)
    wl_base = dict(work=w_cycles, phases=p.phases, barrier=p.barrier, arity=p.arity, send=p.send.to_cycles(f0),
                   recv=p.recv.to_cycles(f0), lat_intra=p.latency_intra.to_cycles(f0),
                   lat_inter=p.latency_inter.to_cycles(f0))
    win = p.window.to_cycles(f0) if p.window is not None else 0
    origin = p.window_origin.to_cycles(f0) if p.window_origin is not None else 0
    if p.window is not None and win < 1:
        raise UsageError("the co-scheduler window is shorter than one cycle", "--window", "Give e.g. --window 10ms")
    return w_cycles, wl_base, win, origin


def _load_trace(path: str, freq_hz: float | None):
    try:
        from hpcvar.noise.formats import load_trace
    except ImportError:  # the noise formats are optional here: the two-column text always works
        from hpcvar.noise.trace import read_two_column

        if freq_hz is None:
            raise UsageError(f"{path} needs its frequency", "--freq", "Give --freq 2.4GHz") from None
        return read_two_column(path, freq_hz)
    return load_trace(path, freq_hz)


def _load_nodes(path: str):
    """The nodes of a multi-node recording when ``path`` is its run directory, else None."""
    p = Path(path)
    if not (p.is_dir() and (p / "traces").is_dir() and (p / "raw" / "sync.raw").is_file()):
        if p.is_dir():
            raise UsageError(f"{path} is a directory but not a multi-node recording (no traces/ and raw/sync.raw)",
                             "--trace", "Give a trace file, or the run directory of 'noise record --launcher srun'")
        return None
    from hpcvar.noise.nodes import load
    from hpcvar.results import Run

    return load(Run.open(p))


def _read_offsets(path: str, ntasks: int, lengths: list[int], cores: int) -> np.ndarray:
    p = Path(path)
    try:
        lines = p.read_text().splitlines()
    except OSError as e:
        raise InputFileError(f"cannot read the offsets: {e.strerror}", str(p)) from None
    vals: list[int] = []
    for i, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        if not _PLAIN_INT.fullmatch(text):
            raise InputFileError(f"'{line.strip()}' is not a non-negative integer", str(p), i,
                                 todo="Each line holds one trace position in cycles")
        v = int(text)
        task = len(vals)
        limit = lengths[task % cores] if task < ntasks else lengths[0]
        if v >= limit:
            raise InputFileError(f"offset {v} is not inside the trace of task {task} (length {limit} cycles)",
                                 str(p), i, todo="Give positions in [0, L)")
        vals.append(v)
    if len(vals) != ntasks:
        more = "more" if len(vals) > ntasks else "fewer"
        raise InputFileError(f"{len(vals)} offsets for {ntasks} tasks ({more} offsets than tasks)", str(p),
                             todo="Give exactly one offset per task, or change --tasks")
    return np.array(vals, dtype=np.int64)


def _configs(loaded, recordings, aligns, cores_per_node, w_cycles, win, origin, warnings: list[str]) -> list:
    """One configuration per trace x alignment: (name, trace, core traces, native traces, cores per node,
    alignment, measured alignment or None)."""
    configs: list[tuple] = []
    for label, tr in loaded:
        k = cores_per_node or len(tr.cpus)
        if k < 1:
            raise UsageError(f"{k} cores per node", "--cores-per-node", "Give K >= 1")
        measured = None
        if label in recordings:
            from hpcvar.sim.jitter_nodes import MeasuredAlignment, NodeTraces

            nts = NodeTraces.build(recordings[label], k)
            cpus = nts.flat()
            measured = MeasuredAlignment(nts)
        else:
            cpus = J.core_traces(tr, k)
        nt = J.NativeTraces(cpus)
        if w_cycles > min(nt.computes):
            warnings.append(f"trace '{label}': one phase's work W = {w_cycles} cycles exceeds the trace's compute "
                            f"time ({min(nt.computes)} cycles); tasks wrap within a phase. Use a longer trace")
        if win and any(origin % win >= L for L in nt.lengths):
            raise UsageError("the co-scheduler window origin lies beyond the end of the trace", "--window-origin",
                             "Give an origin inside the trace")
        for a in aligns:
            if a == MEASURED and measured is None:
                continue  # measured applies to the multi-node recordings among several traces
            name = label if len(aligns) == 1 else f"{label} {a}"
            configs.append((name, tr, cpus, nt, k, a, measured))

    if not configs:
        raise UsageError("no configuration to simulate", "--align", "Give an alignment that applies to the traces")
    return configs


def _check_memory(configs, task_list, phases, per_task) -> None:
    trace_bytes = sum(c[3].nbytes() for c in configs)
    avail = metadata.mem_available_bytes()
    for n in task_list:
        need = J.memory_estimate(n, phases, bool(per_task), trace_bytes)
        if avail is not None and need > 0.9 * avail:
            raise UsageError(f"{n} tasks need about {need / 2**30:.1f} GiB ({J.TASK_BYTES} B per task in the core "
                             f"+ traces), {avail / 2**30:.1f} GiB are available", "--tasks",
                             "Simulate fewer tasks, or run on a machine with more memory")
        if per_task and n * phases > PER_TASK_MAX_ROWS:
            raise UsageError(f"--per-task would write {n * phases} rows", "--per-task",
                             f"Keep tasks x phases under {PER_TASK_MAX_ROWS}")


def _simulate(run, configs, p: JitterParams, wl_base: dict, win: int, origin: int, f0: float,
              warnings: list[str]):
    """Every configuration at every task count; jitter.points is stored after each point. Returns (the rows
    of jitter.phases, the summary of every point)."""
    rows, phase_rows, summaries = [], [], []
    for name, _tr, cpus, nt, k, a, measured in configs:
        wl = J.Workload(cores_per_node=k, trace_nodes=len(cpus) // k, **wl_base)
        periodic = cf.periodic_event(cpus) if wl.trace_nodes == 1 else None
        for n in p.tasks:
            if p.offsets_path:
                al = J.Alignment("file", explicit=_read_offsets(p.offsets_path, n, nt.lengths, k))
            elif a == MEASURED:
                al = J.Alignment(MEASURED, measured=measured)
            else:
                al = J.Alignment(a, window=win, origin=origin)
            pr = J.run_point(nt, wl, n, al, p.seed, p.replicas if not p.offsets_path else 1, name,
                             per_task=bool(p.per_task_path), threads=p.threads or J.auto_threads())
            s = pr.summary(f0, min(nt.lengths))
            s["closed_form"] = _closed(periodic, wl, n, a, win, origin) if not p.offsets_path else None
            if s["coverage"] > 1:
                warnings.append(f"{name}, {n} tasks: the run covers {100 * s['coverage']:.0f}% of the trace, so "
                                f"tasks see the same jitter again; use a longer trace or fewer phases")
            summaries.append(s)
            rows.append(_point_row(name, n, s))
            phase_rows += _phase_rows(name, n, pr)
            if p.per_task_path:
                _write_per_task(p.per_task_path, pr.replicas[0])
            run.write_table("jitter.points", columns(rows, POINT_COLUMNS))
    return phase_rows, summaries


PHASE_COLUMNS = ("config", "tasks", "replica", "phase", "end_cycles", "duration_cycles")
POINT_COLUMNS = ("config", "tasks", "replicas", "total_cycles", "total_ci_lo_cycles", "total_ci_hi_cycles",
                 "baseline_cycles", "slowdown", "slowdown_ci_lo", "slowdown_ci_hi", "slowdown_vs_compute", "coverage",
                 "closed_form_slowdown", "absorbed_mean_cycles", "absorbed_max_cycles", "waiting_mean_cycles",
                 "waiting_max_cycles", "sim_s", "task_phases_per_s")


def columns(rows: list[dict], names: tuple[str, ...]) -> dict[str, list]:
    """A table's columns from its rows (dicts with those keys): what Run.write_table stores without pandas."""
    return {c: [r[c] for r in rows] for c in names}


def _phase_rows(name: str, n: int, pr) -> list[dict]:
    out = []
    for r, o in enumerate(pr.replicas):
        prev = 0
        for ph, end in enumerate(o.phase_end.tolist()):
            out.append({"config": name, "tasks": n, "replica": r, "phase": ph, "end_cycles": end,
                        "duration_cycles": end - prev})
            prev = end
    return out


def _point_row(name: str, n: int, s: dict) -> dict:
    """One row of jitter.points from a point's summary."""
    cfs = (s["closed_form"] or {}).get("expected_slowdown")
    return {"config": name, "tasks": n, "replicas": s["replicas"], "total_cycles": s["total_cycles"],
            "total_ci_lo_cycles": s["total_ci_cycles"][0], "total_ci_hi_cycles": s["total_ci_cycles"][1],
            "baseline_cycles": s["baseline_cycles"], "slowdown": s["slowdown"],
            "slowdown_ci_lo": s["slowdown_ci"][0], "slowdown_ci_hi": s["slowdown_ci"][1],
            "slowdown_vs_compute": s["slowdown_vs_compute"], "coverage": s["coverage"],
            "closed_form_slowdown": float(cfs) if cfs is not None else float("nan"),
            "absorbed_mean_cycles": s["absorbed_cycles"]["mean"], "absorbed_max_cycles": s["absorbed_cycles"]["max"],
            "waiting_mean_cycles": s["waiting_cycles"]["mean"], "waiting_max_cycles": s["waiting_cycles"]["max"],
            "sim_s": s["sim_elapsed_s"], "task_phases_per_s": s["task_phases_per_s"]}


def _closed(periodic, wl: J.Workload, n: int, align: str, win: int, origin: int) -> dict | None:
    """The closed form beside the simulation: periodic trace, barrier none (docs/jitter-sim.md)."""
    if periodic is None or wl.barrier != "none":
        return None
    d, g = periodic
    if d == 0:
        return None
    if align == UNSYNC:
        out = cf.unsync_none(d, g, wl.work, n)
        out["note"] = "expectation of the first phase; later phases reuse the same offsets"
        return out
    if align == SYNC:
        return cf.synced_none(d, g, wl.work, wl.phases)
    if align == COSCHED and win % (d + g) == 0:
        return cf.synced_none(d, g, wl.work, wl.phases, phi0=(origin % win) % (d + g))
    return None


def _write_per_task(path: str, o: J.Outcome) -> None:
    assert o.compute_end is not None and o.next_start is not None  # kept for the replica written here
    ph, n = o.compute_end.shape
    lines = ["task,phase,compute_end,next_start"]
    ce, ns = o.compute_end, o.next_start
    for p in range(ph):
        lines.extend(f"{i},{p},{a},{b}" for i, a, b in zip(range(n), ce[p].tolist(), ns[p].tolist(), strict=True))
    atomic_write_text(Path(path), "\n".join(lines) + "\n")

