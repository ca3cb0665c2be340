"""The launchers: local mpiexec, Slurm srun, a user's template.

The testbed launcher (network namespaces) lives in hpcvar.testbed.launcher and
is found through the registry in hpcvar.launch.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from hpcvar.errors import UsageError
from hpcvar.launch.base import Launcher, LaunchSpec
from hpcvar.launch.mpi import MpiFlavor, default_mpiexec, detect_flavor

ROOT_ENV_OPENMPI = {
    # Open MPI refuses to run as root without these (4.x: OMPI_*, 5.x: PRTE_* as well)
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "PRTE_ALLOW_RUN_AS_ROOT": "1",
    "PRTE_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
}


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


class LocalLauncher(Launcher):
    """The mpiexec that matches the build, with the options each MPI family needs.

    - all: ranks are not bound to cores (``--bind-to none`` / ``-bind-to none``):
      hpcvar pins where it must, and binding 2+ jobs to the same core would
      serialize them;
    - Open MPI: ``--oversubscribe`` when ranks outnumber cores (5.x refuses
      otherwise), and the run-as-root variables when running as root.
    """

    name = "local"

    def __init__(self, mpiexec: str | Path | None = None, flavor: MpiFlavor | None = None,
                 cores: int | None = None, root: bool | None = None):
        self.mpiexec = str(mpiexec or default_mpiexec())
        self.flavor = flavor or detect_flavor(self.mpiexec)
        self.cores = cores if cores is not None else (os.cpu_count() or 1)
        self.root = is_root() if root is None else root

    def slots(self) -> int | None:
        return self.cores

    def command(self, spec: LaunchSpec) -> tuple[list[str], dict[str, str]]:
        env = dict(spec.env)
        argv = [self.mpiexec, "-n", str(spec.np)]
        if self.flavor.family == "openmpi":
            argv += ["--bind-to", "none"]
            if spec.np > self.cores:
                argv.append("--oversubscribe")
            if self.root:
                env.update(ROOT_ENV_OPENMPI)
            for k, v in spec.env.items():
                argv += ["-x", f"{k}={v}"]
        elif self.flavor.family == "mpich":
            argv += ["-bind-to", "none"]
            for k, v in spec.env.items():
                argv += ["-genv", k, v]
        argv += spec.extra_args
        argv += [str(spec.exe), *spec.args]
        return argv, env

    def describe(self) -> dict:
        return {"launcher": self.name, "mpiexec": self.mpiexec, "mpi_family": self.flavor.family,
                "mpi_version": self.flavor.version, "cores": self.cores}


class SrunLauncher(Launcher):
    """Slurm's srun inside an allocation (salloc/sbatch). The MPI must match the build's."""

    name = "srun"

    def __init__(self, srun: str = "srun"):
        self.srun = srun

    def slots(self) -> int | None:
        n = os.environ.get("SLURM_NTASKS") or os.environ.get("SLURM_NPROCS")
        return int(n) if n and n.isdigit() else None

    def command(self, spec: LaunchSpec) -> tuple[list[str], dict[str, str]]:
        argv = [self.srun, "--ntasks", str(spec.np), "--kill-on-bad-exit=1", "--cpu-bind=none"]
        if spec.ranks_per_node:
            argv.append(f"--ntasks-per-node={spec.ranks_per_node}")
        if spec.env:
            argv.append("--export=ALL," + ",".join(f"{k}={v}" for k, v in spec.env.items()))
        argv += spec.extra_args
        argv += [str(spec.exe), *spec.args]
        return argv, dict(spec.env)

    def describe(self) -> dict:
        return {"launcher": self.name, "srun": self.srun,
                "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
                "slurm_nodelist": os.environ.get("SLURM_JOB_NODELIST")}


class TemplateLauncher(Launcher):
    """A user's command template, e.g. ``mpirun -np {np} --hostfile hosts {exe} {args}``.

    The template is split like a shell would (shlex) but never run by a shell.
    ``{np}``, ``{exe}`` and ``{rpn}`` (ranks per node) are replaced inside tokens;
    a token that is exactly ``{args}`` becomes the program's arguments.
    """

    name = "template"

    def __init__(self, template: str):
        if not template:
            raise UsageError("the template launcher needs a template", "--template",
                             "Example: --template 'mpirun -np {np} {exe} {args}'")
        try:
            self.tokens = shlex.split(template)
        except ValueError as e:
            raise UsageError(f"cannot split the template: {e}", "--template", "Check its quotes") from None
        if not any("{exe}" in t for t in self.tokens):
            raise UsageError("the template has no {exe}", "--template",
                             "Example: --template 'mpirun -np {np} {exe} {args}'")
        self.template = template

    def command(self, spec: LaunchSpec) -> tuple[list[str], dict[str, str]]:
        argv: list[str] = []
        saw_args = False
        for tok in self.tokens:
            if tok == "{args}":
                argv.extend(spec.args)
                saw_args = True
                continue
            argv.append(tok.replace("{np}", str(spec.np)).replace("{exe}", str(spec.exe))
                        .replace("{rpn}", str(spec.ranks_per_node or "")))
        if not saw_args:
            argv.extend(spec.args)
        return argv, dict(spec.env)

    def describe(self) -> dict:
        return {"launcher": self.name, "template": self.template}
