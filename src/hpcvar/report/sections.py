"""What each kind of run contributes to the HTML/Markdown report.

Each kind of run names its section builder ``fn(run) -> Section`` in the
table of kinds (hpcvar.kinds). The report (hpcvar report) only walks runs
and renders their sections; it knows nothing of any benchmark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcvar.errors import ResultsError

if TYPE_CHECKING:
    import pandas as pd

GOOD, BAD, SUSPECT, INFO = "good", "bad", "suspect", "info"
# measured: a valid measurement with no reference that could call it good or bad (e.g. a latency judged only
# against the timer's resolution: the timer can resolve it, which says nothing of its goodness)
MEASURED = "measured"
STATUSES = (BAD, SUSPECT, GOOD, MEASURED, INFO)  # the order of the report's verdict: what needs attention first
# what a headline judges: the machine (its bad values make the answer DEGRADED, its suspect ones UNRELIABLE), a
# model's accuracy against the machine, or a prediction from measurements (neither says the machine is bad)
MEASUREMENT, MODEL, PREDICTION = "measurement", "model", "prediction"


@dataclass
class Headline:
    """One number that matters: value with uncertainty, a one-line meaning, and a judgement.

    ``status`` says how the value compares with ``reference``, which names what it was judged against (a link
    rate, the timer's cost, a stated threshold) or the assumptions an alarming number rests on; ``info`` when
    nothing is known to judge it by (``reference`` then says so or stays empty). ``suspect`` marks values that
    are impossible or rest on too little (a negative fitted cost, a CI spanning zero, a fit of 2 points), or a
    prediction built on a suspect measurement; ``measured`` a valid value judged only against the instrument
    (the timer resolves it) and so neither good nor bad. ``role`` says whether the judgement is of the machine
    (a measurement), of a model or of a prediction: only measurements make the one-line answer DEGRADED or
    UNRELIABLE (hpcvar.report.verdict).
    """

    label: str
    value: str  # formatted, with unit, e.g. "1.82 us [1.81, 1.83]"
    meaning: str
    status: str = INFO  # good | bad | suspect | measured | info
    reference: str = ""
    role: str = MEASUREMENT  # measurement | model | prediction: what the judgement is of (the answer's rule)


@dataclass
class Section:
    title: str
    headlines: list[Headline] = field(default_factory=list)
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)  # (caption, frame)
    figures: list[tuple[str, Path]] = field(default_factory=list)  # (caption, PNG path)
    notes: list[str] = field(default_factory=list)  # warnings with remedies, readings


def figures_of(run: Any, stems: Iterable[tuple[str, str]], draw: Callable[[Any], list[Path]]) -> list[tuple[str, Path]]:
    """(caption, PNG) of a run's figures ``plots/<stem>.png``. A kind whose job draws its figures only when asked
    (the simulators: drawing costs more than a small simulation) passes its drawing view: when none of them is
    there, they are drawn now from the stored run (by the report, into its own directory: hpcvar.report.plots
    .redirect; a read-only run directory outside a report: no figures)."""
    stems = list(stems)
    have = [(cap, run.path / "plots" / f"{stem}.png") for stem, cap in stems]
    if any(f.is_file() for _, f in have):
        return [(cap, f) for cap, f in have if f.is_file()]
    try:
        drawn = [Path(p) for p in draw(run) if str(p).endswith(".png")]
    except (OSError, ResultsError):
        return []
    out = []
    for stem, cap in stems:
        f = next((d for d in drawn if d.name == f"{stem}.png" or d.name.endswith(f"-{stem}.png")), None)
        if f is not None:
            out.append((cap, f))
    return out


def section_for(run) -> Section | None:
    """The report section of a stored run, from its kind's entry in hpcvar.kinds (None: no section)."""
    from hpcvar.results.kinds import kind_of

    kind = kind_of(run.info.get("command"))
    fn = kind.view("section") if kind else None
    return fn(run) if fn else None
