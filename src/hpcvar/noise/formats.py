"""Jitter trace files: the native ``.jtr`` format and the exchange formats.

Formats (docs/formats.md, "Jitter traces"):

``jtr``       native, binary, versioned, many CPUs in one file, full metadata (written by hv_noise_collect).
``text``      the paper's two-column text: ``jitter_duration cycles_to_next_jitter`` in cycles per line;
              ``#`` comments; ``# freq_hz F`` gives the frequency, ``# cpu C [lead_in_cycles N]`` starts a CPU.
``loggopsim`` LogGOPSim / netgauge noise traces: ``<start_ns>\\t<duration_ns>`` per line, one CPU.
``csv``       ``cpu,duration_cycles,gap_cycles,start_cycles,start_ns,duration_ns`` with ``# freq_hz=F``.

``load_trace(path, freq_hz=None, fmt=None)`` picks the format from ``fmt``, else the extension, else the
content; ``save_trace(trace, path, fmt=None)`` writes one. Every parse error names ``file:line`` (text) or
``file:byte N`` (binary).
"""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path

import numpy as np

from hpcvar.errors import InputFileError, UsageError
from hpcvar.noise.trace import CpuTrace, JitterTrace, cpu_trace_from_events, recorded_starts

JTR_MAGIC = b"HVJTR\r\n\x1a"
JTR_VERSION = 1
_HDR = struct.Struct("<8sIIdQ")  # magic, version, ncpus, freq_hz, meta_len
_CPU = struct.Struct("<IIQQQ")  # cpu, flags, nevents, lead_in_cycles, meta_len
FLAG_OVERFLOW, FLAG_MIGRATED = 1, 2

FORMATS = ("jtr", "text", "loggopsim", "csv")
EXTENSIONS = {".jtr": "jtr", ".txt": "text", ".tc": "text", ".2col": "text", ".noise": "loggopsim",
              ".lgs": "loggopsim", ".ng": "loggopsim", ".csv": "csv"}


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (np.ndarray, Path)):
        return o.tolist() if isinstance(o, np.ndarray) else str(o)
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


# Bounds of a trace file: beyond them a value is damage or a typo, never a recording. Cycle counts are int64
# arrays whose sums (trace length, start times) must not wrap; a trace is at most MAX_TIME_S long.
MAX_CYCLES = 1 << 62
MAX_CPU = 1 << 20


def _cycles(text: str, what: str) -> int:
    """A non-negative cycle count below MAX_CYCLES (ValueError naming ``what`` otherwise)."""
    v = int(text)
    if v < 0:
        raise ValueError(f"negative {what}")
    if v >= MAX_CYCLES:
        raise ValueError(f"{what} {text[:30]} is beyond {MAX_CYCLES} cycles")
    return v


def _file_freq(text: str, path, line: int) -> float:
    """A '# freq_hz' header value: finite, positive, at most MAX_FREQ_HZ."""
    from hpcvar.units import MAX_FREQ_HZ

    try:
        f = float(text)
    except ValueError:
        raise InputFileError(f"'{text[:40]}' is not a frequency", str(path), line) from None
    if not 0 < f <= MAX_FREQ_HZ:  # also nan and inf
        raise InputFileError(f"frequency {text[:40]} Hz is not in (0, {MAX_FREQ_HZ:g}]", str(path), line,
                             todo="Fix the 'freq_hz' header")
    return f


def _check_span(trace: JitterTrace, where: str) -> JitterTrace:
    """Refuse a trace whose frequency is absurd or whose CPUs last beyond MAX_TIME_S (or MAX_CYCLES): their
    int64 start times would wrap."""
    from hpcvar.units import MAX_FREQ_HZ, MAX_TIME_S

    if not 0 < trace.freq_hz <= MAX_FREQ_HZ:
        raise InputFileError(f"frequency {trace.freq_hz} Hz is not in (0, {MAX_FREQ_HZ:g}]", where,
                             todo="Fix the trace's frequency or give --freq")
    for c in trace.cpus:
        total = int(c.meta.get("lead_in_cycles", 0)) + int(sum(c.duration.tolist())) + int(sum(c.gap.tolist()))
        if total >= MAX_CYCLES or total / trace.freq_hz > MAX_TIME_S:
            raise InputFileError(f"CPU {c.cpu} lasts {total} cycles ({total / trace.freq_hz:.3g} s): beyond any "
                                 f"recording (at most {MAX_TIME_S:g} s)", where,
                                 todo="The trace is damaged, or its frequency is wrong")
    return trace


