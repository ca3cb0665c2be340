"""A trace from any format hpcvar reads, and the choice of an importer's engine."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from hpcvar.errors import UsageError

IMPORT_ENGINES = ("auto", "native", "python")
ENGINE_ENV = "HPCVAR_IMPORT_ENGINE"


def import_engine(engine: str | None, available: Callable[[], bool], lib: Callable[[], object]) -> str:
    """``native`` or ``python``: the importer to run. ``engine`` (else $HPCVAR_IMPORT_ENGINE, else ``auto``):
    ``auto`` is the compiled importer when its library is installed, ``native`` requires it (``lib()``
    raises MissingToolError with the remedy), ``python`` is the reference."""
    where = "--engine"
    if engine is None:
        engine, where = os.environ.get(ENGINE_ENV) or "auto", ENGINE_ENV
    if engine not in IMPORT_ENGINES:
        raise UsageError(f"unknown import engine '{engine}'", where, f"Use one of {', '.join(IMPORT_ENGINES)}")
    if engine == "native":
        lib()
        return "native"
    return "native" if engine == "auto" and available() else "python"


# the formats load_trace reads ("native": the name of "parquet" before, still accepted)
FORMATS = ("parquet", "tit", "otf2")
PARQUET_MAGIC = b"PAR1"
SNIFF_BYTES = 65536


def trace_format(path: Path, fmt: str = "auto") -> str:
    """The format to read ``path`` as: ``fmt``, or with ``auto`` by the extension (.otf2 OTF2, .txt and .tit
    SimGrid TIT, .parquet hpcvar's Parquet), else by the content: a file that starts with Parquet's magic is
    Parquet, one whose first 64 KiB are ASCII text is TIT (SMPI's index files often have no extension; the TIT
    reader then names the line it cannot read), anything else Parquet (whose reader says what is wrong)."""
    if fmt != "auto":
        return fmt
    if path.suffix == ".otf2":
        return "otf2"
    if path.suffix in (".txt", ".tit"):
        return "tit"
    if path.suffix == ".parquet":
        return "parquet"
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError:  # missing or unreadable: the Parquet reader's error names the file
        return "parquet"
    if head.startswith(PARQUET_MAGIC) or not head:
        return "parquet"
    return "tit" if head.isascii() and b"\0" not in head else "parquet"


def load_trace(path: str, fmt: str = "auto", flops_rate: float = 1e9, engine: str | None = None,
               dialect: str | None = None, prefetch_arrow: bool = True):
    """A Trace from hpcvar's Parquet trace, a SimGrid TIT file or an OTF2 archive (anchor .otf2); ``fmt``
    auto goes by the extension; ``engine`` picks the TIT and OTF2 importer (import_engine); ``dialect``: the
    TIT dialect (None: auto, else the SimGrid version that wrote it, hpcvar.traces.tit_dialect);
    ``prefetch_arrow``: the compiled importers start importing Arrow's Parquet writer while they read (for a
    caller that stores Arrow next); False for one that has C work of its own to overlap it with first."""
    from hpcvar.traces import parquet

    p = Path(path)
    fmt = trace_format(p, fmt)
    if fmt in ("parquet", "native"):
        return parquet.read_parquet(p)
    if fmt == "tit":
        from hpcvar.traces.tit import read_tit

        return read_tit(p, flops_rate, engine, dialect, prefetch_arrow)
    if fmt == "otf2":
        from hpcvar.traces.otf2_import import read_otf2

        return read_otf2(p, engine, prefetch_arrow)
    raise UsageError(f"unknown trace format '{fmt}'", "--from", f"Use {', '.join(FORMATS)}")
