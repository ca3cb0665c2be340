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
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcvar import __version__
from hpcvar.errors import ResultsError, UsageError
from hpcvar.results.schema import SCHEMA_VERSION, check_table, check_version

if TYPE_CHECKING:
    import pandas as pd

RUNS_ENV = "HPCVAR_RUNS"
DEFAULT_RUNS_DIR = "hpcvar-runs"


def runs_root(runs_dir: str | os.PathLike[str] | None = None) -> Path:
    """The runs root: --runs-dir, else $HPCVAR_RUNS, else ./hpcvar-runs."""
    return Path(runs_dir or os.environ.get(RUNS_ENV) or DEFAULT_RUNS_DIR)


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=_json_default, allow_nan=True)


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
        root.mkdir(parents=True, exist_ok=True)
        path = root / base
        k = 2
        while True:
            try:
                path.mkdir()
                break
            except FileExistsError:
                path = root / f"{base}-{k}"
                k += 1
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
        }
        run = cls(path, info)
        run.save()
        return run

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Run:
        path = Path(path)
        f = path / "run.json"
        if not f.is_file():
            raise ResultsError("no run.json in this directory", str(path),
                               "Give a run directory (see 'hpcvar runs list')")
        try:
            info = json.loads(f.read_text())
        except json.JSONDecodeError as e:
            raise ResultsError(f"run.json is not valid JSON: {e.msg}", f"{f}:{e.lineno}:{e.colno}") from None
        check_version(info.get("schema_version"), str(f))
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

    def write_table(self, name: str, df: pd.DataFrame) -> Path:
        """Write a declared table atomically as <name>.parquet."""
        check_table(name, df)
        import pyarrow as pa
        import pyarrow.parquet as pq

        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), sink)
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
        return pd.read_parquet(f)

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


def resolve_run(ref: str, runs_dir: str | os.PathLike[str] | None = None) -> Path:
    """A run given as a path, a directory name under the runs root, or 'latest'."""
    p = Path(ref)
    if (p / "run.json").is_file():
        return p
    root = runs_root(runs_dir)
    if ref == "latest":
        runs = list_runs(runs_dir)
        if not runs:
            raise UsageError(f"no runs in {root}", "RUN", "Run a benchmark first, or pass --runs-dir")
        return runs[-1].path
    if (root / ref / "run.json").is_file():
        return root / ref
    matches = sorted(d for d in root.glob(f"*{ref}*") if (d / "run.json").is_file()) if root.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise UsageError(f"'{ref}' matches {len(matches)} runs", "RUN", "Give more of the run's name")
    raise UsageError(f"no run '{ref}' in {root}", "RUN", "See 'hpcvar runs list', or pass --runs-dir")


def list_runs(runs_dir: str | os.PathLike[str] | None = None) -> list[Run]:
    """All readable runs under the root, oldest first; unreadable ones are skipped."""
    root = runs_root(runs_dir)
    out: list[Run] = []
    if not root.is_dir():
        return out
    for d in sorted(root.iterdir()):
        if (d / "run.json").is_file():
            try:
                out.append(Run.open(d))
            except ResultsError:
                continue
    return out
