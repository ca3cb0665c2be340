"""Event traces: the native Parquet format, imports (OTF2, SimGrid TIT), Chrome/Perfetto export."""

from __future__ import annotations

from pathlib import Path

from hpcvar.errors import UsageError


def load_trace(path: str, fmt: str = "auto", flops_rate: float = 1e9):
    """A Trace from a native Parquet trace, a SimGrid TIT file or an OTF2 archive (anchor .otf2)."""
    from hpcvar.traces import native

    p = Path(path)
    if fmt == "auto":
        fmt = "otf2" if p.suffix == ".otf2" else "tit" if p.suffix in (".txt", ".tit") else "native"
    if fmt == "native":
        return native.read_parquet(p)
    if fmt == "tit":
        from hpcvar.traces.tit import read_tit

        return read_tit(p, flops_rate)
    if fmt == "otf2":
        from hpcvar.traces.otf2_import import read_otf2

        return read_otf2(p)
    raise UsageError(f"unknown trace format '{fmt}'", "--format", "Use native, tit or otf2")
