"""The launchers: local mpiexec, Slurm srun, a user's template.

The testbed launcher (network namespaces) lives in hpcvar.testbed.launcher and
is found through the registry in hpcvar.launch.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
from pathlib import Path

from hpcvar.errors import HpcvarError, MissingToolError, UsageError
from hpcvar.launch.base import Launcher, LaunchSpec
from hpcvar.launch.mpi import MpiFlavor, default_mpiexec, detect_flavor, parse_version_text

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

    def nodes(self) -> int | None:
        return 1

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


# srun --mpi plugin that each MPI family speaks (measured: docs/cluster.md): MPICH's Hydra-less PMI is PMI-2,
# Open MPI 4 and 5 use PMIx. A wrong plugin makes srun start N independent size-1 worlds that exit 0, which the
# native programs catch with --expect-np.
SRUN_MPI_BY_FAMILY = {"mpich": "pmi2", "openmpi": "pmix"}


def build_family() -> MpiFlavor:
    """Family and version of the MPI hpcvar's native programs were built with."""
    from hpcvar._native import build_info

    text = build_info().get("mpi_library_version") or ""
    flavor = parse_version_text(text)
    if flavor.family == "unknown":
        try:
            flavor = detect_flavor(str(default_mpiexec()))
        except HpcvarError:
            pass
    return flavor


