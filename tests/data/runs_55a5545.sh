#!/bin/sh
# How tests/data/runs_55a5545.tar.xz was made: hpcvar at commit 55a5545 (the last layout before src/hpcvar/kinds/),
# from a checkout of that commit after make install:  sh runs_55a5545.sh /tmp/runs && tar --owner=0 --group=0 \
#   --sort=name -C /tmp -cJf runs_55a5545.tar.xz runs   (the archive holds the directory runs/).
# tests/unit/test_old_runs.py loads, shows, reports and compares them; tests/integration/test_old_runs.py resumes
# the interrupted latency sweep.
set -eu
H=${H:-.venv/bin/hpcvar}
OUT=$1
mkdir -p "$OUT"
export HPCVAR_RUNS=$OUT
$H bench latency --sizes 0,1KiB,64KiB --iters 20 --min-iters 5 --warmup 2 --time-per-size 50ms >/dev/null
# an interrupted latency sweep (stopped by --timeout after some points): resumable
$H bench latency --sizes 0,64MiB,128MiB,256MiB --iters 40 --min-iters 40 --warmup 0 --time-per-size 10s --timeout 2s >/dev/null 2>&1 || true
$H bench queues posted --lengths 0,16 --traversed 0,100 --sizes 8 --iters 20 --min-iters 5 --warmup 2 --time-per-point 20ms >/dev/null
$H bench queues unexpected --lengths 0,16 --sizes 8 --iters 20 --min-iters 5 --warmup 2 --time-per-point 20ms >/dev/null
$H bench ace --ea pattern=pairs,mode=blocking,size=1KiB,load=50,cycles=10 --bench-iters 5 --bench-warmup 1 >/dev/null
$H bench sharing 'a: 0->1; b: 0->2' --size 64KiB --repeat 2 --warmup 0 >/dev/null
$H bench fanin --clients 1 --chatter 0,1 --large 64KiB --small 1KiB --duration 0.2s >/dev/null
$H bench bsp --quantum 200us --phases 20 --warmup 2 --repeat 2 >/dev/null
$H noise record --cpus 0 --duration 0.3s >/dev/null
$H sim jitter --synthetic 250Hz:2us --tasks 1,4 --phases 5 --duration 2s --replicas 2 --align unsync,sync >/dev/null
NOISE=$(ls -d "$OUT"/*-noise-record | head -1)
$H sim jitter --trace "$NOISE/trace.jtr" --tasks 1,2 --phases 5 --no-plots >/dev/null
# sim app over a 3-task trace (a fan-out of two 1 MB messages), two models, with --breakdown
.venv/bin/python - "$OUT/fan.trace" <<'PY'
import sys
from hpcvar.traces.parquet import Trace, make_events, write_parquet
ev = []
for t in (1, 2):
    ev += [dict(task=t, op="init", t_start_ns=0, t_end_ns=0),
           dict(task=t, op="recv", peer=0, bytes=10**6, t_start_ns=0, t_end_ns=2_000_000),
           dict(task=t, op="finalize", t_start_ns=2_000_000, t_end_ns=2_000_000)]
ev += [dict(task=0, op="init", t_start_ns=0, t_end_ns=0),
       dict(task=0, op="isend", peer=1, bytes=10**6, t_start_ns=0, t_end_ns=0),
       dict(task=0, op="isend", peer=2, bytes=10**6, t_start_ns=0, t_end_ns=0),
       dict(task=0, op="wait", req=1, t_start_ns=0, t_end_ns=2_000_000),
       dict(task=0, op="wait", req=2, t_start_ns=2_000_000, t_end_ns=2_000_000),
       dict(task=0, op="finalize", t_start_ns=2_000_000, t_end_ns=2_000_000)]
write_parquet(Trace(make_events(ev), 3), sys.argv[1])
PY
$H sim app "$OUT/fan.trace" --bandwidth 1GB/s --latency 0 --eager 0 --model none,maxmin --mapping rrn,rrp --breakdown >/dev/null
# what is kept: no figures (the views take them when present), raw files only where a run resumes
rm -rf "$OUT"/*/plots
for d in "$OUT"/*/; do
  case "$(grep -h '"status"' "$d/run.json")" in *complete*) rm -rf "$d/raw";; esac
done
