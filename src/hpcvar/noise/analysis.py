"""Analysis of a jitter trace: statistics, periodicity, attribution, collector quality.

Everything here is computed from the trace and its metadata; nothing is assumed about the machine.

- ``cpu_stats``: count, rate, noise fraction (sum of durations / trace length), max, percentiles of the
  durations and of the gaps (linear interpolation, all events), MAD.
- ``spectrum`` / ``periodic_sources``: the periodogram of the event starts, Z(f) = |mean_k exp(-2 pi i f
  t_k)|^2, and its peaks grouped into harmonic series; a source is named by its fundamental in Hz, its
  strength is Z at its strongest harmonic (1: every event on the period; ~1/N: random).
- ``attribution``: per CPU rates of every interrupt / softirq source from the /proc snapshots taken just
  before and after the recording, and which of them fire at the rate of a periodic source (a rate match,
  not a proof: the report says so).
- ``quality``: t_min at the start and the end, TSC frequency over the run against the calibration.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np

from hpcvar.noise.trace import CpuTrace, JitterTrace, recorded_starts

PERCENTILES = (50, 90, 99, 99.9, 99.99)
SPECTRUM_FS_HZ = 10000.0  # event-train sampling rate: periodic sources up to 5 kHz
PEAK_FACTOR = 20.0  # a spectral peak must exceed 20 x the median power
MAX_HARMONIC = 8
RANDOM_FACTOR = 15.0  # random phases: Z ~ Exp(1/N); the max over ~1e4 frequencies is ~ln(1e4)/N = 9/N
CLASS_EDGES_NS = (0.0, 1e3, 1e4, 1e5, 1e6, np.inf)  # duration classes (decades) for per-class periodicity
# ... and the decades centred on those edges: a train whose durations straddle an edge (1 ms bursts, every other
# one holding a 4 ms tick: 0.98 and 1.02 ms) is whole in one of them, while each decade holds half of it, a
# train at half its frequency
# (both bounds as 10^(k -+ 0.5), so that neighbours share one float: 1e3 * sqrt(10) and 1e4 / sqrt(10) differ in
# the last bit, and made classes that only touch look overlapping)
STRADDLE_CLASSES_NS = tuple((float(10.0 ** (k - 0.5)), float(10.0 ** (k + 0.5)))
                            for k in np.log10(CLASS_EDGES_NS[1:-1]))
MIN_CLASS_EVENTS = 20


def _pkey(p: float) -> str:
    return "p" + (f"{p:g}".replace(".", "_")) + "_ns"


def cpu_stats(trace: JitterTrace, c: CpuTrace) -> dict:
    ns = 1e9 / trace.freq_hz
    d = c.duration * ns
    g = c.gap * ns
    length_ns = c.length * ns
    out = {
        "cpu": c.cpu,
        "t_min_ns": c.meta["t_min_cycles"] * ns if "t_min_cycles" in c.meta else None,
        "threshold_ns": c.meta["threshold_cycles"] * ns if "threshold_cycles" in c.meta else None,
        "events": c.events,
        "length_s": length_ns / 1e9,
        "events_per_s": c.events / (length_ns / 1e9) if length_ns else 0.0,
        "noise_fraction": float(c.duration.sum() / c.length) if c.length else 0.0,
        "max_ns": float(d.max()) if c.events else 0.0,
        "mean_ns": float(d.mean()) if c.events else 0.0,
        "mad_ns": float(np.median(np.abs(d - np.median(d)))) if c.events else 0.0,
    }
    for p in PERCENTILES:
        out[_pkey(p)] = float(np.percentile(d, p)) if c.events else 0.0
    for p in PERCENTILES:
        out["gap_" + _pkey(p)] = float(np.percentile(g, p)) if c.events else 0.0
    return out


# ---- periodicity ---------------------------------------------------------------------------------------------
def event_train(trace: JitterTrace, c: CpuTrace, fs: float = SPECTRUM_FS_HZ) -> np.ndarray:
    """Number of event starts per 1/fs bin over the trace."""
    t = recorded_starts(c) / trace.freq_hz
    n = max(int(np.ceil(c.length / trace.freq_hz * fs)), 1)
    return np.bincount(np.minimum((t * fs).astype(np.int64), n - 1), minlength=n).astype(float)


def spectrum(trace: JitterTrace, c: CpuTrace, fs: float = SPECTRUM_FS_HZ) -> tuple[np.ndarray, np.ndarray]:
    """The point-process periodogram of the event starts: Z(f) = |sum_k exp(-2 pi i f t_k)|^2 / N^2.

    Computed as the FFT of the count series (1/fs bins, zero-padded 2x); Z(f) is the squared mean
    resultant length of the event phases at f: 1 when every event is locked to the period 1/f, about 1/N
    for random times. Long traces lower fs so that the series stays below 2^25 bins.
    """
    x = event_train(trace, c, fs)
    while x.size > (1 << 25):
        fs /= 2
        x = event_train(trace, c, fs)
    n = 1 << int(np.ceil(np.log2(max(x.size, 2)) + 1))
    z = np.abs(np.fft.rfft(x, n)) ** 2 / max(c.events, 1) ** 2
    f = np.fft.rfftfreq(n, 1.0 / fs)
    return f, z


def local_peaks(x: np.ndarray, height: float) -> np.ndarray:
    """Indices of the local maxima of ``x`` at least ``height`` (a flat top: its middle, the left one of two),
    never its first or last sample: ``scipy.signal.find_peaks(x, height=height, distance=2)[0]`` (two such
    maxima are always two samples apart or more; tests/unit/test_noise_formats.py compares them), without
    importing scipy.signal, which takes 1.2 s here (scipy 1.17), more than a short recording's analysis."""
    n = x.size
    if n < 3:
        return np.empty(0, dtype=np.intp)
    change = np.flatnonzero(x[1:] != x[:-1]) + 1
    starts = np.concatenate(([0], change))  # the runs of equal values: first index, last index, value
    ends = np.concatenate((change - 1, [n - 1]))
    v = x[starts]
    k = np.arange(1, starts.size - 1)
    k = k[(v[k - 1] < v[k]) & (v[k + 1] < v[k]) & (v[k] >= height)]
    return (starts[k] + ends[k]) // 2


