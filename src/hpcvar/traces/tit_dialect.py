"""The two dialects of SimGrid's time-independent traces (TIT), as SimGrid's own replay reads them.

Read from SimGrid's sources (``src/smpi/internals/smpi_replay.cpp``, the recorder's
``src/instr/instr_private.hpp`` and ``src/smpi/bindings/smpi_pmpi_*.cpp``, the datatype ids of
``src/smpi/mpi/smpi_datatype.cpp``) and checked against traces recorded here with ``smpirun -trace-ti``
(SimGrid 3.32, tests/unit/test_tit_simgrid.py). Action names are case-sensitive, as in SimGrid.

* **SimGrid <= 3.19** (before June 2018): ``Isend DST COUNT [DATATYPE]``, ``Irecv``, ``send``, ``recv`` (no
  tag), ``wait`` (no argument: the most recent pending request), ``waitAll``, ``allReduce``, ``allToAll``,
  ``allGather``; datatype ids 0-6 (MPI_DOUBLE, INT, CHAR, SHORT, LONG, FLOAT, BYTE).
* **SimGrid >= 3.20**: ``isend DST TAG COUNT [DATATYPE]``, ``irecv SRC TAG COUNT [DATATYPE]``, ``send``, ``recv``
  (with the tag), ``wait SRC DST TAG`` (the oldest pending request with that key), ``waitall``, ``allreduce``,
  ``alltoall``, ``allgather``; ``sleep`` and ``location`` from 3.24, ``sendRecv`` from 3.32. Datatype ids 0-59,
  whose table changed: ids 40-44 in 3.21 and 3.24, 55 in 3.23, 51-59 in 3.27 (``DATATYPE_SIZES``).

A count is a number of elements of its datatype (absent: MPI_BYTE, or MPI_DOUBLE after an ``init`` with an
argument, SimGrid's default). The grammar is chosen per file from the first line that only one grammar reads (a
name, or ``send``/``recv``/``wait``/``test`` by their number of arguments), unless the SimGrid version is given
(``--dialect 3.32``); without it the ids whose size changed between versions are refused as ambiguous.
"""

from __future__ import annotations

import re

# grammars: the lines a file is read with (UNDECIDED: only lines both read the same way)
UNDECIDED, OLD, NEW = 0, 1, 2
GRAMMAR_NAMES = {OLD: "SimGrid <= 3.19", NEW: "SimGrid >= 3.20"}

# classes of a line (name, number of arguments) for the choice of grammar
NEUTRAL, C_OLD, C_NEW, AMBIGUOUS, UNKNOWN = 0, OLD, NEW, 3, 4

# action kinds (the C parser's A_* in the same order)
(K_INIT, K_FINALIZE, K_COMPUTE, K_SLEEP, K_P2P, K_WAIT, K_WAITALL, K_TEST, K_COLL, K_SENDRECV, K_IGNORED,
 K_UNSUPPORTED, K_VCOLL) = range(13)
BOTH = OLD | NEW

