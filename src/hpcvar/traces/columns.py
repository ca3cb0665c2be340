"""The events frame (hpcvar.traces.parquet.COLUMNS) from column arrays, as the importers build it.

Both the compiled importers (TIT, OTF2) and their Python references end in ``events_frame``, so that the two
give the same frame by construction from the same arrays: ``task`` int32, ``seq`` int64, ``op`` int8 codes of
OPS, ``peer`` int32, ``bytes`` int64, ``req`` int64, ``t_start``/``t_end`` int64 ns, optional ``tag`` int32
(else 0); ``comm`` is 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hpcvar.traces.parquet import COLUMNS, OPS


def events_frame(cols: dict[str, np.ndarray]) -> pd.DataFrame:
    n = len(cols["task"])
    zeros = np.zeros(n, np.int32)
    ev = {"task": cols["task"], "seq": cols["seq"], "op": op_names(cols["op"]), "peer": cols["peer"],
          "bytes": cols["bytes"], "tag": cols.get("tag", zeros), "comm": zeros.copy(), "t_start_ns": cols["t_start"],
          "t_end_ns": cols["t_end"], "req": cols["req"]}
    return pd.DataFrame({c: ev[c] if t == "object" else ev[c].astype(t, copy=False) for c, t in COLUMNS.items()},
                        copy=False)


def op_names(codes: np.ndarray):
    """The op names of int8 codes (OPS) as the array pandas makes of a column of strings (pandas 3: ``str``,
    Arrow-backed, built by Arrow's take in C; else objects), without pandas inferring millions of strings."""
    dtype = pd.Series(OPS).dtype
    if getattr(dtype, "storage", None) == "pyarrow":
        import pyarrow as pa

        return pd.array(pa.array(OPS, pa.large_string()).take(pa.array(codes)), dtype=dtype)
    return pd.Series(np.array(OPS, dtype=object)[codes]).array


__all__ = ["events_frame", "op_names"]