def periodic_sources(f: np.ndarray, p: np.ndarray, top: int = 5, events: int = 0) -> list[dict]:
    """Peaks of the periodogram grouped into harmonic series, strongest first.

    A peak exceeds PEAK_FACTOR x the median of Z and, given ``events`` N, RANDOM_FACTOR/N (random phases
    give about 1/N). Every peak is a candidate fundamental f_c with the score S(f_c) = mean of max Z near k f_c,
    k = 1..min(MAX_HARMONIC, f_max / f_c): an event train with period T has Z high at every multiple of 1/T,
    while its sub-multiples miss some. Repeatedly, the best-scoring candidate is taken, replaced by the
    lowest candidate of which it is a multiple and that scores at least 60% as well (so 250 Hz, not
    500 Hz, names a 4 ms train), its multiples are removed, and the fundamental is refined by a
    least-squares fit through its harmonics. ``strength`` = S.
    """
    if f.size < 4:
        return []
    df = f[1] - f[0]
    med = float(np.median(p[1:]))
    floor = max(med * PEAK_FACTOR, RANDOM_FACTOR / events if events else 0.0, 1e-300)
    idx = local_peaks(p, floor)
    idx = idx[f[idx] >= 1.0]
    if idx.size == 0:
        return []
    fmax = float(f[-1])
    tol = lambda x: max(2.0 * df, 0.003 * x)  # noqa: E731

    def z_near(x: float) -> tuple[float, float]:
        i = int(round(x / df))
        w = max(int(np.ceil(tol(x) / df)), 1)
        lo, hi = max(i - w, 0), min(i + w + 1, f.size)
        if lo >= hi:
            return 0.0, x
        j = lo + int(np.argmax(p[lo:hi]))
        return float(p[j]), float(f[j])

    def score(fc: float) -> float:
        kmax = max(1, min(MAX_HARMONIC, int(fmax / fc)))
        return float(np.mean([z_near(k * fc)[0] for k in range(1, kmax + 1)]))

    def multiple(fx: float, fc: float) -> bool:
        k = round(fx / fc)
        return k >= 1 and abs(fx - k * fc) <= tol(fx)

    cand = [float(x) for x in f[idx]]
    scores = {fc: score(fc) for fc in cand}
    out: list[dict] = []
    while cand and len(out) < top:
        best = max(cand, key=lambda x: scores[x])
        if scores[best] < floor:
            break
        f0 = min((fc for fc in cand if multiple(best, fc) and scores[fc] >= 0.6 * scores[best]), default=best)
        kmax = max(1, min(MAX_HARMONIC, int(fmax / f0)))
        hs = [z_near(k * f0) for k in range(1, kmax + 1)]
        ks = np.arange(1, kmax + 1, dtype=float)
        zs = np.array([h[0] for h in hs])
        fs_ = np.array([h[1] for h in hs])
        fit = float((ks * fs_ * zs).sum() / (ks * ks * zs).sum()) if zs.sum() > 0 else f0
        out.append({"hz": fit, "strength": scores[f0], "period_ms": 1e3 / fit,
                    "harmonics": int((zs >= floor).sum()),
                    "harmonic_hz": [float(x) for x, z in zip(fs_, zs, strict=True) if z >= floor]})
        cand = [fc for fc in cand if not (multiple(fc, f0) or multiple(fc, fit))]
    return out


