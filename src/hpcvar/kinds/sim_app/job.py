"""``hpcvar sim app``: ``job(AppParams, ctx) -> Run``.

The command line (hpcvar.cli.sim_app) only turns flags into ``AppParams`` and prints the run. The job
reads the trace (columnar: Arrow/numpy), computes the measured side (S_m per task), lowers the trace once
into the C core's op arrays (native/sim/lower.c) and replays it for every mapping x model x replica,
writing the tables after each mapping x model (docs/replay.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpcvar.errors import UsageError
from hpcvar.noise import COSCHED, DRAWN_ALIGNMENTS, UNSYNC
from hpcvar.results import Run
from hpcvar.results.context import JobContext
from hpcvar.results.kinds import draw_plots
from hpcvar.results.params import Params
from hpcvar.results.store import prefetch_arrow, run_lifecycle

PROGRESS_MIN_OPS = 2_000_000  # a progress bar only for replays at least this long (and only on a terminal)


@dataclass(frozen=True)
class AppParams(Params):
    """``hpcvar sim app``'s parameters (run.json ``params``)."""

    trace: str  # the trace file: Parquet (hpcvar trace), SimGrid TIT, OTF2
    fmt: str = "auto"  # auto (by extension), parquet, tit, otf2
    cluster_path: str | None = None  # a cluster file instead of the options below
    nodes: int | None = None  # None: one per task
    cores_per_node: int | None = None  # None: as many as the tasks need
    bandwidth_bytes_per_s: float = 1.25e8
    latency_s: float = 50e-6
    shm_bandwidth_bytes_per_s: float = 5e9
    shm_latency_s: float = 5e-7
    rndv_latency_s: float = 0.0
    shm_rndv_latency_s: float = 0.0
    send_buffer_bytes: int = 0
    rndv_first_bytes: int = 0
    pair_messages: str = "serial"  # serial: a pair of tasks' messages between nodes one after the other; shared
    mappings: tuple[str, ...] = ("rrn",)  # hpcvar.sim.replay.MAPPINGS, compared
    mapping_files: tuple[str, ...] = ()  # files of 'TASK NODE' lines, compared after the named mappings
    models: tuple[str, ...] = ("none",)  # hpcvar.sim.replay.MODELS
    params_path: str | None = None  # model parameters from 'hpcvar model fit'
    collectives: str = "binomial"
    eager_bytes: int = 65536
    jitter_path: str | None = None  # an OS-jitter trace (two-column 'duration gap' cycles)
    jitter_freq_hz: float | None = None
    align: str = UNSYNC  # hpcvar.noise.DRAWN_ALIGNMENTS
    window_s: float | None = None  # the co-scheduler window (align cosched)
    window_origin_s: float | None = None
    replicas: int = 1
    seed: int = 1
    engine: str = "auto"  # auto | native | python
    chrome_path: str | None = None  # the first timeline as Chrome/Perfetto JSON
    plot_stem: str | None = None  # the per-task figure here too
    plots: bool = False  # draw the figures now (else the report draws them when it needs them)
    flops_per_s: float | None = None  # TIT: flop/s of a core (None: the cluster file's flops_rate, else 1e9)
    dialect: str = "auto"  # TIT: the SimGrid version that wrote the trace (hpcvar.traces.tit_dialect)
    breakdown: bool = False
    phases: int | None = None  # --breakdown: slices of each task's measured span
    compute: str = "wall"  # hpcvar.sim.replay_ref.COMPUTE_MODES: the gaps less the polls, or their CPU time
    stream: bool | None = None  # the streaming replay (True), in memory (False), or auto (None: _stream_choice)

    def all_mappings(self) -> list[str]:
        """The mappings compared, in order: the named ones, then the files."""
        return [*self.mappings, *self.mapping_files]

    def check(self) -> None:
        """Usage errors that need no file, naming the flag."""
        from hpcvar.sim.replay import MAPPINGS, MODELS
        from hpcvar.sim.replay_ref import COMPUTE_MODES

        if self.compute not in COMPUTE_MODES:
            raise UsageError(f"unknown compute mode '{self.compute}'", "--compute",
                             f"Use one of {', '.join(COMPUTE_MODES)}")

        if self.align not in DRAWN_ALIGNMENTS:
            raise UsageError(f"unknown alignment '{self.align}'", "--align", f"Use {', '.join(DRAWN_ALIGNMENTS)}")
        if self.window_s is not None and self.align != COSCHED:
            raise UsageError("--window is only for --align cosched", "--window", "Add --align cosched")
        if self.align == COSCHED and self.window_s is None:
            raise UsageError("--align cosched needs the window length", "--window", "Give e.g. --window 10ms")
        if self.window_origin_s is not None and self.align != COSCHED:
            raise UsageError("--window-origin is only for --align cosched", "--window-origin", "Add --align cosched")
        if self.align != UNSYNC and self.jitter_path is None:
            raise UsageError(f"--align {self.align} applies to a jitter trace", "--align", "Give --jitter TRACE")
        if not self.all_mappings():
            raise UsageError("no mapping", "--mapping", f"Give one of {', '.join(MAPPINGS)}, or --mapping-file FILE")
        for mp in self.mappings:
            if mp not in MAPPINGS:
                raise UsageError(f"unknown mapping '{mp}'", "--mapping",
                                 f"Use {', '.join(MAPPINGS)}, or give a file of 'TASK NODE' lines with --mapping-file")
        _check_breakdown(self)
        for m in self.models:
            if m not in MODELS:
                raise UsageError(f"unknown model '{m}'", "--model", f"Use one of {', '.join(MODELS)}")


