"""Large arrays on anonymous memory mappings, faulted in by the kernel in one call.

numpy asks the kernel for transparent huge pages on every array of 4 MiB or more (``madvise(MADV_HUGEPAGE)``).
Where THP is set to ``madvise`` (the usual default), the first touch of such an array takes 2 MiB pages that
the kernel must find and clear: on the 2-core VM we measure on, writing 640 MB of fresh numpy arrays took
0.1 to 2.9 s (system time in ``clear_page``, from one run to the next; numpy/numpy#31590 describes the same
stalls) against 0.3 to 0.4 s for the 4 KiB pages of a mapping made with ``MAP_POPULATE``, which the kernel
faults in during the ``mmap`` call instead of one trap per page. ``empty`` gives the trace columns and the op
arrays of the replay (``hpcvar sim app``) that steadier memory; the kernel's own THP policy still applies to
the mapping (a system with THP ``always`` gets huge pages there too). The mapping is unmapped when the array
and every view of it are gone.
"""

from __future__ import annotations

import mmap
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

MIN_MAPPED_BYTES = 4 << 20  # smaller arrays come from numpy's allocator (below numpy's huge page threshold too)
_FLAGS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)


def mapped(nbytes: int) -> mmap.mmap:
    """``nbytes`` (at least 1) of writable memory on its own prefaulted mapping; without numpy."""
    try:
        return mmap.mmap(-1, max(nbytes, 1), flags=_FLAGS)
    except OSError as e:  # ENOMEM: the MemoryError numpy's allocator raises
        raise MemoryError(f"cannot map {nbytes} bytes: {e.strerror}") from None


def raw(nbytes: int) -> bytearray | mmap.mmap:
    """``nbytes`` (at least 1) of writable memory for an array made later (``numpy.frombuffer``): a prefaulted
    mapping when large (``MIN_MAPPED_BYTES``), else a bytearray; without numpy."""
    return mapped(nbytes) if nbytes >= MIN_MAPPED_BYTES else bytearray(max(nbytes, 1))


def empty(n: int, dtype) -> np.ndarray:
    """An uninitialised writable array of ``n`` items of ``dtype``, on its own prefaulted mapping when it is
    large (``MIN_MAPPED_BYTES``)."""
    import numpy as np

    dtype = np.dtype(dtype)
    nbytes = n * dtype.itemsize
    if nbytes < MIN_MAPPED_BYTES:
        return np.empty(n, dtype)
    return np.frombuffer(mapped(nbytes), dtype=dtype, count=n)


__all__ = ["MIN_MAPPED_BYTES", "empty", "mapped", "raw"]
