"""hpcvar screen: which node, which link, is it OK? (native/bench/screen.c; the engine is hpcvar.screen).

One MPI job over the allocation (or the testbed), one or two ranks per node: a load check, then every node's
OS noise, compute kernel, clock cost and shared-memory latency (in turns where nodes share CPUs), then every
pair of the plan (``--pairs``) in rounds of disjoint pairs: 8-byte latency and bandwidth both ways. Every point
is written as it is measured (``--resume`` continues). The analysis flags outliers by robust statistics,
attributes slow links to a node or a pair, says what they cost, judges the site's expectations (``--expect``)
and answers in one line: OK, DEGRADED or UNRELIABLE (hpcvar.answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from hpcvar.bench.runner import BenchContext, Benchmark, run_benchmark
from hpcvar.errors import UsageError
from hpcvar.results import RawFile, RawPoint, Run
from hpcvar.results.params import Params
from hpcvar.screen import plan as pairplan

COMMAND = "screen"
NO = -1  # a field a point does not have (a pair has no round, a node no pair)
# Ranks with nothing to measure wait asleep, testing every 5 ms: where nodes share CPUs (the testbed) every
# wake-up is a detour on the CPU being measured (7 idle ranks testing every 1 ms made about 3% of noise); the
# price is up to 5 ms per written point.
WAIT_US = 5000


def recheck_iters(p: ScreenParams) -> int:
    """Round trips of a pair's latency recheck, after every pair was measured: as many as one of its halves."""
    return (p.lat_iters + 1) // 2


@dataclass(frozen=True)
class ScreenParams(Params):
    """``hpcvar screen``'s parameters (run.json ``params``)."""

    nodes: int  # nodes screened
    ranks_per_node: int  # 2: the second rank measures the shared-memory latency; 1: it is not measured
    pairs: str  # all | ring | random:K | auto (all up to 64 nodes, random:4 above)
    seed: int  # seed of random pair plans
    rounds: int  # node measurement rounds (the nodes take turns within each)
    check_s: float  # load check before measuring (0: none)
    noise_s: float  # OS noise recording per node and round
    kernel_s: float  # compute kernel time per node and round
    kernel_quantum_s: float  # length of one kernel call (calibrated once; the same work on every node)
    timer_samples: int  # clock cost samples per node and round
    timer_reads: int  # back-to-back reads per sample
    shm_iters: int  # 8-byte round trips inside a node per round
    lat_iters: int  # 8-byte round trips per pair
    lat_warmup: int
    bw_size_bytes: int  # bandwidth message
    bw_iters: int  # timed messages per pair and direction
    bw_warmup: int
    partition: str | None  # the Slurm partition the screen ran in (expectations may be per partition)
    expect_file: str | None  # the expectations file (--expect), as given
    expect_text: str | None  # its content: the run is judged against what it said then
    costs: bool  # estimate what the outliers cost (jitSim, ring allreduce)


def validate(p: ScreenParams) -> None:
    """What the command line cannot check through click types (the flags are named)."""
    if p.nodes < 1:
        raise UsageError("a screen needs at least one node", "--nodes", "Give --nodes 2 or more")
    if p.ranks_per_node not in (1, 2):
        raise UsageError(f"{p.ranks_per_node} ranks per node", "--ranks-per-node",
                         "Use 2 (the second measures the latency inside the node) or 1")
    for flag, n, least in (("--bw-iters", p.bw_iters, 3), ("--lat-iters", p.lat_iters, 20),
                           ("--shm-iters", p.shm_iters, 20), ("--timer-samples", p.timer_samples, 5)):
        if n < least:
            raise UsageError(f"{flag} {n} is too few samples for a confidence interval", flag,
                             f"Give {least} or more")
    if p.noise_s and p.noise_s < 0.2:
        raise UsageError("a noise recording shorter than 200 ms has fewer than 2 windows of 100 ms", "--noise",
                         "Give --noise 200ms or more (or 0 to skip it)")
    pairplan.parse_pairs(p.pairs)


