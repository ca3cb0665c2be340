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


# How srun starts the ranks of each MPI family (measured: docs/cluster.md). Open MPI 4 and 5 speak PMIx
# (srun --mpi=pmix). MPICH is started by its own process manager, hydra, with hydra's Slurm launcher ("hydra"):
# srun starts one hydra proxy per node, and hydra serves PMI to the ranks. The direct way, srun --mpi=pmi2, fails at
# random on multi-node jobs: slurmstepd's PMI-1 server reads a request with one read() of at most 1024 bytes
# (src/plugins/mpi/pmi2/pmi1.c, "TODO: read until newline", still so in Slurm 26.05) and advertises values of up to
# 1024 bytes, while MPICH's PMI-1 client cuts a long value (the ranks' network addresses) into segments of up to
# 1022 characters and sends each as one 'cmd=put kvsname=... key=...-seg-i/n value=...' line of up to ~1080 bytes.
# Whether a segment's line crosses 1024 bytes depends on how well its bytes compress (MPICH run-length encodes the
# hex), so it depends on the addresses of that launch: slurmstepd then reads a cut request ("value not properly
# terminated"), the rest of the line as a second one ("full request is: 3333..."), and the job dies.
# A wrong plugin makes srun start N independent size-1 worlds that exit 0, which the native programs catch with
# --expect-np.
SRUN_MPI_BY_FAMILY = {"mpich": "hydra", "openmpi": "pmix"}
HYDRA = "hydra"  # --srun-mpi hydra: not an srun plugin but MPICH's process manager over srun


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

    - ``--mpi``: how the build's MPI is started under Slurm (MPICH: ``hydra``, its own process manager whose
      proxies srun starts, see SRUN_MPI_BY_FAMILY; Open MPI: ``srun --mpi=pmix``) unless the user gives a plugin
      (``--srun-mpi``); the choice, why, and Slurm's version go into the run's metadata.
    - ``--nodes``: ceil(np / ranks per node) when --ranks-per-node is given, so that the placement asked for
      is the one Slurm makes (the native programs check it and stop with a clear error otherwise).
    - Outside an allocation ``--time`` bounds the job Slurm creates by the launch timeout.
    """

    name = "srun"

    def __init__(self, srun: str = "srun", mpi: str | None = None, flavor: MpiFlavor | None = None,
                 in_allocation: bool | None = None, mpiexec: str | Path | None = None):
        self.srun = srun
        if mpi is not None and not re.fullmatch(r"[A-Za-z0-9_]+", mpi):
            raise UsageError(f"'{mpi}' is not an srun --mpi plugin name", "--srun-mpi",
                             "Give one of the names 'srun --mpi=list' prints, e.g. pmi2 or pmix, or auto")
        self._mpi = None if mpi in (None, "auto") else mpi
        self._flavor = flavor
        self._mpiexec = None if mpiexec is None else str(mpiexec)
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
                             "--srun-mpi", "Give it yourself: --srun-mpi hydra (MPICH, Intel MPI) or "
                                           "--srun-mpi pmix (Open MPI)")
        return plugin

    def mpi_choice(self) -> dict:
        """The plugin and why it was chosen (run metadata)."""
        if self._mpi:
            return {"srun_mpi": self._mpi, "srun_mpi_from": "--srun-mpi"}
        why = f"build MPI family {self.flavor.family} {self.flavor.version}".strip()
        if self.mpi == HYDRA:
            why += ("; Slurm's PMI-1 server (--mpi=pmi2) reads requests of at most 1024 bytes, which MPICH's "
                    "PMI-1 client exceeds at random (docs/cluster.md)")
        return {"srun_mpi": self.mpi, "srun_mpi_from": why}

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
        env = {**self._transport_env(spec), **spec.env}
        if self.mpi == HYDRA:
            return self._hydra_command(spec, env), env
        argv = [self.srun, f"--mpi={self.mpi}", "--ntasks", str(spec.np), "--kill-on-bad-exit=1",
                "--cpu-bind=none"]
        argv += self._placement(spec)
        if not self.in_allocation:
            argv += self._own_job(spec)
        if env:
            argv.append("--export=ALL," + ",".join(f"{k}={v}" for k, v in env.items()))
        argv += spec.extra_args
        argv += [str(spec.exe), *spec.args]
        return argv, env

    @staticmethod
    def _placement(spec: LaunchSpec) -> list[str]:
        if not spec.ranks_per_node:
            return []
        return [f"--nodes={math.ceil(spec.np / spec.ranks_per_node)}", f"--ntasks-per-node={spec.ranks_per_node}"]

    @staticmethod
    def _own_job(spec: LaunchSpec) -> list[str]:
        """Outside an allocation: the job Slurm creates for this launch, bounded by the launch timeout."""
        return [f"--time={max(1, math.ceil(spec.timeout_s / 60))}", "--job-name=hpcvar"]

    def _hydra_command(self, spec: LaunchSpec, env: dict[str, str]) -> list[str]:
        """MPICH's mpiexec (hydra) with its Slurm launcher: srun starts one proxy per node of the allocation and
        hydra serves PMI itself. Outside an allocation, salloc makes one for the launch. The user's
        --launcher-args are srun options, which hydra passes to its srun (HYDRA_LAUNCHER_EXTRA_ARGS)."""
        argv = [self.hydra_mpiexec(), "-launcher", "slurm", "-launcher-exec", self.srun, "-np", str(spec.np),
                "-bind-to", "none"]
        if spec.ranks_per_node:
            argv += ["-ppn", str(spec.ranks_per_node)]
        for k, v in env.items():
            argv += ["-genv", k, v]
        env["HYDRA_LAUNCHER_EXTRA_ARGS"] = shlex.join(["--cpu-bind=none", *spec.extra_args])
        argv += [str(spec.exe), *spec.args]
        if self.in_allocation:
            return argv
        salloc = str(Path(shutil.which(self.srun) or self.srun).with_name("salloc"))
        return [salloc, "--quiet", "--ntasks", str(spec.np), *self._placement(spec), *self._own_job(spec), *argv]

    def hydra_mpiexec(self) -> str:
        """The build's hydra mpiexec (next to its mpicc, else on PATH)."""
        if self._mpiexec is None:
            self._mpiexec = str(default_mpiexec())
        return self._mpiexec

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
        if self.mpi == HYDRA and shutil.which(self.hydra_mpiexec()) is None:
            raise MissingToolError(f"'{self.hydra_mpiexec()}' (MPICH's hydra, which starts MPICH under Slurm) "
                                   "is not there", "--srun-mpi",
                                   "Reinstall hpcvar's MPI (make install), or give --srun-mpi pmi2 to start the "
                                   "ranks with srun's PMI-2 plugin directly")

    def failure_hint(self, text: str) -> tuple[str | None, str] | None:
        """srun's own refusals, with the flag or allocation option that fixes them."""
        if "More processors requested than permitted" in text or "Requested node configuration is not available" \
                in text:
            return ("--ranks-per-node", "The allocation has fewer CPUs or nodes than the job needs: ask for them "
                                        "(salloc/sbatch -N <nodes> --exclusive, "
                                        "or --ntasks-per-node=<ranks per node>), or lower --np / --ranks-per-node")
        if "Could not establish a configuration source" in text:
            where = os.environ.get("SLURM_CONF")
            missing = (f"SLURM_CONF names {where}, which srun could not use" if where else
                       "SLURM_CONF is not set and srun found no slurm.conf (nor a configless controller)")
            return ("--launcher", f"{missing}: set SLURM_CONF to the cluster's slurm.conf (on a Slurm node it is "
                                  "usually /etc/slurm/slurm.conf); for the testbed's Slurm run "
                                  "eval \"$(hpcvar testbed env)\" first")
        return None

    def mismatch_hint(self) -> tuple[str, str]:
        return ("--srun-mpi", f"srun started the ranks with --mpi={self.mpi}, which this MPI library "
                              f"({self.flavor.family or 'unknown'}) does not speak: give the plugin it needs, "
                              "e.g. --srun-mpi hydra for MPICH or --srun-mpi pmix for Open MPI ('srun --mpi=list' "
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
