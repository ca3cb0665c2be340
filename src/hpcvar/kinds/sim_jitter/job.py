"""jitSim as a library job: what ``hpcvar sim jitter`` does, from its option values to a stored Run
(docs/jitter-sim.md). The command line only declares the options and renders the result; ``hpcvar
characterize`` calls ``run_job`` directly."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from hpcvar import metadata, units
from hpcvar.errors import InputFileError, UsageError
from hpcvar.kinds.sim_jitter.views import plot_phases, plot_sweep
from hpcvar.results import Run
from hpcvar.results.store import atomic_write_text, run_lifecycle
from hpcvar.sim import closed_form as cf
from hpcvar.sim import jitter as J
from hpcvar.sim.synth import parse_freq, synthesize

_PLAIN_INT = re.compile(r"\d+")
PER_TASK_MAX_ROWS = 50_000_000


def _cycles(text: str | None, flag: str, freq: float, runs_dir) -> int:
    """Cycles from a plain integer, a time with a unit (2us), or run:REF (a 'bench latency' run)."""
    if text is None:
        return 0
    text = text.strip()
    if _PLAIN_INT.fullmatch(text):
        return int(text)
    if text.startswith("run:"):
        return _from_latency_run(text[4:], flag, freq, runs_dir)
    secs = units.parse_time(text, flag)
    return int(round(secs * freq))


def _from_latency_run(ref: str, flag: str, freq: float, runs_dir) -> int:
    """The 0-byte (smallest size) median one-way latency of a 'bench latency' run, in cycles.
    --send-cycles and --recv-cycles take half of it (the paper halves the MPI stack latency)."""
    from hpcvar.results import resolve_run

    run = Run.open(resolve_run(ref, runs_dir))
    if run.info.get("command") != "bench latency" or not run.has_table("latency.summary"):
        raise UsageError(f"run {run.id} is not a 'bench latency' run with a summary", flag,
                         "Give run:<a bench latency run>, cycles, or a time such as 2us")
    summ = run.read_table("latency.summary").sort_values("size_bytes")
    ns = float(summ["median_ns"].iloc[0])
    if flag in ("--send-cycles", "--recv-cycles"):
        ns /= 2.0
    return int(round(ns * 1e-9 * freq))


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


def run_job(traces, synthetics, trace_length, freq, align, window, window_origin, offsets_file, seed, replicas,
            cores_per_node, work, quantum, barrier, arity, send_cycles, recv_cycles, latency_intra, latency_inter,
            phases, task_list, per_task, no_plots, threads, runs_dir, argv=None):
    """The work of 'hpcvar sim jitter' from its option values (strings as given, units parsed here, errors
    naming the flag); returns (run, result, warnings). Every check is made before the run is created."""
    aligns = _check_options(traces, synthetics, align, window, offsets_file, task_list, per_task, arity, threads,
                            phases, work, quantum)
    loaded, recordings, f0 = _load_traces(traces, synthetics, freq, trace_length, seed, aligns)
    w_cycles, wl_base, win, origin = _workload(work, quantum, f0, phases, barrier, arity, send_cycles, recv_cycles,
                                               latency_intra, latency_inter, window, window_origin, runs_dir)
    warnings: list[str] = []
    configs = _configs(loaded, recordings, aligns, cores_per_node, w_cycles, win, origin, warnings)
    _check_memory(configs, task_list, phases, per_task)
    params = {"traces": list(traces), "synthetic": list(synthetics), "trace_length": trace_length, "freq_hz": f0,
              "align": aligns, "window_cycles": win, "window_origin_cycles": origin, "offsets": offsets_file,
              "seed": seed, "replicas": replicas, "cores_per_node": cores_per_node, "tasks": list(task_list),
              "threads": threads, **wl_base}
    run = Run.create("sim jitter", params, runs_dir, argv, metadata.collect({}))

    with run_lifecycle(run):  # complete on return; failed, or interrupted (Ctrl-C, SIGTERM), on any exception
        rows, phase_rows, summaries = _simulate(run, configs, task_list, wl_base, offsets_file, win, origin, seed,
                                                replicas, per_task, threads, f0, warnings)
        run.write_table("jitter.phases", pd.DataFrame(phase_rows))
        if not no_plots:
            plot_sweep(pd.DataFrame(rows), run.plots_dir() / "sweep")
            plot_phases(pd.DataFrame(phase_rows), run.plots_dir() / "phases", freq_hz=f0)
        for w in warnings:
            run.warn(w)
        head = summaries[-1] if len(configs) == 1 else [s for s in summaries if s["config"] == configs[0][0]][-1]
        result = {"command": "sim jitter", "freq_hz": f0, "work_cycles": w_cycles, "phases_n": phases,
                  "barrier": barrier, "arity": arity, "send_cycles": wl_base["send"], "recv_cycles": wl_base["recv"],
                  "latency_intra_cycles": wl_base["lat_intra"], "latency_inter_cycles": wl_base["lat_inter"],
                  "total_cycles": head["total_cycles"], "baseline_cycles": head["baseline_cycles"],
                  "slowdown": head["slowdown"], "phases": head["phases"], "points": summaries, "warnings": warnings,
                  "run": str(run.path)}
        run.info["result"] = result
    return run, result, warnings


def _check_options(traces, synthetics, align, window, offsets_file, task_list, per_task, arity, threads, phases,
                   work, quantum) -> list[str]:
    """Refuse inconsistent options (naming the flag); returns the alignments asked for."""
    if arity < 1:
        raise UsageError(f"arity {arity} is below 1", "--arity", "A k-ary tree needs k >= 1 (2: binary)")
    if not 1 <= threads <= J.MAX_THREADS:
        raise UsageError(f"{threads} threads", "--threads", f"Give 1 to {J.MAX_THREADS} (1: no extra threads)")
    if phases < 1:
        raise UsageError(f"{phases} phases", "--phases", "Simulate at least one phase")
    if not traces and not synthetics:
        raise UsageError("no trace", "--trace", "Give --trace FILE or --synthetic SPEC")
    if work is not None and quantum is not None:
        raise UsageError("both --work and --quantum", "--work", "Give the work in cycles or as a time, not both")
    aligns = [a.strip() for a in align.split(",") if a.strip()]
    for a in aligns:
        if a not in ("unsync", "sync", "cosched", "measured"):
            raise UsageError(f"unknown alignment '{a}'", "--align", "Use unsync, sync, cosched or measured")
    if offsets_file and (len(task_list) != 1 or len(traces) + len(synthetics) != 1):
        raise UsageError("--offsets gives one position per task of one run", "--offsets",
                         "Use it with a single --tasks count and a single trace")
    if "cosched" in aligns and window is None:
        raise UsageError("--align cosched needs the window length", "--window", "Give --window 10ms (or cycles)")
    if window is not None and "cosched" not in aligns:
        raise UsageError("--window is only for --align cosched", "--window", "Add --align cosched")
    if min(task_list) < 1:
        raise UsageError("a task count below 1", "--tasks", "Give task counts >= 1")
    if per_task and len(task_list) != 1:
        raise UsageError("--per-task writes one task count", "--per-task", "Give a single --tasks value")

    return aligns


def _load_traces(traces, synthetics, freq, trace_length, seed, aligns):
    """The traces to replay: (label, JitterTrace) each, the multi-node recordings by label, and the common
    frequency (traces of other frequencies are refused)."""
    freq_hz = parse_freq(freq, "--freq") if freq else None
    loaded = []  # (label, JitterTrace)
    recordings = {}  # label -> the nodes of a multi-node recording
    for path in traces:
        nodes = _load_nodes(path)
        if nodes is not None:
            label = Path(path).name
            recordings[label] = nodes
            loaded.append((label, nodes[0].trace))
            continue
        tr = _load_trace(path, freq_hz)
        tr.validate(path)
        loaded.append((Path(path).stem, tr))
    if "measured" in aligns and not recordings:
        raise UsageError("--align measured needs a multi-node recording", "--align",
                         "Give --trace RUN_DIR of 'hpcvar noise record --launcher srun|testbed'")
    if synthetics:
        length_s = units.parse_time(trace_length, "--duration")
        for k, spec in enumerate(synthetics):
            loaded.append((spec if len(spec) <= 24 else f"synthetic{k + 1}",
                           synthesize(spec, freq_hz or 2.4e9, length_s, seed=seed + k)))
    f0 = loaded[0][1].freq_hz
    for label, tr in loaded[1:]:
        if abs(tr.freq_hz - f0) > 1e-6 * f0:
            raise UsageError(f"trace '{label}' is at {tr.freq_hz:g} Hz, the first at {f0:g} Hz", "--trace",
                             "Compare traces of one frequency (cycles must mean the same)")
    return loaded, recordings, f0


def _workload(work, quantum, f0, phases, barrier, arity, send_cycles, recv_cycles, latency_intra, latency_inter,
              window, window_origin, runs_dir):
    """The work per phase in cycles, the workload's parameters, the co-scheduler window and its origin."""
    if work is not None:
        if not _PLAIN_INT.fullmatch(work.strip()):
            raise UsageError(f"'{work}' is not a cycle count", "--work", "Give cycles, or use --quantum 1ms")
        w_cycles = int(work)
    else:
        w_cycles = int(round(units.parse_time(quantum or "1ms", "--quantum") * f0))
    wl_base = dict(work=w_cycles, phases=phases, barrier=barrier, arity=arity,
                   send=_cycles(send_cycles, "--send-cycles", f0, runs_dir),
                   recv=_cycles(recv_cycles, "--recv-cycles", f0, runs_dir),
                   lat_intra=_cycles(latency_intra, "--latency-intra", f0, runs_dir),
                   lat_inter=_cycles(latency_inter, "--latency-inter", f0, runs_dir))
    win = _cycles(window, "--window", f0, runs_dir) if window is not None else 0
    origin = _cycles(window_origin, "--window-origin", f0, runs_dir) if window_origin is not None else 0
    if window is not None and win < 1:
        raise UsageError("the co-scheduler window is shorter than one cycle", "--window", "Give e.g. --window 10ms")

    return w_cycles, wl_base, win, origin


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
            if a == "measured" and measured is None:
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



