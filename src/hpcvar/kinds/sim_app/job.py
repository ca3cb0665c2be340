"""``hpcvar sim app`` as a library job: ``run_job(Params, runs_dir) -> (Run, result)``.

The command line (hpcvar.cli.sim_app) only turns flags into ``Params`` and renders the result. The job
reads the trace (columnar: Arrow/numpy), computes the measured side (S_m per task), lowers the trace once
into the C core's op arrays (native/sim/lower.c) and replays it for every mapping x model x replica,
writing the tables after each mapping x model (docs/replay.md).
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from hpcvar.errors import UsageError

PROGRESS_MIN_OPS = 2_000_000  # a progress bar only for replays at least this long (and only on a terminal)


@dataclass(frozen=True)
class Params:
    trace: str
    fmt: str = "auto"
    cluster_file: str | None = None
    nodes: int | None = None
    cores_per_node: int | None = None
    bandwidth: float = 1.25e8
    latency: float = 50e-6
    shm_bandwidth: float = 5e9
    shm_latency: float = 5e-7
    rndv_latency: float = 0.0
    shm_rndv_latency: float = 0.0
    send_buffer: int = 0
    rndv_first: int = 0
    mappings: tuple[str, ...] = ("rrn",)
    models: tuple[str, ...] = ("none",)
    params_file: str | None = None
    collectives: str = "binomial"
    eager: int = 65536
    jitter_file: str | None = None
    jitter_freq: float | None = None
    align: str = "unsync"
    window: float | None = None
    window_origin: float | None = None
    replicas: int = 1
    seed: int = 1
    engine: str = "auto"
    chrome_file: str | None = None
    plot_stem: str | None = None
    no_plots: bool = False
    flops_rate: float | None = None  # TIT: flop/s (None: the cluster file's flops_rate, else 1e9)
    dialect: str = "auto"  # TIT: the SimGrid version that wrote the trace (hpcvar.traces.tit_dialect)
    breakdown: bool = False
    phases: int | None = None
    extra: dict = field(default_factory=dict, compare=False)

    def check(self) -> None:
        """Usage errors that need no file, naming the flag."""
        from hpcvar.sim.replay import MODELS

        if self.window is not None and self.align != "cosched":
            raise UsageError("--window is only for --align cosched", "--window", "Add --align cosched")
        if self.align == "cosched" and self.window is None:
            raise UsageError("--align cosched needs the window length", "--window", "Give e.g. --window 10ms")
        if self.window_origin is not None and self.align != "cosched":
            raise UsageError("--window-origin is only for --align cosched", "--window-origin", "Add --align cosched")
        if self.align != "unsync" and self.jitter_file is None:
            raise UsageError(f"--align {self.align} applies to a jitter trace", "--align", "Give --jitter TRACE")
        _check_breakdown(self)
        for m in self.models:
            if m not in MODELS:
                raise UsageError(f"unknown model '{m}'", "--model", f"Use one of {', '.join(MODELS)}")


def _check_breakdown(p: Params) -> None:
    from hpcvar.sim.breakdown import MAX_PHASES

    if p.phases is not None and not p.breakdown:
        raise UsageError("--phases splits the --breakdown", "--phases", "Add --breakdown")
    if p.phases is not None and not 1 <= p.phases <= MAX_PHASES:
        raise UsageError(f"--phases {p.phases} is outside 1..{MAX_PHASES}", "--phases", "Give e.g. --phases 4")


def flops_rate_of(p: Params) -> float:
    """The flop/s that turn a TIT trace's flops into seconds: --flops-rate, else the cluster file's flops_rate,
    else 1e9 (both given: an error, as for the other keys of the cluster file)."""
    if not p.cluster_file:
        return 1e9 if p.flops_rate is None else p.flops_rate
    from hpcvar.sim import replay as simapp

    rate = simapp.load_cluster(p.cluster_file).flops_rate
    if p.flops_rate is not None:
        raise UsageError("--flops-rate and --cluster both given", "--flops-rate",
                         "Put 'flops_rate RATE' (flop/s) in the cluster file")
    return 1e9 if rate is None else rate


def cluster_of(p: Params, ntasks: int):
    from hpcvar.sim import replay as simapp

    if p.cluster_file:
        if p.nodes or p.cores_per_node:
            raise UsageError("--nodes/--cores-per-node and --cluster both given", "--cluster",
                             "Put the node counts in the cluster file")
        for flag, key, v in (("--send-buffer", "send_buffer", p.send_buffer), ("--rndv-first", "rndv_first",
                                                                              p.rndv_first)):
            if v:
                raise UsageError(f"{flag} and --cluster both given", flag, f"Put '{key} SIZE' in the cluster file")
        return simapp.load_cluster(p.cluster_file)
    n = p.nodes or ntasks
    k = p.cores_per_node or max(1, -(-ntasks // n))
    return simapp.Cluster(n, k, p.bandwidth, p.latency, p.shm_bandwidth, p.shm_latency,
                          rndv_latency=p.rndv_latency, shm_rndv_latency=p.shm_rndv_latency,
                          send_buffer=float(p.send_buffer), rndv_first=float(p.rndv_first))


class _Progress:
    """A rich progress bar over all replays (ops replayed / ops to replay), on stderr."""

    def __init__(self, total_ops: int):
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        from hpcvar.report.terminal import make_console

        self.bar = Progress(TextColumn("replay"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                            TimeRemainingColumn(), console=make_console(stderr=True),
                            transient=True)
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


def run_job(p: Params, runs_dir=None, argv=None, show_progress: bool | None = None):
    """Replay ``p.trace`` for every mapping x model (x replica); store the run. Returns (run, result).
    ``show_progress``: None = when stderr is a terminal and the replays are long (PROGRESS_MIN_OPS)."""
    from hpcvar.results.store import Run, run_lifecycle
    from hpcvar.sim import breakdown

    p.check()
    timings: dict = {}
    trace, host = _read(p, timings)
    cl, params_by_model, jit = _prepare(p, trace)
    stored = _stored_params(p, trace, cl, params_by_model)
    run = Run.create("sim app", stored, runs_dir, argv if argv is not None else ["hpcvar", *sys.argv[1:]], host)
    with run_lifecycle(run):  # complete on return; failed, or interrupted (Ctrl-C, SIGTERM), on any exception
        nevents_trace = len(trace.events)
        grid = breakdown.grid(trace, p.phases or 1) if p.breakdown else None  # before the lowering frees the rows
        ops, encoded, ops_per_replay, m_total, m_comm = _lower(p, trace, timings)
        timeline_src = trace if p.chrome_file else None
        nruns = sum(p.replicas if (mp == "random" or jit is not None) else 1 for mp in p.mappings) * len(p.models)
        total_ops = nruns * ops_per_replay
        if show_progress is None:
            show_progress = sys.stderr.isatty() and total_ops >= PROGRESS_MIN_OPS
        bar = _Progress(total_ops) if show_progress else None
        try:
            runs, first, bd = _replay_all(p, run, trace, cl, params_by_model, jit, ops, encoded, ops_per_replay,
                                          bar, (m_total, m_comm), nevents_trace, grid)
        finally:
            if bar:
                bar.stop()
        plots, warnings = _outputs(p, run, runs, first, timeline_src, trace.timed)
        total_replay = sum(r["replay_s"] for r in runs)
        out = {"command": "sim app", "trace": str(p.trace), "ntasks": trace.ntasks, "timed": trace.timed,
               "events": nevents_trace, "cluster": stored["cluster"], "collectives": p.collectives,
               "eager_bytes": p.eager, "replicas": p.replicas, "seed": p.seed, "mapping": runs[0]["mapping"],
               "model": runs[0]["model"], "tasks": runs[0]["tasks"], "runs": runs, "lower_s": timings["lower_s"],
               "read_s": timings["read_s"], "measure_s": timings["measure_s"],
               "replay_rows_per_s": (sum(r["events_per_s"] * r["replay_s"] for r in runs if r["events_per_s"])
                                     / total_replay) if total_replay > 0 else None,
               "plots": plots, "warnings": warnings, "run": str(run.path)}
        if grid is not None:
            out["breakdown"] = {"phases": grid.nphases, "rows": bd.to_dict("records")}
        run.info["result"] = out
    return run, out


def _read(p: Params, timings: dict):
    """(the trace, the host's metadata): the metadata is collected in a thread while the trace is read (its
    timer probe runs a program for about 0.25 s, mostly on the other core)."""
    from concurrent.futures import ThreadPoolExecutor

    from hpcvar import metadata
    from hpcvar.traces import load_trace

    with ThreadPoolExecutor(1) as pool:
        host = pool.submit(metadata.collect, {})
        t0 = time.perf_counter()
        # --engine python runs the whole reference path (the Python TIT/OTF2 importers too); otherwise the
        # importer is chosen as for 'trace import' (HPCVAR_IMPORT_ENGINE, else C where built)
        trace = load_trace(p.trace, p.fmt, flops_rate_of(p), "python" if p.engine == "python" else None, p.dialect)
        timings["read_s"] = time.perf_counter() - t0
        return trace, host.result()


def _prepare(p: Params, trace):
    """The cluster, the model parameters and the jitter of the replays; every mapping and model is checked
    before anything runs (an impossible --engine too)."""
    from hpcvar.sim import replay as simapp
    from hpcvar.sim.replay_jitter import jitter_factory

    cl = cluster_of(p, trace.ntasks)
    params_by_model: dict = {}
    if p.params_file:
        from hpcvar.models.sharing import load_params

        pm, pp = load_params(p.params_file)
        params_by_model[pm] = pp
    for mp in p.mappings:
        simapp.mapping(mp, trace.ntasks, cl, p.seed)
    jit = jitter_factory(p.jitter_file, p.jitter_freq, p.align, p.window, p.window_origin)
    no_ops: list[list[tuple]] = [[] for _ in range(trace.ntasks)]
    for m in p.models:
        simapp.Simulator(trace, cl, simapp.mapping(p.mappings[0], trace.ntasks, cl, p.seed), m,
                         params_by_model.get(m), p.collectives, p.eager, None if jit is None else jit(trace.ntasks,
                                                                                                      p.seed, 0),
                         lowered=no_ops, engine=p.engine)
    return cl, params_by_model, jit


def _stored_params(p: Params, trace, cl, params_by_model: dict) -> dict:
    """run.json's params: the options as given plus what they resolved to (cluster, model parameters)."""
    stored = {k: v for k, v in asdict(p).items() if k not in ("extra",)}
    stored.update(flops_rate=trace.meta.get("flops_rate") if not trace.timed else p.flops_rate,
                  tit_dialect=trace.meta.get("tit_dialect"))
    stored.update(ntasks=trace.ntasks, timed=trace.timed, mappings=list(p.mappings), models=list(p.models),
                  format=p.fmt, model_params=params_by_model, eager_bytes=p.eager, jitter=p.jitter_file,
                  jitter_freq_hz=p.jitter_freq, window_s=p.window, window_origin_s=p.window_origin,
                  cluster={"nodes": cl.nodes, "cores_per_node": cl.cores_per_node,
                           "bandwidth_bytes_per_s": cl.bandwidth, "latency_s": cl.latency,
                           "shm_bandwidth_bytes_per_s": cl.shm_bandwidth, "shm_latency_s": cl.shm_latency,
                           "rndv_latency_s": cl.rndv_latency, "shm_rndv_latency_s": cl.shm_rndv_latency,
                           "send_buffer_bytes": cl.send_buffer, "rndv_first_bytes": cl.rndv_first,
                           "links": [[a, b, bw, lat] for (a, b), (bw, lat) in cl.links.items()]})
    return stored


