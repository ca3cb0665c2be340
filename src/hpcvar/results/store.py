"""Run directories: ``<runs-dir>/<UTC timestamp>-<command>/``.

Content (docs/results-format.md):
  run.json        schema version, command line, parameters, metadata, status, result
  raw/            native raw outputs and launcher logs, written while measuring
  <table>.parquet tidy tables (names declared in hpcvar.results.schema)
  plots/          figures

Every file is written atomically (temporary name in the same directory, fsync,
rename), so a reader never sees half a file and an interrupted run keeps what
it had finished.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import math
import os
import socket
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcvar import __version__
from hpcvar.errors import ResultsError, UsageError
from hpcvar.results.schema import SCHEMA_VERSION, check_table, check_version

if TYPE_CHECKING:
    import pandas as pd

RUNS_ENV = "HPCVAR_RUNS"
PARQUET_COMPRESSION = "zstd"
PARQUET_ZSTD_LEVEL = 9  # 8-byte round trips: 3.8 bytes per sample (snappy: 7.5, zstd's default level: 4.0)
DEFAULT_RUNS_DIR = "hpcvar-runs"


def runs_root(runs_dir: str | os.PathLike[str] | None = None) -> Path:
    """The runs root: --runs-dir, else $HPCVAR_RUNS, else ./hpcvar-runs."""
    return Path(runs_dir or os.environ.get(RUNS_ENV) or DEFAULT_RUNS_DIR)


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _write_failed(path: Path, e: OSError) -> ResultsError:
    """One clean error for a write the system refused (read-only directory, full disk, quota)."""
    todo = {errno.ENOSPC: "The disk is full: free space or write to another directory",
            errno.EDQUOT: "The disk quota is exhausted: free space or write to another directory",
            errno.EROFS: "The file system is read-only: write to a writable directory",
            errno.EACCES: "No permission to write there: write to a writable directory",
            errno.EPERM: "No permission to write there: write to a writable directory"}.get(
        e.errno or 0, "Check the directory and free space, or write to another directory")
    return ResultsError(f"cannot write {path.name}: {e.strerror or e}", str(path), todo)


def _owner() -> dict[str, object]:
    return {"pid": os.getpid(), "host": socket.gethostname(), "boot_id": _boot_id()}


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _umask() -> int:
    """The process's umask (read by setting it and putting it back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary name in the same directory, fsync, rename: a reader sees the old file or
    the whole new one, never a part. A refused write (full disk, read-only) raises ResultsError and leaves the
    old file and no temporary file behind."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        # mkstemp makes the file 0600; the user's file gets what open() would give it: 0666 minus the umask
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise _write_failed(path, e) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


def dumps(obj: Any) -> str:
    """JSON as run.json holds it: NaN and infinities written as Python writes them (NaN, Infinity), which Python's
    reader, hpcvar's, reads back as they were."""
    return json.dumps(obj, indent=2, default=_json_default, allow_nan=True)


def finite(obj: Any) -> Any:
    """``obj`` with every number that is not finite (NaN: nothing to divide by; an infinity: a change from 0) as
    None, for standard JSON, which has neither: dicts, lists and tuples walked, numpy values as Python's."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):  # numpy scalars and arrays
        return finite(obj.tolist())
    return obj


def dumps_standard(obj: Any) -> str:
    """Standard JSON (RFC 8259), for other programs: what ``--json`` prints and the files of ``history -o`` and
    ``export``. A number that is not finite is null (``finite``): ``jq`` 1.6 read Infinity as 1.8e308 and
    JavaScript's JSON.parse refuses NaN."""
    try:  # most results have none: no walk over a large one's values
        return json.dumps(obj, indent=2, default=_json_default, allow_nan=False)
    except ValueError:  # "Out of range float values are not JSON compliant"
        return json.dumps(finite(obj), indent=2, default=_json_default, allow_nan=False)


# keys of run.json whose type every reader relies on (checked on open; absent keys are left to each reader)
RUN_KEYS = {"id": str, "command": str, "argv": list, "params": dict, "metadata": dict, "status": str,
            "tables": list, "warnings": list, "launches": list}


