"""Start-up of every command: ``hpcvar <cmd> --help`` and a tiny run of each simulator, whole processes.

Issue 30: a command spends its time on its work, not on importing what it does not use. Each command's
``--help`` is timed against ``hpcvar --help`` itself (the floor: Python, click, rich and the table of
commands), and a tiny run of each simulator (``sim jitter`` on 4 tasks x 2 phases of a 10 s synthetic trace,
``sim app`` on a 4-rank TIT ring of 40 actions and on a 4-rank native trace, each with its default figures)
against a fixed budget. Per command the best of --repeat whole processes, run in rounds (one of each command per
round, so that a passing load hits them alike): wall time and CPU time (user + system, robust to a loaded
machine; the targets are on CPU time), and the heavy modules the process imported
(numpy, pandas, pyarrow, scipy, matplotlib), read from ``-X importtime``.

Targets: ``<cmd> --help`` at most HELP_SLACK_S more CPU than ``hpcvar --help``; a tiny simulator run at most
TINY_CPU_S of CPU, with neither pandas nor matplotlib imported.

    .venv/bin/python benchmarks/startup.py [--repeat 5] [--only sim]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HELP_SLACK_S = 0.03  # a command's --help: at most 30 ms of CPU more than 'hpcvar --help'
TINY_CPU_S = 0.25  # a tiny simulation, whole process, CPU time
HEAVY = ("numpy", "pandas", "pyarrow", "scipy", "matplotlib")


def commands() -> list[list[str]]:
    """Every command path of the command line (groups included)."""
    import click

    from hpcvar.cli import cli

    def walk(group: click.Group, path: list[str]) -> list[list[str]]:
        ctx = click.Context(group)
        out: list[list[str]] = []
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            out.append([*path, name])
            if isinstance(cmd, click.Group):
                out += walk(cmd, [*path, name])
        return out

    return walk(cli, [])


def run_once(argv: list[str], cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s) of ``python -m hpcvar argv`` as a whole process; a failure stops the benchmark."""
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "hpcvar", *argv], cwd=cwd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode() if p.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"hpcvar {' '.join(argv)} failed:\n{err[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def heavy_imports(argv: list[str], cwd: Path) -> set[str]:
    """The heavy modules ``python -m hpcvar argv`` imports (from ``-X importtime``)."""
    imp = subprocess.run([sys.executable, "-X", "importtime", "-m", "hpcvar", *argv], cwd=cwd, capture_output=True,
                         text=True, check=True).stderr
    mods = {ln.split("|")[-1].strip() for ln in imp.splitlines() if ln.startswith("import time:")}
    return {h for h in HEAVY if h in mods}


def measure_all(items: dict[str, list[str]], cwd: Path, repeat: int) -> dict[str, tuple[float, float]]:
    """Per command, (best wall s, best CPU s) of ``repeat`` whole processes, run in rounds (one process of each
    command per round): a load that comes and goes for a second hits every command alike, where ``repeat``
    processes in a row would all fall in it (seen: one --help 20 ms over the others in one run, not in the next)."""
    walls: dict[str, list[float]] = {k: [] for k in items}
    cpus: dict[str, list[float]] = {k: [] for k in items}
    for _ in range(repeat):
        for name, argv in items.items():
            wall, cpu = run_once(argv, cwd)
            walls[name].append(wall)
            cpus[name].append(cpu)
    return {k: (min(walls[k]), min(cpus[k])) for k in items}


def tiny_inputs(d: Path) -> dict[str, list[str]]:
    """The tiny simulator runs (argv), their inputs written into d."""
    ring = d / "ring.txt"
    ring.write_text("".join(f"{r} init\n" + f"{r} compute 1000\n{r} Irecv {(r - 1) % 4} 1024\n"
                            f"{r} Isend {(r + 1) % 4} 1024\n{r} wait\n{r} wait\n" * 2 + f"{r} finalize\n"
                            for r in range(4)))
    (d / "runs").mkdir(exist_ok=True)  # --runs-dir must exist
    runs = str(d / "runs")
    native = d / "ring.trace"
    subprocess.run([sys.executable, "-m", "hpcvar", "trace", "import", str(ring), "-o", str(native)], check=True,
                   capture_output=True)
    return {"sim jitter (tiny)": ["sim", "jitter", "--synthetic", "250Hz:2us", "--duration", "10s", "--tasks", "4",
                                  "--phases", "2", "--runs-dir", runs],
            "sim app TIT (tiny)": ["sim", "app", str(ring), "--runs-dir", runs],
            "sim app native (tiny)": ["sim", "app", str(native), "--runs-dir", runs]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="whole processes per command (the best is kept)")
    ap.add_argument("--only", default="", help="only the commands starting with this text")
    a = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; best of {a.repeat} processes, in rounds")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        helps = {"--help": ["--help"]}
        helps.update({" ".join(p) + " --help": [*p, "--help"] for p in commands() if " ".join(p).startswith(a.only)})
        tiny = {k: v for k, v in tiny_inputs(d).items() if k.startswith(a.only)}
        best = measure_all({**helps, **tiny}, d, a.repeat)
        floor = best["--help"][1]
        print(f"{'command':<34} {'wall s':>7} {'cpu s':>7}  {'target (cpu)':<16} heavy imports")
        print(f"{'--help':<34} {'':>7} {floor:>7.3f}  {'(the floor)':<16}")
        misses = 0
        for name, argv in [*list(helps.items())[1:], *tiny.items()]:
            (wall, cpu), heavy = best[name], heavy_imports(argv, d)
            target = floor + HELP_SLACK_S if name in helps else TINY_CPU_S
            ok = cpu <= target and not (name in tiny and heavy & {"pandas", "matplotlib"})
            misses += not ok
            print(f"{name:<34} {wall:>7.3f} {cpu:>7.3f}  <= {target:.3f} {'meets' if ok else 'MISSES':<6} "
                  f"{', '.join(sorted(heavy)) or '-'}", flush=True)
        print(f"{misses} miss{'es' if misses != 1 else ''}")


if __name__ == "__main__":
    main()