def _lower(p: Params, trace, timings: dict):
    """The trace lowered once for the engine that will replay it (the C lowering also computes the measured
    side in the same pass): (python ops or None, C arrays or None, ops per replay, measured total, comm)."""
    from hpcvar.sim import replay as simapp

    ops, encoded = None, None
    t0 = time.perf_counter()
    if p.engine == "python" or not _native_ok():
        ops = simapp.lower(trace, p.collectives)[0]
        ops_per_replay = sum(map(len, ops))
    else:
        from hpcvar.sim.replay_native import lower_native

        # the replays need only the op arrays: the rows go as the lowering consumes them (--chrome keeps them)
        encoded = lower_native(trace, p.collectives, release_rows=not p.chrome_file)
        ops_per_replay = len(encoded.kind)
    timings["lower_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    m_total, m_comm = encoded.measured if encoded is not None and encoded.measured is not None \
        else simapp.measured(trace)
    timings["measure_s"] = time.perf_counter() - t0
    return ops, encoded, ops_per_replay, m_total, m_comm


def _replay_all(p: Params, run, trace, cl, params_by_model, jit, ops, encoded, ops_per_replay, bar, measured,
                nevents_trace: int, grid=None):
    """Every mapping x model (x replica for random mappings and jitter); the tables are stored after each
    mapping x model. Returns (one summary per mapping x model, the first replay's result, the breakdown rows
    of every replay when ``grid`` is given, else None)."""
    import pandas as pd

    from hpcvar.sim import breakdown
    from hpcvar.sim import replay as simapp

    runs: list[dict] = []
    rep_rows: list = []
    bd_rows: list = []
    first = None
    for mp in p.mappings:
        for m in p.models:
            random_here = mp == "random" or jit is not None
            reps, t_sim, eng = [], 0.0, None
            for r in range(p.replicas if random_here else 1):
                node_of = simapp.mapping(mp, trace.ntasks, cl, p.seed + r)
                jf = jit(trace.ntasks, p.seed, r) if jit is not None else None
                sim = simapp.Simulator(trace, cl, node_of, m, params_by_model.get(m), p.collectives, p.eager, jf,
                                       ops, engine=p.engine, encoded=encoded,
                                       keep_rows=(first is None and bool(p.chrome_file)) or grid is not None,
                                       progress=bar.callback if bar else None)
                if sim.engine == "python" and ops is None:
                    raise UsageError("the trace was lowered for the C core only", "--engine", "Use --engine auto")
                t1 = time.perf_counter()
                res = sim.run()
                t_sim += time.perf_counter() - t1
                if bar:
                    bar.next_replay(ops_per_replay)  # the engine is the one its ops were lowered for
                eng = sim.engine
                reps.append(res)
                rep_rows.append(pd.DataFrame({
                    "mapping": mp, "model": m, "replica": r, "seed": p.seed + r, "task": np.arange(trace.ntasks),
                    "node": np.asarray(res.node_of, np.int64), "total_s": res.total_s, "comm_s": res.comm_s,
                    "avg_penalty": res.avg_penalty}))
                if first is None:
                    first = res
                if grid is not None:
                    bd_rows.append(breakdown.rows(grid, res, mp, m, r))
            one = combine(mp, m, reps, measured[0], measured[1], trace.timed)
            one.update(engine=eng, replay_s=t_sim,
                       events_per_s=nevents_trace * len(reps) / t_sim if t_sim > 0 else None)
            runs.append(one)
            run.write_table("replay.replicas", pd.concat(rep_rows, ignore_index=True))
            run.write_table("replay.tasks", pd.DataFrame(task_rows(runs)))
            run.write_table("replay.runs", pd.DataFrame(run_rows(runs)))
            if grid is not None:
                run.write_table("replay.breakdown", pd.concat(bd_rows, ignore_index=True))
    return runs, first, (pd.concat(bd_rows, ignore_index=True) if grid is not None else None)


def _outputs(p: Params, run, runs: list[dict], first, timeline_src, timed: bool) -> tuple[list[str], list[str]]:
    """The Chrome/Perfetto timeline, the figures and the warnings of a finished replay."""
    from hpcvar.kinds.sim_app.views import plot_comparison, plot_e_abs
    from hpcvar.sim import replay as simapp

    if p.chrome_file:
        from hpcvar.traces.chrome import write_chrome

        assert first is not None and timeline_src is not None  # kept for the first replay when chrome_file
        write_chrome(simapp.timeline(first, timeline_src), first.node_of, p.chrome_file)
    plots: list[str] = []
    if not p.no_plots:
        plots += [str(x) for x in plot_comparison(runs, run.plots_dir() / "comm_per_task")]
        if len(runs) > 1 and timed:
            plots += [str(x) for x in plot_e_abs(runs, run.plots_dir() / "e_abs")]
    if p.plot_stem:
        plots += [str(x) for x in plot_comparison(runs, p.plot_stem)]
    warnings = []
    if not timed:
        warnings.append("the trace has no measured times (TIT import): no E_abs; record it with 'hpcvar trace' "
                        "for a comparison with the measurement")
    for w in warnings:
        run.warn(w)
    return plots, warnings


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


def combine(mp, m, reps, m_total, m_comm, timed) -> dict:
    """Medians over replicas per task (95% CIs with several), E_abs against the measurement."""
    from hpcvar.sim.replay import e_abs

    if len(reps) > 1:
        from hpcvar.stats.summary import median_ci  # scipy: seconds to import, only for CIs

    tot = np.array([r.total_s for r in reps])
    com = np.array([r.comm_s for r in reps])
    pen = np.array([r.avg_penalty for r in reps])
    tasks = []
    for t in range(tot.shape[1]):
        row = {"task": t, "node": reps[0].node_of[t], "total_s": float(np.median(tot[:, t])),
               "comm_s": float(np.median(com[:, t])), "avg_penalty": float(np.median(pen[:, t])),
               "conflicts": reps[0].conflicts[t]}
        if timed:
            ea = e_abs(com[:, t], np.full(len(reps), m_comm[t]))
            row.update({"measured_total_s": float(m_total[t]), "measured_comm_s": float(m_comm[t]),
                        "e_abs_pct": float(np.median(ea))})
        if len(reps) > 1:
            row["total_s_ci"] = list(median_ci(tot[:, t]))
            row["comm_s_ci"] = list(median_ci(com[:, t]))
            if timed:
                row["e_abs_pct_ci"] = list(median_ci(e_abs(com[:, t], np.full(len(reps), m_comm[t]))))
        tasks.append(row)
    out = {"mapping": mp, "model": m, "replicas": len(reps), "tasks": tasks,
           "makespan_s": float(np.median(tot.max(axis=1)))}
    if timed:
        ea_pcts = [r["e_abs_pct"] for r in tasks if r["e_abs_pct"] == r["e_abs_pct"]]
        out["mean_e_abs_pct"] = float(np.mean(ea_pcts)) if ea_pcts else None
    return out


__all__ = ["PROGRESS_MIN_OPS", "Params", "cluster_of", "combine", "run_job"]
