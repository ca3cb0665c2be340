"""Results store: run directories, schema, raw-file reader."""

from hpcvar.results.rawio import RawFile, RawPoint, read_raw
from hpcvar.results.schema import SCHEMA_VERSION, TABLES
from hpcvar.results.store import (
                                   Run,
                                   atomic_write_bytes,
                                   atomic_write_text,
                                   dumps,
                                   list_runs,
                                   resolve_run,
                                   run_lifecycle,
                                   runs_root,
)

__all__ = ["SCHEMA_VERSION", "TABLES", "RawFile", "RawPoint", "Run", "atomic_write_bytes", "atomic_write_text",
           "dumps", "list_runs", "read_raw", "resolve_run", "run_lifecycle", "runs_root"]
