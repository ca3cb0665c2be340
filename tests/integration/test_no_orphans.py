"""Nothing left behind (docs/robustness.md): hpcvar killed with SIGKILL in the middle of a local run, a testbed
run and a noise recording leaves no process of its own 2 s later, and ``--resume`` completes the run.

Processes are found two ways, both unique to the test: every descendant of the killed hpcvar seen just before
the kill (pid and start time, so a reused pid is not mistaken for a survivor), and every process whose command
line holds the test's own temporary directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hpcvar.launch.guard import start_time
from hpcvar.results import Run
from tests.conftest import hpcvar_cmd, run_cli
from tests.testbed.conftest import up_testbed

pytestmark = [pytest.mark.mpi]


def _procs() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, command line) of every process."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (d / "stat").read_text()
        except OSError:
            continue
        out[int(d.name)] = (int(stat.rpartition(")")[2].split()[1]), cmd)
    return out


def _family(root: int, marker: str) -> dict[int, str]:
    """Descendants of ``root`` and processes naming ``marker``: pid -> start time."""
    procs = _procs()
    found, frontier = set(), {root}
    while frontier:
        frontier = {p for p, (pp, _) in procs.items() if pp in frontier and p not in found}
        found |= frontier
    found |= {p for p, (_, cmd) in procs.items() if marker in cmd and p != os.getpid()}
    found.discard(root)
    return {p: s for p in found if (s := start_time(p))}


def _zombie(pid: int) -> bool:
    """Exited, not yet reaped (by a pid 1 that may never reap, in a container): nothing runs."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] in ("Z", "X")
    except OSError:
        return True


def _survivors(seen: dict[int, str], marker: str) -> list[str]:
    procs = _procs()
    alive = [p for p, s in seen.items() if start_time(p) == s and not _zombie(p)]
    alive += [p for p, (_, cmd) in procs.items() if marker in cmd and p not in alive and p != os.getpid()
              and not _zombie(p)]
    return [f"{p}: {procs.get(p, (0, '?'))[1][:200]}" for p in alive]


