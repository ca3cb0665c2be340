"""The streaming replay on a trace bigger than memory (issue 30): speed and peak memory of
``hpcvar sim app TRACE --stream --no-plots --model none``, and its identity with the in-memory replay.

The trace is benchmarks/replay_speed.py's ring (each task: compute 10 us, irecv from the left, isend 4 KiB
to the right, wait, wait; an allreduce of 8 B every 50 iterations), --events rows over --tasks tasks, written
as a native Parquet trace in chunks of whole tasks with pyarrow.parquet.ParquetWriter (never the whole trace
in memory). The replay runs as the library job in a fresh process, measured as replay_speed.py does: wall
time, and the peak RSS of that process (VmHWM of /proc/self/status). Each figure is printed beside its
target. With --check-events N, a trace of N events is also replayed both ways (in memory and --stream, every
model) and the results (per task: total, comm, penalty, conflicts, measured side, E_abs; makespans) compared
for equality.

    .venv/bin/python benchmarks/replay_stream.py [--events 300000000] [--tasks 1536] [--nodes 64]
        [--check-events 10000000] [--dir /tmp] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay_speed import end_to_end, template  # the same trace and child as replay_speed.py (a sibling script)

TARGET_RATE = 3e6          # events/s end to end, streaming
TARGET_PEAK = 4 * 2**30    # bytes of peak RSS, streaming, on 300M events
CHUNK_ROWS = 4_000_000     # rows per write (whole tasks)


def write_trace(path: Path, events: int, tasks: int) -> int:
    """The ring trace written task chunk by task chunk; its number of rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hpcvar.traces.parquet import META_KEY, OPS, TRACE_VERSION

    tp = template(events, tasks)
    per_task = len(tp["op"])
    meta = {"format": "hpcvar-trace", "version": TRACE_VERSION, "ntasks": tasks, "comms": {"0": list(range(tasks))},
            "timed": True, "source": "synthetic"}
    schema = pa.schema([("task", pa.int32()), ("seq", pa.int64()), ("op", pa.dictionary(pa.int8(), pa.string())),
                        ("peer", pa.int32()), ("bytes", pa.int64()), ("tag", pa.int32()), ("comm", pa.int32()),
                        ("t_start_ns", pa.int64()), ("t_end_ns", pa.int64()), ("req", pa.int64())],
                       metadata={META_KEY: json.dumps(meta).encode()})
    dictionary = pa.array(OPS, pa.string())
    step = max(1, CHUNK_ROWS // per_task)
    rows = 0
    with pq.ParquetWriter(path, schema, compression="zstd") as w:
        for a in range(0, tasks, step):
            k = min(step, tasks - a)
            task = np.repeat(np.arange(a, a + k, dtype=np.int32), per_task)
            dp = np.tile(tp["dpeer"], k)
            peer = np.where(dp == 0, -1, (task + dp) % tasks).astype(np.int32)
            n = len(task)
            cols = [pa.array(task), pa.array(np.tile(np.arange(per_task, dtype=np.int64), k)),
                    pa.DictionaryArray.from_arrays(pa.array(np.tile(tp["op"], k)), dictionary), pa.array(peer),
                    pa.array(np.tile(tp["bytes"], k)), pa.array(np.zeros(n, np.int32)),
                    pa.array(np.zeros(n, np.int32)), pa.array(np.tile(tp["t_start_ns"], k)),
                    pa.array(np.tile(tp["t_end_ns"], k)), pa.array(np.tile(tp["req"], k))]
            w.write_table(pa.Table.from_arrays(cols, schema=schema), row_group_size=1 << 20)
            rows += n
    return rows


def verdict(ok: bool) -> str:
    return "meets" if ok else "MISSES"


def report(e: dict, label: str) -> None:
    rate = e["events"] / e["wall_s"]
    print(f"{label}: {e['events']:,} events in {e['wall_s']:.1f} s (read {e['read_s']:.2f} + lower {e['lower_s']:.1f} "
          f"+ replay {e['replay_s']:.1f} + store/other {e['wall_s'] - e['read_s'] - e['lower_s'] - e['replay_s']:.1f})")
    so = e["stream_ops"]
    if so:
        fb = so["file_bytes"]
        print(f"  ops file:   {so['ops']:,} ops, {fb / 2**30:.2f} GiB ({fb / so['ops']:.1f} bytes/op); "
              f"{so['keys']:,} match keys ({so['key_slots']:,} in use at most), {so['requests']:,} request ids")
    print(f"  end to end: {rate / 1e6:6.2f} M events/s   target >= {TARGET_RATE / 1e6:.0f} M "
          f"({verdict(rate >= TARGET_RATE)})")
    print(f"  peak RSS:   {e['peak_rss'] / 2**30:6.2f} GiB (VmHWM; {e['peak_rss'] / e['events']:.2f} bytes/event)   "
          f"target < {TARGET_PEAK / 2**30:.0f} GiB ({verdict(e['peak_rss'] < TARGET_PEAK)})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=300_000_000)
    ap.add_argument("--tasks", type=int, default=1536)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--check-events", type=int, default=0,
                    help="also replay a trace of this many events in memory and streaming (every model) and compare")
    ap.add_argument("--dir", default=None, help="where the traces and the ops file go (default $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep the trace files")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hpcvar-stream-bench-", dir=a.dir))
    os.environ["TMPDIR"] = str(tmp)  # the ops file of the streaming replay goes beside the trace
    try:
        if a.events:
            path = tmp / "big.trace"
            t0 = time.perf_counter()
            n = write_trace(path, a.events, a.tasks)
            print(f"trace: {n:,} events, {a.tasks} tasks on {a.nodes} nodes, rrp, written in "
                  f"{time.perf_counter() - t0:.0f} s ({path.stat().st_size / n:.1f} bytes/event on disk)")
            e = end_to_end(path, a.nodes, ["none"], tmp / "runs", stream=True)
            report(e, "hpcvar sim app --stream --model none")
            if not a.keep:
                path.unlink()
        if a.check_events:
            path = tmp / "check.trace"
            n = write_trace(path, a.check_events, a.tasks)
            models = ["none", "gige", "myrinet", "maxmin"]
            mem = end_to_end(path, a.nodes, models, tmp / "runs-mem")
            st = end_to_end(path, a.nodes, models, tmp / "runs-stream", stream=True)
            assert not mem["stream"] and st["stream"]
            for label, e in (("in memory", mem), ("--stream", st)):
                print(f"check {label:9s}: {n:,} events, 4 models, {e['wall_s']:.1f} s (replay {e['replay_s']:.1f}), "
                      f"peak RSS {e['peak_rss'] / 2**30:.2f} GiB")
            same = mem["results"] == st["results"]
            print(f"  results identical (per task total, comm, penalty, conflicts, measured, E_abs; makespans; "
                  f"{', '.join(models)}): {'yes' if same else 'NO'}")
            if not a.keep:
                path.unlink()
            if not same:
                sys.exit(1)
    finally:
        if not a.keep:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
