"""A TIT trace parsed in C while the command imports what it runs.

``hpcvar sim app TRACE.txt`` spends about 0.15 s importing numpy and its job before it reads the trace, and the
C parse of a large trace takes as long again; the parse holds no lock of Python's. ``start`` reads the files (on
the calling thread: a thread doing Python work would slow the imports' system calls, docs/replay.md) and starts
the C parse on a thread of its own; ``take``, called by the reader (hpcvar.traces.tit.read_tit), waits for it
and hands over the files and the parse when they are of the same trace, flop rate and dialect. Anything that
goes wrong here is left to the reader, which reads again and says what is wrong. Nothing here imports numpy.
"""

from __future__ import annotations

import threading
from pathlib import Path

from hpcvar.errors import HpcvarError

_started: dict = {}


def start(path: str, fmt: str, flops_rate: float, dialect: str | None) -> bool:
    """Read a TIT trace's files and start their C parse; False when it is not a TIT trace or the compiled parser
    will not read it (the reader then does all)."""
    from hpcvar.traces import tit_dialect as td
    from hpcvar.traces import tit_files, tit_native
    from hpcvar.traces.load import import_engine, trace_format

    _drop()  # one a command started and never read (it stopped before): not this one's
    p = Path(path)
    if trace_format(p, fmt) != "tit" or not p.is_file():
        return False
    try:
        code = td.parse_dialect(dialect or "auto")
        if import_engine(None, tit_native.available, tit_native.lib) != "native":
            return False
        sources = tit_files.sources(p)
    except (HpcvarError, OSError, ValueError):
        return False
    if not all(d.isascii() for _, d in sources):
        return False
    box: dict = {}

    def parse() -> None:
        try:
            box["pending"] = tit_native.start([d for _, d in sources], flops_rate, code)
        except (HpcvarError, OSError, MemoryError):  # the reader parses again and says what is wrong
            pass

    t = threading.Thread(target=parse, name="hpcvar-tit-parse", daemon=True)
    t.start()
    _started.update(key=(str(p), flops_rate, code), sources=sources, thread=t, box=box)
    return True


def _pop():
    """(key, files, parse or None) of the parse started, once its thread is done; None when none was started."""
    if not _started:
        return None
    st = dict(_started)
    _started.clear()
    st["thread"].join()
    return st["key"], st["sources"], st["box"].get("pending")


def _drop() -> None:
    from hpcvar.traces import tit_native

    popped = _pop()
    if popped is not None and popped[2] is not None:
        tit_native.discard(popped[2])


def take(path: Path, flops_rate: float, code: int):
    """(the files, the parse or None) started for this trace, flop rate and dialect code, or None."""
    from hpcvar.traces import tit_native

    popped = _pop()
    if popped is None:
        return None
    key, sources, pending = popped
    if key != (str(path), flops_rate, code):
        if pending is not None:
            tit_native.discard(pending)
        return None
    return sources, pending


__all__ = ["start", "take"]
