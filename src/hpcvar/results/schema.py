"""The one place that owns table names, column names, units and SCHEMA_VERSION.

Units live in column names (``_ns``, ``_bytes``, ``_bytes_per_s``, ``_pct``).
Every table a command writes is declared here; ``check_table`` refuses a frame
that lacks a declared column, so that a renamed column cannot slip through.

Version history:
  1 (0.1.0): first version: run.json + Parquet tables per run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hpcvar.errors import ResultsError

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_VERSION = 1

# table name -> {column: description with unit}
TABLES: dict[str, dict[str, str]] = {
    # hpcvar bench latency
    "latency.samples": {
        "size_bytes": "message size (bytes)",
        "iter": "iteration index within the size",
        "rtt_ns": "round-trip time of one ping-pong (ns)",
        "oneway_ns": "one-way latency = rtt_ns / 2 (ns)",
        "send_ns": "how long rank 0's MPI_Send took inside the round trip (ns; NaN below 64 KiB, where the extra "
                   "clock read would weigh on the round trip, and in runs before it was kept)",
    },
    "latency.summary": {
        "size_bytes": "message size (bytes)",
        "n": "number of samples",
        "median_ns": "median one-way latency (ns)",
        "mean_ns": "mean one-way latency (ns)",
        "min_ns": "minimum one-way latency (ns)",
        "max_ns": "maximum one-way latency (ns)",
        "p90_ns": "90th percentile of one-way latency (ns)",
        "p99_ns": "99th percentile of one-way latency (ns)",
        "p99_9_ns": "99.9th percentile of one-way latency (ns)",
        "mad_ns": "median absolute deviation (ns)",
        "cv": "coefficient of variation (stdev / mean)",
        "median_ci_lo_ns": "95% CI of the median, low (ns)",
        "median_ci_hi_ns": "95% CI of the median, high (ns)",
        "outliers": "samples flagged by the modified z-score > 3.5",
        "bw_bytes_per_s": "size / median one-way latency (bytes/s)",
        "send_median_ns": "median time rank 0's MPI_Send took (ns)",
        "buffered_bytes": "bytes of the message still on their way when MPI_Send returned: "
                          "size x (1 - send_median_ns / median_ns), within [0, size]",
    },
}


# hpcvar bench sharing / hpcvar model evaluate (bandwidth sharing, docs/models.md)
TABLES.update({
    "sharing.samples": {
        "rep": "repetition index",
        "comm_index": "communication index in the scheme",
        "comm": "communication name",
        "src": "source node", "dst": "destination node",
        "size_bytes": "message size (bytes)",
        "t_ns": "duration of the blocking MPI_Send at the source, all communications at once (ns)",
        "t_ref_ns": "duration of the reference transfer alone in the same repetition (ns)",
        "penalty": "t_ns / (t_ref_ns scaled to size_bytes) (ratio)",
    },
    "sharing.summary": {
        "comm_index": "communication index in the scheme",
        "comm": "communication name",
        "src": "source node", "dst": "destination node",
        "size_bytes": "message size (bytes)",
        "n": "repetitions",
        "t_median_ns": "median duration with all communications at once (ns)",
        "t_min_ns": "minimum duration (ns)", "t_max_ns": "maximum duration (ns)",
        "t_ref_median_ns": "median duration of the reference transfer alone (ns)",
        "penalty": "t_median_ns / t_ref_median_ns (size-scaled) (ratio)",
        "penalty_rep_median": "median of the per-repetition penalties (ratio)",
        "penalty_min": "smallest per-repetition penalty (ratio)",
        "penalty_max": "largest per-repetition penalty (ratio)",
        "penalty_mad": "median absolute deviation of per-repetition penalties (ratio)",
        "penalty_ci_lo": "95% CI of the median per-repetition penalty, low (ratio)",
        "penalty_ci_hi": "95% CI of the median per-repetition penalty, high (ratio)",
        "penalty_cv": "coefficient of variation of per-repetition penalties",
    },
})


# hpcvar bench queues posted / unexpected (hpcvar.kinds.queues, docs/queues.md)
_QUEUE_SUMMARY = {
    "n": "number of samples (measured iterations)",
    "median_ns": "median one-way latency (ns)",
    "mean_ns": "mean one-way latency (ns)",
    "min_ns": "minimum one-way latency (ns)",
    "max_ns": "maximum one-way latency (ns)",
    "p10_ns": "10th percentile of one-way latency (ns)",
    "p90_ns": "90th percentile of one-way latency (ns)",
    "p99_ns": "99th percentile of one-way latency (ns)",
    "mad_ns": "median absolute deviation (ns)",
    "median_ci_lo_ns": "95% CI of the median, low (ns)",
    "median_ci_hi_ns": "95% CI of the median, high (ns)",
    "outliers": "samples flagged by the modified z-score > 3.5",
}
_QUEUE_FIT = {
    "size_bytes": "message size (bytes)",
    "fit_stat": "per-point statistic the fit uses: median, p10 or min",
    "points": "number of points (per-point medians) in the fit",
    "dof": "residual degrees of freedom (points - parameters)",
    "slope_ns_per_entry": "least-squares slope of the per-point one-way latency statistic per entry (ns/entry)",
    "slope_ci_lo": "95% t-interval of the slope, low (ns/entry)",
    "slope_ci_hi": "95% t-interval of the slope, high (ns/entry)",
    "intercept_ns": "fitted latency at zero entries (ns)",
    "r2": "coefficient of determination of the fit",
    "baseline_ns": "fit_stat of the one-way latency over the length-0 samples (ns)",
}
TABLES.update({
    "queues_posted.samples": {
        "length": "posted-queue length: extra receives posted besides the latency receive",
        "traversed_pct": "requested percent of the queue in front of the latency receive",
        "entries": "extra receives in front of the latency receive = round(length * pct / 100)",
        "size_bytes": "message size (bytes)",
        "any_source": "receives posted with MPI_ANY_SOURCE",
        "iter": "iteration index within the point",
        "rtt_ns": "round-trip time of one ping-pong (ns)",
        "oneway_ns": "one-way latency = rtt_ns / 2 (ns)",
    },
    "queues_posted.summary": {
        "length": "posted-queue length",
        "traversed_pct": "percent traversed",
        "entries": "traversed entries",
        "untraversed": "entries behind the latency receive = length - entries",
        "size_bytes": "message size (bytes)",
        **_QUEUE_SUMMARY,
    },
    "queues_posted.fit": {
        **_QUEUE_FIT,
        "untraversed_slope_ns_per_entry": "slope per untraversed entry when the sweep separates it (ns/entry)",
        "untraversed_slope_ci_lo": "95% t-interval of the untraversed slope, low (ns/entry)",
        "untraversed_slope_ci_hi": "95% t-interval of the untraversed slope, high (ns/entry)",
    },
    "queues_unexpected.samples": {
        "length": "unexpected-queue length: messages waiting at each rank",
        "size_bytes": "message size (bytes)",
        "iter": "iteration index within the point",
        "rtt_ns": "round-trip time of one ping-pong, receive post included (ns)",
        "oneway_ns": "one-way latency = rtt_ns / 2 (ns)",
    },
    "queues_unexpected.summary": {
        "length": "unexpected-queue length",
        "size_bytes": "message size (bytes)",
        **_QUEUE_SUMMARY,
    },
    "queues_unexpected.fit": dict(_QUEUE_FIT),
})


# hpcvar bench ace (application communication emulator, hpcvar.kinds.ace, docs/ace.md)
_ACE_DISP = {f"{w}_{k}_ns": f"{k} of per-cycle T_{w} over the EA's processes and cycles (ns; variance in ns^2)"
             for w in ("comm", "comp", "barr")
             for k in ("mean", "stdev", "variance", "min", "p50", "p90", "p99", "max")}
TABLES.update({
    "ace.cycles": {
        "point": "sweep point (one MPI launch)", "repeat": "repeat index of the point",
        "ea": "EA index", "name": "EA name", "rank": "rank in the EA's communicator", "world_rank": "rank in the job",
        "cycle": "cycle index", "size_bytes": "message size (bytes)",
        "t_comp_req_ns": "requested busy-wait compute time (ns)", "t_comp_ns": "measured compute (busy-wait) time (ns)",
        "t_comm_ns": "measured communication time (ns)", "t_barr_ns": "measured barrier time after the cycle (ns)",
    },
    "ace.bench": {
        "point": "sweep point", "ea": "EA index", "rank": "rank in the EA", "world_rank": "rank in the job",
        "iter": "repetition index", "size_bytes": "message size (bytes)",
        "t_comm_ns": "phase-1 time of one exchange of the EA's pattern at 100% load (ns)",
    },
    "ace.fits": {
        "point": "sweep point", "ea": "EA index", "rank": "rank in the EA", "world_rank": "rank in the job",
        "alpha_ns": "this process's least-squares intercept per message (ns)",
        "beta_ns_per_byte": "this process's least-squares slope per message (ns/byte)",
    },
    "ace.summary": {
        "point": "sweep point", "repeat": "repeat index", "ea": "EA index", "name": "EA name",
        "pattern": "communication pattern", "mode": "blocking or nonblocking", "ranks": "ranks of the EA",
        "size_bytes": "message size (bytes)", "load_pct": "communication load L (%)", "cycles": "cycles",
        "messages_per_cycle": "model messages per cycle m (T_comm = m (alpha + beta n))",
        "fixed": "1 when alpha/beta were given (phase 1 skipped)",
        "fit_fallback": "1 when the averaged fit predicted a non-positive time at the EA's size and the measured "
                        "mean time per message at that size was used instead (alpha = it, beta = 0)",
        "alpha_ns": "alpha used (EA average of the per-process fits, the fallback, or given) (ns)",
        "beta_ns_per_byte": "beta used (ns/byte)",
        "native_t_comm_ns": "T_comm per cycle computed by the native program (ns)",
        "pred_t_comm_ns": "predicted T_comm per cycle (ns)", "pred_t_comp_ns": "T_comp per cycle, eq. 6 (ns)",
        "pred_t_run_ns": "predicted run time, eq. 4 (ns)",
        "meas_t_run_ns": "measured run time: max over the EA's processes of the phase-2 wall time (ns)",
        "meas_t_run_min_ns": "min over the EA's processes of the phase-2 wall time (ns)",
        "error_pct": "run-time prediction error (measured - predicted) / predicted (%)",
        "check_ok": "1 when every received buffer held the EA's own marker",
        "stored_cycles": "cycle rows stored (ranks x cycles)",
        "comp_req_ns": "requested busy-wait per cycle (ns)",
        "comp_error_pct": "mean of (actual - requested) / requested busy-wait (%)",
        "comp_error_median_pct": "median of (actual - requested) / requested busy-wait (%)",
        "comp_error_p99_pct": "99th percentile of (actual - requested) / requested busy-wait (%)",
        **_ACE_DISP,
    },
    "ace.variability": {
        "name": "EA name", "size_bytes": "message size (bytes)", "load_pct": "communication load (%)",
        "runs": "repeats", "run_mean_ns": "mean measured run time (ns)", "run_cv": "CV of the run time across repeats",
        "error_pct_mean": "mean prediction error (%)",
        "comm_within_var_ns2": "pooled within-run variance of per-cycle T_comm (ns^2)",
        "comm_between_var_ns2": "variance of the run means of T_comm (ns^2)",
        "comm_cv_between": "CV of the run means of T_comm",
        "cycle_within_var_ns2": "pooled within-run variance of the cycle time (ns^2)",
        "cycle_between_var_ns2": "variance of the run means of the cycle time (ns^2)",
        "cycle_cv_between": "CV of the run means of the cycle time",
    },
})

# hpcvar noise record (OS jitter, docs/noise.md)
TABLES.update({
    "noise.summary": {
        "host": "node the CPU belongs to (its hostname)",
        "cpu": "CPU recorded on",
        "t_min_ns": "smallest back-to-back TSC read difference before the run (ns)",
        "t_min_end_ns": "the same after the run (ns)",
        "threshold_ns": "detour threshold: a read difference above it is an event (ns)",
        "events": "number of jitter events",
        "length_s": "recorded length (s)",
        "events_per_s": "events per second",
        "noise_fraction": "sum of detour durations / recorded length (fraction of the CPU lost)",
        "max_ns": "longest detour (ns)", "mean_ns": "mean detour (ns)",
        "p50_ns": "median detour (ns)", "p90_ns": "90th percentile detour (ns)",
        "p99_ns": "99th percentile detour (ns)", "p99_9_ns": "99.9th percentile detour (ns)",
        "p99_99_ns": "99.99th percentile detour (ns)",
        "gap_p50_ns": "median gap between detours (ns)", "gap_p99_ns": "99th percentile gap (ns)",
        "migrations": "events after which rdtscp reported another CPU",
        "overflow": "the event buffer filled and the CPU stopped early",
        "unexplained_events": "detours beyond the interrupts and context switches the guest kernel counted on the "
                              "CPU (/proc): the hypervisor's or the firmware's (empty: no /proc snapshots, or the "
                              "timer method)",
        "unexplained_lost_min": "lower bound of the CPU time lost to them: the shortest unexplained_events detours "
                                "(fraction)",
    },
    "noise.periods": {
        "host": "node the CPU belongs to (its hostname)",
        "cpu": "CPU", "rank": "0 = strongest",
        "hz": "fundamental frequency of a periodic source (Hz)",
        "strength": "mean phase locking of the events over its harmonics (0..1)",
        "harmonics": "harmonics above the peak threshold",
    },
    "noise.sources": {
        "host": "node the CPU belongs to (its hostname)",
        "cpu": "CPU", "kind": "interrupt or softirq", "source": "/proc/interrupts or /proc/softirqs row",
        "count": "increase over the recording window", "per_s": "count / window (1/s)",
    },
    # noise record with a multi-node launcher (docs/noise.md "Noise on every node")
    "noise.clock_sync": {
        "host": "node", "rank": "its rank in hv_noise_nodes (0: the reference clock)",
        "boot_id": "/proc/sys/kernel/random/boot_id: nodes that share it are one machine",
        "offset_before_ns": "its CLOCK_MONOTONIC_RAW minus rank 0's, before the recording (ns)",
        "rtt_before_ns": "round trip of the exchange the offset comes from (ns)",
        "offset_after_ns": "the same after the recording (ns)", "rtt_after_ns": "its round trip (ns)",
        "drift_ppm": "change of the offset over the recording (parts per million)",
        "precision_ns": "half the larger best round trip: bound of the alignment error (ns)",
        "method": "collector method: spin (TSC loop) or timer (sleep to deadlines, lateness)",
    },
    "noise.alignment": {
        "host_a": "node A", "cpu_a": "CPU of A", "host_b": "node B", "cpu_b": "CPU of B",
        "same_machine": "A and B share a boot id (the pair never compares one physical CPU with itself)",
        "long_a": "detours of A at least min_detour long", "long_b": "the same for B",
        "overlap": "share of long detours overlapping one of the other side (mean of both directions)",
        "overlap_expected": "that share if the other side's detours were placed at random",
        "excess": "(overlap - expected) / (1 - expected): 1 all matched, 0 chance",
        "corr": "Pearson r of the per-window noise fraction",
        "corr_ci_lo": "95% interval of r, low (Fisher z)", "corr_ci_hi": "95% interval of r, high",
        "phase_hz": "frequency of the phase comparison (the strongest common periodic source, Hz)",
        "phase_diff_cycles": "phase difference at phase_hz (cycles, 0..0.5)",
    },
    "noise.windows": {
        "host": "node", "cpu": "CPU", "window": "window index", "t_start_s": "window start, common time base (s)",
        "noise_fraction": "share of the window lost to detours",
    },
    # noise record --attribute: kernel tracepoints time-aligned with the detours (matched, not a rate guess)
    "noise.kernel_events": {
        "cpu": "CPU", "source": "e.g. 'irq 0 timer', 'softirq TIMER', 'local_timer', 'sched_switch to kworker/0:1'",
        "kind": "irq, softirq, vector (irq_vectors), nmi or sched",
        "start_cycles": "entry (or switch-out) time, TSC cycles from the collector's common start",
        "end_cycles": "exit (or switch-in) time, TSC cycles from the collector's common start",
        "complete": "both ends were recorded (else the interval is cut at the first/last record)",
    },
    "noise.attribution": {
        "cpu": "CPU", "event": "detour index k on that CPU",
        "start_ns": "detour start from the recording start (ns)", "duration_ns": "detour duration (ns)",
        "sources": "kernel sources overlapping the detour, chronological, ' + '-joined, or 'unattributed'",
        "primary": "the source with the largest overlap",
        "kernel_events": "kernel trace intervals overlapping the detour",
        "covered": "the kernel trace covered the detour (false after tracefs lost events)",
    },
    "noise.attribution_summary": {
        "cpu": "CPU", "source": "kernel source, or 'unattributed'",
        "detours": "covered detours this source overlaps",
        "detour_share": "detours / covered detours (a detour with two sources counts for both)",
        "lost_ns": "detour time given to this source, split by overlap (ns)",
        "lost_share": "lost_ns / total detour time (the shares and 'unattributed' sum to 1)",
        "kernel_events": "this source's trace intervals within the recording",
        "kernel_events_in_detours": "of those, the ones overlapping a detour",
    },
})


# hpcvar sim jitter (jitSim, docs/jitter-sim.md); all times in cycles of the trace's frequency
TABLES.update({
    "jitter.points": {
        "config": "trace (and alignment) of the configuration",
        "tasks": "number of simulated tasks",
        "replicas": "replicas (derived seeds)",
        "total_cycles": "mean total time T after N phases (cycles)",
        "total_ci_lo_cycles": "95% CI of the mean T over replicas (bootstrap percentile), low (cycles; NaN with one "
                              "replica)",
        "total_ci_hi_cycles": "95% CI of the mean T over replicas, high (cycles; NaN with one replica)",
        "baseline_cycles": "T0: the same workload without jitter (cycles)",
        "slowdown": "T / T0 - 1",
        "slowdown_ci_lo": "95% CI of the slowdown, low (NaN with one replica)",
        "slowdown_ci_hi": "95% CI of the slowdown, high (NaN with one replica)",
        "slowdown_vs_compute": "T / (N * W) - 1",
        "coverage": "T / trace length (above 1: tasks see the same jitter again)",
        "closed_form_slowdown": "closed-form expected slowdown for a periodic trace (NaN: none applies)",
        "absorbed_mean_cycles": "mean over tasks of the jitter absorbed (cycles, mean over replicas)",
        "absorbed_max_cycles": "max over tasks of the jitter absorbed (cycles, mean over replicas)",
        "waiting_mean_cycles": "mean over tasks of the waiting: T_i - CPU work - absorbed (cycles)",
        "waiting_max_cycles": "max over tasks of the waiting (cycles)",
        "sim_s": "wall time of the C core over all replicas (s)",
        "task_phases_per_s": "tasks x phases x replicas / sim_s",
    },
    "jitter.phases": {
        "config": "configuration",
        "tasks": "number of tasks",
        "replica": "replica index",
        "phase": "phase index",
        "end_cycles": "latest start of the next phase over tasks (cycles)",
        "duration_cycles": "end_cycles minus the previous phase's end (cycles)",
    },
})

def columns(name: str) -> list[str]:
    """The declared columns of table ``name``, in order: producers build their frames from these."""
    cols = TABLES.get(name)
    if cols is None:
        raise ResultsError(f"table '{name}' is not declared in hpcvar.results.schema", None,
                           "Declare its columns in schema.TABLES")
    return list(cols)


def check_table(name: str, df: pd.DataFrame | Mapping[str, Any]) -> None:
    """Raise ResultsError unless ``df`` (a DataFrame, or its columns by name) has exactly the columns declared
    for ``name`` (any order)."""
    cols = columns(name)
    have = list(df) if isinstance(df, Mapping) else list(df.columns)
    missing = [c for c in cols if c not in have]
    extra = [c for c in have if c not in TABLES[name]]
    if missing or extra:
        what = "; ".join(x for x in (f"lacks {missing}" if missing else "",
                                     f"has undeclared {extra}" if extra else "") if x)
        raise ResultsError(f"table '{name}' {what}", None,
                           "Fix the producer, or declare the columns in hpcvar.results.schema")


def check_version(version: object, where: str) -> None:
    if version != SCHEMA_VERSION:
        raise ResultsError(
            f"schema version {version!r} is not the version this hpcvar reads ({SCHEMA_VERSION})", where,
            "Read it with the hpcvar version that wrote it (see run.json 'hpcvar_version')")

# hpcvar bench fanin (docs/fanin.md). Key columns of every fanin table: rep (repetition = launch),
# clients (large-buffer), chatter (small-buffer clients), queues (single|dual), depth ("deep" or a number,
# as text), match (any|exact).
_FANIN_KEY = {
    "rep": "repetition index (one MPI launch each)",
    "clients": "large-buffer clients in the point",
    "chatter": "chatter (small-buffer) clients in the point",
    "queues": "root receive queues: single or dual",
    "depth": "posted receives per queue: 'deep' (one per client) or a number (text)",
    "match": "root matching: any (wildcards) or exact (source and tag)",
}
TABLES.update({
    "fanin.points": {
        **_FANIN_KEY,
        "servers": "roots in the job",
        "large_bytes": "large-buffer message size (bytes)",
        "small_bytes": "chatter message size (bytes)",
        "placement": "rank-to-role mapping: fixed or shuffle",
        "seed": "seed of the shuffled mapping of this launch",
        "wait_us": "how ranks waited for MPI: 0 spin in MPI, -1 yield, N sleep N us between tests",
        "window_s": "measured window at the root (s)",
        "large_bytes_total": "large-buffer bytes completed at the roots inside the window (bytes)",
        "aggregate_bytes_per_s": "steady large-buffer rate: bytes completed after a root's first large "
                                 "completion / (last - first completion), summed over roots (bytes/s)",
        "window_bytes_per_s": "large-buffer bytes completed in the window / window, summed over roots (bytes/s)",
        "chatter_bytes_per_s": "chatter bytes completed at the roots / window (bytes/s)",
        "jain_index": "Jain's index over the large-buffer clients' bytes in the window",
        "chatter_jain_index": "Jain's index over the chatter clients' bytes in the window",
        "chatter_rtt_n": "recorded chatter round trips",
        "chatter_rtt_median_ns": "median chatter round trip: request + root's ack (ns)",
        "chatter_rtt_p99_ns": "99th percentile chatter round trip (ns)",
        "chatter_round_trips": "chatter round trips made (recorded or not)",
        "rate_cv": "CV of the root's large-buffer receive rate over the full bins",
        "receives_posted": "receives the roots posted at the start",
        "receives_cancelled": "posted receives cancelled at the end (checked with MPI_Test_cancelled)",
    },
    "fanin.clients": {
        **_FANIN_KEY,
        "rank": "client rank",
        "server_rank": "rank of its root",
        "role": "large or chatter",
        "bytes": "bytes its root completed inside the window (bytes)",
        "messages": "messages its root completed inside the window",
        "messages_total": "messages its root completed, window and drain",
        "bw_bytes_per_s": "bytes / window (bytes/s)",
    },
    "fanin.bins": {
        **_FANIN_KEY,
        "server_rank": "rank of the root",
        "bin": "bin index from the window start",
        "t_start_s": "bin start since the window start (s)",
        "bin_s": "bin width (s)",
        "large_bytes": "large-buffer bytes completed in the bin (bytes)",
        "small_bytes": "chatter bytes completed in the bin (bytes)",
        "large_bytes_per_s": "large_bytes / bin_s (bytes/s)",
        "small_bytes_per_s": "small_bytes / bin_s (bytes/s)",
        "full": "true when the bin lies wholly inside the window",
    },
    "fanin.rtt": {
        **_FANIN_KEY,
        "rank": "chatter client rank",
        "server_rank": "rank of its root",
        "seq": "round-trip sequence number in the point",
        "rtt_ns": "chatter request + root's ack round trip (ns)",
        "t_send_ns": "send time since the client's window start (ns)",
    },
    "fanin.variability": {
        "clients": "large-buffer clients",
        "chatter": "chatter clients",
        "queues": "single or dual",
        "depth": "'deep' or a number (text)",
        "match": "any or exact",
        "runs": "repetitions",
        "mean_bytes_per_s": "mean of the runs' aggregate bandwidth (bytes/s)",
        "run_mean_min": "lowest run's aggregate bandwidth (bytes/s)",
        "run_mean_max": "highest run's aggregate bandwidth (bytes/s)",
        "within_var": "pooled within-run variance of the binned aggregate rate ((bytes/s)^2)",
        "between_var": "variance of the run means of the binned rate ((bytes/s)^2)",
        "between_over_within": "between_var / within_var",
        "cv_between": "CV of the run means",
        "cv_overall": "CV of all bins of all runs",
    },
    # a summary table (Benchmark.summaries): derived from fanin.points, printed by --json as chatter_effect
    "fanin.chatter_effect": {
        "clients": "large-buffer clients",
        "queues": "single or dual",
        "depth": "'deep' or a number (text)",
        "match": "any or exact",
        "chatter": "chatter clients of the point with chatter",
        "without_bytes_per_s": "aggregate large-buffer bandwidth without chatter, mean over repetitions (bytes/s)",
        "with_bytes_per_s": "aggregate large-buffer bandwidth with this chatter, mean over repetitions (bytes/s)",
        "chatter_bytes_per_s": "chatter bandwidth, mean over repetitions (bytes/s)",
        "drop_pct": "100 (1 - with / without): positive when chatter takes bandwidth from the large clients (%)",
    },
})

# hpcvar bench bsp (hpcvar.kinds.bsp, docs/jitter-sim.md "Validation on real runs"). Times are ns since
# rank 0's clock reading after the start barrier of the repetition (one clock for ranks of one host).
TABLES.update({
    "bsp.phases": {
        "rep": "repetition index",
        "rank": "MPI rank",
        "phase": "phase index",
        "cpu": "CPU the rank ran on after the phase's barrier",
        "start_ns": "start of the phase's work (ns)",
        "compute_end_ns": "end of the phase's work (ns)",
        "end_ns": "barrier exit (ns)",
        "compute_ns": "compute_end_ns - start_ns: the work, stretched by any detour (ns)",
        "wait_ns": "end_ns - compute_end_ns: time in the barrier (ns)",
        "phase_ns": "end_ns - start_ns (ns)",
        "work_iters": "loop iterations of the work",
        "calib_quantum_ns": "fastest of 5 timed runs of the work at start-up (ns)",
    },
    "bsp.reps": {
        "rep": "repetition index",
        "ranks": "MPI ranks",
        "phases": "measured phases N",
        "quantum_ns": "work quantum W (ns)",
        "barrier": "mpi or tree",
        "arity": "arity of the tree barrier (0 for mpi)",
        "work_iters": "loop iterations per phase (median over ranks)",
        "calib_quantum_ns": "undisturbed time of the work at start-up (median over ranks) (ns)",
        "total_ns": "T: last barrier exit of the last phase - first start of phase 0 (ns)",
        "per_phase_ns": "T / N (ns)",
        "pure_compute_ns": "N * W (ns)",
        "slowdown_vs_compute": "T / (N * W) - 1 (ratio)",
        "phase_p50_ns": "median phase duration (last barrier exit to last barrier exit) (ns)",
        "phase_p99_ns": "99th percentile phase duration (ns)",
        "phase_max_ns": "longest phase (ns)",
        "compute_mean_ns": "mean compute time over ranks and phases (ns)",
        "compute_max_ns": "longest compute time of any rank (ns)",
        "slowest_compute_mean_ns": "mean over phases of the slowest rank's compute time (ns)",
        "wait_mean_ns": "mean barrier time over ranks and phases (ns)",
        "cpu_changes": "times a rank was seen on another CPU than in its previous phase",
        "common_clock": "1 when all ranks share a host (one clock), 0 otherwise",
        "baseline_per_phase_ns": "T0 / N0 of the --baseline run, mean over its repetitions (ns; NaN without)",
        "slowdown": "(T / N) / (T0 / N0) - 1 against the --baseline run (ratio; NaN without)",
        "excess_per_phase_ns": "T / N - T0 / N0 (ns; NaN without)",
    },
})


# hpcvar sim app (application replay, hpcvar.sim.replay, docs/replay.md)
_REPLAY_KEY = {"mapping": "task mapping: rrn, rrp, random or a mapping file", "model": "network model"}
TABLES.update({
    "replay.replicas": {
        **_REPLAY_KEY, "replica": "replica index", "seed": "seed of the replica (random mapping, jitter offsets)",
        "task": "MPI task (rank in MPI_COMM_WORLD)", "node": "simulated node of the task in this replica",
        "total_s": "predicted end time of the task (s)", "comm_s": "predicted communication time S_p (s)",
        "avg_penalty": "simulated / nominal data time of the task's inter-node sends (ratio)",
    },
    "replay.tasks": {
        **_REPLAY_KEY, "replicas": "replicas combined (medians)", "task": "MPI task", "node": "node (first replica)",
        "total_s": "predicted end time, median over replicas (s)",
        "comm_s": "predicted communication time S_p, median over replicas (s)",
        "total_ci_lo_s": "95% CI of the median end time, low (s; NaN with one replica)",
        "total_ci_hi_s": "95% CI of the median end time, high (s)",
        "comm_ci_lo_s": "95% CI of the median S_p, low (s)", "comm_ci_hi_s": "95% CI of the median S_p, high (s)",
        "avg_penalty": "average penalty of the task's inter-node sends, median over replicas (ratio)",
        "conflicts_none": "inter-node sends that met no conflict (count, first replica)",
        "conflicts_out": "sends that shared their source node (count)",
        "conflicts_in": "sends that shared their destination node (count)",
        "conflicts_in_out": "sends that shared both (count)",
        "measured_total_s": "measured span of the task in the trace (s; NaN without measured times)",
        "measured_comm_s": "measured communication time S_m: sum of the traced MPI call durations (s)",
        "e_abs_pct": "E_abs = |S_p - S_m| / S_m x 100, median over replicas (%)",
    },
    "replay.runs": {
        **_REPLAY_KEY, "replicas": "replicas", "makespan_s": "predicted makespan, median over replicas (s)",
        "mean_e_abs_pct": "mean over tasks of E_abs (%)", "engine": "replay engine: native (C core) or python",
        "replay_s": "time spent in the replay engine over the replicas (s)",
        "events_per_s": "trace rows replayed per second of engine time",
    },
    # hpcvar sim app --breakdown (hpcvar.sim.breakdown): where the error comes from
    "replay.breakdown": {
        **_REPLAY_KEY, "replica": "replica index", "task": "MPI task",
        "phase": "phase index: slice 0..N-1 of the task's measured span (--phases N) where the calls start",
        "phase_start_s": "start of the phase, from the task's first traced row (s)",
        "phase_end_s": "end of the phase, from the task's first traced row (s)",
        "kind": "MPI call kind: the trace's op name (a Sendrecv's two rows are one kind, sendrecv)",
        "calls": "calls of the kind in the phase (a Waitall's requests and a Sendrecv's halves count once)",
        "measured_s": "measured time inside these calls, their share of the union S_m; kinds x phases sum to "
                      "S_m (s; NaN without measured times)",
        "predicted_s": "simulated time inside these calls; kinds x phases sum to S_p (s)",
    },
})


# hpcvar screen (which node, which link: hpcvar.screen, docs/screen.md)
_HOST = "node (its hostname)"
_JUDGED = {
    "value": "the figure (unit in the unit column)", "ci_lo": "95% CI, low", "ci_hi": "95% CI, high",
    "n": "samples", "unit": "unit of value and CI: % | ns | B/s | op/s",
    "load_pct": "other processes' and the hypervisor's share of the CPUs while it was measured (%)",
    "valid": "measured with other processes' load and the hypervisor's steal under 25% of the CPUs",
    "why": "why the measurement is disturbed ('' when valid)",
}
TABLES.update({
    "screen.nodes": {"node": "node index (rank order)", "host": _HOST, "boot_id": "the node's boot id",
                     "cpus": "CPUs the node's ranks may use",
                     "turn": "measurement turn: nodes of one turn share no CPU and are measured together"},
    "screen.load": {"item": "check (before measuring) | node | pair", "a": "node index (pair: first node; else "
                    "-1 or the node)", "b": "second node of a pair (-1 otherwise)", "round": "round (-1 for pairs)",
                    "host": "node whose CPUs are read",
                    "phase": "all (the whole item) | noise | kernel | shm (a part of a node item)",
                    "local": "0 leader rank, 1 its partner (-1 in a part's rows)",
                    "busy_ns": "time the node's CPUs ran processes (/proc/stat user+nice+system) (ns)",
                    "cap_ns": "wall time x the node's CPUs (ns)", "steal_ns": "hypervisor steal (ns)",
                    "own_ns": "CPU time of this rank and its waited-for children (getrusage) (ns)",
                    "throttled_ns": "time the rank's cgroup and its ancestors were throttled by a CPU quota, summed "
                                    "over CPUs (cpu.stat) (ns; NaN: not visible)"},
    "screen.kernel": {"host": _HOST, "round": "round", "cpu": "CPU the kernel thread was pinned to",
                      "call": "call index", "call_ns": "duration of one call of the calibrated kernel (ns)",
                      "start_ns": "start of the call since the kernel phase began (ns)",
                      "iters": "iterations of one call (calibrated on rank 0 at the launch's start)",
                      "ns_per_iter": "call_ns / iters (ns)"},
    "screen.timer": {"host": _HOST, "round": "round", "sample": "sample index",
                     "read_ns": "cost of one clock read, mean of a batch of back-to-back reads (ns)",
                     "resolution_ns": "smallest clock increment seen at start-up (ns)"},
    "screen.shm": {"host": _HOST, "round": "round", "iter": "iteration", "rtt_ns": "8-byte round trip between "
                   "two ranks of the node (ns)", "oneway_ns": "rtt_ns / 2 (ns)"},
    "screen.lat": {"host_a": "first node of the pair", "host_b": "second node", "iter": "iteration",
                   "pass": "0 before the pair's bandwidth test, 1 after it, 2 the recheck after every pair (screens "
                           "stored before 2026-11-27: 0 throughout)",
                   "rtt_ns": "8-byte round trip (ns)", "oneway_ns": "rtt_ns / 2 (ns)"},
    "screen.bw": {"src": "sending node", "dst": "receiving node", "iter": "iteration",
                  "t_ns": "time to send size_bytes and receive an 8-byte answer (ns)",
                  "size_bytes": "message size (bytes)",
                  "bw_bytes_per_s": "size_bytes / (t_ns - the pair's median 8-byte one-way latency) (bytes/s)"},
    "screen.noise": {"host": _HOST, "round": "round", "cpu": "CPU", "length_s": "recorded length (s)",
                     "noise_fraction": "CPU time lost to detours / recorded length (fraction)",
                     "events_per_s": "detours per second", "max_detour_ns": "longest detour (ns)",
                     "preemptions": "times the collector's thread was preempted (nonvoluntary switches)",
                     "overflow": "the collector's event buffer filled"},
    "screen.noise_windows": {"host": _HOST, "round": "round", "cpu": "CPU", "window": "100 ms window index",
                             "lost_fraction": "CPU time lost to detours in the window (fraction)"},
    "screen.node_metrics": {"host": _HOST, "metric": "noise_fraction | longest_detour | compute_rate | "
                            "timer_cost | shm_latency | cpu_throttled (the share of the node's CPU time its "
                            "processes' cgroup was throttled by a CPU quota, %, over all its items; judged by its "
                            "own bound, 1%; no row where cpu.stat was not visible)", **_JUDGED,
                            "z": "modified z-score among the nodes (NaN: not judged)",
                            "candidate": "beyond the threshold on the metric's bad side (an outlier, or a suspect "
                                         "finding when its CI reaches the other nodes' interval)",
                            "outlier": "flagged by the outlier rule (hpcvar.stats.outliers)",
                            "rest_median": "median of the other nodes' values",
                            "throttled_pct": "share of the node's CPUs its processes' cgroup was throttled by a CPU "
                                             "quota while the metric was measured (%; NaN: not visible)",
                            "rest_lo": "low end of the other nodes' interval (the CI of their median widened to "
                                       "their median CI bounds), which an outlier's CI must not reach",
                            "rest_hi": "its high end"},
    "screen.link_metrics": {"src": "sending node (latency: first node of the pair)", "dst": "receiving node",
                            "metric": "link_bandwidth | link_latency", **_JUDGED,
                            "first": "latency: median of the pair's first half of round trips (before the bandwidth "
                                     "test), in ns; NaN for bandwidth",
                            "second": "latency: median of the second half (after the bandwidth test), in ns",
                            "later": "latency: median of the recheck after every pair was measured, in ns (NaN "
                                     "without one)",
                            "src_throttled_pct": "the share of its CPUs the src end's processes' cgroup was "
                                                 "throttled by a CPU quota while the pair was measured (%; NaN: "
                                                 "cpu.stat not visible there)",
                            "dst_throttled_pct": "the same for the dst end"},
    "screen.findings": {"scope": "node (a node's fault) | pair (one link) | expectation",
                        "where": "the node, or the link (a->b, a-b)", "hosts": "the nodes named, comma list",
                        "metric": "the metric", "side": "send | receive | both (a node's links), '' otherwise",
                        "value": "the figure (the median of a node's links)",
                        "reference": "median of the others (the expected bound for an expectation)",
                        "ratio": "value / reference", "z": "modified z-score against the others",
                        "threshold": "the z threshold (3.5)",
                        "links": "links of a node's link finding that stand out (more than half of its links)",
                        "status": "degraded (valid) | suspect (the measurement was disturbed, or a latency not "
                                  "reproduced in its second half)",
                        "why": "why it is suspect", "cost": "what it costs (ratio: +0.5 = 50% longer)",
                        "cost_text": "what the cost is of (hpcvar.screen.cost)",
                        "cause": "a cause measured with it ('' when none): a CPU quota that throttled the node's "
                                 "processes"},
    "screen.expect": {"metric": "the metric", "where": "node or link", "hosts": "nodes, comma list",
                      "value": "the figure", "ci_lo": "its 95% CI, low", "ci_hi": "its 95% CI, high",
                      "lo": "lower bound expected (NaN: none)", "hi": "upper bound expected (NaN: none)",
                      "bound": "the bound as written", "status": "passed | failed | within its CI",
                      "group": "the [[expect]] group that judged it", "source": "file:line of the bound",
                      "valid": "measured without disturbance", "why": "why not", "run": "run id"},
})