def sources_by_class(trace: JitterTrace, c: CpuTrace, top: int = 5, tick_hz: float | None = None,
                     spec: tuple[np.ndarray, np.ndarray] | None = None) -> list[dict]:
    """Periodic sources of all events and of each duration decade (<1 us, 1-10 us, ..., >1 ms) with at
    least MIN_CLASS_EVENTS events: a rare periodic detour (a 1 ms burst at 100 Hz among 30,000 short
    VM exits) is invisible in the periodogram of all events but dominates its own class. Sources at the
    same frequency (0.5%) are merged, keeping the strongest; each names its ``class_ns`` range. ``tick_hz``: the
    kernel's tick (CONFIG_HZ), never folded into another source (fold_harmonics); ``spec``: ``spectrum(trace, c)``
    when the caller has it."""
    from hpcvar.noise.trace import cpu_trace_from_events

    ns = 1e9 / trace.freq_hz
    d_ns = c.duration * ns
    found = []
    f, p = spectrum(trace, c) if spec is None else spec
    for s_ in periodic_sources(f, p, top, c.events):
        found.append(s_ | {"class_ns": [0.0, None], "class_events": int(c.events)})
    starts = recorded_starts(c)
    for lo, hi in [*zip(CLASS_EDGES_NS[:-1], CLASS_EDGES_NS[1:], strict=True), *STRADDLE_CLASSES_NS]:
        m = (d_ns >= lo) & (d_ns < hi)
        if m.sum() < MIN_CLASS_EVENTS or m.all():
            continue
        sub = cpu_trace_from_events(c.cpu, starts[m], np.zeros(int(m.sum()), dtype=np.int64), c.length)
        f, p = spectrum(trace, sub)
        for s_ in periodic_sources(f, p, top, sub.events):
            found.append(s_ | {"class_ns": [lo, None if np.isinf(hi) else hi], "class_events": int(sub.events)})
    found.sort(key=lambda x: -x["strength"])
    out: list[dict] = []
    for s_ in found:
        if not any(abs(s_["hz"] - o["hz"]) <= 0.005 * o["hz"] for o in out):
            out.append(s_)
    # a sampler on a grid makes sources of its own; one whose deadlines are dithered (hv_noise_collect since
    # 2026-11-29) does not
    grid = 1e9 / float(trace.meta["interval_ns"]) if trace.meta.get("method") == "timer" and \
        float(trace.meta.get("interval_ns") or 0) > 0 and trace.meta.get("deadlines") != "dithered" else None
    return fold_harmonics(out, trace.freq_hz / c.length if c.length else 0.0, grid, tick_hz)[:top]