IN_MEMORY_BYTES_PER_EVENT = 85  # the in-memory replay's peak per trace event (benchmarks/replay_speed.py)


def _check_stream(p: AppParams) -> None:
    """What --stream cannot do: the per-row times (--chrome, --breakdown) and the Python engine."""
    for flag, given in (("--chrome", p.chrome_path), ("--breakdown", p.breakdown)):
        if given:
            raise UsageError(f"{flag} needs the time of every trace row, which --stream does not keep", flag,
                             f"Drop {flag}, or replay in memory (--no-stream)")
    if p.engine == "python":
        raise UsageError("--stream runs the C core", "--engine", "Use --engine auto or native with --stream")


def _mem_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None where it cannot be read)."""
    try:
        with open("/proc/meminfo") as f:
            return next((int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:")), None)
    except OSError:
        return None


def _stream_choice(p: AppParams) -> tuple[bool, str | None]:
    """(stream or not, a note when the automatic rule chose streaming): --stream / --no-stream as given; by
    default a native Parquet trace streams when its in-memory replay (IN_MEMORY_BYTES_PER_EVENT per row) would
    take more than half of MemAvailable and nothing needs the rows (--chrome, --breakdown, --engine python)."""
    if p.stream is not None:
        return p.stream, None
    from hpcvar.sim.replay_stream import is_parquet

    if p.chrome_path or p.breakdown or p.engine == "python" or not is_parquet(p.trace, p.fmt):
        return False, None
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        nrows = pq.ParquetFile(p.trace).metadata.num_rows
    except (OSError, pa.ArrowException):  # the in-memory reader reports an unreadable file with its remedy
        return False, None
    avail = _mem_available()
    need = nrows * IN_MEMORY_BYTES_PER_EVENT
    if avail is None or need <= avail / 2:
        return False, None
    return True, (f"note: streaming the replay: {nrows:,} events need about {need / 2**30:.1f} GiB in memory, more "
                  f"than half of the {avail / 2**30:.1f} GiB available (--no-stream replays in memory anyway)")


def _check_breakdown(p: AppParams) -> None:
    from hpcvar.sim.breakdown import MAX_PHASES

    if p.phases is not None and not p.breakdown:
        raise UsageError("--phases splits the --breakdown", "--phases", "Add --breakdown")
    if p.phases is not None and not 1 <= p.phases <= MAX_PHASES:
        raise UsageError(f"--phases {p.phases} is outside 1..{MAX_PHASES}", "--phases", "Give e.g. --phases 4")
    if p.stream:
        _check_stream(p)


def flops_rate_of(p: AppParams) -> float:
    """The flop/s that turn a TIT trace's flops into seconds: --flops-rate, else the cluster file's flops_rate,
    else 1e9 (both given: an error, as for the other keys of the cluster file)."""
    if not p.cluster_path:
        return 1e9 if p.flops_per_s is None else p.flops_per_s
    from hpcvar.sim import replay as simapp

    rate = simapp.load_cluster(p.cluster_path).flops_rate
    if p.flops_per_s is not None:
        raise UsageError("--flops-rate and --cluster both given", "--flops-rate",
                         "Put 'flops_rate RATE' (flop/s) in the cluster file")
    return 1e9 if rate is None else rate


def cluster_of(p: AppParams, ntasks: int):
    from hpcvar.sim import replay as simapp

    if p.cluster_path:
        if p.nodes or p.cores_per_node:
            raise UsageError("--nodes/--cores-per-node and --cluster both given", "--cluster",
                             "Put the node counts in the cluster file")
        for flag, key, v in (("--send-buffer", "send_buffer", p.send_buffer_bytes),
                             ("--rndv-first", "rndv_first", p.rndv_first_bytes)):
            if v:
                raise UsageError(f"{flag} and --cluster both given", flag, f"Put '{key} SIZE' in the cluster file")
        cl = simapp.load_cluster(p.cluster_path)
    else:
        n = p.nodes or ntasks
        k = p.cores_per_node or max(1, -(-ntasks // n))
        cl = simapp.Cluster(n, k, p.bandwidth_bytes_per_s, p.latency_s, p.shm_bandwidth_bytes_per_s, p.shm_latency_s,
                            rndv_latency=p.rndv_latency_s, shm_rndv_latency=p.shm_rndv_latency_s,
                            send_buffer=float(p.send_buffer_bytes), rndv_first=float(p.rndv_first_bytes))
    cl.pair_serial = p.pair_messages == "serial"
    return cl


class _Progress:
    """A rich progress bar over all replays (ops replayed / ops to replay), on stderr."""

    def __init__(self, total_ops: int, console):
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(TextColumn("replay"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                            TimeRemainingColumn(), console=console, transient=True)
        self.task = self.bar.add_task("replay", total=total_ops)
        self.base = 0
        self.bar.start()

    def callback(self, done: int, nops: int) -> None:
        self.bar.update(self.task, completed=self.base + done)

    def next_replay(self, nops: int) -> None:
        self.base += nops
        self.bar.update(self.task, completed=self.base)

    def stop(self) -> None:
        self.bar.stop()


def job(p: AppParams, ctx: JobContext) -> Run:
    """Replay ``p.trace`` for every mapping x model (x replica); store the run. A progress bar when the replays
    are long (PROGRESS_MIN_OPS) and ``ctx.show_progress()``."""
    p.check()  # Arrow, for the tables: imported by a Parquet trace's read, else in a thread from the replays on
    timings: dict = {}
    stream, note = _stream_choice(p)
    if note:
        ctx.say(note)  # on the terminal now; run.json keeps it (result.stream_note)
    if stream:
        trace, host = _read_stream(p, timings)
    else:
        trace, host = _read(p, timings)
        _check_compute(p, trace)
    cl, params_by_model, jit = _prepare(p, trace)
    run = ctx.create_run("sim app", p, host)
    with run_lifecycle(run):  # complete on return; failed, or interrupted (Ctrl-C, SIGTERM), on any exception
        nevents_trace = trace.nrows
        grid = _grid(p, trace)  # before the lowering frees the rows
        ops, encoded, ops_per_replay, m_total, m_comm = _lower(p, trace, timings, stream)
        timeline_src = trace if p.chrome_path else None
        nruns = sum(p.replicas if (mp == "random" or jit is not None) else 1 for mp in p.all_mappings()) \
            * len(p.models)
        total_ops = nruns * ops_per_replay
        bar = _Progress(total_ops, ctx.console) if ctx.show_progress() and total_ops >= PROGRESS_MIN_OPS else None
        try:
            runs, first, bd = _replay_all(_Replays(p, trace, cl, params_by_model, jit, ops, encoded, ops_per_replay,
                                                   bar, (m_total, m_comm), nevents_trace, grid), run)
        finally:
            if bar:
                bar.stop()
            if stream:
                encoded.close()  # the ops file
        if not trace.timed:
            run.warn("the trace has no measured times (TIT import): no E_abs; record it with 'hpcvar trace' for a "
                     "comparison with the measurement")
        total_replay = sum(r["replay_s"] for r in runs)
        run.info["result"] = out = {
            "command": "sim app", "trace": str(p.trace), "ntasks": trace.ntasks, "timed": trace.timed,
            "events": nevents_trace, "cluster": _cluster_json(cl), "model_params": params_by_model,
            "collectives": p.collectives, "eager_bytes": p.eager_bytes, "jitter": p.jitter_path, "align": p.align,
            "flops_per_s": trace.meta.get("flops_rate") if not trace.timed else p.flops_per_s,
            "tit_dialect": trace.meta.get("tit_dialect"),
            "compute": p.compute, "stream": stream, "stream_note": note,
            "stream_ops": {"ops": encoded.nops, "keys": encoded.nkeys, "key_slots": encoded.key_slots,
                           "requests": encoded.nreqs, "file_bytes": encoded.nbytes_file} if stream else None,
            "replicas": p.replicas, "seed": p.seed, "mapping": runs[0]["mapping"], "model": runs[0]["model"],
            "tasks": runs[0]["tasks"], "runs": runs, "lower_s": timings["lower_s"], "read_s": timings["read_s"],
            "measure_s": timings["measure_s"],
            "replay_rows_per_s": (sum(r["events_per_s"] * r["replay_s"] for r in runs if r["events_per_s"])
                                  / total_replay) if total_replay > 0 else None, "run": str(run.path)}
        if grid is not None:
            out["breakdown"] = {"phases": grid.nphases, "rows": bd.to_dict("records")}
        out["plots"] = _outputs(p, run, runs, first, timeline_src)
    return run


def _grid(p: AppParams, trace):
    """The breakdown's grid (--breakdown), else None."""
    if not p.breakdown:
        return None
    from hpcvar.sim import breakdown

    return breakdown.grid(trace, p.phases or 1)


