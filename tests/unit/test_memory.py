"""hpcvar._memory.empty: the large arrays of the replay's fast path on their own mappings."""

from __future__ import annotations

import numpy as np
import pytest

from hpcvar import _memory


@pytest.mark.parametrize("n, dtype", [(0, np.int64), (7, np.int8), (_memory.MIN_MAPPED_BYTES // 8 + 3, np.int64),
                                      (_memory.MIN_MAPPED_BYTES, np.int8)])
def test_empty_gives_writable_arrays_of_the_size_and_type(n, dtype):
    a = _memory.empty(n, dtype)
    assert a.shape == (n,) and a.dtype == dtype and a.flags.writeable and a.flags.c_contiguous
    a[:] = np.arange(n) % 100
    assert int(a.sum()) == int((np.arange(n) % 100).sum())


def test_a_view_keeps_the_mapping_alive():
    a = _memory.empty(_memory.MIN_MAPPED_BYTES // 4, np.int32)
    a[:] = 5
    tail = a[-3:]
    del a
    assert tail.tolist() == [5, 5, 5]