MAX_NS = 1e17  # units.MAX_TIME_S in ns


def _cpu_number(text: str) -> int:
    v = int(text)
    if not 0 <= v < MAX_CPU:
        raise ValueError(f"CPU {text[:30]} is not in 0..{MAX_CPU - 1}")
    return v


def _bin_error(what: str, path, offset: int, todo: str | None = None) -> InputFileError:
    e = InputFileError(what, str(path), todo=todo)
    e.where = f"{path}:byte {offset}"
    return e


# ---- native .jtr ------------------------------------------------------------------------------------------
_TODO_TRUNC = "The file is truncated or not a .jtr trace; record it again"


class _JtrReader:
    """The bytes of a .jtr file read in order, each error naming the byte offset."""

    def __init__(self, buf: bytes, path: Path):
        self.buf, self.path, self.off = buf, path, 0

    def take(self, n: int, what: str) -> bytes:
        if self.off + n > len(self.buf):
            raise _bin_error(f"truncated {what} (needs {n} bytes, {len(self.buf) - self.off} left)", self.path,
                             self.off, _TODO_TRUNC)
        b = self.buf[self.off:self.off + n]
        self.off += n
        return b

    def meta(self, n: int, what: str) -> dict:
        at = self.off
        b = self.take(n, what)
        try:
            m = json.loads(b.decode()) if b else {}
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise _bin_error(f"metadata is not JSON ({e})", self.path, at) from None
        if not isinstance(m, dict):
            raise _bin_error("metadata is not a JSON object", self.path, at)
        return m

    def events(self, n: int, what: str, cpu: int) -> np.ndarray:
        at = self.off
        arr = np.frombuffer(self.take(8 * n, f"{what}s of CPU {cpu}"), dtype="<i8").astype(np.int64)
        bad = np.flatnonzero(arr < 0)
        if bad.size:
            k = int(bad[0])
            raise _bin_error(f"negative {what} {arr[k]} at CPU {cpu} event {k}", self.path, at + 8 * k,
                             "The trace is corrupt; record it again")
        return arr

    def cpu(self, i: int) -> CpuTrace:
        cpu, flags, n, lead, cmlen = _CPU.unpack(self.take(_CPU.size, f"header of CPU block {i}"))
        cmeta = self.meta(cmlen, f"metadata of CPU {cpu}")
        d = self.events(n, "duration", cpu)
        g = self.events(n, "gap", cpu)
        cmeta["lead_in_cycles"] = int(lead)
        cmeta["flags"] = int(flags)
        return CpuTrace(int(cpu), d, g, cmeta)


def read_jtr(path) -> JitterTrace:
    path = Path(path)
    try:
        buf = path.read_bytes()
    except OSError as e:
        raise InputFileError(f"cannot read the trace: {e.strerror}", str(path)) from None
    if len(buf) < _HDR.size:
        raise _bin_error(f"truncated header ({len(buf)} of {_HDR.size} bytes)", path, len(buf), _TODO_TRUNC)
    magic, version, ncpus, freq, mlen = _HDR.unpack_from(buf, 0)
    if magic != JTR_MAGIC:
        raise _bin_error("not a .jtr jitter trace (bad magic)", path, 0,
                         "Give a .jtr file, or --from text/loggopsim/csv for other formats")
    if version != JTR_VERSION:
        raise _bin_error(f"unsupported .jtr version {version} (this hpcvar reads {JTR_VERSION})", path, 8,
                         "Convert it with the hpcvar version that wrote it")
    r = _JtrReader(buf, path)
    r.off = _HDR.size
    meta = r.meta(mlen, "metadata")
    cpus = [r.cpu(i) for i in range(ncpus)]
    if r.off != len(buf):
        raise _bin_error(f"{len(buf) - r.off} unexpected bytes after the last CPU block", path, r.off,
                         "The file is not a valid .jtr trace")
    meta.setdefault("source", str(path))
    if not (freq > 0):
        raise _bin_error(f"frequency {freq} is not positive", path, 16)
    return _check_span(JitterTrace(float(freq), cpus, meta), str(path))


