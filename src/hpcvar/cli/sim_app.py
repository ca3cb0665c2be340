"""hpcvar sim app: replay an event trace on a simulated cluster (mappings x network models)."""

from __future__ import annotations

import re
import sys
import time

import click
import numpy as np

from hpcvar.cli.common import DURATION, SIZE, emit, output_options, stderr_console
from hpcvar.errors import UsageError


def _bandwidth(text: str, flag: str) -> float:
    """Bytes/s from a number ('1.25e8') or a tc rate ('1gbit' = 1.25e8 bytes/s)."""
    t = text.strip().lower()
    if re.search(r"bit$", t):
        from hpcvar.units import parse_rate

        return parse_rate(t, flag) / 8.0
    try:
        v = float(t)
    except ValueError:
        raise UsageError(f"'{text}' is not a bandwidth", flag,
                         "Give bytes per second (1.25e8) or a tc rate (1gbit)") from None
    if v <= 0:
        raise UsageError(f"bandwidth must be positive, got {text}", flag, "Give bytes per second, e.g. 1.25e8")
    return v


class _BW(click.ParamType):
    name = "bandwidth"

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return value
        from hpcvar.cli.common import flag_name

        return _bandwidth(value, flag_name(param))


BANDWIDTH = _BW()


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


@click.command("app")
@click.argument("trace_file", metavar="APP.trace", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["auto", "native", "tit", "otf2"]), default="auto",
              show_default=True, help="Trace format (auto: by extension; .txt/.tit = SimGrid TIT, .otf2 = OTF2).")
@click.option("--cluster", "cluster_file", type=click.Path(), default=None,
              help="Cluster file (nodes, cores_per_node, bandwidth, latency, shm_*, per-link 'link A B BW LAT').")
@click.option("--nodes", type=click.IntRange(1), default=None, help="Nodes (default: one per task).")
@click.option("--cores-per-node", type=click.IntRange(1), default=None, help="Cores per node (default 1).")
@click.option("--bandwidth", type=BANDWIDTH, default="1.25e8", show_default=True,
              help="Inter-node link bandwidth: bytes/s or a tc rate (1gbit).")
@click.option("--latency", type=DURATION, default="50us", show_default=True, help="Inter-node latency per message.")
@click.option("--shm-bandwidth", type=BANDWIDTH, default="5e9", show_default=True,
              help="Intra-node (shared-memory) bandwidth, bytes/s.")
@click.option("--shm-latency", type=DURATION, default="500ns", show_default=True, help="Intra-node latency.")
@click.option("--mapping", default="rrn", show_default=True,
              help="Comma list of rrn (round-robin per node), rrp (fill a node first), random, or a file of "
                   "'TASK NODE' lines; several are compared.")
@click.option("--model", default="none", show_default=True,
              help="Comma list of network models: none, gige, myrinet, maxmin (several are compared).")
@click.option("--params", "params_file", type=click.Path(), default=None,
              help="Model parameters from 'hpcvar model fit' (used for the model it names).")
@click.option("--collectives", type=click.Choice(["binomial", "recdoub", "ring"]), default="binomial",
              show_default=True, help="Algorithm that decomposes collectives into messages (docs/replay.md).")
@click.option("--eager", type=SIZE, default="64KiB", show_default=True,
              help="Messages up to this size are sent eagerly (start at once, the send completes at once).")
@click.option("--jitter", "jitter_file", type=click.Path(), default=None,
              help="OS-jitter trace (two-column 'duration gap' cycles) applied to compute with jitSim semantics.")
@click.option("--jitter-freq", type=float, default=None, help="Cycle frequency (Hz) of the --jitter trace.")
@click.option("--align", type=click.Choice(["unsync", "sync", "cosched"]), default="unsync", show_default=True,
              help="Jitter alignment (jitSim): independent random offsets per task, one shared offset, or "
                   "co-scheduled windows (--window).")
@click.option("--window", type=DURATION, default=None,
              help="Co-scheduler window for --align cosched: every task starts its trace at a random window start.")
@click.option("--window-origin", type=DURATION, default=None,
              help="Start of one co-scheduler window in the jitter trace (default 0).")
@click.option("--replicas", type=click.IntRange(1), default=1, show_default=True,
              help="Replicas with seeds seed, seed+1, ... where randomness enters (random mapping, jitter).")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the first replica.")
@click.option("--engine", type=click.Choice(["auto", "native", "python"]), default="auto", show_default=True,
              help="Replay engine: the C core (none/maxmin/gige without jitter), the Python reference, or auto.")
@click.option("--chrome", "chrome_file", type=click.Path(dir_okay=False), default=None,
              help="Write the first simulated timeline as Chrome/Perfetto JSON.")
@click.option("--plot", "plot_stem", type=click.Path(dir_okay=False), default=None,
              help="Also write the per-task comparison figure (PNG+SVG) at this stem (the run's plots/ always "
                   "gets it).")
