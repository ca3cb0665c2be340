"""The C core of the application replay (native/sim/replay.c) through ctypes.

``encode(ops)`` turns the lowered per-task op lists of ``hpcvar.sim.app.lower`` into flat
arrays (match keys, requests and trace rows become dense integer ids); it depends only on
the trace, so one encoding serves every mapping x model x replica. ``run(sim, enc)`` then
replays them in C and returns the same ``Result`` as the Python engine. The Python engine
(``Simulator(..., engine="python")``) stays the reference: the core processes the same
events in the same order with the same arithmetic (tests/unit/test_replay_native.py).

The core covers models none, maxmin and gige without jitter; myrinet (Stop&Go enumeration)
and ``--jitter`` use the Python engine (``Simulator.engine_for``).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from hpcvar.errors import HpcvarError

MODEL_CODES = {"none": 0, "maxmin": 1, "gige": 2}
KIND_NAMES = ("none", "out", "in", "in-out")
_P = ctypes.c_void_p


class _Config(ctypes.Structure):
    _fields_: ClassVar[Sequence[tuple[str, Any]]] = [
                ("ntasks", ctypes.c_int64), ("nops", ctypes.c_int64), ("nreqs", ctypes.c_int64),
                ("nkeys", ctypes.c_int64), ("nrows", ctypes.c_int64), ("nnodes", ctypes.c_int64),
                ("model", ctypes.c_int32), ("pad0", ctypes.c_int32),
                ("beta", ctypes.c_double), ("gamma_in", ctypes.c_double), ("gamma_out", ctypes.c_double),
                ("eager", ctypes.c_double)] + [(n, _P) for n in (
                    "task_off", "kind", "peer", "val", "key", "req", "nwait", "wreq", "row", "bw", "lat", "inter",
                    "node_of", "clock", "row_start", "row_end", "pen_sum", "pen_n", "kinds", "pc", "blocked")] + [
                (n, ctypes.c_int64) for n in ("nevents", "finished", "unmatched", "first_unmatched_op")]


@functools.cache
def lib() -> ctypes.CDLL:
    from hpcvar._native import find_library

    so = ctypes.CDLL(str(find_library("libhv_replay.so")))
    so.hv_rp_config_size.restype = ctypes.c_int
    so.hv_rp_run.restype = ctypes.c_int
    so.hv_rp_run.argtypes = [ctypes.POINTER(_Config)]
    if so.hv_rp_config_size() != ctypes.sizeof(_Config):
        raise HpcvarError(f"libhv_replay.so has a config of {so.hv_rp_config_size()} bytes, expected "
                          f"{ctypes.sizeof(_Config)}", None,
                          "Rebuild hpcvar (make install) so that the library matches the Python code")
    return so


def available() -> bool:
    from hpcvar.errors import MissingToolError

    try:
        lib()
    except (MissingToolError, OSError):
        return False
    return True


@dataclass
class Encoded:
    """Flat arrays of the lowered ops (one entry per op unless said)."""

    ntasks: int
    task_off: np.ndarray  # int64, ntasks + 1
    kind: np.ndarray      # int8: 0 compute, 1 send, 2 recv, 3 wait
    peer: np.ndarray      # int32
    val: np.ndarray       # float64: seconds or bytes
    key: np.ndarray       # int64
    req: np.ndarray       # int64 (wait: offset into wreq)
    nwait: np.ndarray     # int32
    wreq: np.ndarray      # int64
    row: np.ndarray       # int64
    task: np.ndarray      # int32: the task of each op
    rows: list            # row id -> (task, seq)
    row_task: np.ndarray  # int64: the task of each row id
    nreqs: int
    nkeys: int


def encode(ops: list[list[tuple]]) -> Encoded:
    """Flat arrays of ``lower()``'s op lists; keys, requests and rows become dense ids."""
    keys: dict = {}
    reqs: dict = {}
    rows: dict = {}
    wreq: list[int]
    kind, peer, val, key, req, nwait, wreq, row, task = [], [], [], [], [], [], [], [], []
    off = [0]
    kcode = {"c": 0, "s": 1, "r": 2, "w": 3}
    for t, lst in enumerate(ops):
        for o in lst:
            k = o[0]
            r = o[-1]
            kind.append(kcode[k])
            task.append(t)
            if r is None:
                row.append(-1)
            else:
                rid = rows.get(r)
                if rid is None:
                    rid = rows[r] = len(rows)
                row.append(rid)
            if k == "c":
                peer.append(-1)
                val.append(o[1])
                key.append(-1)
                req.append(-1)
                nwait.append(0)
            elif k == "w":
                peer.append(-1)
                val.append(0.0)
                key.append(-1)
                req.append(len(wreq))
                nwait.append(len(o[1]))
                for rq in o[1]:
                    i = reqs.get(rq)
                    if i is None:
                        i = reqs[rq] = len(reqs)
                    wreq.append(i)
            else:
                peer.append(o[1])
                val.append(o[2])
                i = keys.get(o[3])
                if i is None:
                    i = keys[o[3]] = len(keys)
                key.append(i)
                i = reqs.get(o[4])
                if i is None:
                    i = reqs[o[4]] = len(reqs)
                req.append(i)
                nwait.append(0)
        off.append(len(kind))
    return Encoded(len(ops), np.array(off, np.int64), np.array(kind, np.int8), np.array(peer, np.int32),
                   np.array(val, np.float64), np.array(key, np.int64), np.array(req, np.int64),
                   np.array(nwait, np.int32), np.array(wreq, np.int64), np.array(row, np.int64),
                   np.array(task, np.int32), list(rows),
                   np.array([r[0] for r in rows], np.int64), len(reqs), len(keys))