class Screen(Benchmark[ScreenParams]):
    name = "screen"
    program = "hv_screen"
    command = COMMAND
    min_np = 1
    np_flag = "--ranks-per-node"

    def __init__(self) -> None:
        self.traces: Path | None = None  # the run's traces/, known once raw files are read

    def rounds(self, p: ScreenParams) -> list[list[tuple[int, int]]]:
        mode, k = pairplan.parse_pairs(p.pairs)
        return pairplan.plan_rounds(p.nodes, mode, k, p.seed)

    def point_fields(self) -> list[str]:
        return ["item", "node", "round", "a", "b"]

    def raw_point_key(self, pt: RawPoint) -> str:
        return " ".join(f"{k}={pt.params.get(k, NO)}" for k in sorted(self.point_fields()))

    def points(self, p: ScreenParams) -> list[dict]:
        out = []
        if p.check_s > 0:
            out += [{"item": "check", "node": n, "round": NO, "a": NO, "b": NO} for n in range(p.nodes)]
        out += [{"item": "node", "node": n, "round": r, "a": NO, "b": NO} for r in range(p.rounds)
                for n in range(p.nodes)]
        out += [{"item": "pair", "node": NO, "round": NO, "a": a, "b": b} for rnd in self.rounds(p) for a, b in rnd]
        return out

    def validate(self, p: ScreenParams, ctx: BenchContext) -> None:
        validate(p)

    def argv(self, p: ScreenParams, points: list[dict]) -> list[str]:
        round_of = {pair: i for i, rnd in enumerate(self.rounds(p)) for pair in rnd}
        nodes = [pt for pt in points if pt["item"] == "node"]
        pairs = sorted((round_of[(pt["a"], pt["b"])], pt["a"], pt["b"]) for pt in points if pt["item"] == "pair")
        check = any(pt["item"] == "check" for pt in points)
        args = ["--rounds", str(p.rounds), "--check-s", repr(p.check_s if check else 0.0),
                "--noise-s", repr(p.noise_s), "--threshold-ns", "0",
                "--max-events", str(int(p.noise_s * 200_000) + 4096), "--kernel-s", repr(p.kernel_s),
                "--quantum-ns", repr(p.kernel_quantum_s * 1e9), "--timer-samples", str(p.timer_samples),
                "--timer-reads", "1000", "--shm-iters", str(p.shm_iters), "--shm-warmup", "20",
                "--lat-iters", str(p.lat_iters), "--lat-warmup", str(p.lat_warmup),
                "--lat-recheck", str(recheck_iters(p) if pairs else 0),
                "--bw-size", str(p.bw_size_bytes), "--bw-iters", str(p.bw_iters), "--bw-warmup", str(p.bw_warmup),
                "--wait-us", str(WAIT_US)]
        if nodes:
            args += ["--todo-nodes", ",".join(str(pt["node"]) for pt in nodes),
                     "--todo-rounds", ",".join(str(pt["round"]) for pt in nodes)]
        if pairs:
            args += ["--pair-a", ",".join(str(a) for _, a, _ in pairs), "--pair-b", ",".join(str(b) for *_, b in pairs),
                     "--pair-round", ",".join(str(r) for r, _, _ in pairs)]
        return args

    def estimate_s(self, p: ScreenParams, points: list[dict]) -> float:
        """Generous: every node item alone (turns), links at 50 Mbit/s."""
        nodes = sum(pt["item"] == "node" for pt in points)
        pairs = sum(pt["item"] == "pair" for pt in points)
        per_node = 1.0 + p.noise_s + p.kernel_s + (p.shm_iters + p.timer_samples) * 1e-4
        per_pair = (1.5 + (p.lat_iters + recheck_iters(p)) * 1e-3
                    + 2 * (p.bw_iters + p.bw_warmup) * p.bw_size_bytes / 6.25e6)
        return 10.0 + p.check_s + nodes * per_node + pairs * per_pair

    def busy_polls(self, p: ScreenParams) -> bool:
        return False  # ranks with nothing to measure sleep (hv_wait with --wait-us)

    def tables(self, raws: list[RawFile], p: ScreenParams) -> dict[str, pd.DataFrame]:
        from hpcvar.screen import tables as st

        where = str(raws[0].path.parent.parent) if raws else "run"
        if raws:
            self.traces = raws[0].path.parent.parent / "traces"
        t = st.raw_tables(raws, where)
        size = int(raws[-1].meta.get("bw_size", p.bw_size_bytes)) if raws else p.bw_size_bytes
        t["screen.bw"] = st.bandwidth(t.pop("screen.bw_raw"), t["screen.lat"], size)
        if self.traces is not None:
            t.update(st.noise_tables(t["screen.nodes"], list(range(p.rounds)), self.traces))
        else:
            t.update(st.noise_tables(t["screen.nodes"], [], Path(".")))
        return t

    def summaries(self, t: dict[str, pd.DataFrame], p: ScreenParams) -> dict[str, pd.DataFrame]:
        from hpcvar.screen import analysis as an

        nm = an.node_metrics(t)
        lm = an.link_metrics(t)
        hosts = list(t["screen.nodes"]["host"])
        findings = an.ordered(pd.DataFrame(an.node_findings(nm, t) + an.link_findings(lm, hosts),
                                           columns=an.FINDING_COLS))
        if p.costs:
            findings = self._with_costs(findings, nm, lm, hosts)
        out = {"screen.node_metrics": nm, "screen.link_metrics": lm, "screen.findings": findings}
        if p.expect_text:
            out["screen.expect"] = judge_expectations(p, nm, lm)
        return out

    def _with_costs(self, findings: pd.DataFrame, nm: pd.DataFrame, lm: pd.DataFrame,
                    hosts: list[str]) -> pd.DataFrame:
        from hpcvar.screen import cost

        for i, f in findings.iterrows():
            if f["metric"] in ("link_bandwidth", "link_latency"):
                c, text = cost.link_cost(lm, hosts, f["metric"], f["reference"])
            elif f["metric"] == "compute_rate":
                c, text = cost.compute_cost(f["value"], f["reference"])
            elif f["metric"] == "noise_fraction":
                c, text = self._noise_cost(findings, nm)
            elif f["metric"] == "cpu_throttled":
                c, text = cost.throttle_cost(f["value"])
            else:
                continue
            findings.loc[i, "cost"], findings.loc[i, "cost_text"] = c, text
        return findings

    def _noise_cost(self, findings: pd.DataFrame, nm: pd.DataFrame) -> tuple[float, str]:
        from hpcvar.noise.formats import read_jtr
        from hpcvar.screen import cost

        noisy = list(findings[findings["metric"] == "noise_fraction"]["where"])
        g = nm[(nm["metric"] == "noise_fraction") & ~nm["host"].isin(noisy)]
        if self.traces is None or not len(g):
            return float("nan"), ""
        typical = str(g.iloc[(g["value"] - g["value"].median()).abs().argmin()]["host"])
        files = {h: self.traces / f"{h}-r0.jtr" for h in nm["host"].unique()}
        traces = {h: read_jtr(f) for h, f in files.items() if f.is_file()}
        return cost.noise_cost(traces, noisy, typical)

    def result(self, t: dict[str, pd.DataFrame], p: ScreenParams) -> dict:
        from hpcvar.screen import analysis as an

        checks = t.get("screen.expect")
        nodes = len(t["screen.nodes"])
        npairs = len(t["screen.lat"].groupby(["host_a", "host_b"])) if len(t["screen.lat"]) else 0
        ans = an.answer(nodes, npairs, t["screen.node_metrics"], t["screen.link_metrics"], t["screen.findings"],
                        checks, p.expect_file)

        def records(name: str) -> list[dict]:
            return t[name].to_dict("records") if name in t else []

        return {"command": COMMAND, "answer": ans.to_json(), "nodes": list(t["screen.nodes"]["host"]),
                "turns": int(t["screen.nodes"]["turn"].max() + 1) if nodes else 0, "pairs": npairs,
                "plan": p.pairs, "largest_z": an.largest_z(t["screen.node_metrics"], t["screen.link_metrics"]),
                "findings": records("screen.findings"), "expectations": records("screen.expect"),
                "node_metrics": records("screen.node_metrics"), "link_metrics": records("screen.link_metrics"),
                "load_check": an.check_load(t)}

    def warnings(self, t: dict[str, pd.DataFrame], p: ScreenParams, within: str | None = None) -> list[str]:
        from hpcvar.screen import analysis as an

        out = [f"load check before measuring: on {c['host']}, {c['why']}; the screen measures what they leave"
               for c in an.check_load(t) if c["why"]]
        turns = int(t["screen.nodes"]["turn"].max() + 1) if len(t["screen.nodes"]) else 1
        if turns > 1:
            out.append(f"the nodes share CPUs (one machine: same boot id, overlapping CPU sets), so they were "
                       f"measured in {turns} turns, not all at once")
        return out