# name -> (kind, grammars that know it, native op name or None)
ACTIONS: dict[str, tuple[int, int, str | None]] = {
    "init": (K_INIT, BOTH, "init"), "finalize": (K_FINALIZE, BOTH, "finalize"),
    "comm_size": (K_IGNORED, BOTH, None), "comm_split": (K_IGNORED, BOTH, None), "comm_dup": (K_IGNORED, BOTH, None),
    "compute": (K_COMPUTE, BOTH, None),
    "send": (K_P2P, BOTH, "send"), "recv": (K_P2P, BOTH, "recv"),
    "Isend": (K_P2P, OLD, "isend"), "Irecv": (K_P2P, OLD, "irecv"),
    "isend": (K_P2P, NEW, "isend"), "irecv": (K_P2P, NEW, "irecv"),
    "wait": (K_WAIT, BOTH, "wait"), "test": (K_TEST, BOTH, None),
    "waitAll": (K_WAITALL, OLD, "wait"), "waitall": (K_WAITALL, NEW, "wait"),
    "barrier": (K_COLL, BOTH, "barrier"), "bcast": (K_COLL, BOTH, "bcast"), "reduce": (K_COLL, BOTH, "reduce"),
    "gather": (K_COLL, BOTH, "gather"), "scatter": (K_COLL, BOTH, "scatter"),
    "allReduce": (K_COLL, OLD, "allreduce"), "allToAll": (K_COLL, OLD, "alltoall"),
    "allGather": (K_COLL, OLD, "allgather"),
    "allreduce": (K_COLL, NEW, "allreduce"), "alltoall": (K_COLL, NEW, "alltoall"),
    "allgather": (K_COLL, NEW, "allgather"),
    "sleep": (K_SLEEP, NEW, None), "location": (K_IGNORED, NEW, None), "sendRecv": (K_SENDRECV, NEW, "sendrecv"),
    "gatherV": (K_VCOLL, OLD, "gatherv"), "scatterV": (K_VCOLL, OLD, "scatterv"),
    "allGatherV": (K_VCOLL, OLD, "allgatherv"), "allToAllV": (K_VCOLL, OLD, "alltoallv"),
    "reduceScatter": (K_VCOLL, OLD, "reducescatter"),
    "gatherv": (K_VCOLL, NEW, "gatherv"), "scatterv": (K_VCOLL, NEW, "scatterv"),
    "allgatherv": (K_VCOLL, NEW, "allgatherv"), "alltoallv": (K_VCOLL, NEW, "alltoallv"),
    "reducescatter": (K_VCOLL, NEW, "reducescatter"), "scan": (K_UNSUPPORTED, NEW, None),
    "exscan": (K_UNSUPPORTED, NEW, None),
}
# the v-collectives' arguments for a world of n ranks: (min = a * n + b, max = c * n + d, text); their counts
# are one per rank, so a line can only be read knowing n (SimGrid: its number of processes; hpcvar: the highest
# rank of the trace + 1)
_VLAYOUT = {"gatherv": (1, 1, 1, 4, "SEND RECV_COUNT*N [ROOT [SEND_DATATYPE [RECV_DATATYPE]]]"),
            "scatterv": (1, 1, 1, 4, "SEND_COUNT*N RECV [ROOT [SEND_DATATYPE [RECV_DATATYPE]]]"),
            "allgatherv": (1, 1, 1, 3, "SEND RECV_COUNT*N [SEND_DATATYPE [RECV_DATATYPE]]"),
            "alltoallv": (2, 2, 2, 4, "SEND_BUFFER SEND_COUNT*N RECV_BUFFER RECV_COUNT*N [SEND_DATATYPE "
                                      "[RECV_DATATYPE]]"),
            "reducescatter": (1, 1, 1, 2, "RECV_COUNT*N FLOPS [DATATYPE]")}

# (kind, grammar) or name -> (min args, max args, layout for messages); -1: any number
_P2P_LAYOUT = {OLD: (2, 3, "PEER COUNT [DATATYPE]"), NEW: (3, 4, "PEER TAG COUNT [DATATYPE]")}
_LAYOUT: dict[str, tuple[int, int, str]] = {
    "init": (0, 1, "[X] (an argument: counts without a datatype are MPI_DOUBLEs)"), "finalize": (0, 0, ""),
    "comm_size": (0, -1, "..."), "comm_split": (0, -1, "..."), "comm_dup": (0, -1, "..."),
    "compute": (1, 1, "FLOPS"), "sleep": (1, 1, "SECONDS"), "location": (2, 2, "FILE LINE"),
    "waitAll": (0, 1, "[COUNT]"), "waitall": (0, 1, "[COUNT]"), "barrier": (0, 0, ""),
    "bcast": (1, 3, "COUNT [ROOT [DATATYPE]]"), "reduce": (2, 4, "COUNT FLOPS [ROOT [DATATYPE]]"),
    "allReduce": (2, 3, "COUNT FLOPS [DATATYPE]"), "allreduce": (2, 3, "COUNT FLOPS [DATATYPE]"),
    "gather": (2, 5, "SEND RECV [ROOT [SEND_DATATYPE [RECV_DATATYPE]]]"),
    "scatter": (2, 5, "SEND RECV [ROOT [SEND_DATATYPE [RECV_DATATYPE]]]"),
    "allGather": (2, 4, "SEND RECV [SEND_DATATYPE [RECV_DATATYPE]]"),
    "allgather": (2, 4, "SEND RECV [SEND_DATATYPE [RECV_DATATYPE]]"),
    "allToAll": (2, 4, "SEND RECV [SEND_DATATYPE [RECV_DATATYPE]]"),
    "alltoall": (2, 4, "SEND RECV [SEND_DATATYPE [RECV_DATATYPE]]"),
    "sendRecv": (4, 6, "SEND_COUNT DST RECV_COUNT SRC [SEND_DATATYPE [RECV_DATATYPE]]"),
}


