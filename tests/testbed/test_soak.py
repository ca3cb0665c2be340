"""The soak (benchmarks/soak.py): five characterize --quick on the testbed with cross traffic and injected
noise, then testbed down; every run complete or cleanly failed, nothing left behind. slow: ~10+ min."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.root, pytest.mark.mpi, pytest.mark.slow]


@pytest.mark.timeout(5400)
def test_soak_five_characterizations_leave_nothing_behind():
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "soak.py"
    res = subprocess.run([sys.executable, str(script), "--count", "5"], capture_output=True, text=True,
                         timeout=5300)
    assert res.returncode == 0, res.stdout[-5000:] + res.stderr[-3000:]
