"""ReFrame tests that run hpcvar: a characterization, a screen of the allocation, and the OS noise of one node
(meant for ``--distribute``, which clones it onto every node of a partition).

Run-only tests, in the manner of ReFrame's hpctestlib: the job runs one hpcvar command into a runs directory of
its stage directory, then ``hpcvar export reframe-refs`` on that run writes ``hpcvar-perf.json``; the performance
variables are read from that JSON (every figure of the run, named as the references are). Sanity: hpcvar ended
with 0 (OK) or 3 (DEGRADED: a finding, which the references then judge); 4 (UNRELIABLE: the measurement itself
cannot be trusted), an error or a missing JSON fail the test.

References: set ``references`` to a JSON file written by ``hpcvar export reframe-refs`` from good runs (a site's
last quiet nights): values with bounds from the measured dispersion, the bad side only. Without it the test
reports its figures and judges nothing (a reference-less performance test, as ReFrame runs them).

    reframe -C config.py -c $(python -c 'import hpcvar.integrations.reframe as m; print(m.__file__)') \\
        -n hpcvar_node_noise --distribute=idle -S references=/site/hpcvar-noise-refs.json -r

Subclass the base classes (``hpcvar_check`` and the three below) for site tests: set ``valid_systems``,
``valid_prog_environs``, ``hpcvar`` (the command), ``launcher`` and the variables of each test.
"""

from __future__ import annotations

import json
import math
import os

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import deferrable, run_after, run_before, sanity_function, variable

PERF_JSON = "hpcvar-perf.json"
RUNS = "hpcvar-runs"
# the exit codes of hpcvar's answer (hpcvar.answer): OK and DEGRADED are measurements; UNRELIABLE is not
MEASURED_EXIT = (0, 3)


@deferrable
def _perf_value(path: str, name: str) -> float:
    with open(path) as f:
        value = json.load(f)["reference"]["*"][name][0]
    return math.nan if value is None else float(value)  # null: standard JSON's NaN (nothing measured)


class hpcvar_check(rfm.RunOnlyRegressionTest):
    """Base: one hpcvar command into ``hpcvar-runs/`` of the stage directory, its figures as performance
    variables."""

    #: The hpcvar command (a path, or a name on PATH).
    hpcvar = variable(str, value="hpcvar")
    #: JSON of ``hpcvar export reframe-refs`` with the references to judge by (None: report only).
    references = variable(str, type(None), value=None)
    #: Labels left out of the performance variables' names (``node`` for tests cloned onto every node).
    drop_labels = variable(typ.List[str], value=[])
    #: How hpcvar starts MPI ranks inside the job: ``auto`` (srun under a Slurm partition, else local).
    launcher = variable(str, value="auto")
    #: Extra options of the hpcvar command.
    extra_options = variable(typ.List[str], value=[])

    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    num_tasks = 1
    tags = {"hpcvar"}
    # kept in the test's output directory: the figures, and the stored run (hpcvar runs show, report, history)
    keep_files = [PERF_JSON, RUNS]

    def hpcvar_command(self) -> list[str]:  # the subcommand and its options, without --runs-dir
        raise NotImplementedError

    def chosen_launcher(self) -> str:
        if self.launcher != "auto":
            return self.launcher
        return "srun" if self.current_partition.scheduler.registered_name in ("slurm", "squeue") else "local"

    @run_after("setup")
    def set_command(self):
        self.executable = self.hpcvar
        self.executable_opts = [*self.hpcvar_command(), *self.extra_options, "--runs-dir", RUNS]
        self.prerun_cmds = [f"mkdir -p {RUNS}"]
        drop = " ".join(f"--drop-label {d}" for d in self.drop_labels)
        self.postrun_cmds = ["echo hpcvar_exit=$?",
                             f"{self.hpcvar} export reframe-refs latest --runs-dir {RUNS} {drop} -o {PERF_JSON}"]

    @run_before("run")
    def run_hpcvar_directly(self):
        # hpcvar starts its own ranks (srun, mpiexec): the job script runs it once, not under the partition's
        # parallel launcher
        self.job.launcher = getlauncher("local")()

    @sanity_function
    def hpcvar_measured(self):
        code = sn.extractsingle(r"^hpcvar_exit=(\d+)", self.stdout, 1, int)
        return sn.all([sn.assert_in(code, MEASURED_EXIT, msg="hpcvar exited with {0}: not a measurement "
                                    "(4: UNRELIABLE; see the job's output)"),
                       sn.assert_true(os.path.exists(os.path.join(self.stagedir, PERF_JSON)),
                                      msg=f"hpcvar export reframe-refs wrote no {PERF_JSON}")])

    @run_before("performance")
    def set_perf_variables(self):
        path = os.path.join(self.stagedir, PERF_JSON)
        with open(path) as f:
            figures = json.load(f)["reference"]["*"]
        self.perf_variables = {name: sn.make_performance_function(_perf_value(path, name), ref[3])
                               for name, ref in figures.items()}
        if self.references:
            with open(self.references) as f:
                refs = json.load(f)["reference"]["*"]
            self.reference = {"*": {k: tuple(v) for k, v in refs.items() if k in figures}}


