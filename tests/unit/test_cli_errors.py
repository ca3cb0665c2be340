"""The one error boundary: one line, the flag named, exit 2 for usage errors."""

import pytest

from tests.conftest import run_cli


@pytest.mark.parametrize("args,flag", [
    (["bench", "latency", "--sizes", "8,abc"], "--sizes"),
    (["bench", "latency", "--np", "1"], "--np"),
    (["bench", "latency", "--time-per-size", "soon"], "--time-per-size"),
    (["bench", "latency", "--iters", "0"], "--iters"),
    (["bench", "latency", "--sizes", "2GiB"], "--sizes"),
    (["bench", "latency", "--launcher", "template"], "--template"),
    (["bench", "latency", "--min-iters", "50", "--iters", "10"], "--min-iters"),
    # issue #27: taken before and giving nan results
    (["bench", "latency", "--timeout", "0s"], "--timeout"),
    (["bench", "bsp", "--quantum", "0s"], "--quantum"),
    (["model", "penalties", "a->b", "--beta", "inf"], "--beta"),
    (["model", "penalties", "a->b", "--gamma-in", "nan"], "--gamma-in"),
    (["compare", "a", "b", "--threshold", "nan"], "--threshold"),
    (["compare", "a", "b", "--alpha", "nan"], "--alpha"),
    (["trace", "import", "x.tit", "--flops-rate", "inf"], "--flops-rate"),
    (["noise", "record", "--duration", "0s"], "--duration"),
])
def test_bad_values_name_the_flag(args, flag, runs_dir):
    res = run_cli(args)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and f"({flag})" in lines[0]
    assert res.stdout == ""


def test_unknown_option_and_command():
    res = run_cli(["bench", "latency", "--bogus"])
    assert res.returncode == 2 and "error: no such option (--bogus)" in res.stderr
    res = run_cli(["nosuch"])
    assert res.returncode == 2 and res.stderr.startswith("error: ")


def test_help_lists_groups_and_units():
    res = run_cli(["--help"])
    for group in ("bench", "noise", "sim", "model", "trace", "testbed", "report", "runs", "info", "demo"):
        assert f"  {group}" in res.stdout
    res = run_cli(["bench", "latency", "--help"])
    assert res.returncode == 0 and "bytes" in res.stdout and "ns" in res.stdout


def test_runs_show_unknown_run(runs_dir):
    res = run_cli(["runs", "show", "nope"])
    assert res.returncode == 2 and "(RUN)" in res.stderr


def test_python_m_hpcvar_works():
    res = run_cli(["--version"])
    assert res.returncode == 0 and "hpcvar" in res.stdout


def test_info_json():
    import json

    res = run_cli(["info", "--json"])
    assert res.returncode == 0
    info = json.loads(res.stdout)
    assert "build" in info and "machine" in info and info["machine"]["cores"] >= 1