MAX_FOLD = 32  # a source at k x another's frequency, k = 2..MAX_FOLD, is that source's harmonic
COMB_MIN = 20  # ... when that frequency is 20 tolerances or more (a chance match within one: 10% at most)
# ... unless it is a train of its own: it dominates the spectrum of its class (strength) and its class holds at
# least half the events a train at its frequency has over the recording (a harmonic peak of a slower train has
# fewer); the slower source is then that train seen in part (a class holding every other burst), not its root
OWN_TRAIN_STRENGTH = 0.5
OWN_TRAIN_EVENTS = 0.5
TICK_TOL = 0.005  # a source within 0.5% of CONFIG_HZ is the tick (tick_check)


def _is_tick(s_: dict, tick_hz: float | None) -> bool:
    return tick_hz is not None and tick_hz > 0 and abs(s_["hz"] - tick_hz) <= TICK_TOL * tick_hz


def fold_harmonics(sources: list[dict], df: float, grid_hz: float | None = None,
                   tick_hz: float | None = None) -> list[dict]:
    """Sources (strongest first) without the harmonics of others: a source at k x f of another source at f
    (k = 2..MAX_FOLD, within max(3 df, 0.1%)) is that source's harmonic, listed in its ``folded_hz`` and not as a
    source of its own (a 250 Hz tick's train has peaks at 4250 and 4750 Hz too, and the per-class spectra can
    find them without their fundamental). With the timer method, detours are seen on a grid of the sampling
    interval: sources at multiples of its frequency ``grid_hz`` are the sampler's, not the machine's, and are
    left out. A source that is a train of its own (``own_train``) is never folded; a slower source in an
    overlapping duration class at its frequency / k is that train seen in part, listed in its ``partial_hz``.
    A source at the kernel's tick ``tick_hz`` is never folded: in a VM whose host interrupts it at 1 kHz, the 250 Hz
    tick looked like that train seen in part, or a weak 62.7 Hz source's 4th harmonic (CI, 2026-11-28). Order
    kept."""
    def near(x: float, f: float, kmin: int) -> bool:
        k, tol = round(x / f), max(3.0 * df, 1e-3 * x)
        # a comb as dense as the tolerance matches anything: 1 Hz (a 1 s trace replayed in a loop) has a multiple
        # within 0.86 Hz of every frequency, and took a 100 Hz source as its harmonic
        return kmin <= k <= MAX_FOLD and f >= COMB_MIN * tol and abs(x - k * f) <= tol

    def own_train(s_: dict) -> bool:
        return (s_.get("strength", 0.0) >= OWN_TRAIN_STRENGTH and df > 0
                and s_.get("class_events", 0) >= OWN_TRAIN_EVENTS * s_["hz"] / df)

    def overlap(a: dict, b: dict) -> bool:
        (alo, ahi), (blo, bhi) = a.get("class_ns", [0.0, None]), b.get("class_ns", [0.0, None])
        return alo < (np.inf if bhi is None else bhi) and blo < (np.inf if ahi is None else ahi)

    kept = [dict(s_) for s_ in sources if not (grid_hz and near(s_["hz"], grid_hz, 1))]
    by_hz = sorted(kept, key=lambda s_: s_["hz"])
    folded: set[int] = set()
    # a slower source in an overlapping class, at a sub-multiple of a train of its own, is that train in part
    for s_ in by_hz:
        if own_train(s_):
            for f0 in by_hz:
                if f0 is not s_ and id(f0) not in folded and not _is_tick(f0, tick_hz) and overlap(f0, s_) and \
                        near(s_["hz"], f0["hz"], 2):
                    s_.setdefault("partial_hz", []).append(f0["hz"])
                    folded.add(id(f0))
    for i, s_ in enumerate(by_hz):
        if id(s_) in folded or own_train(s_) or _is_tick(s_, tick_hz):
            continue
        for f0 in by_hz[:i]:
            if id(f0) not in folded and near(s_["hz"], f0["hz"], 2):
                f0.setdefault("folded_hz", []).append(s_["hz"])
                folded.add(id(s_))
                break
    return [s_ for s_ in kept if id(s_) not in folded]