def kill_mid_run(args: list[str], env: dict, marker: str, native: str, settle_s: float = 2.0,
                 timeout_s: float = 120) -> None:
    """Start ``hpcvar args``, wait until its native program ``native`` runs (plus ``settle_s``), SIGKILL hpcvar
    alone, and assert that 2 s later nothing it started is left."""
    e = dict(os.environ, **env)
    proc = subprocess.Popen(hpcvar_cmd() + args, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        t0 = time.monotonic()
        while not any(native in cmd for _, (_, cmd) in _procs().items() if marker in cmd):
            assert proc.poll() is None, f"hpcvar ended before {native} started: {proc.stderr.read().decode()}"
            assert time.monotonic() - t0 < timeout_s, f"{native} did not start within {timeout_s} s"
            time.sleep(0.2)
        time.sleep(settle_s)
        seen = _family(proc.pid, marker)
        assert any(native in _procs().get(p, (0, ""))[1] for p in seen), seen
        os.kill(proc.pid, signal.SIGKILL)  # hpcvar only: no process group, no cleanup of its own
        proc.wait(timeout=10)
        deadline = time.monotonic() + 2.0  # everything gone within 2 s (polled: most instants need far less)
        while (left := _survivors(seen, marker)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not left, f"left behind 2 s after kill -9 of hpcvar: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in _family(proc.pid, marker):  # never leave our own mess to the next test
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _the_run(runs: Path) -> Run:
    runs_ = [d for d in runs.iterdir() if (d / "run.json").is_file()]
    assert len(runs_) == 1, runs_
    return Run.open(runs_[0])


# A short run of 5 points (a few seconds), for the kill-anywhere test: small buffers, so that a launch starts fast
QUICK = ["bench", "latency", "--sizes", "8,1KiB,16KiB,64KiB,256KiB", "--time-per-size", "0.2s", "--iters", "100000",
         "--warmup", "1000", "--timeout", "120s"]
QUICK_SIZES = [8, 1024, 16384, 65536, 262144]


def _raw_text(runs: Path) -> str:
    """The launches' raw files as they are now; one that goes between the listing and its read is read at the
    next poll (CI, once): a launch's raw file is replaced by its compressed copy, launch-NNN.raw.zst, once the
    launch ends (hpcvar.results.rawio.compress_raw)."""
    out = []
    for p in runs.glob("*/raw/launch-*.raw"):
        try:
            out.append(p.read_text(errors="replace"))
        except FileNotFoundError:
            pass
    return "".join(out)


def _native_running(marker: str, name: str) -> bool:
    return any(name in cmd and marker in cmd for _, (_, cmd) in _procs().items())


# The instants of issue #32: each a condition on what the run has reached, polled every 10 ms
KILL_INSTANTS = {
    "before the launcher starts": lambda runs, m: True,
    "while the ranks start": lambda runs, m: _native_running(m, "hv_latency"),
    "before the header is written": lambda runs, m: (any(runs.glob("*/raw/launch-*.raw"))
                                                     and "#@columns" not in _raw_text(runs)),
    "during warm-up": lambda runs, m: "#@columns" in _raw_text(runs),
    "mid-point": lambda runs, m: _raw_text(runs).count("#@point ") == 1 and "#@point_end" not in _raw_text(runs),
    "between points": lambda runs, m: _raw_text(runs).count("#@point_end") == 1,
    "mid second point": lambda runs, m: _raw_text(runs).count("#@point ") == 2 and
                                        _raw_text(runs).count("#@point_end") == 1,
    "after three points": lambda runs, m: _raw_text(runs).count("#@point_end") == 3,
    "after the last point": lambda runs, m: _raw_text(runs).count("#@point_end") == 5,
    "while storing": lambda runs, m: any(runs.glob("*/*.parquet")) or any(runs.glob("*/.*.tmp*")),
}


def _kill_at(args: list[str], env: dict, marker: str, reached, timeout_s: float = 60) -> str:
    """Start ``hpcvar args``, SIGKILL it (alone) once ``reached(runs, marker)`` holds, and assert that 2 s later
    nothing it started is left. Returns how far it got ('killed' or 'finished first')."""
    runs = Path(env["HPCVAR_RUNS"])
    proc = subprocess.Popen(hpcvar_cmd() + args, env=dict(os.environ, **env), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    seen: dict[int, str] = {}
    try:
        t0 = time.monotonic()
        while not reached(runs, marker):
            if proc.poll() is not None:
                return "finished first"
            assert time.monotonic() - t0 < timeout_s, "the instant was never reached"
            seen.update(_family(proc.pid, marker))
            time.sleep(0.01)
        seen.update(_family(proc.pid, marker))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 2.0  # everything gone within 2 s (polled: most instants need far less)
        while (left := _survivors(seen, marker)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not left, f"left behind 2 s after kill -9 of hpcvar: {left}"
        return "killed"
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in _family(proc.pid, marker):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.timeout(600)
def test_kill_9_anywhere_leaves_nothing_and_resume_measures_every_point_once(tmp_path):
    """Issue #32: hpcvar killed with SIGKILL at ten instants of a run, from before the launcher starts to while it
    stores the tables. Each time nothing it started is left, and --resume (or, killed before the run existed, the
    same command) completes the run with every point measured once: no point lost, none counted twice."""
    outcomes = {}
    for k, (instant, reached) in enumerate(KILL_INSTANTS.items()):
        runs = tmp_path / f"runs{k}"
        env = {"HPCVAR_RUNS": str(runs)}
        outcomes[instant] = _kill_at(QUICK, env, str(runs), reached)
        existing = [d for d in runs.iterdir() if (d / "run.json").is_file()] if runs.is_dir() else []
        assert len(existing) <= 1, existing
        if existing:
            assert Run.open(existing[0]).status in ("running", "lost", "complete"), instant
        args = QUICK + (["--resume", existing[0].name] if existing else [])
        res = run_cli(args + ["--json"], env=env, timeout=240)
        assert res.returncode == 0, f"{instant}: {res.stdout}{res.stderr}"
        run = _the_run(runs)
        assert run.info["status"] == "complete", instant
        summary = run.read_table("latency.summary")
        samples = run.read_table("latency.samples")
        assert sorted(summary["size_bytes"]) == QUICK_SIZES, (instant, list(summary["size_bytes"]))
        per_size = samples.groupby("size_bytes").size()
        assert (per_size.loc[summary["size_bytes"]].to_numpy() == summary["n"].to_numpy()).all(), instant
        # a point is one launch's: its iterations are numbered once (a point measured twice would repeat them)
        assert not samples.duplicated(["size_bytes", "iter"]).any(), instant
    print(outcomes)
    killed = [i for i, o in outcomes.items() if o == "killed"]
    assert len(killed) >= 8, outcomes  # the instants are reached on any machine; one may race past the end


@pytest.mark.root
@pytest.mark.timeout(400)
def test_kill_9_mid_testbed_run_leaves_nothing_and_resume_completes(tmp_path, tmp_path_factory):
    runs = tmp_path / "runs"
    with up_testbed(tmp_path_factory, "o17k-", 2, "1gbit", "--subnet", "10.217.17.0/24") as tb:
        env = {"HPCVAR_RUNS": str(runs), **tb}
        args = QUICK + ["--launcher", "testbed"]
        kill_mid_run(args, env, str(tmp_path), "hv_latency", settle_s=1.5)
        run = _the_run(runs)
        assert run.info["status"] == "running"
        res = run_cli(args + ["--resume", run.id], env=env, timeout=300)
        assert res.returncode == 0, res.stdout + res.stderr
        assert Run.open(run.path).info["status"] == "complete"


def _tracefs() -> Path | None:
    for p in (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing")):
        if (p / "instances").is_dir():
            return p
    return None


@pytest.mark.timeout(300)
def test_kill_9_mid_noise_recording_leaves_nothing_and_a_new_recording_completes(tmp_path):
    runs = tmp_path / "runs"
    env = {"HPCVAR_RUNS": str(runs)}
    cpu = str(sorted(os.sched_getaffinity(0))[-1])
    attribute = os.geteuid() == 0 and _tracefs() is not None and os.access(_tracefs() / "instances", os.W_OK)
    args = ["noise", "record", "--cpus", cpu, "--duration", "30s", "--no-plots"] + (["--attribute"] if attribute
                                                                                     else [])
    kill_mid_run(args, env, str(tmp_path), "hv_noise_collect", settle_s=3.0 if not attribute else 6.0)
    killed = _the_run(runs)
    assert killed.info["status"] != "complete"
    stale = [d.name for d in (_tracefs() / "instances").glob("hpcvar-*")] if attribute else []
    # noise record has no --resume: the next recording completes and removes what the killed one left
    res = run_cli(args[:5] + ["1s", "--no-plots", "--json"] + (["--attribute"] if attribute else []), env=env,
                  timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    done = [Run.open(d) for d in runs.iterdir() if d.name != killed.id]
    assert [r.info["status"] for r in done] == ["complete"]
    if attribute:
        left = {d.name for d in (_tracefs() / "instances").glob("hpcvar-*")}
        assert not (left & set(stale)), f"stale tracefs instances not removed: {left & set(stale)}"
        session = json.loads((done[0].path / "tracefs.json").read_text())
        assert set(stale) <= set(session["stale_instances_removed"])