def judge_expectations(p: ScreenParams, nm: pd.DataFrame, lm: pd.DataFrame) -> pd.DataFrame:
    from hpcvar import expect

    exp = expect.parse(p.expect_text or "", p.expect_file or "expectations")
    checks = expect.judge(exp, expect.screen_observations(nm, lm), p.partition)
    cols = list(__import__("hpcvar.results.schema", fromlist=["TABLES"]).TABLES["screen.expect"])
    return pd.DataFrame(checks, columns=cols)


def job(p: ScreenParams, ctx: BenchContext) -> Run:
    """Screen the launcher's nodes; the run's result holds the answer (hpcvar.answer) and its exit code."""
    from hpcvar.results.kinds import draw_plots

    def after(run: Run, result: dict) -> None:
        result["plots"] = draw_plots(run)

    if ctx.resume and ctx.stored_params:  # --resume RUN alone: its own parameters, and so its own layout
        from hpcvar.results import resolve_run

        stored = Run.open(resolve_run(ctx.resume, ctx.runs_dir))
        doc = stored.info.get("params")
        if stored.info.get("command") == COMMAND and isinstance(doc, dict) and "step" not in doc:
            p = ScreenParams.from_json(doc, str(stored.path / "run.json"))  # else the runner says what it is

    run, _ = run_benchmark(Screen(), p, _with_layout(ctx, p), after=after)
    return run


def _with_layout(ctx: BenchContext, p: ScreenParams) -> BenchContext:
    import dataclasses

    return dataclasses.replace(ctx, np=p.nodes * p.ranks_per_node, ranks_per_node=p.ranks_per_node)