def tick_check(f: np.ndarray, p: np.ndarray, sources: list[dict], hz: float | None) -> dict | None:
    """Is the kernel tick (CONFIG_HZ) in the spectrum? ``found`` when a source's fundamental or one of its
    harmonics lies within 0.5% of it; ``locking`` is Z at the tick frequency."""
    if not hz:
        return None
    i = int(np.argmin(np.abs(f - hz)))
    lo, hi = max(i - 2, 0), min(i + 3, f.size)
    hit = [s for s in sources if any(abs(h - hz) <= max(TICK_TOL * hz, 2 * (f[1] - f[0])) for h in s["harmonic_hz"])
           or _is_tick(s, hz)]
    return {"config_hz": hz, "locking": float(p[lo:hi].max()), "found": bool(hit),
            "as_fundamental": any(_is_tick(s, hz) for s in hit)}


def kernel_hz() -> int | None:
    """CONFIG_HZ from /proc/config.gz or /boot/config-<release>, None when unknown."""
    import platform

    for path in ("/proc/config.gz", f"/boot/config-{platform.release()}"):
        try:
            raw = gzip.open(path).read() if path.endswith(".gz") else Path(path).read_bytes()
        except OSError:
            continue
        m = re.search(rb"^CONFIG_HZ=(\d+)", raw, re.M)
        if m:
            return int(m.group(1))
    return None


# ---- attribution from /proc snapshots ----------------------------------------------------------------------
def parse_interrupts(text: str) -> dict[str, list[int]]:
    """/proc/interrupts or /proc/softirqs -> {source label: per-CPU counts}."""
    lines = text.splitlines()
    if not lines:
        return {}
    ncpu = len(lines[0].split())
    out = {}
    for line in lines[1:]:
        if ":" not in line:
            continue
        name, rest = line.split(":", 1)
        parts = rest.split()
        counts = []
        for x in parts[:ncpu]:
            if not x.isdigit():
                break
            counts.append(int(x))
        desc = " ".join(parts[len(counts):])
        label = name.strip() + (f" ({desc})" if desc else "")
        out[label] = counts + [0] * (ncpu - len(counts))
    return out


USER_HZ = 100.0  # /proc/stat counts CPU time in ticks of 1/USER_HZ s (100 on Linux)


def parse_stat(text: str) -> dict:
    out: dict = {"cpus": {}}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if re.fullmatch(r"cpu\d+", parts[0]):
            v = [int(x) for x in parts[1:]]
            out["cpus"][int(parts[0][3:])] = {"irq": v[5] if len(v) > 5 else 0,
                                             "softirq": v[6] if len(v) > 6 else 0,
                                             "steal": v[7] if len(v) > 7 else 0}
        elif parts[0] == "ctxt":
            out["ctxt"] = int(parts[1])
    return out