def _simulate(run, configs, task_list, wl_base, offsets_file, win, origin, seed, replicas, per_task, threads, f0,
              warnings: list[str]):
    """Every configuration at every task count; jitter.points is stored after each point."""
    rows, phase_rows, summaries = [], [], []
    for name, _tr, cpus, nt, k, a, measured in configs:
        wl = J.Workload(cores_per_node=k, trace_nodes=len(cpus) // k, **wl_base)
        periodic = cf.periodic_event(cpus) if wl.trace_nodes == 1 else None
        for n in task_list:
            if offsets_file:
                al = J.Alignment("file", explicit=_read_offsets(offsets_file, n, nt.lengths, k))
            elif a == "measured":
                al = J.Alignment("measured", measured=measured)
            else:
                al = J.Alignment(a, window=win, origin=origin)
            pr = J.run_point(nt, wl, n, al, seed, replicas if not offsets_file else 1, name,
                             per_task=bool(per_task), threads=threads)
            s = pr.summary(f0, min(nt.lengths))
            s["closed_form"] = _closed(periodic, wl, n, a, win, origin) if not offsets_file else None
            if s["coverage"] > 1:
                warnings.append(f"{name}, {n} tasks: the run covers {100 * s['coverage']:.0f}% of the trace, so "
                                f"tasks see the same jitter again; use a longer trace or fewer phases")
            summaries.append(s)
            rows.append(_point_row(name, n, s))
            for r, o in enumerate(pr.replicas):
                prev = 0
                for ph, end in enumerate(o.phase_end.tolist()):
                    phase_rows.append({"config": name, "tasks": n, "replica": r, "phase": ph, "end_cycles": end,
                                       "duration_cycles": end - prev})
                    prev = end
            if per_task:
                _write_per_task(per_task, pr.replicas[0])
            run.write_table("jitter.points", pd.DataFrame(rows))
    return rows, phase_rows, summaries


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
    if align == "unsync":
        out = cf.unsync_none(d, g, wl.work, n)
        out["note"] = "expectation of the first phase; later phases reuse the same offsets"
        return out
    if align == "sync":
        return cf.synced_none(d, g, wl.work, wl.phases)
    if align == "cosched" and win % (d + g) == 0:
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