def jtr_bytes(trace: JitterTrace) -> bytes:
    meta = json.dumps(trace.meta, default=_json_default).encode()
    parts = [_HDR.pack(JTR_MAGIC, JTR_VERSION, len(trace.cpus), float(trace.freq_hz), len(meta)), meta]
    for c in trace.cpus:
        cm = {k: v for k, v in c.meta.items() if k not in ("lead_in_cycles", "flags")}
        cmb = json.dumps(cm, default=_json_default).encode()
        parts.append(_CPU.pack(c.cpu, int(c.meta.get("flags", 0)), c.events, int(c.meta.get("lead_in_cycles", 0)),
                               len(cmb)))
        parts += [cmb, c.duration.astype("<i8").tobytes(), c.gap.astype("<i8").tobytes()]
    return b"".join(parts)


def write_jtr(trace: JitterTrace, path) -> None:
    from hpcvar.results import atomic_write_bytes

    atomic_write_bytes(Path(path), jtr_bytes(trace))


# ---- two-column text (the paper's form) ------------------------------------------------------------------------
_FREQ_RE = re.compile(r"freq_hz[\s=:]+([0-9.eE+]+)")
_CPU_RE = re.compile(r"^#\s*cpu\s+(\d+)(?:\s+lead_in_cycles\s+(\d+))?\s*$")


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except OSError as e:
        raise InputFileError(f"cannot read the trace: {e.strerror}", str(path)) from None
    except UnicodeDecodeError:
        raise InputFileError("the file is not text", str(path),
                             todo="Binary traces are hpcvar's .jtr, which this is not: give a .jtr, text, "
                                  "LogGOPSim or CSV trace") from None


def _need_freq(freq_hz, path) -> float:
    if freq_hz is None:
        raise UsageError(f"{path} does not say its frequency", "--freq",
                         "Give the cycles-per-second of the machine that recorded it, e.g. --freq 2.4GHz")
    from hpcvar.units import MAX_FREQ_HZ

    if not 0 < freq_hz <= MAX_FREQ_HZ:  # also nan and inf
        raise UsageError(f"frequency {freq_hz} is not in (0, {MAX_FREQ_HZ:g}] Hz", "--freq",
                         "Give e.g. --freq 2.4GHz")
    return float(freq_hz)


def read_text(path, freq_hz: float | None = None, cpu: int = 0) -> JitterTrace:
    """Two-column text; ``freq_hz`` overrides a ``# freq_hz`` header. Several ``# cpu C`` blocks allowed."""
    path = Path(path)
    lines = _read_lines(path)
    file_freq = None
    blocks: list[tuple[int, int, list, list]] = []  # cpu, lead_in, d, g
    for i, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("#"):
            m = _CPU_RE.match(stripped)
            if m:
                try:
                    c, lead = _cpu_number(m.group(1)), _cycles(m.group(2) or "0", "lead-in")
                except ValueError as e:
                    raise InputFileError(f"'{stripped}': {e}", str(path), i,
                                         todo=f"Write '# cpu C lead_in_cycles N' with C below {MAX_CPU}") from None
                blocks.append((c, lead, [], []))
                continue
            f = _FREQ_RE.search(stripped)
            if f and file_freq is None:
                file_freq = _file_freq(f.group(1), path, i)
            continue
        text = stripped.split("#", 1)[0].strip()
        if not text:
            continue
        parts = text.split()
        if len(parts) != 2 or not all(re.fullmatch(r"[+-]?\d+", p) for p in parts):
            raise InputFileError(f"'{stripped}' is not two integers", str(path), i,
                                 todo="Each line is 'jitter_duration cycles_to_next_jitter' in cycles")
        try:
            a, b = _cycles(parts[0], "duration"), _cycles(parts[1], "gap")
        except ValueError as e:
            raise InputFileError(f"{e} in '{stripped}'", str(path), i,
                                 todo="Durations and gaps are non-negative cycle counts") from None
        if not blocks:
            blocks.append((cpu, 0, [], []))
        blocks[-1][2].append(a)
        blocks[-1][3].append(b)
    blocks = [b for b in blocks if b[2]]
    if not blocks:
        raise InputFileError("the trace has no event", str(path), todo="Give at least one 'd g' line")
    freq = _need_freq(freq_hz if freq_hz is not None else file_freq, path)
    cpus = [CpuTrace(c, np.array(d, dtype=np.int64), np.array(g, dtype=np.int64), {"lead_in_cycles": lead})
            for c, lead, d, g in blocks]
    return _check_span(JitterTrace(freq, cpus, {"source": str(path)}), str(path))