def attribution(trace: JitterTrace, periods_by_cpu: dict[int, list[dict]] | None = None,
                rate_tol: float = 0.10) -> dict:
    """Per-CPU source rates over the recording window and their rate matches with periodic sources."""
    before, after = trace.meta.get("proc_before") or {}, trace.meta.get("proc_after") or {}
    window_s = (trace.meta.get("window_mono_ns") or 0) / 1e9
    if not before or not after or window_s <= 0:
        return {"available": False, "note": "the trace has no /proc snapshots (not recorded by hpcvar)"}
    sources: list[dict] = []
    for kind in ("interrupts", "softirqs"):
        b, a = parse_interrupts(before.get(kind) or ""), parse_interrupts(after.get(kind) or "")
        for label, ca in a.items():
            cb = b.get(label, [0] * len(ca))
            for c in trace.cpus:
                if c.cpu < len(ca):
                    delta = ca[c.cpu] - (cb[c.cpu] if c.cpu < len(cb) else 0)
                    if delta > 0:
                        sources.append({"cpu": c.cpu, "kind": kind[:-1] if kind == "interrupts" else "softirq",
                                        "source": label, "count": delta, "per_s": delta / window_s})
    sb, sa = parse_stat(before.get("stat") or ""), parse_stat(after.get("stat") or "")
    steal = {c.cpu: (sa["cpus"].get(c.cpu, {}).get("steal", 0) - sb["cpus"].get(c.cpu, {}).get("steal", 0))
             / USER_HZ for c in trace.cpus}
    matches = []
    for c in trace.cpus:
        for per in (periods_by_cpu or {}).get(c.cpu, []):
            for s in sources:
                if s["cpu"] == c.cpu and abs(s["per_s"] - per["hz"]) <= rate_tol * per["hz"]:
                    matches.append({"cpu": c.cpu, "hz": per["hz"], "source": s["source"], "per_s": s["per_s"],
                                    "how": f"rate within {rate_tol:.0%} (a guess from counts, not a time match)"})
    sources.sort(key=lambda s: (s["cpu"], -s["per_s"]))
    return {"available": True, "window_s": window_s, "sources": sources, "matches": matches,
            "steal_s": steal, "context_switches_all_cpus": sa.get("ctxt", 0) - sb.get("ctxt", 0),
            "cgroup_throttled_s": _throttled_s(before, after),
            "thread_context_switches": {c.cpu: {"voluntary": c.meta.get("voluntary_ctxt_switches"),
                                                "nonvoluntary": c.meta.get("nonvoluntary_ctxt_switches")}
                                        for c in trace.cpus}}


# ---- collector quality -------------------------------------------------------------------------------------
def quality(trace: JitterTrace) -> dict:
    m = trace.meta
    ns = 1e9 / trace.freq_hz
    q: dict = {"tsc_hz": trace.freq_hz, "invariant_tsc": m.get("invariant_tsc"),
         "calib_spread_ppm": m.get("tsc_calib_spread_ppm"), "tsc_hz_over_run": m.get("tsc_hz_over_run"),
         "in_vm": (m.get("hypervisor") == 1) if "hypervisor" in m else None, "cpus": []}
    if m.get("tsc_hz_over_run"):
        q["freq_drift_ppm"] = (m["tsc_hz_over_run"] - trace.freq_hz) / trace.freq_hz * 1e6
    for c in trace.cpus:
        cm = c.meta
        row = {"cpu": c.cpu}
        if "t_min_cycles" in cm:
            row.update(t_min_ns=cm["t_min_cycles"] * ns, t_min_end_ns=cm.get("t_min_end_cycles", 0) * ns,
                       t_min_drift_ns=(cm.get("t_min_end_cycles", 0) - cm["t_min_cycles"]) * ns)
        if cm.get("iterations"):
            busy = c.length - int(c.duration.sum())
            row["loop_ns"] = busy / cm["iterations"] * ns
        for k in ("migrations", "overflow", "mlocked", "rt_prio"):
            if k in cm:
                row[k] = cm[k]
        q["cpus"].append(row)
    return q


