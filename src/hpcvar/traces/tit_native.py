"""The compiled SimGrid TIT parser (native/sim/tit.c, in libhv_replay.so) through ctypes.

``parse(sources, flops_rate)`` reads the files' bytes (ASCII) into column arrays: the same rows, values and
first error as the Python reference ``hpcvar.traces.tit._Parser``, which writes the error messages from the
kind, place and token this module returns (tests/unit/test_tit_native.py compares the two).
"""

from __future__ import annotations

import ctypes
import functools
import sys
from dataclasses import dataclass

import numpy as np

from hpcvar._native import config_library, fill_columns, loads
from hpcvar.errors import HpcvarError

_P, _I64, _I32, _F64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_double
COLUMNS = {"task": np.int32, "seq": np.int64, "op": np.int8, "peer": np.int32, "bytes": np.int64, "tag": np.int32,
           "req": np.int64, "t": np.int64}


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


def parse(datas: list[bytes], flops_rate: float, dialect: int = 0) -> Parsed:
    """Parse the files' bytes (in order, ASCII) in C; ``dialect``: a code of hpcvar.traces.tit_dialect (0:
    auto)."""
    bufs = (ctypes.c_char_p * len(datas))(*datas)  # pointers to the bytes objects' own buffers, no copy
    lens = np.array([len(d) for d in datas], np.int64)
    grammars = np.zeros(len(datas), np.int32)
    c = _Config(nfiles=len(datas), buf=ctypes.cast(bufs, _P), len=lens.ctypes.data, flops_rate=flops_rate,
                max_digits=sys.get_int_max_str_digits(), dialect=dialect, grammars=grammars.ctypes.data)
    so = lib()
    try:
        if so.hv_tit_parse(ctypes.byref(c)) != 0:
            raise HpcvarError("parsing the TIT trace ran out of memory", None, "Import a smaller trace")
        if c.err:
            return Parsed(None, int(c.ntasks), [], c.err, c.err_file, c.err_line, (c.err_start, c.err_end),
                          c.err_tok, c.err_a, c.err_b)
        cols = fill_columns(so.hv_tit_fill, c, COLUMNS)
        if c.err:  # only HV_TIT_E_MEMORY after a good parse
            raise HpcvarError("parsing the TIT trace ran out of memory", None, "Import a smaller trace")
        return Parsed(cols, int(c.ntasks), [int(g) for g in grammars])
    finally:
        so.hv_tit_free(ctypes.byref(c))


__all__ = ["COLUMNS", "Parsed", "available", "lib", "parse"]
