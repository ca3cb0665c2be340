"""Fan-in: many clients into one (or a few) roots (native/bench/fanin.c; docs/fanin.md).

After the "Reservation" tool of Jones & Settlemyer (fan-in on Cray Gemini and
Aries): large-buffer clients stream --large messages into a root while
"chatter" clients exchange --small request/ack round trips with it. The root's
strategy is swept: one or two receive queues, one posted receive per client or
a fixed depth, wildcard or exact matching. Measured at the root, per point:

- aggregate large-buffer bandwidth = large bytes completed at the root after
  its first large completion in the window / (last - first completion time):
  the steady rate, free of the start-up ramp and of the partly received
  messages at the window's end (summed over roots when --servers > 1);
  ``window_bytes_per_s`` is the plain large bytes in the window / window;
- chatter bandwidth = chatter bytes completed at the root inside the window /
  window length;
- small-message latency at the root = round trip of a chatter request and the
  root's 8-byte ack, timed on the chatter client (one clock, no offset
  estimate); it includes the time the request waits for the root to service it;
- per-client bytes and Jain's index over the large-buffer clients;
- the root's receive rate over time in bins of --bin.

``--repeat N`` relaunches the job N times (``--placement shuffle`` draws a new
rank-to-role mapping per launch from --seed + repetition) and splits the
variance of the binned aggregate rate into between-run and within-run parts
(hpcvar.stats.variance_components): the paper's Figures 6, 7 and 11.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hpcvar import metadata
from hpcvar.bench.runner import BenchContext, Benchmark, Params, run_benchmark
from hpcvar.bench.wait import DEFAULT_SLEEP_US, parse_wait, resolve_wait, wait_us  # noqa: F401 (re-exported)
from hpcvar.errors import UsageError
from hpcvar.results import RawFile, Run
from hpcvar.results.kinds import draw_plots
from hpcvar.results.schema import columns
from hpcvar.stats import jain_index, summarize, variance_components

QUEUES = ("single", "dual")
MATCHES = ("any", "exact")
HEADER_BYTES = 8  # every message starts with an 8-byte header (end-of-stream count)
MAX_MSG = 0x7FFFFFFF  # MPI count limit for MPI_BYTE
MAX_DEPTH = 1 << 20  # posted receives per queue (one MPI_Request and buffer each)
MAX_BINS = 1_000_000  # bins per root and point (preallocated by the root)
POINT_FIELDS = ["rep", "clients", "chatter", "queues", "depth", "match"]
KIND_CLIENT, KIND_BIN, KIND_RTT, KIND_ROOT, KIND_CHATTER, KIND_CLIENT_STEADY = 1, 2, 3, 4, 5, 7  # 6: retired


@dataclass(frozen=True)
class FaninParams(Params):
    """``hpcvar bench fanin``'s parameters (run.json ``params``)."""

    servers: int  # roots
    clients: tuple[int, ...]  # large-buffer clients per point (swept)
    chatter_ratio: tuple[float, ...]  # chatter clients per large-buffer client (swept)
    chatter: tuple[int, ...] | None  # chatter clients as counts; replaces chatter_ratio
    large: int  # large-buffer message size, bytes
    small: int  # chatter message size, bytes
    duration_s: float | None  # measured window per point; None: --messages
    messages: int | None  # messages per large-buffer client; None: --duration
    queues: tuple[str, ...]  # of QUEUES
    depth: tuple[str | int, ...]  # "deep" or a number of posted receives
    match: tuple[str, ...]  # of MATCHES
    bin_s: float | None  # bin of the receive-rate series; None: auto_bin_s
    repeat: int
    placement: str  # fixed or shuffle
    seed: int
    max_samples: int
    wait: str  # auto (resolved by the job before the run is stored), spin, yield or sleep:N