def prefetch_arrow() -> None:
    """Import Arrow's Parquet writer in a thread, while the caller computes: a job that spends its time in C
    (ctypes releases the GIL) stores its tables without then waiting for the import (about 0.1 s). Call it
    where the C work starts, not before: while the import holds the GIL, each system call of the main thread
    (a file read, a stat) waits up to the 5 ms switch interval to take it back (a TIT index of 64 files took
    83 ms to read instead of 11). Once per process; nothing if Arrow is already imported."""
    import threading

    if "pyarrow.parquet" in sys.modules or any(t.name == ARROW_THREAD for t in threading.enumerate()):
        return

    def load() -> None:
        import pyarrow.parquet  # noqa: F401

    threading.Thread(target=load, name=ARROW_THREAD).start()


ARROW_THREAD = "hpcvar-import-arrow"


def _arrow_column(values: Any) -> Any:
    """An Arrow array of a table column given as a list or a numpy array: numbers and booleans as they are
    (NaN stays NaN), anything else as text (None: null). Built from buffers: ``pyarrow.array`` imports pandas
    (over 0.2 s) the first time it sees a list or a numpy array, and a job that stores small tables should not
    pay that."""
    import numpy as np
    import pyarrow as pa

    arr = values if isinstance(values, np.ndarray) else np.asarray(values)
    n = len(arr)
    if arr.dtype.kind in "iuf":
        arr = np.ascontiguousarray(arr)
        return pa.Array.from_buffers(pa.from_numpy_dtype(arr.dtype), n, [None, pa.py_buffer(arr)])
    if arr.dtype.kind == "b":
        return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(np.packbits(arr, bitorder="little"))])
    present = np.array([v is not None for v in arr.tolist()], dtype=bool)
    data = [str(v).encode() if v is not None else b"" for v in arr.tolist()]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum([len(d) for d in data], out=offsets[1:])
    wide = offsets[-1] >= 2**31  # Arrow's string offsets are int32; more text takes large_string
    valid = None if present.all() else pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.Array.from_buffers(pa.large_string() if wide else pa.string(), n,
                                 [valid, pa.py_buffer(offsets if wide else offsets.astype(np.int32)),
                                  pa.py_buffer(b"".join(data))], null_count=int(n - present.sum()))