def _read(p: AppParams, timings: dict):
    """(the trace, the host's metadata; a simulation times nothing with the host's clocks: no timer probe)."""
    from hpcvar import metadata
    from hpcvar.traces import load_trace

    t0 = time.perf_counter()
    # --engine python runs the whole reference path (the Python TIT/OTF2 importers too); otherwise the
    # importer is chosen as for 'trace import' (HPCVAR_IMPORT_ENGINE, else C where built)
    # Arrow's import (for the tables) is started by the replays, not during the read: see _replay_all
    trace = load_trace(p.trace, p.fmt, flops_rate_of(p), "python" if p.engine == "python" else None, p.dialect,
                       prefetch_arrow=False)
    timings["read_s"] = time.perf_counter() - t0
    return trace, metadata.collect({}, timer=False)


def _read_stream(p: AppParams, timings: dict):
    """(the trace's footer and metadata for the streaming replay, the host's metadata)."""
    from hpcvar import metadata
    from hpcvar.sim import replay_native
    from hpcvar.sim.replay_stream import open_trace

    _check_stream(p)
    replay_native.lib()  # a clear MissingToolError if the core is not installed
    t0 = time.perf_counter()
    trace = open_trace(p.trace, p.fmt)
    timings["read_s"] = time.perf_counter() - t0
    return trace, metadata.collect({}, timer=False)


