"""How the replay's contention models scale with the number of ranks: ``hpcvar sim app`` on rings and fan-ins.

A sharing model gives each shared transfer a penalty computed from its conflict component (the transfers linked
to it by a shared source or destination node). The core recomputes, when a transfer starts or ends, only the
component it belongs to (docs/replay.md, "Engines"): on a ring the components stay small whatever the number of
ranks, so the replay's cost per event should not grow with the ranks; on a fan-in every transfer is in one
component, and each event costs the size of the fan-in.

Traces (SimGrid TIT, written once per size, benchmarks/simgrid_side_by_side.py's generators): for each --ranks
R, a **ring** of about --ring-actions-per-rank x R actions (compute, irecv, isend of --ring-bytes doubles, two
waits) and a **fan-in** into rank 0 of about --fanin-actions actions of --fanin-bytes each. Replayed on R / 4
nodes x 4 cores (mapping rrn: a ring's neighbours on different nodes) with each --models, by whole processes,
best of --repeat (interleaved). Printed per trace and model: the events, the replay's own time (the core's
clock, ``replay_s``) and its events per second, and the whole process. myrinet is left out of fan-ins beyond
--myrinet-max-fanin ranks: its exact Stop&Go states of a component of a thousand transfers take minutes a run.

``--against DIR``: also run every case with the native libraries of DIR (HPCVAR_NATIVE_DIR: another build, e.g.
the previous commit's) and print both, interleaved, with the same makespans required.

    .venv/bin/python benchmarks/sharing_scale.py [--ranks 64,256,1024] [--models gige,myrinet,maxmin]
        [--repeat 3] [--against DIR] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import simgrid_side_by_side as sbs


def run(index: Path, nodes: int, model: str, d: Path, native_dir: str | None) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "hpcvar", "sim", "app", str(index), "--nodes", str(nodes), "--cores-per-node", "4",
           "--model", model, "--mapping", "rrn", "--no-plots", "--json", "--runs-dir", str(d / "runs")]
    env = dict(os.environ)
    if native_dir:
        env["HPCVAR_NATIVE_DIR"] = native_dir
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
    return wall, json.loads(p.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="64,256,1024", help="comma list of rank counts (multiples of 4)")
    ap.add_argument("--models", default="gige,myrinet,maxmin")
    ap.add_argument("--ring-actions-per-rank", type=int, default=1000)
    ap.add_argument("--ring-bytes", type=int, default=1024, help="doubles per ring message (8 KiB: eager)")
    ap.add_argument("--fanin-actions", type=int, default=200_000)
    ap.add_argument("--fanin-bytes", type=int, default=1 << 20)
    ap.add_argument("--myrinet-max-fanin", type=int, default=256, help="myrinet on fan-ins of at most N ranks")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--against", default=None, help="another build's native directory, run interleaved")
    ap.add_argument("--keep", type=Path, default=None, help="keep the traces and runs in this directory")
    a = ap.parse_args()
    ranks = [int(r) for r in a.ranks.split(",")]
    if any(r < 8 or r % 4 for r in ranks):
        raise SystemExit("--ranks: give multiples of 4, at least 8 (4 cores per node)")
    builds = [("this build", None)] + ([("--against", a.against)] if a.against else [])
    print(f"load average {os.getloadavg()[0]:.2f}; best of {a.repeat}; nodes = ranks / 4, 4 cores each, rrn")
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep or Path(tmp)
        (d / "runs").mkdir(parents=True, exist_ok=True)
        for r in ranks:
            traces = {"ring": sbs.ring(r, a.ring_actions_per_rank * r, a.ring_bytes, 0),
                      "fan-in": sbs.fanin(r, a.fanin_actions, a.fanin_bytes)}
            for name, per_rank in traces.items():
                index = sbs.write_index(d, f"{name}-{r}.txt", per_rank)
                for m in a.models.split(","):
                    if m == "myrinet" and name == "fan-in" and r > a.myrinet_max_fanin:
                        print(f"  {name:6} {r:5} ranks {m:8} left out (--myrinet-max-fanin {a.myrinet_max_fanin})")
                        continue
                    best: dict[str, tuple[float, dict]] = {}
                    for _ in range(a.repeat):
                        for label, nd in builds:
                            wall, out = run(index, r // 4, m, d, nd)
                            if label not in best or out["runs"][0]["replay_s"] < best[label][1]["runs"][0]["replay_s"]:
                                best[label] = (wall, out)
                    spans = {out["runs"][0]["makespan_s"] for _, out in best.values()}
                    if len(spans) != 1:
                        raise SystemExit(f"{name} {r} {m}: the builds gave different makespans {sorted(spans)}")
                    for label, (wall, out) in best.items():
                        ev, rs = out["events"], out["runs"][0]["replay_s"]
                        print(f"  {name:6} {r:5} ranks {m:8} {label:10} {ev:>9,} events  replay {rs:7.3f} s = "
                              f"{ev / rs / 1e6:5.2f} M events/s   whole {wall:6.2f} s   makespan {min(spans):.6f} s")


if __name__ == "__main__":
    main()