class Run:
    """One run directory."""

    def __init__(self, path: Path, info: dict[str, Any]):
        self.path = Path(path)
        self.info = info

    # ---- creation and loading -------------------------------------------------
    @classmethod
    def create(cls, command: str, params: dict[str, Any], runs_dir: str | os.PathLike[str] | None = None,
               argv: list[str] | None = None, metadata: dict[str, Any] | None = None) -> Run:
        root = runs_root(runs_dir)
        stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        base = f"{stamp}-{command.replace(' ', '-').replace('.', '-')}"
        # the id is the directory name; mkdir is atomic, so two processes starting in the same second (cron,
        # a script running several benchmarks at once) get <stamp>-<command> and <stamp>-<command>-2
        path = root / base
        k = 2
        if root.exists() and not root.is_dir():
            raise ResultsError("the runs directory is not a directory", str(root),
                               f"Give a directory with --runs-dir or {RUNS_ENV} (or move the file away)")
        try:
            root.mkdir(parents=True, exist_ok=True)
            while True:
                try:
                    path.mkdir()
                    break
                except FileExistsError:
                    path = root / f"{base}-{k}"
                    k += 1
        except OSError as e:
            raise _write_failed(path, e) from None
        info = {
            "schema_version": SCHEMA_VERSION,
            "hpcvar_version": __version__,
            "id": path.name,
            "command": command,
            "argv": list(argv if argv is not None else sys.argv),
            "params": params,
            "metadata": metadata or {},
            "status": "running",
            "started_utc": utc_now(),
            "ended_utc": None,
            "exit_status": None,
            "tables": [],
            "result": None,
            "warnings": [],
            "launches": [],
            # who writes this run: a run still 'running' whose process is gone was killed (SIGKILL, power)
            "owner": _owner(),
        }
        run = cls(path, info)
        run.save()
        return run

    def claim(self) -> None:
        """Mark the run running again, written by this process (a resumed run); why it ended before is history."""
        self.info["status"] = "running"
        self.info["owner"] = _owner()
        self.info.pop("error", None)

    @property
    def status(self) -> str:
        """The stored status, except 'lost' for a run stored as running whose process, on this machine since
        its last boot, no longer exists (it was killed before it could mark itself failed or interrupted)."""
        status = str(self.info.get("status"))
        owner = self.info.get("owner") or {}
        if status != "running" or owner.get("host") != socket.gethostname() or owner.get("boot_id") != _boot_id():
            return status
        try:
            os.kill(int(owner["pid"]), 0)
        except ProcessLookupError:
            return "lost"
        except (PermissionError, KeyError, TypeError, ValueError):
            pass  # another user's live process, or no pid recorded
        return status

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Run:
        path = Path(path)
        f = path / "run.json"
        if not f.is_file():
            raise ResultsError("no run.json in this directory", str(path),
                               "Give a run directory (see 'hpcvar runs list')")
        try:
            info = json.loads(f.read_bytes().decode())
        except json.JSONDecodeError as e:
            raise ResultsError(f"run.json is not valid JSON: {e.msg}", f"{f}:{e.lineno}:{e.colno}",
                               "The file is damaged (truncated?): run the measurement again") from None
        except UnicodeDecodeError as e:
            raise ResultsError(f"run.json is not UTF-8 text (byte {e.start})", str(f),
                               "The file is damaged: run the measurement again") from None
        except (OSError, RecursionError) as e:
            raise ResultsError(f"cannot read run.json: {getattr(e, 'strerror', None) or e}", str(f)) from None
        if not isinstance(info, dict):
            raise ResultsError(f"run.json holds a {type(info).__name__}, not a run", str(f),
                               "The file is damaged: run the measurement again")
        check_version(info.get("schema_version"), str(f))
        bad = [k for k, t in RUN_KEYS.items() if k in info and not isinstance(info[k], t)]
        if bad:
            raise ResultsError(f"run.json has a malformed '{bad[0]}'", str(f),
                               "The file is damaged: run the measurement again")
        return cls(path, info)

    # ---- writing -----------------------------------------------------------------
    def save(self) -> None:
        atomic_write_text(self.path / "run.json", dumps(self.info) + "\n")

    def raw_dir(self) -> Path:
        d = self.path / "raw"
        d.mkdir(exist_ok=True)
        return d

    def plots_dir(self) -> Path:
        d = self.path / "plots"
        d.mkdir(exist_ok=True)
        return d

    def write_table(self, name: str, df: pd.DataFrame | Mapping[str, Any]) -> Path:
        """Write a declared table atomically as <name>.parquet (zstd-compressed pages: about half the bytes of
        the default snappy for raw samples, read by every Parquet reader): a DataFrame, or its columns as a
        mapping of name -> list or numpy array (written by Arrow without pandas: a job that needs no pandas does
        not import it)."""
        check_table(name, df)
        import pyarrow as pa
        import pyarrow.parquet as pq

        sink = pa.BufferOutputStream()
        if isinstance(df, Mapping):
            table = pa.Table.from_arrays([_arrow_column(v) for v in df.values()], names=list(df))
        else:
            table = pa.Table.from_pandas(df, preserve_index=False)
        pq.write_table(table, sink, compression=PARQUET_COMPRESSION, compression_level=PARQUET_ZSTD_LEVEL)
        target = self.path / f"{name}.parquet"
        atomic_write_bytes(target, sink.getvalue().to_pybytes())
        if name not in self.info["tables"]:
            self.info["tables"].append(name)
            self.save()
        return target

    def read_table(self, name: str) -> pd.DataFrame:
        import pandas as pd

        f = self.path / f"{name}.parquet"
        if not f.is_file():
            raise ResultsError(f"run has no table '{name}'", str(self.path),
                               f"Tables here: {', '.join(self.info.get('tables', [])) or 'none'}")
        import pyarrow as pa

        try:
            return pd.read_parquet(f)
        except (pa.ArrowException, OSError, ValueError, KeyError, TypeError) as e:
            # KeyError, TypeError: the pandas metadata in the file is damaged (a missing key, an unknown dtype)
            lines = str(e).splitlines() or [type(e).__name__]
            raise ResultsError(f"table '{name}' cannot be read: {lines[0][:200]}", str(f),
                               "The file is damaged (truncated?): run the measurement again") from None

    def has_table(self, name: str) -> bool:
        return (self.path / f"{name}.parquet").is_file()

    def warn(self, message: str) -> None:
        if message not in self.info["warnings"]:
            self.info["warnings"].append(message)
            self.save()

    def finish(self, status: str = "complete", result: Any = None, exit_status: int = 0) -> None:
        self.info["status"] = status
        self.info["ended_utc"] = utc_now()
        self.info["exit_status"] = exit_status
        if result is not None:
            self.info["result"] = result
        self.save()

    @property
    def id(self) -> str:
        return self.path.name

    def steps_dir(self) -> Path:
        """Where a composite run (characterize) keeps the runs of its steps."""
        d = self.path / "steps"
        d.mkdir(exist_ok=True)
        return d

    def children(self) -> list[Run]:
        """The runs of a composite run's steps, oldest first."""
        return list_runs(self.path / "steps") if (self.path / "steps").is_dir() else []


