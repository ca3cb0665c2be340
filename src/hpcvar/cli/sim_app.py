"""hpcvar sim app: replay an event trace on a simulated cluster (mappings x network models)."""

from __future__ import annotations

import re
import time

import click
import numpy as np

from hpcvar.cli.common import DURATION, SIZE, emit
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
@click.option("--align", type=click.Choice(["unsync", "sync"]), default="unsync", show_default=True,
              help="Jitter alignment: independent random offsets per task, or one shared offset.")
@click.option("--replicas", type=click.IntRange(1), default=1, show_default=True,
              help="Replicas with seeds seed, seed+1, ... where randomness enters (random mapping, jitter).")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the first replica.")
@click.option("--chrome", "chrome_file", type=click.Path(dir_okay=False), default=None,
              help="Write the first simulated timeline as Chrome/Perfetto JSON.")
@click.option("--plot", "plot_stem", type=click.Path(dir_okay=False), default=None,
              help="Write measured vs predicted communication time per task and E_abs (PNG+SVG at this stem).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")
def cli(trace_file, fmt, cluster_file, nodes, cores_per_node, bandwidth, latency, shm_bandwidth, shm_latency,
        mapping, model, params_file, collectives, eager, jitter_file, jitter_freq, align, replicas, seed,
        chrome_file, plot_stem, as_json):
    """Replay APP.trace on a simulated cluster: predicted time per task and per event, communication
    time, conflicts met, average penalty, and E_abs against the measured trace, for each mapping x model."""
    from hpcvar.sim import app as simapp
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
    jit = _jitter(jitter_file, jitter_freq, align)
    lowered = simapp.lower(trace, collectives)[0]
    m_total, m_comm = simapp.measured(trace)
    runs = []
    first = None
    t_sim, n_events = 0.0, 0
    for mp in mappings:
        for m in models:
            random_here = mp == "random" or jit is not None
            reps = []
            for r in range(replicas if random_here else 1):
                node_of = simapp.mapping(mp, trace.ntasks, cl, seed + r)
                jf = jit(trace.ntasks, seed, r) if jit is not None else None
                sim = simapp.Simulator(trace, cl, node_of, m, params_by_model.get(m), collectives, eager, jf, lowered)
                t0 = time.perf_counter()
                res = sim.run()
                t_sim += time.perf_counter() - t0
                n_events += len(trace.events)
                reps.append(res)
                if first is None:
                    first = res
            runs.append(_combine(mp, m, reps, m_total, m_comm, trace.timed))
    if chrome_file:
        from hpcvar.traces.chrome import write_chrome

        write_chrome(simapp.timeline(first, trace), first.node_of, chrome_file)
    out = {"trace": str(trace_file), "ntasks": trace.ntasks, "timed": trace.timed,
           "cluster": {"nodes": cl.nodes, "cores_per_node": cl.cores_per_node, "bandwidth_bytes_per_s": cl.bandwidth,
                       "latency_s": cl.latency, "shm_bandwidth_bytes_per_s": cl.shm_bandwidth,
                       "shm_latency_s": cl.shm_latency},
           "collectives": collectives, "eager_bytes": eager, "replicas": replicas, "seed": seed,
           "mapping": runs[0]["mapping"], "model": runs[0]["model"], "tasks": runs[0]["tasks"],
           "runs": runs, "replay_rows_per_s": n_events / t_sim if t_sim > 0 else None}
    if plot_stem:
        out["plots"] = [str(p) for p in _plot(runs, plot_stem)]
    emit(out, as_json, _render)


def _jitter(path, freq, align):
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

    def make(ntasks, seed, replica):
        offs = offsets(refs, ntasks, align, seed, replica)

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
        ea = [r["e_abs_pct"] for r in tasks if r["e_abs_pct"] == r["e_abs_pct"]]
        out["mean_e_abs_pct"] = float(np.mean(ea)) if ea else None
    return out


def _render(console, out: dict) -> None:
    from rich.table import Table

    console.print(f"{out['trace']}: {out['ntasks']} tasks on {out['cluster']['nodes']} nodes x "
                  f"{out['cluster']['cores_per_node']} cores; collectives {out['collectives']}")
    for run in out["runs"]:
        t = Table(title=f"mapping {run['mapping']}, model {run['model']}"
                        + (f", {run['replicas']} replicas (median)" if run["replicas"] > 1 else ""), box=None)
        cols = ["task", "node", "total", "comm", "avg penalty", "conflicts"]
        if out["timed"]:
            cols += ["measured comm", "E_abs %"]
        for c in cols:
            t.add_column(c)
        for r in run["tasks"]:
            cells = [str(r["task"]), str(r["node"]), f"{r['total_s']:.6f} s", f"{r['comm_s']:.6f} s",
                     f"{r['avg_penalty']:.2f}", " ".join(f"{k}:{v}" for k, v in sorted(r["conflicts"].items()))]
            if out["timed"]:
                cells += [f"{r['measured_comm_s']:.6f} s", f"{r['e_abs_pct']:.1f}"]
            t.add_row(*cells)
        console.print(t)
    if len(out["runs"]) > 1 or out["timed"]:
        s = Table(title="comparison", box=None)
        for c in ["mapping", "model", "makespan"] + (["mean E_abs %"] if out["timed"] else []):
            s.add_column(c)
        for run in out["runs"]:
            cells = [run["mapping"], run["model"], f"{run['makespan_s']:.6f} s"]
            if out["timed"]:
                v = run.get("mean_e_abs_pct")
                cells.append("-" if v is None else f"{v:.1f}")
            s.add_row(*cells)
        console.print(s)
    if out.get("plots"):
        console.print("plots: " + ", ".join(out["plots"]))


def _plot(runs: list[dict], stem: str):
    """The paper's Figures 8-9: measured and predicted comm time per task (bars), E_abs (line)."""
    from pathlib import Path

    from hpcvar.report.plots import figure, save

    fig, axes = figure(len(runs), 1, figsize=(7, 2.6 * len(runs)), squeeze=False)
    for ax, run in zip(axes[:, 0], runs):
        tasks = [r["task"] for r in run["tasks"]]
        x = np.arange(len(tasks))
        pred = [r["comm_s"] for r in run["tasks"]]
        if "measured_comm_s" in run["tasks"][0]:
            ax.bar(x - 0.2, [r["measured_comm_s"] for r in run["tasks"]], 0.4, label="measured")
            ax.bar(x + 0.2, pred, 0.4, label="predicted")
            ax2 = ax.twinx()
            ax2.plot(x, [r["e_abs_pct"] for r in run["tasks"]], "k.-", label="E_abs")
            ax2.set_ylabel("E_abs (%)")
        else:
            ax.bar(x, pred, 0.6, label="predicted")
        ax.set_xticks(x, [str(t) for t in tasks])
        ax.set_xlabel("MPI task")
        ax.set_ylabel("communication time (s)")
        ax.set_title(f"mapping {run['mapping']}, model {run['model']}")
        ax.legend(loc="upper left", fontsize=8)
    return save(fig, Path(stem))
