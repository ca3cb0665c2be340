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
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


# hypothesis's statistics, one line per test and phase (generate, reuse, shrink, explain); the wording
# changed across versions: "- 150 passing examples, 0 failing examples, 0 invalid examples" (older) and
# "- 150 passing, 0 failing, and 0 invalid test cases" (6.1xx)
_PHASE = re.compile(r"^\s*-\s+(\d+) passing(?: examples)?, (\d+) failing(?: examples)?, (?:and )?(\d+) invalid")
_TEST = re.compile(r"^\S+::\S+:\s*$")


def count_cases(out: str) -> dict[str, int]:
    """Test cases hypothesis ran, summed over tests and phases, from --hypothesis-show-statistics."""
    n = {"tests": 0, "phases": 0, "passing": 0, "failing": 0, "invalid": 0}
    for line in out.splitlines():
        if _TEST.match(line):
            n["tests"] += 1
        m = _PHASE.match(line)
        if m:
            n["phases"] += 1
            for k, v in zip(("passing", "failing", "invalid"), m.groups(), strict=True):
                n[k] += int(v)
    n["cases"] = n["passing"] + n["failing"] + n["invalid"]
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=5000, help="examples per parser test (suite: 150)")
    ap.add_argument("-k", default=None, help="pytest -k expression selecting tests")
    ap.add_argument("--log", default=None, help="write pytest's whole output (falsifying examples) to this file")
    a = ap.parse_args()
    env = dict(os.environ, FUZZ_EXAMPLES=str(a.examples), FUZZ_RANDOM="1")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE), "--timeout", "0",
            "-o", "addopts=", "--hypothesis-show-statistics"]
    if a.k:
        argv += ["-k", a.k]
    t0 = time.monotonic()
    res = subprocess.run(argv, env=env, cwd=HERE.parents[1], capture_output=True, text=True, errors="replace")
    out = res.stdout.replace("\0", "")
    stats = count_cases(out)
    if a.log:
        Path(a.log).write_text(out + res.stderr)
    print(out[-4000:])
    failed = [ln.split()[1] for ln in out.splitlines() if ln.startswith("FAILED ")]
    if stats["phases"] == 0:
        print("fuzz campaign: no hypothesis statistics in pytest's output: cases not counted", file=sys.stderr)
    print(f"fuzz campaign: {a.examples} examples per test, {stats['tests']} tests, {stats['cases']} cases run "
          f"({stats['passing']} passing, {stats['failing']} failing, {stats['invalid']} invalid), "
          f"{len(failed)} tests failed, {time.monotonic() - t0:.0f} s, exit {res.returncode}")
    for f in failed:
        print(f"  failed: {f}")
    return res.returncode


if __name__ == "__main__":
    sys.exit(main())