class hpcvar_node_noise(hpcvar_check):
    """OS noise on every CPU of one node (``hpcvar noise record``): for ``--distribute``, one test per node,
    the same references for every node (variable names without the node)."""

    #: Recording time of each CPU.
    duration = variable(str, value="10s")
    #: CPUs to record on (``all``, ``0-3``, ...).
    cpus = variable(str, value="all")
    #: SCHED_FIFO priority of the collector (0: the normal scheduler; >0 shows kernel noise only).
    rt_prio = variable(int, value=0)
    drop_labels = ["node"]
    num_tasks = 1
    num_tasks_per_node = 1

    def hpcvar_command(self) -> list[str]:
        return ["noise", "record", "--cpus", self.cpus, "--duration", self.duration, "--rt-prio", str(self.rt_prio),
                "--no-plots"]


class hpcvar_characterize(hpcvar_check):
    """``hpcvar characterize --quick`` (or thorough) on the job's nodes; its answer is the test's sanity."""

    #: Steps to run (comma list; empty: every step that applies).
    steps = variable(str, value="")
    quick = variable(bool, value=True)
    #: MPI ranks per node (srun).
    ranks_per_node = variable(int, value=1)
    num_tasks_per_node = 1  # one task slot per node: num_tasks is the job's node count

    def hpcvar_command(self) -> list[str]:
        cmd = ["characterize", "--launcher", self.chosen_launcher()]
        if self.chosen_launcher() == "srun":
            cmd += ["--ranks-per-node", str(self.ranks_per_node)]
        return cmd + (["--quick"] if self.quick else []) + (["--steps", self.steps] if self.steps else [])


class hpcvar_screen(hpcvar_check):
    """``hpcvar screen`` of the job's nodes (per-node noise and compute, every link's latency and bandwidth);
    needs a multi-node launcher (srun in an allocation)."""

    #: Options of the screen (see hpcvar screen --help).
    screen_options = variable(typ.List[str], value=[])

    def hpcvar_command(self) -> list[str]:
        return ["screen", "--launcher", self.chosen_launcher(), *self.screen_options]


@rfm.simple_test
class hpcvar_node_noise_check(hpcvar_node_noise):
    """The OS noise of one node, every CPU (reframe --distribute: every node)."""


@rfm.simple_test
class hpcvar_characterize_check(hpcvar_characterize):
    """A quick characterization of the job's nodes."""


@rfm.simple_test
class hpcvar_screen_check(hpcvar_screen):
    """A screen of the job's nodes (3 or more)."""

    num_tasks = 3
    num_tasks_per_node = 1