def parse_depth_list(text: str, flag: str = "--depth") -> list:
    """'deep,20' -> ['deep', 20]; depth 0 or negative is refused."""
    out: list = []
    for part in text.split(","):
        part = part.strip().lower()
        if part == "deep":
            out.append("deep")
            continue
        try:
            n = int(part)
        except ValueError:
            raise UsageError(f"'{part}' is not a queue depth", flag,
                             "Give 'deep' (one posted receive per client) or a number of receives such as 20") from None
        if n < 1:
            raise UsageError(f"queue depth {n} leaves the root with no posted receive", flag,
                             "Give a depth of 1 or more, or 'deep'")
        if n > MAX_DEPTH:  # the C side holds it in an int and posts that many requests
            raise UsageError(f"queue depth {part[:30]} is beyond {MAX_DEPTH} posted receives", flag,
                             "Give a realistic depth such as 20, or 'deep'")
        out.append(n)
    return out


def parse_choice_list(text: str, choices: tuple, flag: str) -> list[str]:
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        if part not in choices:
            raise UsageError(f"'{part}' is not one of {', '.join(choices)}", flag,
                             f"Give a comma list of {' / '.join(choices)}")
        out.append(part)
    return list(dict.fromkeys(out))


def chatter_counts(params: FaninParams, clients: int) -> list[int]:
    """Chatter clients for a number of large-buffer clients: --chatter counts, else round(ratio x clients)."""
    if params.chatter is not None:
        return list(dict.fromkeys(int(c) for c in params.chatter))
    return list(dict.fromkeys(int(round(r * clients)) for r in params.chatter_ratio))


def ranks_needed(params: FaninParams) -> int:
    """Ranks the largest point needs: servers + large-buffer clients + chatter clients."""
    return max(params.servers + c + k for c in params.clients for k in chatter_counts(params, c))