def layout(name: str, grammar: int, n: int = 0) -> tuple[int, int, str]:
    """(min, max, text) of the arguments of a known action in a grammar (max -1: any number), v-collectives in a
    world of n ranks. UNDECIDED (a file whose lines do not say its dialect): send/recv within both layouts;
    wait/test none (their 0 or 3 arguments choose the grammar, so an undecided file has no valid wait)."""
    kind, _, op = ACTIONS[name]
    if kind == K_VCOLL:
        a, b, c, d, text = _VLAYOUT[op or ""]
        return a * n + b, c * n + d, text.replace("*N", f"*{n}")
    if kind == K_P2P:
        if grammar == UNDECIDED:
            return 2, 4, "PEER COUNT [DATATYPE] (SimGrid <= 3.19) or PEER TAG COUNT [DATATYPE] (>= 3.20)"
        return _P2P_LAYOUT[grammar]
    if kind in (K_WAIT, K_TEST):
        if grammar == OLD:
            return 0, 0, ""
        if grammar == NEW:
            return 3, 3, "SRC DST TAG"
        return 0, 0, "no argument (SimGrid <= 3.19) or SRC DST TAG (>= 3.20)"
    return _LAYOUT.get(name, (0, -1, "..."))


def describe(name: str, grammar: int, n: int = 0) -> str:
    """The arguments of an action in a grammar, for messages: ``PEER TAG COUNT [DATATYPE] (3 or 4 arguments)``."""
    lo, hi, text = layout(name, grammar, n)
    if grammar == UNDECIDED and ACTIONS[name][0] in (K_P2P, K_WAIT, K_TEST):
        return text
    count = f"{lo}" if lo == hi else f"{lo} or {hi}" if hi == lo + 1 else f"{lo} to {hi}" if hi >= 0 \
        else f"{lo} or more"
    return f"{text or 'no argument'} ({count} argument{'' if hi == 1 else 's'})"


def classify(name: str, nargs: int) -> int:
    """The class of a line for the choice of grammar: C_OLD or C_NEW when only that grammar reads it (its name,
    or for send/recv 2 or 4 arguments, for wait/test 0 or 3), AMBIGUOUS when both read it differently
    (send/recv with 3 arguments), UNKNOWN, else NEUTRAL."""
    a = ACTIONS.get(name)
    if a is None:
        return UNKNOWN
    kind, grammars, _ = a
    if grammars != BOTH:
        return grammars
    if kind == K_P2P:
        return {2: C_OLD, 3: AMBIGUOUS, 4: C_NEW}.get(nargs, NEUTRAL)
    if kind in (K_WAIT, K_TEST):
        return {0: C_OLD, 3: C_NEW}.get(nargs, NEUTRAL)
    return NEUTRAL


# ---- datatypes: id -> size in bytes (x86-64) in each version of SimGrid's table ---------------------------

# dialect codes (the C parser's too, native/sim/tit.h): AUTO, or the table of the SimGrid version that wrote the
# trace. The ids 0-39 and 45-50 kept their types from 3.20 on; the others changed (smpi_datatype.cpp).
AUTO, V319, V320, V321, V323, V324, V327 = range(7)
_FIRST_MINOR = {V320: 20, V321: 21, V323: 23, V324: 24, V327: 27}  # the version that introduced each table
VERSION_NAMES = {V319: "SimGrid <= 3.19", V320: "SimGrid 3.20", V321: "SimGrid 3.21-3.22", V323: "SimGrid 3.23",
                 V324: "SimGrid 3.24-3.26", V327: "SimGrid >= 3.27"}
NOSIZE = 0  # in a table: a type without a size (MPI_UB, MPI_LB, types SimGrid did not define yet)
_BASE = [8, 4, 1, 2, 8, 4, 1,  # 0-6: DOUBLE INT CHAR SHORT LONG FLOAT BYTE (SimGrid <= 3.19 knew only these)
         8, 1, 1, 2, 4, 8, 8, 16, 4, 1,  # 7-16: LONG_LONG SIGNED_CHAR UNSIGNED_CHAR UNSIGNED_SHORT UNSIGNED
         # UNSIGNED_LONG UNSIGNED_LONG_LONG LONG_DOUBLE WCHAR C_BOOL
         1, 2, 4, 8, 1, 2, 4, 8,  # 17-24: INT8_T INT16_T INT32_T INT64_T UINT8_T UINT16_T UINT32_T UINT64_T
         8, 16, 32, 8, 8,  # 25-29: C_FLOAT_COMPLEX C_DOUBLE_COMPLEX C_LONG_DOUBLE_COMPLEX AINT OFFSET
         8, 16, 16, 8, 8, 8, 16, 16,  # 30-37: FLOAT_INT LONG_INT DOUBLE_INT SHORT_INT 2INT 2FLOAT 2DOUBLE 2LONG
         4, 4]  # 38-39: REAL REAL4