def _prepare(p: AppParams, trace):
    """The cluster, the model parameters and the jitter of the replays; every mapping and model is checked
    before anything runs (an impossible --engine too)."""
    from hpcvar.sim import replay as simapp
    from hpcvar.sim.replay_jitter import jitter_factory

    cl = cluster_of(p, trace.ntasks)
    params_by_model: dict = {}
    if p.params_path:
        from hpcvar.models.sharing import load_params

        pm, pp = load_params(p.params_path)
        params_by_model[pm] = pp
    for mp in p.all_mappings():
        simapp.mapping(mp, trace.ntasks, cl, p.seed)
    jit = jitter_factory(p.jitter_path, p.jitter_freq_hz, p.align, p.window_s, p.window_origin_s)
    no_ops: list[list[tuple]] = [[] for _ in range(trace.ntasks)]
    first = simapp.mapping(p.all_mappings()[0], trace.ntasks, cl, p.seed)
    for m in p.models:
        simapp.Simulator(trace, cl, first, m, params_by_model.get(m), p.collectives, p.eager_bytes,
                         None if jit is None else jit(trace.ntasks, p.seed, 0), lowered=no_ops, engine=p.engine)
    return cl, params_by_model, jit


def _check_compute(p: AppParams, trace) -> None:
    """--compute cpu needs the CPU time the tracer records with --cpu-time."""
    if p.compute == "cpu" and not (trace.has_column("cpu_ns") and (trace.column("cpu_ns") >= 0).any()):
        raise UsageError(f"the trace {p.trace} has no CPU time", "--compute",
                         "Record it with 'hpcvar trace --cpu-time', or use --compute wall")


