"""Starting MPI jobs: ``get_launcher(name, ...)`` and the LaunchSpec they run.

Launchers by name: ``local`` (mpiexec matching the build), ``srun`` (Slurm),
``template`` (a user's command template) and ``testbed`` (network-namespace
hosts, hpcvar.testbed.launcher).
"""

from __future__ import annotations

import importlib

from hpcvar.errors import UsageError
from hpcvar.launch.base import Launcher, LaunchError, LaunchResult, LaunchSpec
from hpcvar.launch.launchers import LocalLauncher, SrunLauncher, TemplateLauncher

LAUNCHERS = {
    "local": "hpcvar.launch.launchers:LocalLauncher",
    "srun": "hpcvar.launch.launchers:SrunLauncher",
    "template": "hpcvar.launch.launchers:TemplateLauncher",
    "testbed": "hpcvar.testbed.launcher:TestbedLauncher",
}


def get_launcher(name: str, template: str | None = None, **kwargs) -> Launcher:
    if name not in LAUNCHERS:
        raise UsageError(f"unknown launcher '{name}'", "--launcher", f"Choose one of {', '.join(LAUNCHERS)}")
    module, _, cls = LAUNCHERS[name].partition(":")
    klass = getattr(importlib.import_module(module), cls)
    if name == "template":
        return klass(template or "")
    return klass(**kwargs)


def oversubscription_warning(np: int, launcher: Launcher, flag: str = "--np") -> str | None:
    """The warning (with its remedy) when ranks outnumber the cores they run on; ``flag``: the command's flag
    that sets the ranks."""
    slots = launcher.slots()
    if launcher.name in ("local", "testbed") and slots and np > slots:
        return (f"{np} ranks share {slots} cores: busy-polling MPI stalls for milliseconds when ranks "
                f"outnumber cores, so results include scheduler noise; "
                + (f"use --np {slots} or more cores" if flag == "--np" else f"give fewer ranks ({flag}) or more cores"))
    return None


__all__ = ["LAUNCHERS", "LaunchError", "LaunchResult", "LaunchSpec", "Launcher", "LocalLauncher",
           "SrunLauncher", "TemplateLauncher", "get_launcher", "oversubscription_warning"]

