"""What each kind of run contributes to the HTML/Markdown report.

Each kind of run names its section builder ``fn(run) -> Section`` in the
table of kinds (hpcvar.kinds). The report (hpcvar report) only walks runs
and renders their sections; it knows nothing of any benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

GOOD, BAD, SUSPECT, INFO = "good", "bad", "suspect", "info"
STATUSES = (BAD, SUSPECT, GOOD, INFO)  # the order of the report's verdict: what needs attention first


@dataclass
class Headline:
    """One number that matters: value with uncertainty, a one-line meaning, and a judgement.

    ``status`` says how the value compares with ``reference``, which names what it was judged against (a link
    rate, the timer's cost, a stated threshold) or the assumptions an alarming number rests on; ``info`` when
    nothing is known to judge it by (``reference`` then says so or stays empty). ``suspect`` marks values that
    are impossible or rest on too little (a negative fitted cost, a CI spanning zero, a fit of 2 points).
    """

    label: str
    value: str  # formatted, with unit, e.g. "1.82 us [1.81, 1.83]"
    meaning: str
    status: str = INFO  # good | bad | suspect | info
    reference: str = ""


@dataclass
class Section:
    title: str
    headlines: list[Headline] = field(default_factory=list)
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)  # (caption, frame)
    figures: list[tuple[str, Path]] = field(default_factory=list)  # (caption, PNG path)
    notes: list[str] = field(default_factory=list)  # warnings with remedies, readings


def section_for(run) -> Section | None:
    """The report section of a stored run, from its kind's entry in hpcvar.kinds (None: no section)."""
    from hpcvar.results.kinds import kind_of

    kind = kind_of(run.info.get("command"))
    fn = kind.view("section") if kind else None
    return fn(run) if fn else None
