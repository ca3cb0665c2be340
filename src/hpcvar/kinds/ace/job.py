"""ACE, the application communication emulator (native/bench/ace.c; paper section 4).

An EA (emulated application) is parsed from ``--ea key=value,...`` or a TOML ``[[ea]]`` table,
resolved against the job size (ranks, cartesian sides, the model's messages per cycle), then
each sweep point (load x size x repeat) is one MPI launch: a fresh phase 1 (alpha-beta
benchmark) and phase 2 (the cycles) for every EA at once. Formulas: hpcvar.models.ace.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields

import numpy as np
import pandas as pd

from hpcvar import units
from hpcvar.bench.runner import BenchContext, Benchmark, Params, run_benchmark
from hpcvar.errors import InputFileError, ResultsError, UsageError
from hpcvar.models import ace as model
from hpcvar.results import RawFile, RawPoint, Run
from hpcvar.results.kinds import draw_plots
from hpcvar.stats import summarize, variance_components

MAX_SIZE = (1 << 31) - 1  # MPI count limit for MPI_BYTE messages
MAX_EAS = 16  # native/bench/ace.c MAX_EAS
EA_KEYS = ("name", "ranks", "pattern", "mode", "size", "load", "cycles", "alpha", "beta", "dims", "periodic",
           "bench_sizes")
DEFAULTS = {"mode": "blocking", "size": 1024, "load": 50.0, "cycles": 1000, "periodic": False}
# Pessimistic costs used only to size the launch timeout before phase 1 has measured anything.
EST_ALPHA_S = 200e-6
EST_BETA_S_PER_BYTE = 2e-9


@dataclass
class EASpec:
    """One EA as the user gave it (ranks may be a fraction of the job)."""

    name: str
    pattern: str
    mode: str = "blocking"
    size: int = 1024
    load: float = 50.0
    cycles: int = 1000
    ranks: float | None = None  # count (>= 1) or fraction (0 < r < 1); None = an equal share
    alpha_s: float | None = None
    beta_s_per_byte: float | None = None
    dims: list[int] | None = None
    periodic: bool = False
    bench_sizes: list[int] | None = None
    where: str = "--ea"  # the flag or file:key to name in errors


@dataclass(frozen=True)
class AceParams(Params):
    """``hpcvar bench ace``'s parameters (run.json ``params``; each EA as the object of its EASpec)."""

    eas: tuple[EASpec, ...]  # as the user gave them; resolved against np at every sweep point
    np: int  # ranks of the job (the EAs' fractions and shares are of it)
    loads: tuple[float, ...] | None  # --loads: replaces each EA's load (percent); None: no load sweep
    sizes: tuple[int, ...] | None  # --sizes: replaces each EA's size (bytes); None: no size sweep
    repeat: int
    bench_iters: int  # phase 1: timed exchanges per benchmark size
    bench_warmup: int

    @classmethod
    def _decode(cls, doc: dict, where: str) -> dict:
        keys = [f.name for f in fields(EASpec)]
        eas = doc["eas"]
        if not isinstance(eas, list) or not all(isinstance(e, dict) for e in eas):
            raise ResultsError("the stored parameter 'eas' is not a list of objects", where,
                               "Start a new run instead of resuming this one")
        for e in eas:
            bad = [k for k in e if k not in keys] or [k for k in keys if k not in e]
            if bad:
                raise ResultsError(f"a stored EA has the unknown or missing key '{bad[0]}' (EASpec's keys are "
                                   f"{', '.join(keys)})", where, "Start a new run instead of resuming this one")
        return {**doc, "eas": tuple(EASpec(**e) for e in eas)}


@dataclass
class EA:
    """An EA resolved against the job: ranks, first rank, sides, messages per cycle."""

    spec: EASpec
    index: int
    first: int
    nranks: int
    dims: list[int] | None
    messages: float
    bench_sizes: list[int] = field(default_factory=list)


def _beta(text: str, where: str) -> float:
    """Seconds per byte from '0.01057us/B' or '10.57ns/B' (a bare number is refused: its unit is a guess)."""
    t = text.strip()
    m = re.fullmatch(r"(.+?)\s*/\s*(B|byte)", t)
    if m:
        return units.parse_time(m.group(1), where)
    try:
        v = float(t)
    except ValueError:
        raise UsageError(f"'{text}' is not a per-byte time", where,
                         "Write beta as a time per byte, e.g. beta=0.01057us/B") from None
    if v != 0:
        raise units.no_unit(t, where, "us/B")
    return v


