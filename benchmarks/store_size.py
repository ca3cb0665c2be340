"""Bytes a stored run takes per raw sample (issue 26): one `hpcvar bench latency` run of 8-byte round trips
into a fresh runs directory, its files summed by kind (raw files, tables, the rest) and divided by the number of
samples its `latency.samples` table holds.

    .venv/bin/python benchmarks/store_size.py [--time 3s] [--hpcvar .venv/bin/hpcvar] [--keep DIR]

Give `--hpcvar` another checkout's hpcvar to measure it the same way (before/after a change). Target: at most
10 bytes per sample in all (raw + tables); text raw files took about 30 and snappy Parquet about 7.5.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET_BYTES_PER_SAMPLE = 10.0


def _sizes(run: Path) -> dict[str, int]:
    out = {"raw": 0, "tables": 0, "other": 0}
    for f in run.rglob("*"):
        if not f.is_file():
            continue
        kind = "raw" if f.parent.name == "raw" and ".raw" in f.name else "tables" if f.suffix == ".parquet" else "other"
        out[kind] += f.stat().st_size
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time", default="3s", help="--time-per-size of the latency run (default 3s)")
    ap.add_argument("--hpcvar", default=str(Path(sys.executable).parent / "hpcvar"))
    ap.add_argument("--keep", default=None, help="keep the runs directory here instead of a temporary one")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hpcvar-store-") as tmp:
        root = Path(a.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run([a.hpcvar, "bench", "latency", "--sizes", "8", "--iters", "100000000", "--time-per-size",
                        a.time, "--runs-dir", str(root), "--json"], check=True, stdout=subprocess.DEVNULL)
        (run,) = [p for p in root.iterdir() if (p / "run.json").is_file()]
        import pyarrow.parquet as pq

        n = pq.ParquetFile(run / "latency.samples.parquet").metadata.num_rows
        sizes = _sizes(run)
        total = sum(sizes.values())
        print(f"run: {run.name}, {n} samples of 8-byte round trips")
        for kind, b in sizes.items():
            print(f"  {kind:7s} {b:12d} bytes  {b / n:7.2f} bytes/sample")
        per = (sizes["raw"] + sizes["tables"]) / n
        print(f"raw + tables: {per:.2f} bytes/sample (target <= {TARGET_BYTES_PER_SAMPLE:g}); whole run "
              f"{total / n:.2f} bytes/sample, {total} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
