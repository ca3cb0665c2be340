"""Results store: run directories, schema, raw-file reader.

The raw-file reader (``RawFile``, ``RawPoint``, ``read_raw``) needs numpy; it is imported on first use, so that
a command that only stores or lists runs (and every ``--help``) starts without it.
"""

from typing import TYPE_CHECKING, Any

from hpcvar.results.schema import SCHEMA_VERSION, TABLES
from hpcvar.results.store import (
                                   Run,
                                   atomic_write_bytes,
                                   atomic_write_text,
                                   dumps,
                                   dumps_standard,
                                   list_runs,
                                   resolve_run,
                                   run_lifecycle,
                                   runs_root,
)

if TYPE_CHECKING:
    from hpcvar.results.rawio import RawFile, RawPoint, read_raw

_RAWIO = ("RawFile", "RawPoint", "read_raw")


def __getattr__(name: str) -> Any:
    if name in _RAWIO:
        from hpcvar.results import rawio

        return getattr(rawio, name)
    raise AttributeError(f"module 'hpcvar.results' has no attribute '{name}'")


__all__ = ["SCHEMA_VERSION", "TABLES", "RawFile", "RawPoint", "Run", "atomic_write_bytes", "atomic_write_text",
           "dumps", "dumps_standard", "list_runs", "read_raw", "resolve_run", "run_lifecycle", "runs_root"]