@contextmanager
def run_lifecycle(run: Run) -> Iterator[Run]:
    """The one way a job ends its run: ``with run_lifecycle(run): <the job's work>``.

    - The block ends normally: the run is marked ``complete`` (with the result the block left in
      ``run.info["result"]``), unless the block finished it itself (``run.finish(...)``, e.g. a composite run
      that ends ``failed`` because a step failed): a status other than ``running`` is kept.
    - Anything is raised: the run is marked ``interrupted`` for KeyboardInterrupt (Ctrl-C, and SIGTERM, which
      the command line turns into KeyboardInterrupt), else ``failed``, and the exception goes on unchanged.
      What the block stored before (raw files, tables) stays in the run directory.

    Every job that creates or resumes a run uses it, so that no run is left ``running`` once its process has
    ended its work.
    """
    try:
        yield run
    except BaseException as e:
        global _interrupted
        run.info["error"] = _error_record(e)
        run.finish("interrupted" if isinstance(e, KeyboardInterrupt) else "failed", exit_status=1)
        if isinstance(e, KeyboardInterrupt):
            _interrupted = run  # the outermost run ends last: the one to resume (a characterization, not its step)
        raise
    if run.info.get("status") == "running":
        run.finish("complete")


_interrupted: Run | None = None


def interrupted_run() -> Run | None:
    """The run this process ended as interrupted (Ctrl-C, SIGTERM), for the command line's last words."""
    return _interrupted


RESUMABLE = ("bench ", "characterize")  # the commands whose runs --resume continues


def _error_record(e: BaseException) -> dict[str, Any]:
    """Why a run ended failed or interrupted, as run.json keeps it (``error``): the kind of failure (``LaunchTimeout``,
    ``LaunchError``, ``KeyboardInterrupt``, ...), what failed, where (the flag or file) and what to do."""
    from hpcvar.errors import HpcvarError

    if isinstance(e, HpcvarError):
        return {"kind": type(e).__name__, "what": e.what, "where": e.where, "todo": e.todo}
    if isinstance(e, KeyboardInterrupt):
        return {"kind": "KeyboardInterrupt", "what": "interrupted (Ctrl-C or SIGTERM)", "where": None, "todo": None}
    return {"kind": type(e).__name__, "what": str(e) or type(e).__name__, "where": None, "todo": None}


def _step_ref(ref: str) -> tuple[str, str] | None:
    """'<parent>/steps/<child>' -> (parent, child)."""
    parent, sep, child = ref.rstrip("/").partition("/steps/")
    return (parent, child) if sep and parent and child and "/" not in child else None


