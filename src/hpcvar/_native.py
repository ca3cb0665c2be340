"""Finding the native programs and the build information.

The programs are installed inside the package (``hpcvar/_bin``) by the CMake
build. ``HPCVAR_NATIVE_DIR`` overrides the place (a developer's CMake build
directory, e.g. ``build/dev/bin``).
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
from pathlib import Path

import hpcvar
from hpcvar.errors import MissingToolError


def native_dirs() -> list[Path]:
    dirs = []
    env = os.environ.get("HPCVAR_NATIVE_DIR")
    if env:
        dirs.append(Path(env))
    dirs.extend(Path(p) / "_bin" for p in hpcvar.__path__)
    return dirs


@functools.cache
def build_info() -> dict:
    """What the build found: MPI compiler and its directory, compiler flags.

    A CMake build directory keeps build_info.json one level above its bin/: with HPCVAR_NATIVE_DIR set,
    both places are looked at before the installed package, so that a build against another MPI (e.g.
    MPICC=/usr/bin/mpicc) is launched with that MPI's mpiexec and not with the installed one's.
    """
    for d in native_dirs():
        for f in (d / "build_info.json", d.parent / "build_info.json"):
            if f.is_file():
                info = json.loads(f.read_text())
                info["native_dir"] = str(d)
                return info
    return {"mpi_found": False, "native_dir": None}


def find_program(name: str, needs_mpi: bool = False) -> Path:
    """The path of a native program (``hv_latency``), or MissingToolError with the remedy."""
    for d in native_dirs():
        p = d / name
        if p.is_file() and os.access(p, os.X_OK):
            return p
    if needs_mpi and not build_info().get("mpi_found"):
        raise MissingToolError(
            f"hpcvar was built without MPI, so '{name}' is not available", None,
            "Install an MPI (pip install 'hpcvar[mpich]', or load your system MPI so that mpicc is on PATH "
            "or MPICC names it) and reinstall hpcvar (make install)")
    raise MissingToolError(f"the native program '{name}' is not installed", None,
                           "Reinstall hpcvar (make install), or set HPCVAR_NATIVE_DIR to a CMake build's bin/")


def find_library(name: str) -> Path:
    """The path of a native shared library (``libhv_jitsim.so``)."""
    for d in native_dirs():
        p = d / name
        if p.is_file():
            return p
    raise MissingToolError(f"the native library '{name}' is not installed", None,
                           "Reinstall hpcvar (make install), or set HPCVAR_NATIVE_DIR to a CMake build's bin/")


def config_library(name: str, calls: dict[str, type], sizes: dict[str, type]) -> ctypes.CDLL:
    """A native library called through ctypes the house's way: each function of ``calls`` takes a pointer
    to its config struct and returns an int; each function of ``sizes`` returns the size of its struct as
    the library was compiled, and a library built from other sources than this Python code is refused."""
    from hpcvar.errors import HpcvarError

    so = ctypes.CDLL(str(find_library(name)))
    for size_fn, cfg in sizes.items():
        f = getattr(so, size_fn, None)
        if f is None or f() != ctypes.sizeof(cfg):
            raise HpcvarError(f"{name} does not match this hpcvar ({size_fn})", None,
                              "Rebuild hpcvar (make install) so that the library matches the Python code")
    for fn, cfg in calls.items():
        getattr(so, fn).restype = ctypes.c_int
        getattr(so, fn).argtypes = [ctypes.POINTER(cfg)]
    return so


def loads(loader) -> bool:
    """Whether ``loader()`` (a cached library loader) finds a usable library: not installed, not loadable
    and built from other sources all count as no."""
    from hpcvar.errors import HpcvarError

    try:
        loader()
    except (MissingToolError, OSError, HpcvarError):
        return False
    return True


def fill_columns(so_fill, cfg, columns: dict) -> dict:
    """The second step of the count-then-fill calls (the TIT parser, the OTF2 reader): one array per column
    of ``cfg.nrows`` rows on prefaulted memory (hpcvar._memory), their addresses set in the config struct
    under the column names, then ``so_fill(cfg)`` writes them. Returns the arrays."""
    from hpcvar._memory import empty

    cols = {name: empty(cfg.nrows, dtype) for name, dtype in columns.items()}
    for name, a in cols.items():
        setattr(cfg, name, a.ctypes.data)
    so_fill(ctypes.byref(cfg))
    return cols
