"""The compiled SimGrid TIT parser (native/sim/tit.c, in libhv_replay.so) through ctypes.

``parse(sources, flops_rate)`` reads the files' bytes (ASCII) into column arrays: the same rows, values and
first error as the Python reference ``hpcvar.traces.tit._Parser``, which writes the error messages from the
kind, place and token this module returns (tests/unit/test_tit_native.py compares the two). It is ``start``
(the parse in C, which holds no lock of Python's: another thread may run it, hpcvar.traces.tit_prefetch) then
``finish`` (the columns as numpy arrays). ``start`` fills the columns too, into memory it allocates without numpy
(hpcvar._memory.raw), which ``finish`` wraps: nothing here imports numpy before ``finish``.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hpcvar import _memory
from hpcvar._native import config_library, loads
from hpcvar.errors import HpcvarError

if TYPE_CHECKING:
    import numpy as np

_P, _I64, _I32, _F64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_double
COLUMNS = {"task": "int32", "seq": "int64", "op": "int8", "peer": "int32", "bytes": "int64", "tag": "int32",
           "req": "int64", "t": "int64"}
_ITEMSIZE = {"int8": 1, "int32": 4, "int64": 8}


class _Config(ctypes.Structure):
    _fields_ = ([("nfiles", _I64)] + [(n, _P) for n in ("buf", "len")] + [("flops_rate", _F64)]
                + [(n, _I64) for n in ("max_digits", "dialect", "nrows", "ntasks")] + [("grammars", _P)]
                + [(n, _I32) for n in ("err", "err_tok")]
                + [(n, _I64) for n in ("err_file", "err_line", "err_start", "err_end", "err_a", "err_b")]
                + [(n, _P) for n in COLUMNS] + [("state", _P)])


@dataclass
class Parsed:
    """The columns (COLUMNS, sorted by task then seq, added finalize rows last), ntasks and each file's grammar
    (hpcvar.traces.tit_dialect), or the first error: its kind, file index, line, the line's byte range, the
    token index and two values."""

    cols: dict[str, np.ndarray] | None
    ntasks: int
    grammars: list[int]
    err: int = 0
    file: int = -1
    line: int = 0
    span: tuple[int, int] = (0, 0)
    tok: int = 0
    a: int = 0
    b: int = 0


@functools.cache
def lib() -> ctypes.CDLL:
    return config_library("libhv_replay.so", dict.fromkeys(("hv_tit_parse", "hv_tit_fill", "hv_tit_free"), _Config),
                          {"hv_tit_config_size": _Config})


def available() -> bool:
    return loads(lib)


@dataclass
class Pending:
    """A parse done in C (``rc``: 0, or out of memory) and its columns filled (``cols``: their memory; empty on a
    parse error): the config and what it points to (the files' bytes, their lengths, the grammars it writes)."""

    cfg: _Config
    rc: int
    keep: tuple = field(repr=False)
    grammars: ctypes.Array = field(repr=False)
    cols: dict = field(default_factory=dict, repr=False)


def start(datas: list[bytes], flops_rate: float, dialect: int = 0) -> Pending:
    """Parse the files' bytes (in order, ASCII) in C; ``dialect``: a code of hpcvar.traces.tit_dialect (0:
    auto). ``finish`` (or ``discard``) must follow."""
    n = len(datas)
    bufs = (ctypes.c_char_p * n)(*datas)  # pointers to the bytes objects' own buffers, no copy
    lens = (ctypes.c_int64 * n)(*(len(d) for d in datas))
    grammars = (ctypes.c_int32 * n)()
    c = _Config(nfiles=n, buf=ctypes.cast(bufs, _P), len=ctypes.cast(lens, _P), flops_rate=flops_rate,
                max_digits=sys.get_int_max_str_digits(), dialect=dialect, grammars=ctypes.cast(grammars, _P))
    so = lib()
    p = Pending(c, so.hv_tit_parse(ctypes.byref(c)), (bufs, lens, datas), grammars)
    if p.rc == 0 and not c.err:  # the columns, in memory of its own (the count-then-fill of hpcvar._native)
        try:
            p.cols = {name: _memory.raw(c.nrows * _ITEMSIZE[t]) for name, t in COLUMNS.items()}
        except MemoryError:
            discard(p)
            raise
        for name, buf in p.cols.items():
            setattr(c, name, ctypes.addressof(ctypes.c_char.from_buffer(buf)))
        so.hv_tit_fill(ctypes.byref(c))
    return p


def finish(p: Pending) -> Parsed:
    """The columns of a parse (or its first error), its C state freed."""
    so, c = lib(), p.cfg
    try:
        if p.rc != 0:
            raise HpcvarError("parsing the TIT trace ran out of memory", None, "Import a smaller trace")
        if c.err:
            return Parsed(None, int(c.ntasks), [], c.err, c.err_file, c.err_line, (c.err_start, c.err_end),
                          c.err_tok, c.err_a, c.err_b)
        import numpy as np

        cols = {name: np.frombuffer(p.cols[name], COLUMNS[name], count=c.nrows) for name in COLUMNS}
        if c.err:  # only HV_TIT_E_MEMORY after a good parse
            raise HpcvarError("parsing the TIT trace ran out of memory", None, "Import a smaller trace")
        return Parsed(cols, int(c.ntasks), list(p.grammars))
    finally:
        so.hv_tit_free(ctypes.byref(c))


def discard(p: Pending) -> None:
    """Free a parse that is not used."""
    lib().hv_tit_free(ctypes.byref(p.cfg))


def parse(datas: list[bytes], flops_rate: float, dialect: int = 0) -> Parsed:
    """Parse the files' bytes (in order, ASCII) in C; ``dialect``: a code of hpcvar.traces.tit_dialect (0:
    auto)."""
    return finish(start(datas, flops_rate, dialect))


__all__ = ["COLUMNS", "Parsed", "Pending", "available", "discard", "finish", "lib", "parse", "start"]