def root_buffer_bytes(params: FaninParams, point: dict) -> int:
    """Receive buffers of the busiest root for one point (what fanin.c allocates)."""
    S = params.servers
    L, C = point["clients"], point["chatter"]
    nl, nc = -(-L // S), -(-C // S)
    depth = point["depth"]
    large, small = params.large, params.small
    if point["queues"] == "single":
        slots = nl + nc if depth == "deep" else depth
        return slots * max(large, small)
    return ((nc if depth == "deep" else (depth if nc else 0)) * small
            + (nl if depth == "deep" else depth) * large)


def auto_bin_s(params: FaninParams) -> float:
    """Default bin: 1/50 of the window with --duration (at least 1 ms), 10 ms with --messages."""
    if params.bin_s:
        return float(params.bin_s)
    if params.duration_s:
        return max(params.duration_s / 50.0, 1e-3)
    return 0.01


class Fanin(Benchmark[FaninParams]):
    name = "fanin"
    program = "hv_fanin"
    min_np = 2
    any_source = True  # --match any: several clients compete for the root's wildcard receives

    def point_fields(self) -> list[str]:
        return list(POINT_FIELDS)

    def busy_polls(self, params: FaninParams) -> bool:
        return params.wait == "spin"

    def points(self, params: FaninParams) -> list[dict]:
        pts = {}
        for rep in range(params.repeat):
            for clients, queues, depth, match in itertools.product(params.clients, params.queues,
                                                                   params.depth, params.match):
                for chatter in chatter_counts(params, clients):
                    p = {"rep": rep, "clients": clients, "chatter": chatter, "queues": queues, "depth": depth,
                         "match": match}
                    pts[self.point_key(p)] = p
        return list(pts.values())

    def validate(self, params: FaninParams, ctx: BenchContext) -> None:
        _check_roles(params)
        _check_window(params)
        need = ranks_needed(params)
        if ctx.np < need:
            worst = max(((c, k) for c in params.clients for k in chatter_counts(params, c)), key=sum)
            raise UsageError(
                f"the point with {worst[0]} clients and {worst[1]} chatter clients needs {need} ranks "
                f"({params.servers} servers + {worst[0]} + {worst[1]}), but --np is {ctx.np}", "--clients",
                f"Use --np {need} (or leave --np out), or lower --clients / --chatter-ratio / --chatter")
        super().validate(params, ctx)
        self._check_memory(params, ctx)

    def _check_memory(self, params: FaninParams, ctx: BenchContext) -> None:
        avail = metadata.mem_available_bytes()
        if avail is None:
            return
        one_host = ctx.launcher.name in ("local", "testbed")
        worst, worst_p = 0, {}
        for p in self.points(params):
            need = root_buffer_bytes(params, p)
            if one_host:  # every rank on this machine: add the clients' buffers
                need += p["clients"] * params.large + p["chatter"] * params.small
            if need > worst:
                worst, worst_p = need, p
        if worst > avail:
            from hpcvar.units import format_size

            raise UsageError(
                f"the point with {worst_p['clients']} clients, {worst_p['chatter']} chatter, "
                f"{worst_p['queues']} queue(s), depth {worst_p['depth']} needs {format_size(worst)} of buffers, "
                f"above the {format_size(avail)} available", "--large",
                "Use a smaller --large or --small, a fixed --depth, --queues dual, or fewer clients")

    def launches(self, params: FaninParams, pending: list[dict]) -> list[list[dict]]:
        """One MPI job per repetition: --repeat relaunches the job (and re-draws a shuffled placement)."""
        by_rep: dict[int, list[dict]] = {}
        for p in pending:
            by_rep.setdefault(p["rep"], []).append(p)
        return [by_rep[r] for r in sorted(by_rep)]

    def argv(self, params: FaninParams, points: list[dict]) -> list[str]:
        rep = points[0]["rep"]
        return [
            "--servers", str(params.servers), "--large", str(params.large), "--small", str(params.small),
            "--duration", repr(float(params.duration_s or 0.0)), "--messages", str(params.messages or 0),
            "--bin", repr(auto_bin_s(params)), "--max-samples", str(params.max_samples),
            "--rep", str(rep), "--placement", params.placement, "--seed", str(params.seed + rep),
            "--p-clients", ",".join(str(p["clients"]) for p in points),
            "--p-chatter", ",".join(str(p["chatter"]) for p in points),
            "--p-queues", ",".join(str(QUEUES.index(p["queues"])) for p in points),
            "--p-depth", ",".join("0" if p["depth"] == "deep" else str(p["depth"]) for p in points),
            "--p-match", ",".join(str(MATCHES.index(p["match"])) for p in points),
            "--wait-us", str(wait_us(params.wait)),
        ]

    def estimate_s(self, params: FaninParams, points: list[dict]) -> float:
        if params.duration_s:
            per = params.duration_s * 1.5 + 2.0
        else:  # assume a slow 5 MB/s root
            per = 2.0 + max(p["clients"] for p in points) * (params.messages or 0) * params.large / 5e6
        return 5.0 + len(points) * per

    # ---- tables --------------------------------------------------------------------------------
    def tables(self, raws: list[RawFile], params: FaninParams) -> dict[str, pd.DataFrame]:
        pts, cls, bins, rtts = [], [], [], []
        for raw in raws:
            for p in raw.points:
                key = {"rep": int(p.params["rep"]), "clients": int(p.params["clients"]),
                       "chatter": int(p.params["chatter"]), "queues": p.params["queues"],
                       "depth": p.params["depth"], "match": p.params["match"]}
                prow, c, b, r = _point_tables(raw, p, key)
                pts.append(prow)
                cls.append(c)
                bins.append(b)
                rtts.append(r)
        points = pd.DataFrame(pts, columns=list(_POINT_COLS))
        clients = _concat(cls, _CLIENT_COLS)
        bins_df = _concat(bins, _BIN_COLS)
        rtt = _concat(rtts, _RTT_COLS)
        return {"fanin.points": points, "fanin.clients": clients, "fanin.bins": bins_df, "fanin.rtt": rtt,
                "fanin.variability": variability(points, bins_df)}

    def result(self, tables: dict[str, pd.DataFrame], params: FaninParams) -> dict:
        pts = tables["fanin.points"]
        points = []
        for r in pts.to_dict("records"):
            d = {k: r[k] for k in _POINT_COLS}
            d["depth"] = "deep" if r["depth"] == "deep" else int(r["depth"])
            points.append(d)
        effect = tables["fanin.chatter_effect"] if "fanin.chatter_effect" in tables else chatter_effect_table(pts)
        return {"benchmark": "fanin", "servers": params.servers, "wait": params.wait,
                "large": params.large,
                "small": params.small, "placement": params.placement, "repeat": params.repeat,
                "points": points, "variability": tables["fanin.variability"].to_dict("records"),
                "chatter_effect": _effect_records(effect)}

    def summaries(self, tables: dict[str, pd.DataFrame], params: FaninParams) -> dict[str, pd.DataFrame]:
        return {"fanin.chatter_effect": chatter_effect_table(tables["fanin.points"])}


# ---- tidy tables from one raw point ------------------------------------------------------------
# the columns of each table come from the schema (hpcvar.results.schema), the one place that declares them
_KEY_COLS = ("rep", "clients", "chatter", "queues", "depth", "match")
_POINT_COLS = tuple(columns("fanin.points"))
_CLIENT_COLS = tuple(columns("fanin.clients"))
_BIN_COLS = tuple(columns("fanin.bins"))
_RTT_COLS = tuple(columns("fanin.rtt"))


def job(params: FaninParams, ctx: BenchContext) -> Run:
    """``hpcvar bench fanin``: run (or resume) every point, store the figures; the result in the run.
    ``ctx.np`` None: what the largest point needs; ``params.wait`` "auto" is resolved against the launcher's
    cores."""
    if ctx.np is None:
        ctx.np = max(ranks_needed(params), Fanin.min_np) if params.servers >= 1 and min(params.clients) >= 1 \
            else 2
    params = dataclasses.replace(params, wait=resolve_wait(params.wait, ctx.np, ctx.launcher.slots()))

    def plots(run: Run, result: dict) -> None:
        hosts = [h for h in str(((run.info.get("metadata") or {}).get("native") or {}).get("hosts") or "").split(",")
                 if h]
        why = root_shares_node(hosts, params.servers, params.placement, ctx.launcher.name)
        if why:
            run.warn(why)
        result["plots"] = draw_plots(run)

    return run_benchmark(Fanin(), params, ctx, after=plots)[0]


def root_shares_node(hosts: list[str], servers: int, placement: str, launcher: str) -> str | None:
    """Why the fan-in's measurement of the root's link is not one (a warning), or None: ranks on several nodes
    (``hosts``: rank -> host) and a root (ranks [0, servers) with --placement fixed) sharing its node with
    other ranks, whose traffic to it crosses no link."""
    if placement != "fixed" or len(set(hosts)) < 2:
        return None
    roots = set(range(servers))
    for r in sorted(roots):
        mates = [i for i, h in enumerate(hosts) if h == hosts[r] and i not in roots]
        if mates:
            return (f"the root (rank {r}) shares its node {hosts[r]} with {len(mates)} other rank(s) "
                    f"({', '.join(map(str, mates[:8]))}): their traffic to it crosses no link, so the aggregate is "
                    f"not the root's link alone (it can exceed the link's rate); the {launcher} launcher placed the "
                    "ranks K to a node and cannot put the root alone: run it on as many nodes as ranks (one rank "
                    "per node)")
    return None


def _check_roles(params: FaninParams) -> None:
    """Servers, clients, chatter, the root's queues and the message sizes."""
    if params.servers < 1:
        raise UsageError(f"--servers {params.servers} leaves no root to fan into", "--servers",
                         "Use --servers 1 (one root) or more")
    if min(params.clients) < 1:
        raise UsageError(f"{min(params.clients)} large-buffer clients: every point needs at least one", "--clients",
                         "Give counts of 1 or more, e.g. --clients 1,2,4,8")
    if params.chatter is not None and min(params.chatter, default=0) < 0:
        raise UsageError(f"chatter count {min(params.chatter)} is negative", "--chatter", "Give 0 or more")
    for r in params.chatter_ratio:
        if not (r >= 0 and np.isfinite(r)):
            raise UsageError(f"chatter ratio {r} is not a non-negative number", "--chatter-ratio",
                             "Give e.g. 4 (four chatter clients per large-buffer client) or 0")
    for d in params.depth:
        if d != "deep" and (not isinstance(d, int) or d < 1):
            raise UsageError(f"queue depth {d} leaves the root with no posted receive", "--depth",
                             "Give a depth of 1 or more, or 'deep'")
    for flag, v in (("--large", params.large), ("--small", params.small)):
        if v < HEADER_BYTES or v > MAX_MSG:
            raise UsageError(f"message size {v} bytes is outside [{HEADER_BYTES}, {MAX_MSG}]", flag,
                             f"Give a size of at least {HEADER_BYTES} bytes (the message header) and below 2GiB")


def _check_window(params: FaninParams) -> None:
    """The measured window (a duration or a message count), its bins, the repetitions and the samples kept."""
    dur, msgs = params.duration_s, params.messages
    if (dur is None) == (msgs is None):
        raise UsageError("give exactly one of --duration and --messages", "--duration",
                         "Use --duration 2s (a time window) or --messages 20 (per large-buffer client)")
    if dur is not None and not dur > 0:
        raise UsageError(f"--duration {dur} s is not positive", "--duration", "Give e.g. 2s")
    if msgs is not None and msgs < 1:
        raise UsageError(f"--messages {msgs} is below 1", "--messages", "Give 1 or more")
    bin_s = auto_bin_s(params)
    if not bin_s > 0:
        raise UsageError("--bin must be positive", "--bin", "Give e.g. 10ms")
    if dur is not None and dur / bin_s > MAX_BINS:
        raise UsageError(f"--duration / --bin gives {dur / bin_s:.0f} bins, above {MAX_BINS}", "--bin",
                         "Use a wider --bin")
    if params.repeat < 1:
        raise UsageError("--repeat must be at least 1", "--repeat", "Use --repeat 1 or more")
    if params.max_samples < 2:
        raise UsageError("--max-samples must be at least 2", "--max-samples", "Use e.g. 20000")


def _concat(frames: list[pd.DataFrame], cols) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({c: [] for c in cols})


def _with_key(df: pd.DataFrame, key: dict) -> pd.DataFrame:
    for i, (k, v) in enumerate(key.items()):
        df.insert(i, k, v)
    return df


def _point_tables(raw: RawFile, p, key: dict):
    rows = p.rows
    kind = rows[:, 0] if rows.size else np.zeros(0)
    col = {n: i for i, n in enumerate(raw.columns)}

    def sel(k):
        return rows[kind == k] if rows.size else np.zeros((0, len(raw.columns)))

    roots, crow, brow, rrow = sel(KIND_ROOT), sel(KIND_CLIENT), sel(KIND_BIN), sel(KIND_RTT)
    window_ns = {int(r[col["rank"]]): r[col["a"]] for r in roots}
    bin_ns = float(p.params["bin_ns"])
    # clients, as counted by their root inside the window
    win = np.array([window_ns.get(int(r), np.nan) for r in crow[:, col["peer"]]]) if len(crow) else np.zeros(0)
    clients = _with_key(pd.DataFrame({
        "rank": crow[:, col["rank"]].astype(np.int64), "server_rank": crow[:, col["peer"]].astype(np.int64),
        "role": np.where(crow[:, col["idx"]] == 1, "large", "chatter"),
        "bytes": crow[:, col["a"]].astype(np.int64), "messages": crow[:, col["b"]].astype(np.int64),
        "messages_total": crow[:, col["c"]].astype(np.int64),
        "bw_bytes_per_s": np.where(win > 0, crow[:, col["a"]] / (win * 1e-9), 0.0)}), key)
    # time series: full bins lie wholly inside their root's window
    bstart = brow[:, col["c"]]
    bwin = np.array([window_ns.get(int(r), 0.0) for r in brow[:, col["rank"]]]) if len(brow) else np.zeros(0)
    bins = _with_key(pd.DataFrame({
        "server_rank": brow[:, col["rank"]].astype(np.int64), "bin": brow[:, col["idx"]].astype(np.int64),
        "t_start_s": bstart * 1e-9, "bin_s": bin_ns * 1e-9, "large_bytes": brow[:, col["a"]],
        "small_bytes": brow[:, col["b"]], "large_bytes_per_s": brow[:, col["a"]] / (bin_ns * 1e-9),
        "small_bytes_per_s": brow[:, col["b"]] / (bin_ns * 1e-9),
        "full": bstart + bin_ns <= bwin * (1 + 1e-9)}), key)
    rtt = _with_key(pd.DataFrame({
        "rank": rrow[:, col["rank"]].astype(np.int64), "server_rank": rrow[:, col["peer"]].astype(np.int64),
        "seq": rrow[:, col["idx"]].astype(np.int64), "rtt_ns": rrow[:, col["a"]],
        "t_send_ns": rrow[:, col["b"]]}), key)

    large = clients[clients["role"] == "large"]
    chat = clients[clients["role"] == "chatter"]
    csteady = {int(r[col["rank"]]): (r[col["a"]], r[col["b"]], r[col["c"]]) for r in sel(KIND_CLIENT_STEADY)}
    agg = win_bw = chat_bw = 0.0
    for srv, w in window_ns.items():
        if w > 0:
            mine = large[large["server_rank"] == srv]
            win_bw += mine["bytes"].sum() / (w * 1e-9)
            chat_bw += chat.loc[chat["server_rank"] == srv, "bytes"].sum() / (w * 1e-9)
            for rank, nbytes in zip(mine["rank"], mine["bytes"], strict=True):
                # steady rate of each client (one message in flight): its bytes completed after its own first
                # completion / (its last - its first completion); summed over clients. A root-wide version
                # would count the part of the other clients' messages that arrived before that first
                # completion (+6% with 2 clients here). The window rate when fewer than 2 messages completed.
                first, last, after = csteady.get(int(rank), (0.0, 0.0, 0.0))
                agg += after / ((last - first) * 1e-9) if last > first and after > 0 else nbytes / (w * 1e-9)
    s = summarize(rtt["rtt_ns"].to_numpy(), ci=False)
    full = bins[bins["full"]]
    per_bin = full.groupby("bin")["large_bytes_per_s"].sum().to_numpy()  # summed over roots
    prow = dict(key)
    prow.update({
        "servers": int(p.params["servers"]), "large_bytes": int(p.params["large"]),
        "small_bytes": int(p.params["small"]), "placement": p.params["placement"], "seed": int(p.params["seed"]),
        "wait_us": int(p.params.get("wait_us", 0)),
        "window_s": max(window_ns.values(), default=0.0) * 1e-9,
        "large_bytes_total": int(large["bytes"].sum()), "aggregate_bytes_per_s": float(agg),
        "window_bytes_per_s": float(win_bw),
        "chatter_bytes_per_s": float(chat_bw),
        "jain_index": jain_index(large["bytes"].to_numpy()) if len(large) else float("nan"),
        "chatter_jain_index": jain_index(chat["bytes"].to_numpy()) if len(chat) else float("nan"),
        "chatter_rtt_n": s["n"], "chatter_rtt_median_ns": s["median"], "chatter_rtt_p99_ns": s["p99"],
        "chatter_round_trips": int(sel(KIND_CHATTER)[:, col["a"]].sum()),
        "rate_cv": float(np.std(per_bin, ddof=1) / np.mean(per_bin)) if per_bin.size > 1 and np.mean(per_bin) > 0
        else float("nan"),
        "receives_posted": int(roots[:, col["c"]].sum()), "receives_cancelled": int(roots[:, col["b"]].sum()),
    })
    return prow, clients, bins, rtt


def config_cols() -> list[str]:
    return ["clients", "chatter", "queues", "depth", "match"]


def variability(points: pd.DataFrame, bins: pd.DataFrame) -> pd.DataFrame:
    """Between-run vs within-run variance of the root's aggregate large-buffer rate, per configuration.

    Within a run the samples are the full bins of the time series (aggregate over roots); between runs,
    the run means. One row per configuration (a point without its repetition index).
    """
    cols = ["clients", "chatter", "queues", "depth", "match", "runs", "mean_bytes_per_s", "run_mean_min",
            "run_mean_max", "within_var", "between_var", "between_over_within", "cv_between", "cv_overall"]
    if points.empty:
        return pd.DataFrame({c: [] for c in cols})
    full = bins[bins["full"]] if len(bins) else bins
    rows = []
    for cfg, grp in points.groupby(config_cols(), sort=True):
        groups, means = [], []
        for rep in sorted(grp["rep"]):
            b = full
            for k, v in zip([*config_cols(), "rep"], [*cfg, rep], strict=True):
                b = b[b[k] == v]
            x = b.groupby("bin")["large_bytes_per_s"].sum().to_numpy()
            groups.append(x)
            means.append(float(grp.loc[grp["rep"] == rep, "aggregate_bytes_per_s"].iloc[0]))
        vc = variance_components(groups)
        rows.append({**dict(zip(config_cols(), cfg, strict=True)), "runs": len(means),
                     "mean_bytes_per_s": float(np.mean(means)), "run_mean_min": float(np.min(means)),
                     "run_mean_max": float(np.max(means)), "within_var": vc.get("within_var", float("nan")),
                     "between_var": vc.get("between_var", float("nan")),
                     "between_over_within": vc.get("between_over_within", float("nan")),
                     "cv_between": vc.get("cv_between", float("nan")),
                     "cv_overall": vc.get("cv_overall", float("nan"))})
    return pd.DataFrame(rows, columns=cols)


def chatter_effect_table(points: pd.DataFrame) -> pd.DataFrame:
    """The fanin.chatter_effect table: large-buffer bandwidth with chatter vs without, per clients x strategy
    (means over repetitions).

    drop_pct = 100 (1 - with / without): positive when chatter takes bandwidth from the large clients.
    """
    cols = columns("fanin.chatter_effect")
    out = []
    if points.empty:
        return pd.DataFrame({c: [] for c in cols})
    mean = points.groupby(["clients", "queues", "depth", "match", "chatter"], sort=True)[
        ["aggregate_bytes_per_s", "chatter_bytes_per_s"]].mean().reset_index()
    for (c, q, d, m), grp in mean.groupby(["clients", "queues", "depth", "match"], sort=True):
        base = grp[grp["chatter"] == 0]
        if base.empty:
            continue
        b = float(base["aggregate_bytes_per_s"].iloc[0])
        for r in grp[grp["chatter"] > 0].itertuples():
            out.append({"clients": int(c), "queues": q, "depth": str(d), "match": m,
                        "chatter": int(r.chatter), "without_bytes_per_s": b,
                        "with_bytes_per_s": float(r.aggregate_bytes_per_s),
                        "chatter_bytes_per_s": float(r.chatter_bytes_per_s),
                        "drop_pct": 100.0 * (1.0 - r.aggregate_bytes_per_s / b) if b > 0 else float("nan")})
    return pd.DataFrame(out, columns=cols) if out else pd.DataFrame({c: [] for c in cols})


def _effect_records(effect: pd.DataFrame) -> list[dict]:
    """The JSON ``chatter_effect`` from the fanin.chatter_effect table (depth back to "deep" or a number)."""
    return [{"clients": int(r["clients"]), "queues": r["queues"],
             "depth": "deep" if r["depth"] == "deep" else int(r["depth"]), "match": r["match"],
             "chatter": int(r["chatter"]), "without_bytes_per_s": float(r["without_bytes_per_s"]),
             "with_bytes_per_s": float(r["with_bytes_per_s"]), "chatter_bytes_per_s": float(r["chatter_bytes_per_s"]),
             "drop_pct": float(r["drop_pct"])} for r in effect.to_dict("records")]


def chatter_effect(points: pd.DataFrame) -> list[dict]:
    """The fanin.chatter_effect table as the JSON result's ``chatter_effect`` records."""
    return _effect_records(chatter_effect_table(points))


def strategy_label(queues: str, depth, match: str) -> str:
    return f"{queues}/{depth}/{match}"


def chatter_label(clients: int, chatter: int) -> str:
    if chatter == 0:
        return "- chatter"
    ratio = chatter / clients
    return f"+ chatter {ratio:g}:1" if ratio == int(ratio) else f"+ chatter {chatter}"


__all__ = ["Fanin", "FaninParams", "MATCHES", "QUEUES", "chatter_counts", "chatter_effect", "chatter_effect_table",
           "parse_choice_list", "parse_depth_list", "parse_wait", "ranks_needed", "resolve_wait", "root_buffer_bytes",
           "variability", "wait_us"]