def _cluster_json(cl) -> dict:
    """The simulated cluster as the options and the cluster file resolved to."""
    return {"nodes": cl.nodes, "cores_per_node": cl.cores_per_node, "bandwidth_bytes_per_s": cl.bandwidth,
            "latency_s": cl.latency, "shm_bandwidth_bytes_per_s": cl.shm_bandwidth, "shm_latency_s": cl.shm_latency,
            "rndv_latency_s": cl.rndv_latency, "shm_rndv_latency_s": cl.shm_rndv_latency,
            "send_buffer_bytes": cl.send_buffer, "rndv_first_bytes": cl.rndv_first,
            "pair_messages": "serial" if cl.pair_serial else "shared",
            "links": [[a, b, bw, lat] for (a, b), (bw, lat) in cl.links.items()]}


def _lower(p: AppParams, trace, timings: dict, stream: bool = False):
    """The trace lowered once for the engine that will replay it (the C lowering also computes the measured
    side in the same pass): (python ops or None, C arrays or None, ops per replay, measured total, comm).
    ``stream``: the rows read from the file task by task, the ops written to a temporary file
    (hpcvar.sim.replay_stream; its ``close()`` deletes it)."""
    from hpcvar.sim import replay as simapp

    ops = None
    encoded_: Any = None  # the in-memory arrays (Encoded) or the ops file (StreamEncoded)
    t0 = time.perf_counter()
    if stream:
        from hpcvar.sim import replay_stream

        senc = replay_stream.lower(trace, p.collectives, p.compute)
        encoded_, ops_per_replay = senc, senc.nops
    elif p.engine == "python" or not _native_ok():
        ops = simapp.lower(trace, p.collectives, p.compute)[0]
        ops_per_replay = sum(map(len, ops))
    else:
        from hpcvar.sim.replay_native import lower_native

        # the replays need only the op arrays: the rows go as the lowering consumes them (--chrome keeps them)
        enc = lower_native(trace, p.collectives, release_rows=not p.chrome_path, compute=p.compute)
        encoded_, ops_per_replay = enc, len(enc.kind)
    encoded = encoded_
    timings["lower_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    m_total, m_comm = encoded.measured if encoded is not None and encoded.measured is not None \
        else simapp.measured(trace)
    timings["measure_s"] = time.perf_counter() - t0
    return ops, encoded, ops_per_replay, m_total, m_comm


@dataclass
class _Replays:
    """What every replay of one trace shares: the parameters, the trace lowered once, the cluster, the model
    parameters, the jitter, the measured side, the progress bar, the breakdown's grid."""

    p: AppParams
    trace: Any
    cl: Any
    params_by_model: dict
    jit: Any
    ops: Any
    encoded: Any
    ops_per_replay: int
    bar: Any
    measured: tuple
    nevents_trace: int
    grid: Any = None


def _replay_one(rp: _Replays, mp: str, m: str, r: int, keep_rows: bool):
    """Replica r of mapping mp x model m: (its result, its engine, the replay's seconds)."""
    from hpcvar.sim import replay as simapp

    p, trace = rp.p, rp.trace
    node_of = simapp.mapping(mp, trace.ntasks, rp.cl, p.seed + r)
    jf = rp.jit(trace.ntasks, p.seed, r) if rp.jit is not None else None
    sim = simapp.Simulator(trace, rp.cl, node_of, m, rp.params_by_model.get(m), p.collectives, p.eager_bytes, jf,
                           rp.ops, engine=p.engine, encoded=rp.encoded, keep_rows=keep_rows,
                           progress=rp.bar.callback if rp.bar else None)
    if sim.engine == "python" and rp.ops is None:
        raise UsageError("the trace was lowered for the C core only", "--engine", "Use --engine auto")
    t1 = time.perf_counter()
    res = sim.run()
    elapsed = time.perf_counter() - t1
    if rp.bar:
        rp.bar.next_replay(rp.ops_per_replay)  # the engine is the one its ops were lowered for
    return res, sim.engine, elapsed


def _replay_all(rp: _Replays, run):
    """Every mapping x model (x replica for random mappings and jitter); the tables are stored after each
    mapping x model. Returns (one summary per mapping x model, the first replay's result, the breakdown rows
    of every replay when ``rp.grid`` is given, else None)."""
    p, trace, grid = rp.p, rp.trace, rp.grid
    # Arrow's Parquet writer (the tables, stored after each mapping x model) imported in a thread while the C core
    # replays without the GIL; started during the read, the import held the GIL against the Python work between
    # read and replay (the lowering, the run's creation): a 201k-action fan-in took 15-20 ms longer (issue 30)
    prefetch_arrow()
    runs: list[dict] = []
    rep_rows: dict[str, list] = {c: [] for c in REPLICA_COLUMNS}
    bd_rows: list = []
    first = None
    for mp in p.all_mappings():
        for m in p.models:
            reps, t_sim, eng = [], 0.0, None
            for r in range(p.replicas if (mp == "random" or rp.jit is not None) else 1):
                res, eng, elapsed = _replay_one(rp, mp, m, r, (first is None and bool(p.chrome_path)) or
                                                grid is not None)
                t_sim += elapsed
                reps.append(res)
                _replica_rows(rep_rows, mp, m, r, p.seed + r, res, trace.ntasks)
                first = first if first is not None else res
                if grid is not None:
                    from hpcvar.sim import breakdown

                    bd_rows.append(breakdown.rows(grid, res, mp, m, r))
            one = combine(mp, m, reps, rp.measured[0], rp.measured[1], trace.timed)
            one.update(engine=eng, replay_s=t_sim,
                       events_per_s=rp.nevents_trace * len(reps) / t_sim if t_sim > 0 else None)
            runs.append(one)
            _store_tables(run, runs, rep_rows, bd_rows if grid is not None else None)
    if grid is None:
        return runs, first, None
    import pandas as pd

    return runs, first, pd.concat(bd_rows, ignore_index=True)


REPLICA_COLUMNS = ("mapping", "model", "replica", "seed", "task", "node", "total_s", "comm_s", "avg_penalty")


def _replica_rows(rows: dict[str, list], mp: str, m: str, r: int, seed: int, res, ntasks: int) -> None:
    """The rows of replay.replicas of one replay (one per task), appended to its columns."""
    node = np.asarray(res.node_of, np.int64)
    for c, v in (("mapping", [mp] * ntasks), ("model", [m] * ntasks), ("replica", np.full(ntasks, r, np.int64)),
                 ("seed", np.full(ntasks, seed, np.int64)), ("task", np.arange(ntasks, dtype=np.int64)),
                 ("node", node), ("total_s", np.asarray(res.total_s, float)), ("comm_s", np.asarray(res.comm_s, float)),
                 ("avg_penalty", np.asarray(res.avg_penalty, float))):
        rows[c].append(v)


def _store_tables(run, runs: list[dict], rep_rows: dict[str, list], bd_rows: list | None) -> None:
    run.write_table("replay.replicas", {c: np.concatenate([np.asarray(v, dtype=object if c in ("mapping", "model")
                                                                      else None) for v in vals])
                                        for c, vals in rep_rows.items()})
    run.write_table("replay.tasks", _columns(task_rows(runs)))
    run.write_table("replay.runs", _columns(run_rows(runs)))
    if bd_rows is not None:
        import pandas as pd

        run.write_table("replay.breakdown", pd.concat(bd_rows, ignore_index=True))


def _columns(rows: list[dict]) -> dict[str, list]:
    """A table's columns from its rows (dicts with the same keys, in order)."""
    return {c: [r[c] for r in rows] for c in rows[0]} if rows else {}


def _outputs(p: AppParams, run, runs: list[dict], first, timeline_src) -> list[str]:
    """The Chrome/Perfetto timeline and the figures of a finished replay (the run's, and --plot STEM's)."""
    from hpcvar.sim import replay as simapp

    if p.chrome_path:
        from hpcvar.traces.chrome import write_chrome

        assert first is not None and timeline_src is not None  # kept for the first replay when chrome_path
        write_chrome(simapp.timeline(first, timeline_src), first.node_of, p.chrome_path)
    return draw_plots(run) if p.plots or p.plot_stem else []


def _native_ok() -> bool:
    from hpcvar.sim import replay_native

    return replay_native.available()


def task_rows(runs: list[dict]) -> list[dict]:
    rows = []
    nan = float("nan")
    for run in runs:
        for r in run["tasks"]:
            c = r["conflicts"]
            rows.append({"mapping": run["mapping"], "model": run["model"], "replicas": run["replicas"],
                         "task": r["task"], "node": r["node"], "total_s": r["total_s"], "comm_s": r["comm_s"],
                         "total_ci_lo_s": r.get("total_s_ci", [nan, nan])[0],
                         "total_ci_hi_s": r.get("total_s_ci", [nan, nan])[1],
                         "comm_ci_lo_s": r.get("comm_s_ci", [nan, nan])[0],
                         "comm_ci_hi_s": r.get("comm_s_ci", [nan, nan])[1],
                         "avg_penalty": r["avg_penalty"],
                         "conflicts_none": c.get("none", 0), "conflicts_out": c.get("out", 0),
                         "conflicts_in": c.get("in", 0), "conflicts_in_out": c.get("in-out", 0),
                         "measured_total_s": r.get("measured_total_s", nan),
                         "measured_comm_s": r.get("measured_comm_s", nan), "e_abs_pct": r.get("e_abs_pct", nan)})
    return rows


def run_rows(runs: list[dict]) -> list[dict]:
    return [{"mapping": r["mapping"], "model": r["model"], "replicas": r["replicas"], "makespan_s": r["makespan_s"],
             "mean_e_abs_pct": r.get("mean_e_abs_pct") if r.get("mean_e_abs_pct") is not None else float("nan"),
             "engine": r["engine"], "replay_s": r["replay_s"],
             "events_per_s": r["events_per_s"] if r["events_per_s"] is not None else float("nan")} for r in runs]


def _median(a: np.ndarray) -> np.ndarray:
    """Medians over replicas (axis 0); one replica is its own median (np.median would load numpy.ma)."""
    return a[0] if len(a) == 1 else np.median(a, axis=0)


def combine(mp, m, reps, m_total, m_comm, timed) -> dict:
    """Medians over replicas per task (95% CIs with several), E_abs against the measurement."""
    from hpcvar.sim.replay import e_abs

    if len(reps) > 1:
        from hpcvar.stats.summary import median_ci  # scipy: seconds to import, only for CIs

    tot = np.array([r.total_s for r in reps])
    com = np.array([r.comm_s for r in reps])
    pen = np.array([r.avg_penalty for r in reps])
    ea = e_abs(com, np.broadcast_to(np.asarray(m_comm, float), com.shape)) if timed else None
    cols = [_median(tot).tolist(), _median(com).tolist(), _median(pen).tolist()]
    ea_med = _median(ea).tolist() if ea is not None else []
    tasks = []
    for t in range(tot.shape[1]):
        row = {"task": t, "node": reps[0].node_of[t], "total_s": cols[0][t], "comm_s": cols[1][t],
               "avg_penalty": cols[2][t], "conflicts": reps[0].conflicts[t]}
        if timed:
            row.update({"measured_total_s": float(m_total[t]), "measured_comm_s": float(m_comm[t]),
                        "e_abs_pct": ea_med[t]})
        if len(reps) > 1:
            row["total_s_ci"] = list(median_ci(tot[:, t]))
            row["comm_s_ci"] = list(median_ci(com[:, t]))
            if ea is not None:
                row["e_abs_pct_ci"] = list(median_ci(ea[:, t]))
        tasks.append(row)
    out = {"mapping": mp, "model": m, "replicas": len(reps), "tasks": tasks,
           "makespan_s": float(_median(tot.max(axis=1)))}
    if timed:
        ea_pcts = [r["e_abs_pct"] for r in tasks if r["e_abs_pct"] == r["e_abs_pct"]]
        out["mean_e_abs_pct"] = float(np.mean(ea_pcts)) if ea_pcts else None
    return out


__all__ = ["PROGRESS_MIN_OPS", "AppParams", "cluster_of", "combine", "job"]