def _bool(text, where: str) -> bool:
    if isinstance(text, bool):
        return text
    v = str(text).strip().lower()
    if v in ("1", "yes", "true", "on"):
        return True
    if v in ("0", "no", "false", "off"):
        return False
    raise UsageError(f"'{text}' is not yes/no", where, "Write periodic=yes or periodic=no")


def _ranks(text, where: str) -> float:
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise UsageError(f"ranks '{text}' is not a count or a fraction", where,
                         "Write ranks=4 (a count) or ranks=0.5 (a fraction of --np)") from None
    if v <= 0 or (v >= 1 and v != int(v)):
        raise UsageError(f"ranks '{text}' is neither a whole count nor a fraction in (0, 1)", where,
                         "Write ranks=4 or ranks=0.5")
    return v


def _dims(text, where: str) -> list[int]:
    if isinstance(text, list):
        parts = text
    else:
        parts = str(text).lower().split("x")
    try:
        dims = [int(p) for p in parts]
    except (TypeError, ValueError):
        raise UsageError(f"dims '{text}' is not AxB or AxBxC", where, "Write dims=4x2 or dims=2x2x2") from None
    if any(d < 1 for d in dims):
        raise UsageError(f"dims '{text}' has a side below 1", where, "Give positive sides")
    return dims


def _pattern_and_mode(values: dict, where: str, key_where) -> tuple[str, str]:
    if "pattern" not in values:
        raise UsageError("the EA has no pattern", where, f"Add pattern=<{'|'.join(model.PATTERNS)}>")
    pattern = str(values["pattern"])
    if pattern not in model.PATTERNS:
        raise UsageError(f"unknown pattern '{pattern}'", key_where("pattern"),
                         f"Use one of {', '.join(model.PATTERNS)}")
    mode = str(values.get("mode", DEFAULTS["mode"]))
    if mode not in model.MODES:
        raise UsageError(f"unknown mode '{mode}'", key_where("mode"), "Use mode=blocking or mode=nonblocking")
    return pattern, mode


def _size(v, where: str) -> int:
    return v if isinstance(v, int) else units.parse_size(str(v), where)


def _load(v, where: str) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        raise UsageError(f"load '{v}' is not a number", where,
                         "Give the communication load in percent, 1..100") from None


def _cycles(v, where: str) -> int:
    return v if isinstance(v, int) else units.parse_int(str(v), where)


def _bench_sizes(v, where: str) -> list[int]:
    items = v if isinstance(v, list) else str(v).split(":")
    return [_size(x, where) for x in items]


# the EA keys after pattern and mode, in the order they are read: how each value is parsed (its place named in
# errors) and the EASpec field it sets (its own name unless given)
_SPEC_VALUES = {"size": _size, "load": _load, "cycles": _cycles, "ranks": _ranks,
                "alpha": lambda v, w: units.parse_time(str(v), w), "beta": lambda v, w: _beta(str(v), w),
                "dims": _dims, "periodic": _bool, "bench_sizes": _bench_sizes}
_SPEC_FIELDS = {"alpha": "alpha_s", "beta": "beta_s_per_byte"}


def _make_spec(values: dict, where: str, key_where) -> EASpec:
    """An EASpec from raw values (str from --ea, or TOML values); key_where(k) names the place of key k."""
    unknown = [k for k in values if k not in EA_KEYS]
    if unknown:
        raise UsageError(f"unknown EA key '{unknown[0]}'", key_where(unknown[0]),
                         f"Known keys: {', '.join(EA_KEYS)}")
    pattern, mode = _pattern_and_mode(values, where, key_where)
    spec = EASpec(name=str(values.get("name", "")), pattern=pattern, mode=mode, where=where)
    for key, parse in _SPEC_VALUES.items():
        if key in values:
            setattr(spec, _SPEC_FIELDS.get(key, key), parse(values[key], key_where(key)))
    if (spec.alpha_s is None) != (spec.beta_s_per_byte is None):
        raise UsageError("alpha and beta go together", where,
                         "Give both (to skip phase 1) or neither (to measure them)")
    check_spec(spec, key_where)
    return spec


