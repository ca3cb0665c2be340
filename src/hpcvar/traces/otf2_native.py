"""The compiled OTF2 reader (native/sim/otf2_read.c, libhv_otf2.so, built only where libotf2 was found)
through ctypes: an archive into the columns of ``hpcvar.traces.columns.events_frame``, the same as the Python
reference ``hpcvar.traces.otf2_import`` (through the otf2 package) builds (tests/unit/test_otf2_native.py)."""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

import numpy as np

from hpcvar._native import config_library, fill_columns, loads
from hpcvar.errors import HpcvarError

# error kinds of native/sim/otf2_read.h, in order
OK, E_OPEN, E_RESOLUTION, E_READ, E_TIME, E_NO_PROCESS, E_MEMORY = range(7)
_P, _I64, _I32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
COLUMNS = {"task": np.int32, "seq": np.int64, "op": np.int8, "peer": np.int32, "bytes": np.int64, "tag": np.int32,
           "req": np.int64, "t_start": np.int64, "t_end": np.int64}


class _Config(ctypes.Structure):
    _fields_ = ([("anchor", ctypes.c_char_p)] + [(n, _I64) for n in ("nrows", "ntasks", "err_value")]
                + [(n, _I32) for n in ("err", "pad")] + [("msg", ctypes.c_char * 512)]
                + [(n, _P) for n in COLUMNS] + [("state", _P)])


@dataclass
class Read:
    """The columns (COLUMNS) and ntasks, or an error: its kind, the message, a value."""

    cols: dict[str, np.ndarray] | None
    ntasks: int
    err: int = OK
    msg: str = ""
    value: int = 0


@functools.cache
def lib() -> ctypes.CDLL:
    return config_library("libhv_otf2.so", dict.fromkeys(("hv_otf2_read", "hv_otf2_fill", "hv_otf2_free"), _Config),
                          {"hv_otf2_config_size": _Config})


def available() -> bool:
    return loads(lib)


def read(anchor: str) -> Read:
    """Read the archive whose anchor file is ``anchor`` in C."""
    c = _Config(anchor=str(anchor).encode())
    so = lib()
    try:
        if so.hv_otf2_read(ctypes.byref(c)) != 0:
            raise HpcvarError("reading the OTF2 archive ran out of memory", None, "Import a smaller archive")
        if c.err:
            return Read(None, int(c.ntasks), c.err, c.msg.decode(errors="replace"), int(c.err_value))
        cols = fill_columns(so.hv_otf2_fill, c, COLUMNS)
        if c.err:
            raise HpcvarError("reading the OTF2 archive ran out of memory", None, "Import a smaller archive")
        return Read(cols, int(c.ntasks))
    finally:
        so.hv_otf2_free(ctypes.byref(c))


__all__ = ["COLUMNS", "Read", "available", "lib", "read"]