class SrunLauncher(Launcher):
    """Slurm's srun, inside an allocation (salloc/sbatch: its nodes) or outside one (srun asks for one).

    - ``--mpi``: the plugin that the build's MPI speaks (MPICH: pmi2; Open MPI: pmix) unless the user gives
      one (``--srun-mpi``); the choice, why, and Slurm's version go into the run's metadata.
    - ``--nodes``: ceil(np / ranks per node) when --ranks-per-node is given, so that the placement asked for
      is the one Slurm makes (the native programs check it and stop with a clear error otherwise).
    - Outside an allocation ``--time`` bounds the job Slurm creates by the launch timeout.
    """

    name = "srun"

    def __init__(self, srun: str = "srun", mpi: str | None = None, flavor: MpiFlavor | None = None,
                 in_allocation: bool | None = None):
        self.srun = srun
        if mpi is not None and not re.fullmatch(r"[A-Za-z0-9_]+", mpi):
            raise UsageError(f"'{mpi}' is not an srun --mpi plugin name", "--srun-mpi",
                             "Give one of the names 'srun --mpi=list' prints, e.g. pmi2 or pmix, or auto")
        self._mpi = None if mpi in (None, "auto") else mpi
        self._flavor = flavor
        self.in_allocation = ("SLURM_JOB_ID" in os.environ) if in_allocation is None else in_allocation

    @property
    def flavor(self) -> MpiFlavor:
        if self._flavor is None:
            self._flavor = build_family()
        return self._flavor

    @property
    def mpi(self) -> str:
        """The --mpi plugin used: the user's, else the one of the build's MPI family."""
        if self._mpi:
            return self._mpi
        plugin = SRUN_MPI_BY_FAMILY.get(self.flavor.family)
        if plugin is None:
            raise UsageError("cannot tell which MPI hpcvar was built with, so not which srun --mpi plugin it needs",
                             "--srun-mpi", "Give the plugin yourself: --srun-mpi pmi2 (MPICH, Intel MPI) or "
                                           "--srun-mpi pmix (Open MPI)")
        return plugin

    def mpi_choice(self) -> dict:
        """The plugin and why it was chosen (run metadata)."""
        if self._mpi:
            return {"srun_mpi": self._mpi, "srun_mpi_from": "--srun-mpi"}
        return {"srun_mpi": self.mpi, "srun_mpi_from": f"build MPI family {self.flavor.family} "
                                                         f"{self.flavor.version}".strip()}

    def slots(self) -> int | None:
        n = os.environ.get("SLURM_NTASKS") or os.environ.get("SLURM_NPROCS")
        return int(n) if n and n.isdigit() else None

    def nodes(self) -> int | None:
        """The allocation's nodes (inside salloc/sbatch); outside one, Slurm decides."""
        n = os.environ.get("SLURM_JOB_NUM_NODES") or os.environ.get("SLURM_NNODES")
        return int(n) if self.in_allocation and n and n.isdigit() else None

    def expected_rpn(self, spec: LaunchSpec) -> int | None:
        return spec.ranks_per_node

    def command(self, spec: LaunchSpec) -> tuple[list[str], dict[str, str]]:
        argv = [self.srun, f"--mpi={self.mpi}", "--ntasks", str(spec.np), "--kill-on-bad-exit=1",
                "--cpu-bind=none"]
        if spec.ranks_per_node:
            argv += [f"--nodes={math.ceil(spec.np / spec.ranks_per_node)}",
                     f"--ntasks-per-node={spec.ranks_per_node}"]
        if not self.in_allocation:
            argv += [f"--time={max(1, math.ceil(spec.timeout_s / 60))}", "--job-name=hpcvar"]
        env = {**self._transport_env(spec), **spec.env}
        if env:
            argv.append("--export=ALL," + ",".join(f"{k}={v}" for k, v in env.items()))
        argv += spec.extra_args
        argv += [str(spec.exe), *spec.args]
        return argv, env

    def _transport_env(self, spec: LaunchSpec) -> dict[str, str]:
        """MPICH whose UCX the environment restricts to TCP (the testbed's 'hpcvar testbed env', some sites)
        loses MPI_ANY_SOURCE receives that several senders compete for: such programs get the ofi netmod
        when the library has it (docs/testbed.md)."""
        if (spec.any_source and self.flavor.family == "mpich" and os.environ.get("UCX_TLS") == "tcp,self"
                and "ofi" in self.flavor.devices and "MPIR_CVAR_CH4_NETMOD" not in os.environ):
            return {"MPIR_CVAR_CH4_NETMOD": "ofi"}
        return {}

    def prepare(self, spec: LaunchSpec) -> None:
        if shutil.which(self.srun) is None:
            raise MissingToolError(f"'{self.srun}' is not on PATH", "--launcher",
                                   "Run hpcvar on a Slurm login or compute node (module load slurm), or choose "
                                   "another --launcher")

    def failure_hint(self, text: str) -> tuple[str | None, str] | None:
        """srun's own refusals, with the flag or allocation option that fixes them."""
        if "More processors requested than permitted" in text or "Requested node configuration is not available" \
                in text:
            return ("--ranks-per-node", "The allocation has fewer CPUs or nodes than the job needs: ask for them "
                                        "(salloc/sbatch -N <nodes> --exclusive, "
                                        "or --ntasks-per-node=<ranks per node>), or lower --np / --ranks-per-node")
        return None

    def mismatch_hint(self) -> tuple[str, str]:
        return ("--srun-mpi", f"srun started the ranks with --mpi={self.mpi}, which this MPI library "
                              f"({self.flavor.family or 'unknown'}) does not speak: give the plugin it needs, "
                              "e.g. --srun-mpi pmi2 for MPICH or --srun-mpi pmix for Open MPI ('srun --mpi=list' "
                              "lists what this Slurm has)")

    def describe(self) -> dict:
        d = {"launcher": self.name, "srun": self.srun, "in_allocation": self.in_allocation,
             "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
             "slurm_nodelist": os.environ.get("SLURM_JOB_NODELIST"),
             "slurm_version": slurm_version(self.srun),
             "mpi_family": self.flavor.family, "mpi_version": self.flavor.version}
        try:
            d.update(self.mpi_choice())
        except UsageError as e:  # metadata never fails a run; command() raises the real error
            d["srun_mpi_error"] = str(e)
        return d


def slurm_version(srun: str = "srun") -> str | None:
    """Slurm's version from ``srun --version`` ("slurm 22.05.8" -> "22.05.8"), None without srun."""
    import subprocess

    try:
        out = subprocess.run([srun, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"(\d+\.\d+[\w.-]*)", out)
    return m.group(1) if m else None


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

    def expected_rpn(self, spec: LaunchSpec) -> int | None:
        return spec.ranks_per_node if any("{rpn}" in t for t in self.tokens) else None

    def describe(self) -> dict:
        return {"launcher": self.name, "template": self.template}