def text_string(trace: JitterTrace) -> str:
    out = [f"# hpcvar jitter trace (jitter_duration cycles_to_next_jitter), freq_hz {trace.freq_hz!r}\n"]
    for c in trace.cpus:
        out.append(f"# cpu {c.cpu} lead_in_cycles {int(c.meta.get('lead_in_cycles', 0))}\n")
        out.append("".join(f"{a} {b}\n" for a, b in zip(c.duration.tolist(), c.gap.tolist(), strict=True)))
    return "".join(out)


# ---- LogGOPSim / netgauge ------------------------------------------------------------------------------------
_LEN_RE = re.compile(r"length_ns[\s=:]+([0-9.eE+]+)")
_CPUH_RE = re.compile(r"\bcpu[\s=:]+(\d+)")


def read_loggopsim(path, freq_hz: float | None = None, cpu: int = 0) -> JitterTrace:
    """``<start_ns>\\t<duration_ns>`` lines (LogGOPSim reads them with ``%lf\\t%lf`` and rounds to ns).

    Cycles are ``round(ns * freq / 1e9)``; without a frequency (from ``--freq`` or a ``# freq_hz`` header)
    1 cycle = 1 ns. The trace length is the ``# length_ns`` header, else the end of the last event.
    """
    path = Path(path)
    head: dict = {"freq": None, "length_ns": None, "cpu": cpu}
    starts: list[tuple[float, int]] = []
    durs: list[float] = []
    for i, line in enumerate(_read_lines(path), 1):
        s = line.strip()
        if s.startswith("#"):
            _loggopsim_header(s, path, i, head)
        elif s:
            a, b = _loggopsim_event(s, path, i, starts[-1][0] if starts else None, durs[-1] if durs else None)
            starts.append((a, i))
            durs.append(b)
    if not starts:
        raise InputFileError("the trace has no event", str(path), todo="Give at least one 'start<TAB>duration' line")
    freq = _need_freq(freq_hz, path) if freq_hz is not None else (head["freq"] or 1e9)
    scale, length_ns = freq / 1e9, head["length_ns"]
    if max(length_ns or 0.0, starts[-1][0] + durs[-1]) * scale >= MAX_CYCLES:
        raise InputFileError(f"the trace lasts beyond {MAX_CYCLES} cycles at {freq:g} Hz", str(path),
                             todo="Check the frequency and the times (ns)")
    s_c = np.rint(np.array([a for a, _ in starts]) * scale).astype(np.int64)
    d_c = np.rint(np.array(durs) * scale).astype(np.int64)
    end = int(s_c[-1] + d_c[-1])
    length = end if length_ns is None else int(round(length_ns * scale))
    if length < end:
        raise InputFileError(f"length_ns {length_ns} is shorter than the last event's end", str(path),
                             todo="Fix the '# length_ns' header")
    ct = cpu_trace_from_events(head["cpu"], s_c, np.minimum(d_c, np.append(s_c[1:] - s_c[:-1], d_c[-1])), length)
    return _check_span(JitterTrace(freq, [ct], {"source": str(path)}), str(path))


def _loggopsim_header(s: str, path: Path, i: int, head: dict) -> None:
    """A '#' line: freq_hz, length_ns and cpu headers into ``head``."""
    f = _FREQ_RE.search(s)
    if f:
        head["freq"] = _file_freq(f.group(1), path, i)
    m = _LEN_RE.search(s)
    if m:
        try:
            length_ns = float(m.group(1))
        except ValueError:
            length_ns = math.nan
        if not 0 <= length_ns <= MAX_NS:
            raise InputFileError(f"length_ns {m.group(1)[:40]} is not in 0..{MAX_NS:g}", str(path), i,
                                 todo="Fix the '# length_ns' header")
        head["length_ns"] = length_ns
    c = _CPUH_RE.search(s)
    if c:
        try:
            head["cpu"] = _cpu_number(c.group(1))
        except ValueError as e:
            raise InputFileError(str(e), str(path), i, todo=f"CPUs are numbered below {MAX_CPU}") from None


