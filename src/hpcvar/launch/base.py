"""Launching MPI jobs: the spec, the launcher interface and the supervised run.

A launcher turns a LaunchSpec into an argv and environment (``command``),
which tests check against golden argv, and ``run`` executes it with a timeout,
logs to files, and turns failures into LaunchError naming the failed rank and
the last lines it printed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hpcvar.errors import LaunchError, LaunchTimeout
from hpcvar.launch.guard import preexec, watch_env
from hpcvar.units import format_time_ns

RANK_ERROR = re.compile(r"hpcvar\[rank (-?\d+)\]: (.*)")


@dataclass
class LaunchSpec:
    np: int
    exe: Path
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # extra variables for the ranks
    timeout_s: float = 120.0
    ranks_per_node: int | None = None
    extra_args: list[str] = field(default_factory=list)  # user's own launcher options (--launcher-args)
    # the program receives with MPI_ANY_SOURCE while several senders compete: launchers avoid transports
    # known to lose such receives (the testbed's MPICH on ch4:ucx over tcp; docs/testbed.md)
    any_source: bool = False
    # rank 0 alone on the first node, the other ranks over the other nodes (a fan-in's root, whose link is
    # measured): launchers that can place ranks so do it (the testbed); the others place as usual, and the
    # program's hosts header shows where the ranks went
    root_alone: bool = False


@dataclass
class LaunchResult:
    argv: list[str]
    returncode: int
    elapsed_s: float
    stdout_path: Path
    stderr_path: Path

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")


def tail(path: Path, n: int = 10) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


class Launcher(ABC):
    """Turns a spec into a command; subclasses: local, srun, template, testbed."""

    name = "launcher"
    # what the launcher gets when hpcvar dies, however (hpcvar.launch.guard): SIGTERM lets mpiexec and srun
    # tear their job down (srun cancels the step); ranks on this machine also stop by themselves (hv_watch)
    death_signal = signal.SIGTERM

    @abstractmethod
    def command(self, spec: LaunchSpec) -> tuple[list[str], dict[str, str]]:
        """The argv and the *extra* environment for this spec (no shell ever)."""

    def describe(self) -> dict:
        """Metadata of this launcher for run.json."""
        return {"launcher": self.name}

    def slots(self) -> int | None:
        """How many ranks fit without oversubscription, if known."""
        return os.cpu_count()

    def prepare(self, spec: LaunchSpec) -> None:  # noqa: B027 (an optional hook: by default nothing to do)
        """Hook before the run (the testbed checks its hosts here)."""

    def nodes(self) -> int | None:
        """How many nodes this launcher can place ranks on, if known."""
        return None

    def expected_rpn(self, spec: LaunchSpec) -> int | None:
        """Ranks per node this launcher was asked to make (checked by the native programs), if it places
        ranks on several nodes."""
        return None

    def layout_args(self, spec: LaunchSpec) -> list[str]:
        """Arguments of every native MPI program that make it check the world it gets: its size is
        ``spec.np`` and (multi-node launchers) ranks sit ``expected_rpn`` to a node."""
        args = ["--expect-np", str(spec.np)]
        rpn = self.expected_rpn(spec)
        if rpn:
            args += ["--expect-rpn", str(rpn)]
        return args

    def failure_hint(self, text: str) -> tuple[str | None, str] | None:
        """The flag and remedy for a failure the launcher itself reported (its stderr ``text``), if known."""
        return None

    def mismatch_hint(self) -> tuple[str | None, str]:
        """The flag and the remedy when the ranks did not form the world asked for."""
        return ("--launcher", "The ranks did not join one MPI job: the launcher does not match the MPI hpcvar "
                              "was built with ('hpcvar info' shows it)")

    def run(self, spec: LaunchSpec, log_dir: Path, label: str = "launch",
            poll: Callable[[], None] | None = None) -> LaunchResult:
        """Run the job; raise LaunchError on timeout or failure."""
        self.prepare(spec)
        argv, extra_env = self.command(spec)
        env = dict(os.environ)
        env.update(extra_env)
        env.update(watch_env())
        log_dir.mkdir(parents=True, exist_ok=True)
        out_p, err_p = log_dir / f"{label}.stdout", log_dir / f"{label}.stderr"
        t0 = time.monotonic()
        with open(out_p, "wb") as out, open(err_p, "wb") as err:
            try:
                proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                        start_new_session=True, preexec_fn=preexec(self.death_signal))
            except OSError as e:
                raise LaunchError(f"cannot start '{argv[0]}': {e.strerror}", "--launcher",
                                  "Check that the MPI launcher is installed and on PATH") from None
            try:
                while True:
                    try:
                        proc.wait(timeout=0.25)
                        break
                    except subprocess.TimeoutExpired:
                        if poll:
                            poll()
                        if time.monotonic() - t0 > spec.timeout_s:
                            _kill_group(proc)
                            raise LaunchTimeout(
                                f"the MPI job ran past its timeout of {format_time_ns(spec.timeout_s * 1e9)} and "
                                "was stopped", "--timeout",
                                "Raise --timeout if the work is large; a hang often means ranks cannot reach "
                                f"each other. Last lines of stderr:\n{tail(err_p) or '(none)'}",
                                timeout_s=spec.timeout_s) from None
            except KeyboardInterrupt:
                _kill_group(proc)
                raise
        if poll:
            poll()
        elapsed = time.monotonic() - t0
        res = LaunchResult(argv, proc.returncode, elapsed, out_p, err_p)
        if proc.returncode != 0:
            raise failure_error(res, self)
        return res


def failure_error(res: LaunchResult, launcher: Launcher | None = None) -> LaunchError:
    """A LaunchError that names the failed rank(s) and what they printed; a world that is not the one asked
    for (``world mismatch``, from the native programs' layout check) names the flag to change."""
    text = res.stderr_path.read_text(errors="replace") if res.stderr_path.exists() else ""
    ranks = RANK_ERROR.findall(text)
    last = tail(res.stderr_path) or tail(res.stdout_path) or "(no output)"
    if ranks:
        rank, msg = ranks[0]
        if msg.startswith("world mismatch") and launcher is not None:
            flag, todo = launcher.mismatch_hint() if "world of" in msg else \
                ("--ranks-per-node", "Ask for the placement the allocation can give (salloc -N <nodes>), or "
                                     "change --ranks-per-node / --np")
            return LaunchError(re.sub(r" \([^()]+:\d+\)$", "", msg), flag,
                               f"{todo}. Exit code {res.returncode}; full log in {res.stderr_path}")
        return LaunchError(f"rank {rank} failed: {msg}", None,
                           f"Exit code {res.returncode}; full log in {res.stderr_path}")
    hint = launcher.failure_hint(text) if launcher is not None else None
    if hint is not None:
        flag, todo = hint
        return LaunchError(f"the launcher refused the job (exit code {res.returncode}): {last.splitlines()[-1]}", flag,
                           f"{todo}. Full log in {res.stderr_path}")
    return LaunchError(f"the MPI job failed with exit code {res.returncode}", None,
                       f"Last lines of its output:\n{last}\n(full log in {res.stderr_path})")


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
