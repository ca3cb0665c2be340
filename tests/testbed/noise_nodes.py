"""Shared by the multi-node noise tests (testbed launcher and srun): inject periodic noise on every host at
chosen phases of the wall clock, record on every node meanwhile, return the recording's JSON."""

from __future__ import annotations

import json
import os
import subprocess

from tests.conftest import hpcvar_cmd

PERIOD, BURN = "20ms", "2ms"
ALIGNED = (0, 0, 0, 0)
SHIFTED = (0, 7, 13, 3)  # ms: bursts of 2 ms never meet (nor within the alignment tolerance)


def record_with_injection(env: dict, phases_ms, record_args: list[str], hosts: int = 4) -> dict:
    """Host k injects on CPU (k-1) % 2, so hosts that share a CPU on this 2-core machine inject on the same
    one; the recorders compare only distinct CPUs of one machine (docs/noise.md). The injectors run at
    SCHED_FIFO 50 and the tests' recorders at 20: other jobs of a busy machine cannot delay the recorders,
    the injected bursts still do."""
    e = {**os.environ, **env}
    inj = []
    for k in range(1, hosts + 1):
        cmd = hpcvar_cmd() + ["testbed", "exec", f"h{k}", "--", *hpcvar_cmd(), "noise", "inject",
                              "--cpus", str((k - 1) % 2), "--period", PERIOD, "--burn", BURN, "--time", "7s",
                              "--at-clock", "--phase", f"{phases_ms[(k - 1) % len(phases_ms)]}ms"]
        inj.append(subprocess.Popen(cmd, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    try:
        res = subprocess.run(hpcvar_cmd() + ["noise", "record", *record_args, "--duration", "3s", "--json"],
                             env=e, capture_output=True, text=True, timeout=120)
    finally:
        errs = [p.communicate(timeout=30)[1] for p in inj]
    assert res.returncode == 0, res.stderr[-3000:]
    assert all(p.returncode == 0 for p in inj), errs
    return json.loads(res.stdout)


def steal_disturbed(out: dict) -> str | None:
    """For best_of_quiet_attempts: the recording's own warning that the hypervisor's steal, a detour of one vCPU
    with no partner, took 10% or more of a CPU's long-detour time (on a VM with 4-7% steal the aligned bursts
    measured an excess of 0.32-0.44: mixed)."""
    w = out["alignment"].get("steal_warning")
    return f"steal during the recording: {w[:160]}" if w else None
