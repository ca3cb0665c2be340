"""Which MPI is this: family and version of an mpiexec, from its --version text."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hpcvar._native import build_info
from hpcvar.errors import MissingToolError


@dataclass(frozen=True)
class MpiFlavor:
    family: str  # "mpich", "openmpi" or "unknown"
    version: str  # "5.0.11"; "" when unknown
    devices: tuple[str, ...] = ()  # MPICH ch4 netmods built in (--with-device=ch4:ucx,ofi -> ucx, ofi)

    @property
    def major(self) -> int:
        m = re.match(r"(\d+)", self.version)
        return int(m.group(1)) if m else 0


def parse_version_text(text: str) -> MpiFlavor:
    """Family and version from ``mpiexec --version`` output."""
    m = (re.search(r"\((?:Open MPI|OpenRTE)\)\s+([0-9][0-9.a-z]*)", text)
         or re.search(r"Open MPI[^0-9]*([0-9][0-9.]*)", text))
    if m:
        return MpiFlavor("openmpi", m.group(1))
    if "HYDRA" in text or "MPICH" in text or "hydra" in text:
        m = re.search(r"Version:\s+([0-9][0-9.a-z]*)", text)
        d = re.search(r"--with-device=ch\d:([a-z0-9,]+)", text)
        return MpiFlavor("mpich", m.group(1) if m else "", tuple(d.group(1).split(",")) if d else ())
    if "Intel(R) MPI" in text:
        m = re.search(r"Version\s+([0-9.]+)", text)
        return MpiFlavor("mpich", m.group(1) if m else "")  # Intel MPI is MPICH-derived (hydra)
    return MpiFlavor("unknown", "")


def default_mpiexec() -> Path:
    """The mpiexec next to the mpicc that hpcvar was built with, else the one on PATH."""
    info = build_info()
    bindir = info.get("mpi_bindir")
    if bindir:
        for name in ("mpiexec", "mpirun"):
            p = Path(bindir) / name
            if p.is_file():
                return p
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if found:
        return Path(found)
    raise MissingToolError("no mpiexec found (neither next to the build's mpicc nor on PATH)", "--launcher",
                           "Install an MPI (pip install 'hpcvar[mpich]') or use --launcher srun/template")


@functools.cache
def detect_flavor(mpiexec: str) -> MpiFlavor:
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return MpiFlavor("unknown", "")
    return parse_version_text(out.stdout + out.stderr)
