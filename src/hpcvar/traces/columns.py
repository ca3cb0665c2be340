"""A trace's columns (hpcvar.traces.parquet.NUMPY_TYPES) from the arrays the importers build.

Both the compiled importers (TIT, OTF2) and their Python references end in ``trace_columns``, so that the two
give the same trace by construction from the same arrays: ``task`` int32, ``seq`` int64, ``op`` int8 codes of
OPS, ``peer`` int32, ``bytes`` int64, ``req`` int64, ``t_start``/``t_end`` int64 ns, optional ``tag`` int32
(else 0); ``comm`` is 0. No pandas: ``Trace.events`` builds the DataFrame only when something asks for it.
"""

from __future__ import annotations

import numpy as np

from hpcvar.traces.parquet import NUMPY_TYPES


def trace_columns(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    n = len(cols["task"])
    ev = {"task": cols["task"], "seq": cols["seq"], "op": cols["op"], "peer": cols["peer"], "bytes": cols["bytes"],
          "tag": cols["tag"] if "tag" in cols else np.zeros(n, np.int32), "comm": np.zeros(n, np.int32),
          "t_start_ns": cols["t_start"], "t_end_ns": cols["t_end"], "req": cols["req"]}
    return {c: np.asarray(ev[c]).astype(t, copy=False) for c, t in NUMPY_TYPES.items()}


__all__ = ["trace_columns"]