_INTEGERS = [4, 2, 4, 8, 16, 32]  # 45-50: INTEGER1 (an int in SimGrid) INTEGER2 INTEGER4 INTEGER8 INTEGER16
# LONG_DOUBLE_INT
DATATYPE_SIZES: dict[int, list[int]] = {
    V319: _BASE[:7],
    # 40-44: REAL8 (a float in 3.20) REAL16 (a double) COMPLEX8 COMPLEX16 COMPLEX32 (no type); 51-54: UB LB PACKED PTR
    V320: _BASE + [4, 8, 0, 0, 0] + _INTEGERS + [0, 0, 1, 8],
    V321: _BASE + [8, 16, 0, 0, 0] + _INTEGERS + [0, 0, 1, 8],
    V323: _BASE + [8, 16, 0, 0, 0] + _INTEGERS + [0, 0, 1, 8, 8],  # 55: COUNT
    V324: _BASE + [8, 16, 8, 16, 16] + _INTEGERS + [0, 0, 1, 8, 8],  # COMPLEX8/16/32 defined (COMPLEX32: 16)
    # 51-54: CXX_BOOL CXX_FLOAT_COMPLEX CXX_DOUBLE_COMPLEX CXX_LONG_DOUBLE_COMPLEX; 55-59: UB LB PACKED PTR COUNT
    V327: _BASE + [8, 16, 8, 16, 16] + _INTEGERS + [1, 8, 16, 32, 0, 0, 1, 8, 8],
}
AMBIGUOUS_SIZE = -1  # in the auto table: the versions from 3.20 on disagree


def _auto_table() -> list[int]:
    """Per id the size every version from 3.20 that has the id agrees on, else AMBIGUOUS_SIZE."""
    out = []
    for i in range(len(DATATYPE_SIZES[V327])):
        sizes = {t[i] for v, t in DATATYPE_SIZES.items() if v != V319 and i < len(t)}
        out.append(sizes.pop() if len(sizes) == 1 else AMBIGUOUS_SIZE)
    return out


AUTO_SIZES = _auto_table()
MPI_BYTE_ID = 6
# datatype errors (err_a of HV_TIT_E_DATATYPE)
DT_UNKNOWN, DT_DERIVED, DT_AMBIGUOUS, DT_NOSIZE = 1, 2, 3, 4


def parse_dialect(text: str) -> int:
    """A --dialect value: ``auto`` or the SimGrid version that wrote the trace (3.19, 3.32, 4.0, ...); ValueError
    for anything else."""
    if text == "auto":
        return AUTO
    m = re.fullmatch(r"([0-9]{1,3})\.([0-9]{1,3})", text)
    if not m or int(m.group(1)) < 3:
        raise ValueError(text)
    major, minor = int(m.group(1)), int(m.group(2))
    if major == 3 and minor <= 19:
        return V319
    if major > 3:
        return V327
    return max(v for v, first in _FIRST_MINOR.items() if first <= minor)


def datatype_size(tok: str, dialect: int, grammar: int) -> tuple[int, int]:
    """(size, 0) of a datatype id token, or (0, error): the id as SimGrid writes it (``0``..``59``, no sign, no
    leading zero) in the dialect's table (auto: 3.19's for the 3.19 grammar, else the size every version from
    3.20 agrees on); -1 (a derived datatype or MPI_DATATYPE_NULL) and types without a size are refused."""
    if tok == "-1":
        return 0, DT_DERIVED
    if not (tok.isascii() and tok.isdigit() and len(tok) <= 2 and (tok == "0" or tok[0] != "0")):
        return 0, DT_UNKNOWN
    i = int(tok)
    table = AUTO_SIZES if dialect == AUTO and grammar != OLD else DATATYPE_SIZES[V319 if dialect == AUTO
                                                                                   else dialect]
    if i >= len(table):
        return 0, DT_UNKNOWN
    if table[i] == AMBIGUOUS_SIZE:
        return 0, DT_AMBIGUOUS
    return (table[i], 0) if table[i] != NOSIZE else (0, DT_NOSIZE)


def sizes_by_version(i: int) -> str:
    """``size in which versions`` of a datatype id, for messages."""
    return ", ".join(f"{t[i]} B in {VERSION_NAMES[v]}" if t[i] else f"no size in {VERSION_NAMES[v]}"
                     for v, t in DATATYPE_SIZES.items() if v != V319 and i < len(t))


__all__ = ["ACTIONS", "AUTO", "AUTO_SIZES", "DATATYPE_SIZES", "GRAMMAR_NAMES", "MPI_BYTE_ID", "NEW", "OLD", "UNDECIDED",
           "VERSION_NAMES", "classify", "datatype_size", "describe", "layout", "parse_dialect", "sizes_by_version"]