def check_spec(spec: EASpec, key_where=None) -> None:
    """Checks that need no job size (load range, sizes, cycles)."""
    kw = key_where or (lambda k: spec.where)
    if not 1 <= spec.load <= 100:
        raise UsageError(f"load {spec.load:g}% is outside 1..100", kw("load"),
                         "Give the communication load in percent, from 1 to 100")
    if not 0 <= spec.size <= MAX_SIZE:
        raise UsageError(f"size {spec.size} is outside [0, {MAX_SIZE}] bytes", kw("size"), "Give up to 2GiB-1")
    if spec.cycles < 1:
        raise UsageError("cycles must be at least 1", kw("cycles"), "Give cycles=100 or more")
    for a in (spec.alpha_s, spec.beta_s_per_byte):
        if a is not None and a < 0:
            raise UsageError("alpha and beta cannot be negative", spec.where, "Give the measured values")
    if spec.dims is not None and spec.pattern not in model.CART_NDIMS:
        raise UsageError(f"dims apply to cart2d and cart3d, not {spec.pattern}", kw("dims"), "Remove dims")
    if spec.bench_sizes is not None:
        if len(set(spec.bench_sizes)) < 2 or len(spec.bench_sizes) > 32:
            raise UsageError("bench_sizes needs 2 to 32 sizes, at least two different", kw("bench_sizes"),
                             "Write bench_sizes=0:256:1KiB")
        if any(not 0 <= s <= MAX_SIZE for s in spec.bench_sizes):
            raise UsageError("a bench size is outside [0, 2GiB-1]", kw("bench_sizes"), "Give smaller sizes")


def parse_ea(text: str, flag: str = "--ea") -> EASpec:
    """``pattern=pairs,mode=blocking,size=1MiB,load=20,cycles=1000,alpha=75.9us,beta=0.01057us/B``."""
    values: dict[str, str] = {}
    for item in text.split(","):
        k, sep, v = item.partition("=")
        k = k.strip()
        if not sep or not k or not v.strip():
            raise UsageError(f"'{item}' in '{text}' is not key=value", flag,
                             "Write --ea pattern=pairs,size=1MiB,load=20,cycles=1000")
        if k in values:
            raise UsageError(f"key '{k}' is given twice in '{text}'", flag, "Give each key once")
        values[k] = v.strip()
    return _make_spec(values, flag, lambda k: flag)


def load_config(path) -> list[EASpec]:
    """EAs from a TOML file: one ``[[ea]]`` table per EA (keys as in --ea; numbers or strings with units)."""
    import tomllib

    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as e:
        what = "no such config file" if isinstance(e, FileNotFoundError) else f"cannot read the config: {e.strerror}"
        raise InputFileError(what, str(path), todo="Check the path of --config") from None
    except UnicodeDecodeError as e:
        raise InputFileError(f"byte {e.start} is not UTF-8 text", str(path), todo="Give a TOML text file") from None
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+), column (\d+)", str(e))
        raise InputFileError(f"not valid TOML: {e}", str(path), int(m.group(1)) if m else None,
                             int(m.group(2)) if m else None) from None
    extra = [k for k in doc if k != "ea"]
    if extra:
        raise UsageError(f"unknown top-level key '{extra[0]}'", f"{path}: {extra[0]}",
                         "A config holds only [[ea]] tables")
    eas = doc.get("ea")
    if not isinstance(eas, list) or not eas or not all(isinstance(t, dict) for t in eas):
        raise UsageError("no [[ea]] table", str(path), "Add one [[ea]] table per emulated application")
    out = []
    for i, t in enumerate(eas):
        where = f"{path}: ea[{i}]"
        out.append(_make_spec(dict(t), where, lambda k, w=where: f"{w}.{k}"))
    return out


def more_iters_remedy(within: str | None) -> str:
    """How to get a steadier phase-1 fit: --bench-iters of 'hpcvar bench ace'; a step of ``within``
    (characterize, which has no such flag) names the command that has it."""
    if within:
        return "measure the point again with more phase-1 iterations ('hpcvar bench ace --bench-iters 100')"
    return "raise --bench-iters"