def test_cli_start_up_does_not_import_heavy_libraries():
    """--help must stay fast: command modules import pandas/scipy/matplotlib lazily."""
    import subprocess
    import sys

    code = ("import sys, hpcvar.cli; heavy = [m for m in ('pandas', 'scipy', 'matplotlib', 'pyarrow') "
            "if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_every_help_and_the_simulators_skip_heavy_libraries(tmp_path):
    """Issue 30: every command's --help loads no numpy (nor pandas, pyarrow, matplotlib); a tiny run of each
    simulator loads neither pandas nor matplotlib (its figures are drawn on demand, its tables written by Arrow
    from columns), nor Arrow's compute functions (0.03 s: a native trace's ops are read from their dictionary)."""
    import subprocess
    import sys

    heavy = "[m for m in ('numpy', 'pandas', 'pyarrow', 'scipy', 'matplotlib') if m in sys.modules]"
    helps = ("import sys, click, hpcvar.cli as c\n"
             "def walk(g, path):\n"
             "    ctx = click.Context(g, info_name='hpcvar')\n"
             "    for name in g.list_commands(ctx):\n"
             "        cmd = g.get_command(ctx, name)\n"
             "        cmd.get_help(click.Context(cmd, info_name=name))\n"
             "        if isinstance(cmd, click.Group): walk(cmd, path + [name])\n"
             f"walk(c.cli, []); print(','.join({heavy}))")
    out = subprocess.run([sys.executable, "-c", helps], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
    ring = tmp_path / "ring.txt"
    ring.write_text("".join(f"{r} init\n{r} compute 1000\n{r} Isend {(r + 1) % 2} 1024\n{r} Irecv {(r + 1) % 2} 1024\n"
                            f"{r} wait\n{r} wait\n{r} finalize\n" for r in range(2)))
    (tmp_path / "runs").mkdir()
    native = tmp_path / "ring.trace"
    subprocess.run([sys.executable, "-m", "hpcvar", "trace", "import", str(ring), "-o", str(native)], check=True,
                   capture_output=True)
    for argv in (["sim", "jitter", "--synthetic", "250Hz:2us", "--duration", "1s", "--tasks", "4", "--phases", "2"],
                 ["sim", "app", str(ring)], ["sim", "app", str(native)]):
        full = [*argv, "--runs-dir", str(tmp_path / "runs"), "--json"]
        code = (f"import sys; from hpcvar.cli import cli; cli.main({full!r}, standalone_mode=False); "
                "print('HEAVY=' + ','.join(m for m in ('pandas', 'matplotlib', 'pyarrow.compute') "
                "if m in sys.modules))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.strip().splitlines()[-1] == "HEAVY=", (argv, out.stdout[-300:])


def test_lazy_short_help_matches_each_command():
    """The short help shown by 'hpcvar --help' (without importing) is the command's own."""
    import importlib

    from hpcvar.cli import COMMANDS
    from hpcvar.cli.bench import BENCH_COMMANDS
    from hpcvar.cli.sim import SIM_COMMANDS

    for table in (COMMANDS, BENCH_COMMANDS, SIM_COMMANDS):
        for name, (target, short) in table.items():
            module, _, attr = target.partition(":")
            cmd = getattr(importlib.import_module(module), attr)
            assert cmd.name == name
            assert cmd.get_short_help_str(limit=1000) == short, name


def test_missing_option_and_argument_are_named():
    res = run_cli(["report"])
    assert res.returncode == 2 and res.stderr.strip() == "error: missing argument (RUNS). See --help"
    res = run_cli(["trace", "run", "--", "true"])
    assert res.returncode == 2 and "error: missing option (--out)" in res.stderr


def test_sigterm_stops_helper_programs(tmp_path):
    """A terminated hpcvar leaves no native program running (here: the noise injector)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-m", "hpcvar", "noise", "inject", "--cpus", "0", "--period", "100ms",
                             "--burn", "1ms", "--time", "60s", "--rt-prio", "0"], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        child = None
        while child is None and time.monotonic() < deadline:
            out = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
            child = int(out[0]) if out else None
            time.sleep(0.1)
        assert child is not None, "the injector did not start"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        assert proc.returncode == 130 and "interrupted" in proc.stderr.read()
        time.sleep(0.5)
        try:
            os.kill(child, 0)
            alive = open(f"/proc/{child}/stat").read().split()[2] != "Z"
        except (ProcessLookupError, FileNotFoundError):
            alive = False
        assert not alive
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("flag", ["--send-buffer", "--rndv-first"])
def test_sim_app_transport_sizes_name_the_flag(flag, tmp_path, runs_dir):
    """A size that is not one, and a size given beside a cluster file (which has its own key), name the flag."""
    trace = tmp_path / "t.tit"
    trace.write_text("0 init\n1 init\n0 send 1 100000\n1 recv 0 100000\n0 finalize\n1 finalize\n")
    res = run_cli(["sim", "app", str(trace), flag, "lots"])
    assert res.returncode == 2 and f"({flag})" in res.stderr.splitlines()[0], res.stderr
    cluster = tmp_path / "c.txt"
    cluster.write_text("nodes 2\ncores_per_node 1\nbandwidth 1gbit\nlatency 50us\n")
    res = run_cli(["sim", "app", str(trace), "--cluster", str(cluster), flag, "64KiB"])
    assert res.returncode == 2 and f"({flag})" in res.stderr.splitlines()[0], res.stderr
    assert f"'{flag[2:].replace('-', '_')} SIZE'" in res.stderr