@click.option("--no-plots", is_flag=True, help="Do not draw the plots.")
@output_options
def cli(trace_file, fmt, cluster_file, nodes, cores_per_node, bandwidth, latency, shm_bandwidth, shm_latency,
        mapping, model, params_file, collectives, eager, jitter_file, jitter_freq, align, window, window_origin,
        replicas, seed, engine, chrome_file, plot_stem, no_plots, as_json, runs_dir):
    """Replay APP.trace on a simulated cluster: predicted time per task and per event, communication
    time, conflicts met, average penalty, and E_abs against the measured trace, for each mapping x model.
    The run is stored (tables replay.runs, replay.tasks, replay.replicas; plots) like the other commands."""
    import pandas as pd

    from hpcvar import metadata
    from hpcvar.results.store import Run
    from hpcvar.sim import app as simapp
    from hpcvar.sim.app_report import plot_comparison, plot_e_abs, render_app

    if window is not None and align != "cosched":
        raise UsageError("--window is only for --align cosched", "--window", "Add --align cosched")
    if align == "cosched" and window is None:
        raise UsageError("--align cosched needs the window length", "--window", "Give e.g. --window 10ms")
    if window_origin is not None and align != "cosched":
        raise UsageError("--window-origin is only for --align cosched", "--window-origin", "Add --align cosched")
    if align != "unsync" and jitter_file is None:
        raise UsageError(f"--align {align} applies to a jitter trace", "--align", "Give --jitter TRACE")
    from hpcvar.traces import load_trace

    trace = load_trace(trace_file, fmt)
    if cluster_file:
        cl = simapp.load_cluster(cluster_file)
        if nodes or cores_per_node:
            raise UsageError("--nodes/--cores-per-node and --cluster both given", "--cluster",
                             "Put the node counts in the cluster file")
    else:
        n = nodes or trace.ntasks
        k = cores_per_node or max(1, -(-trace.ntasks // n))
        cl = simapp.Cluster(n, k, bandwidth, latency, shm_bandwidth, shm_latency)
    models = _split(model)
    for m in models:
        if m not in simapp.MODELS:
            raise UsageError(f"unknown model '{m}'", "--model", f"Use one of {', '.join(simapp.MODELS)}")
    params_by_model: dict = {}
    if params_file:
        from hpcvar.models.sharing import load_params

        pm, pp = load_params(params_file)
        params_by_model[pm] = pp
    mappings = _split(mapping)
    for mp in mappings:  # check them all before any simulation
        simapp.mapping(mp, trace.ntasks, cl, seed)
    jit = _jitter(jitter_file, jitter_freq, align, window, window_origin)
    for m in models:  # an impossible --engine is refused before anything runs
        simapp.Simulator(trace, cl, simapp.mapping(mappings[0], trace.ntasks, cl, seed), m,
                         params_by_model.get(m), collectives, eager, None if jit is None else (lambda t, s, d: d),
                         lowered=[[] for _ in range(trace.ntasks)], engine=engine)
    params = {"trace": str(trace_file), "format": fmt, "ntasks": trace.ntasks, "timed": trace.timed,
              "cluster": {"nodes": cl.nodes, "cores_per_node": cl.cores_per_node,
                          "bandwidth_bytes_per_s": cl.bandwidth, "latency_s": cl.latency,
                          "shm_bandwidth_bytes_per_s": cl.shm_bandwidth, "shm_latency_s": cl.shm_latency,
                          "links": [[a, b, bw, lat] for (a, b), (bw, lat) in cl.links.items()]},
              "mappings": mappings, "models": models, "model_params": params_by_model, "collectives": collectives,
              "eager_bytes": eager, "jitter": jitter_file, "jitter_freq_hz": jitter_freq, "align": align,
              "window_s": window, "window_origin_s": window_origin, "replicas": replicas, "seed": seed,
              "engine": engine}
    run = Run.create("sim app", params, runs_dir, ["hpcvar", *sys.argv[1:]], metadata.collect({}))
    t0 = time.perf_counter()
    lowered = simapp.lower(trace, collectives)[0]
    t_lower = time.perf_counter() - t0
    encoded = None
    m_total, m_comm = simapp.measured(trace)
    runs, rep_rows = [], []
    first = None
    for mp in mappings:
        for m in models:
            random_here = mp == "random" or jit is not None
            reps, t_sim, eng = [], 0.0, None
            for r in range(replicas if random_here else 1):
                node_of = simapp.mapping(mp, trace.ntasks, cl, seed + r)
                jf = jit(trace.ntasks, seed, r) if jit is not None else None
                sim = simapp.Simulator(trace, cl, node_of, m, params_by_model.get(m), collectives, eager, jf, lowered,
                                       engine=engine, encoded=encoded)
                if sim.engine == "native" and encoded is None:  # once per trace, outside the timed replay
                    from hpcvar.sim.replay_native import encode

                    t1 = time.perf_counter()
                    encoded = sim.encoded = encode(lowered)
                    t_lower += time.perf_counter() - t1
                t1 = time.perf_counter()
                res = sim.run()
                t_sim += time.perf_counter() - t1
                eng = sim.engine
                reps.append(res)
                for t in range(trace.ntasks):
                    rep_rows.append({"mapping": mp, "model": m, "replica": r, "seed": seed + r, "task": t,
                                     "node": int(res.node_of[t]), "total_s": float(res.total_s[t]),
                                     "comm_s": float(res.comm_s[t]), "avg_penalty": float(res.avg_penalty[t])})
                if first is None:
                    first = res
            one = _combine(mp, m, reps, m_total, m_comm, trace.timed)
            one.update(engine=eng, replay_s=t_sim, events_per_s=len(trace.events) * len(reps) / t_sim
                       if t_sim > 0 else None)
            runs.append(one)
            run.write_table("replay.replicas", pd.DataFrame(rep_rows))
            run.write_table("replay.tasks", pd.DataFrame(_task_rows(runs)))
            run.write_table("replay.runs", pd.DataFrame(_run_rows(runs)))
    if chrome_file:
        from hpcvar.traces.chrome import write_chrome

        write_chrome(simapp.timeline(first, trace), first.node_of, chrome_file)
    plots = []
    if not no_plots:
        plots += [str(p) for p in plot_comparison(runs, run.plots_dir() / "comm_per_task")]
        if len(runs) > 1 and trace.timed:
            plots += [str(p) for p in plot_e_abs(runs, run.plots_dir() / "e_abs")]
    if plot_stem:
        plots += [str(p) for p in plot_comparison(runs, plot_stem)]
    warnings = []
    if not trace.timed:
        warnings.append("the trace has no measured times (TIT import): no E_abs; record it with 'hpcvar trace' "
                        "for a comparison with the measurement")
    for w in warnings:
        run.warn(w)
    out = {"command": "sim app", "trace": str(trace_file), "ntasks": trace.ntasks, "timed": trace.timed,
           "cluster": params["cluster"], "collectives": collectives, "eager_bytes": eager, "replicas": replicas,
           "seed": seed, "mapping": runs[0]["mapping"], "model": runs[0]["model"], "tasks": runs[0]["tasks"],
           "runs": runs, "lower_s": t_lower,
           "replay_rows_per_s": (sum(r["events_per_s"] * r["replay_s"] for r in runs if r["events_per_s"])
                                 / sum(r["replay_s"] for r in runs)) if sum(r["replay_s"] for r in runs) > 0 else None,
           "plots": plots, "warnings": warnings, "run": str(run.path)}
    run.finish("complete", {k: v for k, v in out.items() if k != "tasks"})
    if as_json:
        for w in warnings:
            stderr_console().print(f"[yellow]warning:[/] {w}")
    emit(out, as_json, render_app)


def _task_rows(runs: list[dict]) -> list[dict]:
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


def _run_rows(runs: list[dict]) -> list[dict]:
    return [{"mapping": r["mapping"], "model": r["model"], "replicas": r["replicas"], "makespan_s": r["makespan_s"],
             "mean_e_abs_pct": r.get("mean_e_abs_pct") if r.get("mean_e_abs_pct") is not None else float("nan"),
             "engine": r["engine"], "replay_s": r["replay_s"],
             "events_per_s": r["events_per_s"] if r["events_per_s"] is not None else float("nan")} for r in runs]


def _jitter(path, freq, align, window=None, origin=None):
    """make(ntasks, seed, replica) -> stretch(task, start_s, dur_s), the jitSim semantics in ns."""
    if path is None:
        return None
    if not freq:
        raise UsageError("--jitter needs the trace's cycle frequency", "--jitter-freq", "Give e.g. --jitter-freq 2.4e9")
    from hpcvar.noise.trace import read_two_column
    from hpcvar.sim.jitter_ref import RefTrace, offsets

    jt = read_two_column(path, freq)
    jt.validate(path)
    refs = [RefTrace((c.duration * 1e9 / freq).astype(np.int64), (c.gap * 1e9 / freq).astype(np.int64))
            for c in jt.cpus]
    win = int(round(window * 1e9)) if window is not None else 0
    org = int(round(origin * 1e9)) if origin is not None else 0
    if align == "cosched" and win < 1:
        raise UsageError("the co-scheduler window is shorter than 1 ns", "--window", "Give e.g. --window 10ms")
    if align == "cosched" and org >= min(r.L for r in refs):
        raise UsageError("the co-scheduler window origin lies beyond the end of the jitter trace", "--window-origin",
                         "Give an origin inside the trace")

    def make(ntasks, seed, replica):
        offs = offsets(refs, ntasks, align, seed, replica, win, org)

        def stretch(task, start_s, dur_s):
            tr = refs[task % len(refs)]
            t = int(start_s * 1e9)
            return (tr.advance(offs[task], t, int(round(dur_s * 1e9))) - t) * 1e-9

        return stretch

    return make


def _combine(mp, m, reps, m_total, m_comm, timed) -> dict:
    from hpcvar.sim.app import e_abs
    from hpcvar.stats.summary import median_ci

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
        eas = [r["e_abs_pct"] for r in tasks if r["e_abs_pct"] == r["e_abs_pct"]]
        out["mean_e_abs_pct"] = float(np.mean(eas)) if eas else None
    return out