def _loggopsim_event(s: str, path: Path, i: int, prev_start: float | None,
                     prev_dur: float | None) -> tuple[float, float]:
    """An event line: (start_ns, duration_ns), checked against the one before it."""
    parts = s.split()
    try:
        a, b = (float(p) for p in parts) if len(parts) == 2 else (None, None)
    except ValueError:
        a = b = None
    if a is None or b is None or not (np.isfinite(a) and np.isfinite(b)):
        raise InputFileError(f"'{s}' is not '<start_ns><TAB><duration_ns>'", str(path), i,
                             todo="Each line is a start time and a duration in ns")
    if a < 0 or b < 0:
        raise InputFileError(f"negative {'start' if a < 0 else 'duration'} in '{s}'", str(path), i)
    if a + b > MAX_NS:
        raise InputFileError(f"'{s}' ends beyond {MAX_NS:g} ns", str(path), i,
                             todo="Times are in ns; a trace lasts at most a few years")
    if prev_start is not None and a < prev_start:
        raise InputFileError(f"start {a} is before the previous start {prev_start}", str(path), i,
                             todo="Events must be sorted by start time")
    if prev_start is not None and prev_dur is not None and a < prev_start + prev_dur:
        raise InputFileError(f"event at {a} ns overlaps the previous one", str(path), i,
                             todo="Merge overlapping events")
    return a, b


def loggopsim_string(trace: JitterTrace, cpu_index: int = 0) -> str:
    """One CPU as LogGOPSim lines (3 decimals of ns, exact back to cycles); no final newline, because
    LogGOPSim's reader turns a trailing empty line into an extra event."""
    c = trace.cpus[cpu_index]
    k = 1e9 / trace.freq_hz
    s = recorded_starts(c) * k
    d = c.duration * k
    head = (f"# hpcvar noise trace (LogGOPSim/netgauge: start_ns<TAB>duration_ns) cpu {c.cpu} "
            f"freq_hz {trace.freq_hz!r} length_ns {c.length * k:.3f}\n")
    return head + "\n".join(f"{a:.3f}\t{b:.3f}" for a, b in zip(s.tolist(), d.tolist(), strict=True))


# ---- CSV ------------------------------------------------------------------------------------------------------
CSV_COLUMNS = ["cpu", "duration_cycles", "gap_cycles", "start_cycles", "start_ns", "duration_ns"]


def csv_string(trace: JitterTrace) -> str:
    out = [f"# freq_hz={trace.freq_hz!r}\n", ",".join(CSV_COLUMNS) + "\n"]
    k = 1e9 / trace.freq_hz
    for c in trace.cpus:
        s = recorded_starts(c)
        out.append("".join(f"{c.cpu},{a},{b},{st},{st * k:.3f},{a * k:.3f}\n"
                           for a, b, st in zip(c.duration.tolist(), c.gap.tolist(), s.tolist(), strict=True)))
    return "".join(out)


def read_csv(path, freq_hz: float | None = None) -> JitterTrace:
    """CSV with a header row; needs ``cpu``, ``duration_cycles``, ``gap_cycles`` (``start_cycles`` of the
    first event of each CPU gives its lead-in)."""
    path = Path(path)
    lines = _read_lines(path)
    file_freq = None
    header = None
    rows: dict[int, list] = {}
    for i, line in enumerate(lines, 1):
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            f = _FREQ_RE.search(s)
            if f:
                file_freq = _file_freq(f.group(1), path, i)
            continue
        cells = [x.strip() for x in s.split(",")]
        if header is None:
            header = cells
            missing = [c for c in ("cpu", "duration_cycles", "gap_cycles") if c not in header]
            if missing:
                raise InputFileError(f"the header lacks columns {missing}", str(path), i,
                                     todo=f"The CSV header is {','.join(CSV_COLUMNS)}")
            ix = {c: header.index(c) for c in ("cpu", "duration_cycles", "gap_cycles")}
            ist = header.index("start_cycles") if "start_cycles" in header else None
            continue
        if len(cells) != len(header):
            raise InputFileError(f"{len(cells)} fields, the header has {len(header)}", str(path), i)
        try:
            cpu = _cpu_number(cells[ix["cpu"]])
            d, g = _cycles(cells[ix["duration_cycles"]], "duration"), _cycles(cells[ix["gap_cycles"]], "gap")
            st = _cycles(cells[ist], "start") if ist is not None else None
        except ValueError as e:
            raise InputFileError(f"'{s}': {e}", str(path), i,
                                 todo=f"cpu (below {MAX_CPU}), durations and gaps are non-negative integers") \
                from None
        rows.setdefault(cpu, []).append((d, g, st))
    if not rows:
        raise InputFileError("the trace has no event", str(path), todo="Give a header row and one row per event")
    freq = _need_freq(freq_hz if freq_hz is not None else file_freq, path)
    cpus = []
    for cpu, r in rows.items():
        a = np.array([[x[0], x[1]] for x in r], dtype=np.int64)
        lead = r[0][2] if r[0][2] is not None else 0
        cpus.append(CpuTrace(cpu, a[:, 0], a[:, 1], {"lead_in_cycles": int(lead)}))
    return _check_span(JitterTrace(freq, cpus, {"source": str(path)}), str(path))


