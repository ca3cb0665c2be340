"""HPL as the HPC Challenge suite (Debian's ``hpcc``) runs it: its input file and its result line.

``hpcc`` reads ``hpccinf.txt`` from its working directory (HPL's HPL.dat with a few more lines) and
appends its results to ``hpccoutf.txt`` there. It runs HPL last, after its other benchmarks, and HPL
calls no MPI collective (its broadcasts and reductions are point-to-point), so the HPL section of a
traced hpcc run is what follows the last collective on MPI_COMM_WORLD: ``hpcvar trace cut
--after-collective -1`` (docs/replay.md, "Linpack").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hpcvar.errors import InputFileError, UsageError

BCASTS = {"1rg": 0, "1rM": 1, "2rg": 2, "2rM": 3, "Lng": 4, "LnM": 5}


@dataclass(frozen=True)
class HplResult:
    """HPL's result line (``WR...``): the variant, N, NB, P, Q, the solve time and the rate."""

    variant: str
    n: int
    nb: int
    p: int
    q: int
    time_s: float
    gflops: float


def hpcc_input(n: int, nb: int = 80, p: int = 1, q: int = 4, bcast: str = "1rg") -> str:
    """hpccinf.txt for one HPL problem: N, NB, a P x Q grid and the panel broadcast (``1rg``, the
    increasing ring, is the paper's "task n sends to n + 1" on a 1 x Q grid); the rest as in hpcc's
    example file (right-looking recursive factorisation, look-ahead 1, mixed swap)."""
    if n < 1 or nb < 1 or p < 1 or q < 1:
        raise UsageError(f"HPL needs positive N, NB, P and Q (got {n}, {nb}, {p}, {q})", "--n",
                         "Give e.g. N 2000, NB 80, a 1 x 4 grid")
    if bcast not in BCASTS:
        raise UsageError(f"unknown HPL broadcast '{bcast}'", "--bcast", f"Use one of {', '.join(BCASTS)}")
    lines = [("HPLinpack benchmark input file", ""), ("written by hpcvar", ""), ("HPL.out", "output file name"),
             ("8", "device out"), ("1", "# of problems sizes (N)"), (str(n), "Ns"), ("1", "# of NBs"),
             (str(nb), "NBs"), ("0", "PMAP process mapping (0=Row-,1=Column-major)"),
             ("1", "# of process grids (P x Q)"), (str(p), "Ps"), (str(q), "Qs"), ("16.0", "threshold"),
             ("1", "# of panel fact"), ("2", "PFACTs (0=left, 1=Crout, 2=Right)"),
             ("1", "# of recursive stopping criterium"), ("4", "NBMINs (>= 1)"), ("1", "# of panels in recursion"),
             ("2", "NDIVs"), ("1", "# of recursive panel fact."), ("1", "RFACTs (0=left, 1=Crout, 2=Right)"),
             ("1", "# of broadcast"), (str(BCASTS[bcast]), "BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)"),
             ("1", "# of lookahead depth"), ("1", "DEPTHs (>=0)"), ("2", "SWAP (0=bin-exch,1=long,2=mix)"),
             ("64", "swapping threshold"), ("0", "L1 in (0=transposed,1=no-transposed) form"),
             ("0", "U  in (0=transposed,1=no-transposed) form"), ("1", "Equilibration (0=no,1=yes)"),
             ("8", "memory alignment in double (> 0)"),
             ("##### This line (no. 32) is ignored (it serves as a separator). ######", ""),
             ("0", "Number of additional problem sizes for PTRANS"), ("1200", "values of N"),
             ("0", "number of additional blocking sizes for PTRANS"), ("40", "values of NB")]
    return "".join(f"{v:<12} {c}".rstrip() + "\n" for v, c in lines)


_WR = re.compile(r"^(W[RC]\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([0-9.eE+-]+)\s+([0-9.eE+-]+)\s*$", re.M)


def hpl_results(path: str | Path) -> list[HplResult]:
    """Every HPL result line of an hpccoutf.txt (hpcc appends: the last is the newest run)."""
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise InputFileError(f"cannot read hpcc's output ({e.strerror})", str(path),
                             todo="Run hpcc in this directory first") from None
    found = [HplResult(m[0], int(m[1]), int(m[2]), int(m[3]), int(m[4]), float(m[5]), float(m[6]))
             for m in _WR.findall(text)]
    if not found:
        raise InputFileError("no HPL result line (WR...) in hpcc's output: HPL did not finish", str(path),
                             todo="Look at the end of the file for HPL's error")
    return found


__all__ = ["BCASTS", "HplResult", "hpcc_input", "hpl_results"]