class RowTimes(Mapping):
    """{(task, seq): time} over the rows a run reached, built from the core's arrays on first use."""

    _d: dict | None

    def __init__(self, rows: list, times: np.ndarray):
        self._rows, self._times, self._d = rows, times, None

    def _dict(self) -> dict:
        if self._d is None:
            idx = np.flatnonzero(self._times >= 0)
            self._d = dict(zip([self._rows[i] for i in idx.tolist()], self._times[idx].tolist(), strict=True))
        return self._d

    def __getitem__(self, k):
        return self._dict()[k]

    def __iter__(self):
        return iter(self._dict())

    def __len__(self):
        return len(self._dict())


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def run(sim, enc: Encoded):
    """Replay ``enc`` with the simulator's cluster, mapping and model in C; a ``Result``."""
    from hpcvar.errors import InputFileError
    from hpcvar.models.sharing import check_params
    from hpcvar.sim.app import Result

    cl, ntasks = sim.cluster, enc.ntasks
    node_of = np.asarray(sim.node_of, np.int32)
    # per-message bandwidth and latency (send ops only matter): Cluster.link semantics, vectorized
    is_send = enc.kind == 1
    a = node_of[enc.task]
    b = node_of[np.where(is_send, enc.peer, enc.task)]
    inter = (a != b) & is_send
    bw = np.where(inter, cl.bandwidth, cl.shm_bandwidth).astype(np.float64)
    lat = np.where(inter, cl.latency, cl.shm_latency).astype(np.float64)
    for direct in (False, True):  # links[(a, b)] wins over links[(b, a)], as in Cluster.link
        for (x, y), (lbw, llat) in cl.links.items():
            m = inter & ((a == x) & (b == y) if direct else (a == y) & (b == x))
            bw[m], lat[m] = lbw, llat
    inter8 = inter.astype(np.int8)
    nrows = len(enc.rows)
    clock = np.zeros(ntasks)
    row_start, row_end = np.empty(nrows), np.empty(nrows)
    pen_sum, pen_n = np.zeros(ntasks), np.zeros(ntasks)
    kinds = np.zeros((ntasks, 4), np.int64)
    pc, blocked = np.zeros(ntasks, np.int64), np.zeros(ntasks, np.int64)
    c = _Config(ntasks=ntasks, nops=len(enc.kind), nreqs=enc.nreqs, nkeys=enc.nkeys, nrows=nrows,
                nnodes=max(int(cl.nodes), int(node_of.max(initial=0)) + 1), model=MODEL_CODES[sim.model],
                eager=float(sim.eager))
    if sim.model == "gige":
        p = check_params("gige", sim.params)
        c.beta, c.gamma_in, c.gamma_out = p["beta"], p["gamma_in"], p["gamma_out"]
    arrays = dict(task_off=enc.task_off, kind=enc.kind, peer=enc.peer, val=enc.val, key=enc.key, req=enc.req,
                  nwait=enc.nwait, wreq=enc.wreq, row=enc.row, bw=bw, lat=lat, inter=inter8, node_of=node_of,
                  clock=clock, row_start=row_start, row_end=row_end, pen_sum=pen_sum, pen_n=pen_n, kinds=kinds,
                  pc=pc, blocked=blocked)
    for name, arr in arrays.items():
        assert arr.flags.c_contiguous
        setattr(c, name, _ptr(arr))
    if lib().hv_rp_run(ctypes.byref(c)) != 0:
        raise HpcvarError("the replay core ran out of memory", None, "Replay a shorter trace")
    source = sim.trace.source or "trace"
    if c.finished < ntasks:
        stuck = [t for t in range(ntasks) if blocked[t] > 0]
        desc = []
        for t in stuck[:5]:
            r = enc.row[pc[t] - 1]
            desc.append(f"rank {t} seq {enc.rows[r][1] if r >= 0 else '?'}")
        raise InputFileError("the replay deadlocks or a receive has no matching send: blocked at "
                             + ", ".join(desc), source,
                             todo="Check the trace is complete (every rank to MPI_Finalize) and that "
                                  "sends and receives match; try a larger --eager limit")
    if c.unmatched:
        op = c.first_unmatched_op
        t, seq = enc.rows[enc.row[op]]
        raise InputFileError(f"unmatched send: rank {t} seq {seq} to rank {enc.peer[op]} has no "
                             f"matching receive ({c.unmatched} unmatched in all)", source,
                             todo="Check the trace is complete and its tags/communicators are right")
    reached = row_start >= 0
    ends = np.where(row_end >= 0, row_end, row_start)
    comm = np.bincount(enc.row_task[reached], weights=(ends - row_start)[reached], minlength=ntasks)
    conflicts = [{KIND_NAMES[j]: int(v) for j, v in enumerate(kinds[t]) if v} for t in range(ntasks)]
    avg = np.divide(pen_sum, pen_n, out=np.ones(ntasks), where=pen_n > 0)
    return Result(ntasks, list(sim.node_of), clock, comm, RowTimes(enc.rows, row_start), RowTimes(enc.rows, row_end),
                  conflicts, avg, int(c.nevents))


__all__ = ["Encoded", "MODEL_CODES", "RowTimes", "available", "encode", "run"]