# ---- dispatch ------------------------------------------------------------------------------------------------
def sniff_format(path) -> str:
    """The format from the extension, else from the first bytes."""
    path = Path(path)
    ext = EXTENSIONS.get(path.suffix.lower())
    if ext:
        return ext
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise InputFileError(f"cannot read the trace: {e.strerror}", str(path)) from None
    if head.startswith(JTR_MAGIC):
        return "jtr"
    text = head.decode(errors="replace")
    if "LogGOPSim" in text:
        return "loggopsim"
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if "," in s:
            return "csv"
        return "loggopsim" if "\t" in s or "." in s else "text"
    return "text"


def load_trace(path, freq_hz: float | None = None, fmt: str | None = None) -> JitterTrace:
    """Read any supported trace. ``freq_hz`` is needed for text/CSV without a ``freq_hz`` header."""
    path = Path(path)
    if not path.exists():
        raise InputFileError("no such file", str(path), todo="Check the path")
    fmt = fmt or sniff_format(path)
    if fmt == "jtr":
        t = read_jtr(path)
        if freq_hz:
            t.freq_hz = float(freq_hz)
        return t
    if fmt == "text":
        return read_text(path, freq_hz)
    if fmt == "loggopsim":
        return read_loggopsim(path, freq_hz)
    if fmt == "csv":
        return read_csv(path, freq_hz)
    raise UsageError(f"unknown trace format '{fmt}'", "--from", f"Use one of {', '.join(FORMATS)}")


def save_trace(trace: JitterTrace, path, fmt: str | None = None, cpu_index: int | None = None,
               cpu_flag: tuple[str, str] | None = None) -> None:
    """Write ``trace``; loggopsim holds one CPU (``cpu_index``, needed when there are several); ``cpu_flag``:
    (flag, remedy) for a trace of several CPUs, when the command chooses the CPU otherwise than --cpu."""
    from hpcvar.results import atomic_write_text

    path = Path(path)
    fmt = fmt or EXTENSIONS.get(path.suffix.lower())
    if fmt is None:
        raise UsageError(f"cannot tell the format of '{path.name}' from its extension", "--to",
                         f"Give --to {'/'.join(FORMATS)} or an extension .jtr/.txt/.noise/.csv")
    if cpu_index is not None:
        trace = JitterTrace(trace.freq_hz, [trace.cpus[cpu_index]], trace.meta)
    if fmt == "jtr":
        write_jtr(trace, path)
    elif fmt == "text":
        atomic_write_text(path, text_string(trace))
    elif fmt == "csv":
        atomic_write_text(path, csv_string(trace))
    elif fmt == "loggopsim":
        if len(trace.cpus) != 1:
            flag, todo = cpu_flag or ("--cpu", f"Choose one with --cpu ({', '.join(str(c.cpu) for c in trace.cpus)})")
            raise UsageError(f"a LogGOPSim trace holds one CPU; this trace has {len(trace.cpus)}", flag, todo)
        atomic_write_text(path, loggopsim_string(trace))
    else:
        raise UsageError(f"unknown trace format '{fmt}'", "--to", f"Use one of {', '.join(FORMATS)}")