def resolve_run(ref: str, runs_dir: str | os.PathLike[str] | None = None) -> Path:
    """A run given as a path, a name under the runs root (a step of a characterization as
    '<parent>/steps/<child>' or its bare name), a unique part of a name, or 'latest'."""
    p = Path(ref)
    if (p / "run.json").is_file():
        return p
    root = runs_root(runs_dir)
    if ref == "latest":
        broken: list[tuple[Path, ResultsError]] = []
        runs = [r.path for r in list_runs(runs_dir, broken=broken)] + [b for b, _ in broken]
        if not runs:
            raise UsageError(f"no runs in {root}", "RUN", "Run a benchmark first, or pass --runs-dir")
        newest = max(runs, key=lambda x: x.name)  # ids start with their UTC second: the newest, readable or not
        _unreadable(newest, broken)
        return newest
    if (root / ref / "run.json").is_file():
        return root / ref
    if p.is_file():
        raise UsageError(f"'{ref}' is a file, not a run directory", "RUN",
                         "Give a run directory or a run name (see 'hpcvar runs list')")
    if os.sep in ref and not _step_ref(ref):
        # a path that names no run: say what is missing, not "no run"
        if p.exists():
            raise UsageError(f"'{ref}' has no run.json: it is not a run directory", "RUN",
                             "Give a run directory or a run name (see 'hpcvar runs list')")
        raise UsageError(f"no such file or directory: '{ref}'", "RUN", "Check the path")
    step = _step_ref(ref)
    if step and (root / step[0] / "steps" / step[1] / "run.json").is_file():
        return root / step[0] / "steps" / step[1]
    return _match_run(ref, p, root, runs_dir)


def _match_run(ref: str, p: Path, root: Path, runs_dir: str | os.PathLike[str] | None) -> Path:
    """The one stored run (steps included) whose name is ``ref``, or else contains it."""
    broken: list[tuple[Path, ResultsError]] = []
    candidates = [r.path for r in list_runs(runs_dir, steps=True, broken=broken)] + [b for b, _ in broken]
    exact = [c for c in candidates if c.name == ref]
    if len(exact) == 1:
        return exact[0]
    top = [c for c in candidates if c.parent == root and ref in c.name]
    matches = exact or top or [c for c in candidates if ref in run_ref(c, root)]
    if len(matches) == 1:
        _unreadable(matches[0], broken)
        return matches[0]
    if len(matches) > 1:
        raise UsageError(f"'{ref}' matches {len(matches)} runs", "RUN", "Give more of the run's name")
    if "." in p.name and not p.exists():
        raise UsageError(f"no such file or run: '{ref}'", "RUN", "Check the file name, or see 'hpcvar runs list'")
    raise UsageError(f"no run '{ref}' in {root}", "RUN", "See 'hpcvar runs list', or pass --runs-dir")


def _unreadable(path: Path, broken: list[tuple[Path, ResultsError]]) -> None:
    """The run named is one that cannot be read: say so, and why (never "no run")."""
    for b, e in broken:
        if b == path:
            raise ResultsError(f"run {path.name} is unreadable: {e.what}", e.where,
                               e.todo or "The run is damaged; run the measurement again")


def run_ref(path: Path, root: Path) -> str:
    """The name a run is shown by and given back by: its directory name, '<parent>/steps/<child>' for a step."""
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)


def list_runs(runs_dir: str | os.PathLike[str] | None = None, steps: bool = False,
              broken: list[tuple[Path, ResultsError]] | None = None) -> list[Run]:
    """All readable runs under the root, oldest first; with ``steps``, each composite run is followed by the runs
    of its steps. Unreadable ones are skipped, or appended to ``broken`` (path, error) when it is given."""
    root = runs_root(runs_dir)
    out: list[Run] = []
    if not root.is_dir():
        return out

    def scan(d: Path) -> None:
        try:
            subs = sorted(x for x in d.iterdir() if x.is_dir() and not x.name.startswith("."))
        except OSError:
            return
        for x in subs:
            if not (x / "run.json").exists():
                continue
            try:
                out.append(Run.open(x))
            except ResultsError as e:
                if broken is not None:
                    broken.append((x, e))
                continue
            if steps and (x / "steps").is_dir():
                scan(x / "steps")

    scan(root)
    return out
