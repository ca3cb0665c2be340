"""The long fuzz campaign: the tests of tests/fuzz with many more examples and random (not derandomized)
inputs. Run for minutes by a developer; prints how many cases ran and what failed.

    .venv/bin/python tests/fuzz/run_campaign.py --examples 5000          # about 5-10 min on 2 cores
    .venv/bin/python tests/fuzz/run_campaign.py --examples 500 -k flags  # one area

Each failure is a parser bug (a traceback, a hang, or an absurd value accepted): fix it and add the input to
the unit tests. Cases run = examples x tests (hypothesis stops a test early when its input space is small).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=5000, help="examples per parser test (suite: 150)")
    ap.add_argument("-k", default=None, help="pytest -k expression selecting tests")
    a = ap.parse_args()
    env = dict(os.environ, FUZZ_EXAMPLES=str(a.examples), FUZZ_RANDOM="1")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE), "--timeout", "0",
            "-o", "addopts=", "--hypothesis-show-statistics"]
    if a.k:
        argv += ["-k", a.k]
    t0 = time.monotonic()
    res = subprocess.run(argv, env=env, cwd=HERE.parents[1], capture_output=True, text=True, errors="replace")
    out = res.stdout.replace("\0", "")
    cases = sum(int(line.split()[1]) for line in out.splitlines()
                if line.strip().startswith("- ") and "passing examples" in line)
    print(out[-4000:])
    print(f"fuzz campaign: {a.examples} examples per test, {cases} passing cases counted, "
          f"{time.monotonic() - t0:.0f} s, exit {res.returncode}")
    return res.returncode


if __name__ == "__main__":
    sys.exit(main())