def unexplained(trace: JitterTrace, c: CpuTrace, att: dict) -> dict | None:
    """Detours of ``c`` that the guest kernel cannot have caused, counted from /proc (None without snapshots).

    Every detour the kernel causes on a CPU starts with an event it counts: an interrupt on that CPU
    (/proc/interrupts: the tick, IPIs, devices; softirqs run on their exit) or a switch away from the collector's
    thread. More detours than those events are someone else's: a VM's hypervisor (its exits to the host, which
    the guest neither sees nor counts as steal), or on bare metal the firmware (SMIs). Since each guest event
    explains at most one detour, the (detours - events) shortest detours are a lower bound on the time lost to
    them (a CI VM lost 6.5 % of each CPU at 21,000 detours/s of 1-3 us against 290 guest interrupts/s)."""
    if not att.get("available") or trace.meta.get("method") == "timer":  # a sleeping collector: one wake per sample
        return None
    irq = sum(s["count"] for s in att["sources"] if s["cpu"] == c.cpu and s["kind"] == "interrupt")
    switches = sum(int(c.meta.get(k) or 0) for k in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"))
    extra = max(c.events - irq - switches, 0)
    lost = float(np.sort(c.duration)[:extra].sum()) if extra else 0.0
    return {"guest_events": irq + switches, "events": extra,
            "lost_fraction_min": lost / c.length if c.length else 0.0}


def analyze(trace: JitterTrace, top: int = 5) -> dict:
    """The full report: per CPU statistics and periods, attribution, quality."""
    cpus, periods = [], {}
    khz = kernel_hz()
    for c in trace.cpus:
        s = cpu_stats(trace, c)
        f, p = spectrum(trace, c)
        s["periods"] = sources_by_class(trace, c, top, khz, (f, p))
        s["tick"] = tick_check(f, p, s["periods"], khz)
        periods[c.cpu] = s["periods"]
        cpus.append(s)
    m = trace.meta
    att = attribution(trace, periods)
    for s, c in zip(cpus, trace.cpus, strict=True):
        s["unexplained"] = unexplained(trace, c, att)
    return {"freq_hz": trace.freq_hz, "kernel": m.get("kernel"), "kernel_hz": khz,
            "source": m.get("source"), "cpus": cpus, "quality": quality(trace), "attribution": att}


# The collector runs alone on its CPU: a few preemptions a second come from kernel threads; tens a second mean
# other user processes were scheduled there (the recording then measured their load, not the OS).
PREEMPTIONS_PER_S = 10.0


def _throttled_s(before: dict, after: dict) -> float | None:
    """Seconds the collector's cgroup (and its ancestors) was throttled by a CPU quota over the window, summed
    over CPUs (hv_noise_collect reads cpu.stat beside /proc; None: not visible, or an older recording)."""
    b, a = before.get("cgroup_throttled_ns"), after.get("cgroup_throttled_ns")
    if not isinstance(b, int | float) or not isinstance(a, int | float):
        return None
    return max(0.0, float(a) - float(b)) / 1e9


# a recording whose cgroup was throttled this share of its CPU time or more has the quota named as a cause
THROTTLED_SHARE = 0.01


def throttle_cause(res: dict) -> str:
    """The CPU quota that held the collector back, when its cgroup was throttled THROTTLED_SHARE or more of the
    recorded CPU time ('' otherwise). A throttled group waits, every thread of it, until its period ends: each
    wait is a detour of every CPU it records and a preemption of each collector thread."""
    att = res.get("attribution") or {}
    thr, window, ncpu = att.get("cgroup_throttled_s"), att.get("window_s") or 0, len(res.get("cpus") or [])
    if not thr or not window or not ncpu or thr / (window * ncpu) < THROTTLED_SHARE:
        return ""
    return (f"the collector's cgroup was throttled by a CPU quota for {100 * thr / (window * ncpu):.1f}% of the "
            "recorded CPU time (cpu.stat): a CPU limit on this job or container, which its processes get too; "
            "record without the limit to see the OS alone")


def preemption_suspicion(res: dict, cpu) -> str:
    """Why the recording of ``cpu`` measured load rather than OS noise ('' when it did not): the collector's
    thread was preempted more than PREEMPTIONS_PER_S times a second (``res``: a noise record result), unless
    its cgroup's CPU quota throttled it (``throttle_cause``): a throttled group's threads are switched out as
    if preempted, with no other process involved."""
    att = res.get("attribution") or {}
    window = att.get("window_s") or 0
    if throttle_cause(res):
        return ""
    preempt = ((att.get("thread_context_switches") or {}).get(str(cpu)) or {}).get("nonvoluntary") or 0
    if window and preempt / window > PREEMPTIONS_PER_S:
        return (f"the collector was preempted {preempt} times ({preempt / window:.0f}/s): other processes shared "
                f"CPU {cpu}, so this is load, not OS noise")
    return ""


def recording_suspicion(res: dict) -> str:
    """Why a noise recording (a noise record result) is suspect as a whole ('' when no CPU of it is)."""
    for c in res.get("cpus") or []:
        why = preemption_suspicion(res, c.get("cpu"))
        if why:
            return why
    return ""
