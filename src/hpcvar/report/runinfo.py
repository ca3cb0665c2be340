"""What every view of a stored run says besides the kind's own: its warnings and its figures (no rich here:
machine-readable output prints them without loading the terminal toolkit)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hpcvar.results.store import Run


def run_warnings(run: Run) -> list[str]:
    """The run's warnings (run.json ``warnings``), and those that runs of earlier versions kept only in their
    result (``warning``, ``warnings``), each once."""
    result = run_result(run)
    out = [str(w) for w in run.info.get("warnings") or []]
    legacy = list(result.get("warnings") or []) + ([result["warning"]] if result.get("warning") else [])
    return out + [str(w) for w in dict.fromkeys(legacy) if str(w) not in out]


def run_result(run: Run) -> dict[str, Any]:
    result = run.info.get("result")
    return result if isinstance(result, dict) else {}


def run_plots(run: Run) -> list[str]:
    """The figures a run's result lists (``plots``), those of its own ``plots/`` directory found where the run
    is now (a run directory moved or copied elsewhere keeps its figures)."""
    result = run_result(run)
    made_in = str(result.get("run") or run.path)
    out = []
    for p in result.get("plots") or []:
        p = str(p)
        if p.startswith(made_in + "/"):
            p = str(run.path / p[len(made_in) + 1:])
        out.append(p)
    return out