def default_bench_sizes(size: int) -> list[int]:
    """Phase-1 sizes around the run's size: 0, n/4, n/2, n (or 0, 256, 1KiB when n is tiny)."""
    if size >= 16:
        return sorted({0, size // 4, size // 2, size})
    return [0, 256, 1024]


def resolve(specs: list[EASpec], np_: int, flag_np: str = "--np") -> list[EA]:
    """Ranks, first ranks, cartesian sides and messages per cycle; every job-size check before launch."""
    if not specs:
        raise UsageError("no emulated application", "--ea", "Give --ea pattern=pairs,... or --config FILE.toml")
    if len(specs) > MAX_EAS:
        raise UsageError(f"{len(specs)} EAs, at most {MAX_EAS}", "--ea", "Run fewer EAs at once")
    names: set[str] = set()
    out, first = [], 0
    for i, s in enumerate(specs):
        n = _ranks_of(s, i, np_, np_ // len(specs), np_ - first, first, flag_np)
        name = s.name or f"ea{i}"
        if name in names or not re.fullmatch(r"[A-Za-z0-9_.-]{1,31}", name):
            raise UsageError(f"EA name '{name}' is repeated or not a short word", s.where,
                             "Give each EA a distinct name of letters, digits, '_', '-' or '.'")
        names.add(name)
        s.name = name
        dims = _cart_dims(s, n)
        _check_pattern(s, name, n)
        msgs = model.messages_per_cycle(s.pattern, s.mode, n, dims, s.periodic)
        out.append(EA(s, i, first, n, dims, msgs, s.bench_sizes or default_bench_sizes(s.size)))
        first += n
    return out


def _ranks_of(s: EASpec, i: int, np_: int, share: int, free: int, first: int, flag_np: str) -> int:
    """The EA's ranks: its share of the job, a fraction of it (ranks < 1) or a count; at least 2, and within
    the ranks the EAs before it left."""
    n = share if s.ranks is None else int(round(s.ranks * np_)) if s.ranks < 1 else int(s.ranks)
    if n < 2:
        raise UsageError(f"EA {s.name or i} gets {n} rank(s); every pattern needs at least 2", s.where,
                         f"Give ranks=2 or more, or a larger {flag_np}")
    if n > free:
        total = first + n
        raise UsageError(f"the EAs ask for at least {total} ranks, the job has {np_}", s.where,
                         f"Use {flag_np} {total} or give the EAs fewer ranks")
    return n


def _cart_dims(s: EASpec, n: int) -> list[int] | None:
    """The sides of a cartesian pattern's grid of n ranks (given, or balanced); None for the others."""
    if s.pattern not in model.CART_NDIMS:
        return None
    nd = model.CART_NDIMS[s.pattern]
    dims: list[int] | None
    if s.dims is not None:
        if len(s.dims) != nd or int(np.prod(s.dims)) != n or min(s.dims) < 2:
            raise UsageError(f"dims {'x'.join(map(str, s.dims))} do not factor {n} ranks into {nd} sides "
                             f">= 2", s.where, f"Give {nd} sides whose product is {n}")
        dims = list(s.dims)
    else:
        dims = model.balanced_dims(n, nd)
        if dims is None:
            raise UsageError(f"{n} ranks do not factor into a {nd}-D grid with every side >= 2", s.where,
                             f"Give a rank count such as {4 if nd == 2 else 8}, {6 if nd == 2 else 12}, ...")
    if s.periodic and s.mode == "blocking" and any(d % 2 for d in dims):
        raise UsageError(f"a blocking periodic exchange needs even sides, got {'x'.join(map(str, dims))}",
                         s.where, "Use mode=nonblocking, periodic=no or an even side")
    return dims


def _check_pattern(s: EASpec, name: str, n: int) -> None:
    """What the pattern needs of its ranks and size."""
    if s.pattern == "pairs" and n % 2:
        raise UsageError(f"pairs needs an even number of ranks, EA {name} has {n}", s.where,
                         "Give an even ranks count")
    if s.pattern == "ring" and s.mode == "blocking" and n % 2:
        raise UsageError(f"a blocking ring needs an even number of ranks, EA {name} has {n}", s.where,
                         "Give an even ranks count or mode=nonblocking")
    if s.pattern == "alltoall" and s.size * n > MAX_SIZE:
        raise UsageError(f"alltoall of {s.size} bytes to {n} ranks exceeds one 2GiB buffer", s.where,
                         "Give a smaller size")


def with_point(spec: EASpec, load: float | None, size: int | None) -> EASpec:
    """The EA at one sweep point (the sweep's load / size replace the EA's own)."""
    d = asdict(spec)
    if load is not None:
        d["load"] = float(load)
    if size is not None:
        d["size"] = int(size)
        if spec.bench_sizes is None:
            d["bench_sizes"] = None
    s = EASpec(**d)
    check_spec(s, lambda k: {"load": "--loads", "size": "--sizes"}.get(k, spec.where))
    return s


def predict_ea(ea: EA, alpha_s: float | None = None, beta: float | None = None) -> dict:
    s = ea.spec
    a = s.alpha_s if alpha_s is None else alpha_s
    b = s.beta_s_per_byte if beta is None else beta
    if a is None or b is None:  # callers give alpha and beta, or an EA that has both
        raise ValueError(f"EA {s.name} has no alpha and beta to predict from")
    p = model.predict(a, b, s.size, s.load, s.cycles, ea.messages)
    return {"name": s.name, "pattern": s.pattern, "mode": s.mode, "ranks": ea.nranks, "first_rank": ea.first,
            "dims": ea.dims, "periodic": s.periodic if ea.dims else None, "size_bytes": s.size,
            "load_pct": s.load, "cycles": s.cycles, "messages_per_cycle": ea.messages, "alpha_s": a,
            "beta_s_per_byte": b, "t_comm_s": p.t_comm_s, "t_comp_s": p.t_comp_s, "t_cycle_s": p.t_cycle_s,
            "t_run_s": p.t_run_s}


def sweep_points(params: AceParams) -> list[dict]:
    """One point per (repeat, size, load): repeats outermost so that a whole sweep is repeated."""
    loads = params.loads or [0]
    sizes = params.sizes or [-1]
    pts: list[dict] = []
    for r in range(params.repeat):
        for n in sizes:
            for L in loads:
                pts.append({"point": len(pts), "load": L, "size": n, "repeat": r})
    return pts


def eas_at(params: AceParams, point: dict) -> list[EA]:
    """The EAs resolved at one sweep point (copies: ``params.eas`` is never changed)."""
    load = None if point["load"] == 0 else point["load"]
    size = None if point["size"] == -1 else point["size"]
    return resolve([with_point(s, load, size) for s in params.eas], params.np)


def native_options(eas: list[EA], bench_iters: int, bench_warmup: int) -> list[str]:
    """hv_ace's flat options (native/bench/ace.c): one comma list per EA field, one value per EA, all numbers
    but the names; everything here is already validated, so hv_ace only re-checks ranges."""
    def each(flag: str, values) -> list[str]:
        return [flag, ",".join(values)]

    fixed = [e.spec.alpha_s is not None for e in eas]
    bench = [n for e, f in zip(eas, fixed, strict=True) if not f for n in e.bench_sizes]
    pairs = list(zip(eas, fixed, strict=True))
    out = (each("--ea-name", (e.spec.name for e in eas)) + each("--ea-first", (str(e.first) for e in eas))
           + each("--ea-ranks", (str(e.nranks) for e in eas))
           + each("--ea-pattern", (str(model.PATTERNS.index(e.spec.pattern)) for e in eas))
           + each("--ea-mode", (str(model.MODES.index(e.spec.mode)) for e in eas))
           + each("--ea-size", (str(e.spec.size) for e in eas)) + each("--ea-cycles", (str(e.spec.cycles) for e in eas))
           + each("--ea-load", (repr(float(e.spec.load)) for e in eas))
           + each("--ea-msgs", (repr(float(e.messages)) for e in eas))
           + each("--ea-dims", (str(d) for e in eas for d in (e.dims or []) + [0] * (3 - len(e.dims or []))))
           + each("--ea-periodic", (str(int(e.spec.periodic and bool(e.dims))) for e in eas))
           + each("--ea-fixed", (str(int(f)) for f in fixed))
           + each("--ea-alpha-ns",
                  (repr(e.spec.alpha_s * 1e9) if e.spec.alpha_s is not None else "0" for e in eas))
           + each("--ea-beta-ns",  # set with alpha (_make_spec refuses one without the other)
                  (repr(e.spec.beta_s_per_byte * 1e9) if e.spec.beta_s_per_byte is not None else "0"
                   for e in eas))
           + each("--ea-bench-count", ("0" if f else str(len(e.bench_sizes)) for e, f in pairs))
           + ["--bench-iters", str(bench_iters), "--bench-warmup", str(bench_warmup)])
    if bench:
        out += each("--ea-bench-sizes", map(str, bench))
    return out


DISPERSION = ("mean", "stdev", "variance", "min", "p50", "p90", "p99", "max")


class Ace(Benchmark[AceParams]):
    name = "ace"
    program = "hv_ace"

    def point_fields(self) -> list[str]:
        return ["load", "point", "repeat", "size"]

    def points(self, params: AceParams) -> list[dict]:
        return sweep_points(params)

    def validate(self, params: AceParams, ctx: BenchContext) -> None:
        super().validate(params, ctx)
        for p in sweep_points(params):
            eas_at(params, p)  # every point's EAs resolve (loads, sizes, ranks, sides) before any launch

    def launches(self, params: AceParams, pending: list[dict]) -> list[list[dict]]:
        return [[p] for p in pending]  # one launch per point: a fresh phase 1 for each

    def argv(self, params: AceParams, points: list[dict]) -> list[str]:
        (point,) = points
        eas = eas_at(params, point)
        label = self.point_key(point)
        return [*native_options(eas, params.bench_iters, params.bench_warmup), "--label", label]

    def estimate_s(self, params: AceParams, points: list[dict]) -> float:
        total = 2.0
        for p in points:
            for ea in eas_at(params, p):
                s = ea.spec
                a = s.alpha_s if s.alpha_s is not None else EST_ALPHA_S
                b = s.beta_s_per_byte if s.beta_s_per_byte is not None else EST_BETA_S_PER_BYTE
                pr = model.predict(a, b, s.size, s.load, s.cycles, ea.messages)
                bench = 0.0
                if s.alpha_s is None:
                    bench = sum(model.t_comm(EST_ALPHA_S, EST_BETA_S_PER_BYTE, n, ea.messages) for n in ea.bench_sizes)
                    bench *= params.bench_iters + params.bench_warmup
                total = max(total, 2.0 + bench + pr.t_run_s * 2)
        return total

    # ---- raw -> tables -----------------------------------------------------------------
    def tables(self, raws: list[RawFile], params: AceParams) -> dict[str, pd.DataFrame]:
        cyc, bench, fits, summ = [], [], [], []
        for raw in raws:
            for p in raw.points:
                c, b, f, s = _point_tables(raw, p, params)
                cyc.append(c)
                bench.append(b)
                fits.append(f)
                summ.extend(s)
        cycles = pd.concat(cyc, ignore_index=True) if cyc else _empty("ace.cycles")
        bench_df = pd.concat(bench, ignore_index=True) if bench else _empty("ace.bench")
        fits_df = pd.concat(fits, ignore_index=True) if fits else _empty("ace.fits")
        summary = pd.DataFrame(summ) if summ else _empty("ace.summary")
        if not summary.empty:
            summary = summary.sort_values(["point", "ea"]).reset_index(drop=True)
        return {"ace.cycles": cycles, "ace.bench": bench_df, "ace.fits": fits_df, "ace.summary": summary,
                "ace.variability": _variability(cycles, summary)}

    def warnings(self, tables: dict[str, pd.DataFrame], params: AceParams, within: str | None = None) -> list[str]:
        out, more = [], more_iters_remedy(within)
        for r in tables["ace.summary"].itertuples():
            where = f"EA '{r.name}' at point {r.point} ({r.size_bytes} B, load {r.load_pct:g}%)"
            if r.fit_fallback:
                out.append(f"{where}: the phase-1 line predicted a non-positive time per message at the EA's "
                           f"size, so the measured mean time there ({r.alpha_ns / 1e3:.3g} us) was used with "
                           f"beta = 0; {more} for a steadier fit")
            elif not r.fixed and r.pred_t_comm_ns <= 0:
                out.append(f"{where}: the phase-1 line predicted a non-positive time per message, so T_comm and "
                           f"T_comp are 0; " + ("include the EA's size in bench_sizes or " if not within else "")
                           + more)
        return out

    def result(self, tables: dict[str, pd.DataFrame], params: AceParams) -> dict:
        summ = tables["ace.summary"]
        eas = []
        for r in summ.to_dict("records"):
            e = {"name": r["name"], "point": int(r["point"]), "repeat": int(r["repeat"]), "pattern": r["pattern"],
                 "mode": r["mode"], "ranks": int(r["ranks"]), "size_bytes": int(r["size_bytes"]),
                 "load_pct": float(r["load_pct"]), "cycles": int(r["cycles"]),
                 "messages_per_cycle": float(r["messages_per_cycle"]), "alpha_s": r["alpha_ns"] * 1e-9,
                 "beta_s_per_byte": r["beta_ns_per_byte"] * 1e-9, "alpha_beta_measured": not bool(r["fixed"]),
                 "fit_fallback": bool(r["fit_fallback"]),
                 "t_comm_s": r["pred_t_comm_ns"] * 1e-9, "t_comp_s": r["pred_t_comp_ns"] * 1e-9,
                 "t_run_s": r["pred_t_run_ns"] * 1e-9,
                 "measured_t_comm_s": r["comm_mean_ns"] * 1e-9, "measured_t_comp_s": r["comp_mean_ns"] * 1e-9,
                 "measured_t_barr_s": r["barr_mean_ns"] * 1e-9, "measured_t_run_s": r["meas_t_run_ns"] * 1e-9,
                 "error_pct": r["error_pct"], "comp_error_pct": r["comp_error_pct"],
                 "comp_error_median_pct": r["comp_error_median_pct"], "no_mixing": bool(r["check_ok"])}
            for what in ("comm", "comp", "barr"):
                e[f"t_{what}_stats_s"] = {k: r[f"{what}_{k}_ns"] * (1e-18 if k == "variance" else 1e-9)
                                          for k in DISPERSION}
            eas.append(e)
        var = tables["ace.variability"]
        return {"benchmark": "ace", "eas": eas, "variability": var.to_dict("records")}


def job(params: AceParams, ctx: BenchContext) -> Run:
    """``hpcvar bench ace``: run (or resume) every EA at every sweep point, store the figures; the result in the
    run."""
    def plots(run: Run, result: dict) -> None:
        result["plots"] = draw_plots(run)

    return run_benchmark(Ace(), params, ctx, after=plots)[0]


def _empty(name: str) -> pd.DataFrame:
    from hpcvar.results.schema import TABLES

    return pd.DataFrame({c: [] for c in TABLES[name]})


def _point_tables(raw: RawFile, p: RawPoint, params: AceParams):
    point = {"point": int(p.params["point"]), "load": float(p.params["load"]), "size": int(p.params["size"]),
             "repeat": int(p.params["repeat"])}
    point["load"] = int(point["load"]) if point["load"] == int(point["load"]) else point["load"]
    eas = eas_at(params, point)
    col = {c: raw.column(p, c) for c in raw.columns}
    phase = col["phase"]
    run_mask, bench_mask = phase == 1, phase == 0
    names = np.array([e.spec.name for e in eas])
    ea_idx = col["ea"].astype(np.int64)
    cycles = pd.DataFrame({
        "point": point["point"], "repeat": point["repeat"], "ea": ea_idx[run_mask],
        "name": names[ea_idx[run_mask]] if run_mask.any() else np.array([], dtype=str),
        "rank": col["rank"][run_mask].astype(np.int64), "world_rank": col["world_rank"][run_mask].astype(np.int64),
        "cycle": col["iter"][run_mask].astype(np.int64), "size_bytes": col["size_bytes"][run_mask].astype(np.int64),
        "t_comp_req_ns": col["t_comp_req_ns"][run_mask], "t_comp_ns": col["t_comp_ns"][run_mask],
        "t_comm_ns": col["t_comm_ns"][run_mask], "t_barr_ns": col["t_barr_ns"][run_mask]})
    bench = pd.DataFrame({
        "point": point["point"], "ea": ea_idx[bench_mask], "rank": col["rank"][bench_mask].astype(np.int64),
        "world_rank": col["world_rank"][bench_mask].astype(np.int64),
        "iter": col["iter"][bench_mask].astype(np.int64), "size_bytes": col["size_bytes"][bench_mask].astype(np.int64),
        "t_comm_ns": col["t_comm_ns"][bench_mask]})
    fit_rows = []
    for (ea_i, rank, wrank), grp in bench.groupby(["ea", "rank", "world_rank"]):
        per = grp.groupby("size_bytes")["t_comm_ns"].mean()
        a, b = model.fit_alpha_beta(per.index.to_numpy(), per.to_numpy() / eas[int(ea_i)].messages)
        fit_rows.append({"point": point["point"], "ea": int(ea_i), "rank": int(rank), "world_rank": int(wrank),
                         "alpha_ns": a, "beta_ns_per_byte": b})
    fits = pd.DataFrame(fit_rows) if fit_rows else _empty("ace.fits")
    summ = []
    for e in eas:
        i = e.index
        s = e.spec
        alpha_ns = float(p.params[f"ea{i}_alpha_ns"])
        beta_ns = float(p.params[f"ea{i}_beta_ns_per_byte"])
        pred = predict_ea(e, alpha_ns * 1e-9, beta_ns * 1e-9)
        mine = cycles[cycles["ea"] == i]
        meas_run = float(p.params[f"ea{i}_run_ns"])
        pred_run_ns = pred["t_run_s"] * 1e9
        row = {"point": point["point"], "repeat": point["repeat"], "ea": i, "name": s.name, "pattern": s.pattern,
               "mode": s.mode, "ranks": e.nranks, "size_bytes": s.size, "load_pct": s.load, "cycles": s.cycles,
               "messages_per_cycle": e.messages, "fixed": int(p.params[f"ea{i}_fixed"]),
               "fit_fallback": int(p.params.get(f"ea{i}_fit_fallback", 0)), "alpha_ns": alpha_ns,
               "beta_ns_per_byte": beta_ns, "native_t_comm_ns": float(p.params[f"ea{i}_t_comm_ns"]),
               "pred_t_comm_ns": pred["t_comm_s"] * 1e9, "pred_t_comp_ns": pred["t_comp_s"] * 1e9,
               "pred_t_run_ns": pred_run_ns, "meas_t_run_ns": meas_run,
               "meas_t_run_min_ns": float(p.params[f"ea{i}_run_min_ns"]),
               "error_pct": (meas_run - pred_run_ns) / pred_run_ns * 100 if pred_run_ns > 0 else float("nan"),
               "check_ok": int(p.params[f"ea{i}_check"]), "stored_cycles": int(len(mine))}
        for what in ("comm", "comp", "barr"):
            st = summarize(mine[f"t_{what}_ns"].to_numpy(), ci=False)
            for k in DISPERSION:
                row[f"{what}_{k}_ns"] = st[k]
        req = pred["t_comp_s"] * 1e9
        rel = (mine["t_comp_ns"].to_numpy() - req) / req * 100 if req > 0 else np.array([np.nan])
        row["comp_req_ns"] = req
        row["comp_error_pct"] = float(np.mean(rel)) if rel.size else float("nan")
        row["comp_error_median_pct"] = float(np.median(rel)) if rel.size else float("nan")
        row["comp_error_p99_pct"] = float(np.percentile(rel, 99)) if rel.size else float("nan")
        summ.append(row)
    return cycles, bench, fits, summ


def _variability(cycles: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """Per EA, size and load across repeats: between-run vs within-run variance of per-cycle T_comm and
    of the cycle time, and the CV of the measured run time."""
    rows = []
    if summary.empty:
        return _empty("ace.variability")
    for (name, size, load), grp in summary.groupby(["name", "size_bytes", "load_pct"], sort=True):
        pts = grp["point"].tolist()
        sub = cycles[(cycles["name"] == name) & cycles["point"].isin(pts)]
        comm = variance_components([g["t_comm_ns"].to_numpy() for _, g in sub.groupby("point")])
        cyc = variance_components([(g["t_comp_ns"] + g["t_comm_ns"] + g["t_barr_ns"]).to_numpy()
                                   for _, g in sub.groupby("point")])
        runs = grp["meas_t_run_ns"].to_numpy()
        rows.append({"name": name, "size_bytes": int(size), "load_pct": float(load), "runs": int(len(pts)),
                     "run_mean_ns": float(runs.mean()),
                     "run_cv": float(runs.std(ddof=1) / runs.mean()) if runs.size > 1 else 0.0,
                     "error_pct_mean": float(grp["error_pct"].mean()),
                     "comm_within_var_ns2": comm.get("within_var", float("nan")),
                     "comm_between_var_ns2": comm.get("between_var", float("nan")),
                     "comm_cv_between": comm.get("cv_between", float("nan")),
                     "cycle_within_var_ns2": cyc.get("within_var", float("nan")),
                     "cycle_between_var_ns2": cyc.get("between_var", float("nan")),
                     "cycle_cv_between": cyc.get("cv_between", float("nan"))})
    return pd.DataFrame(rows)
