"""The one-line answer to "is it OK?": OK, DEGRADED or UNRELIABLE, with the exit code the commands return.

- **OK**: the measurements are valid and nothing was found against the reference named (the other nodes of the
  screen, the site's expectations, a baseline).
- **DEGRADED**: something valid was found: what, where, by how much, against which reference.
- **UNRELIABLE**: the measurement itself cannot be trusted (load during the run, a preempted collector, too few
  samples or nodes to judge): nothing is called bad on it.

Validity is judged apart from goodness: a finding that rests on a disturbed measurement makes the answer
UNRELIABLE, never DEGRADED; and a value judged only against the timer's resolution is "measured", which says
nothing of its goodness. Exit codes (docs/cli.md): 0 OK, 3 DEGRADED (as ``hpcvar compare`` uses for a
degradation), 4 UNRELIABLE; 1 and 2 stay errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

OK, DEGRADED, UNRELIABLE = "OK", "DEGRADED", "UNRELIABLE"
EXIT_CODES = {OK: 0, DEGRADED: 3, UNRELIABLE: 4}
MAX_IN_LINE = 3  # findings spelled out in the line; the rest are counted


@dataclass
class Answer:
    status: str  # OK | DEGRADED | UNRELIABLE
    findings: list[str] = field(default_factory=list)  # what was found (DEGRADED), one phrase each
    reasons: list[str] = field(default_factory=list)  # why the measurement cannot be trusted (UNRELIABLE)
    basis: str = ""  # what was judged and against what (OK)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def line(self) -> str:
        """The one line, e.g. 'DEGRADED: hv-h2's link ...; hv-h3's OS noise ...'."""
        if self.status == DEGRADED:
            return f"{DEGRADED}: " + _join(self.findings) + (
                f" (also unreliable: {_join(self.reasons)})" if self.reasons else "")
        if self.status == UNRELIABLE:
            return f"{UNRELIABLE}: " + _join(self.reasons)
        return f"{OK}: " + (self.basis or "nothing found")

    def to_json(self) -> dict:
        return {"status": self.status, "line": self.line(), "exit_code": self.exit_code, "findings": self.findings,
                "reasons": self.reasons, "basis": self.basis}

    @classmethod
    def from_json(cls, d: dict) -> Answer:
        return cls(d.get("status", UNRELIABLE), list(d.get("findings") or []), list(d.get("reasons") or []),
                   d.get("basis", ""))


def _join(items: list[str]) -> str:
    shown = "; ".join(items[:MAX_IN_LINE])
    return shown + (f"; and {len(items) - MAX_IN_LINE} more" if len(items) > MAX_IN_LINE else "")


def decide(findings: list[str], reasons: list[str], basis: str) -> Answer:
    """DEGRADED when something valid was found, else UNRELIABLE when a reason stands, else OK."""
    if findings:
        return Answer(DEGRADED, findings, reasons, basis)
    if reasons:
        return Answer(UNRELIABLE, [], reasons, basis)
    return Answer(OK, [], [], basis)


def combine(answers: list[tuple[str, Answer]]) -> Answer:
    """Several answers (``(label, answer)``, e.g. per step) as one: every finding and reason, labelled."""
    findings = [f"{label}: {f}" if label else f for label, a in answers for f in a.findings]
    reasons = [f"{label}: {r}" if label else r for label, a in answers for r in a.reasons]
    basis = "; ".join(f"{label}: {a.basis}" if label else a.basis for label, a in answers if a.basis)
    return decide(findings, reasons, basis)
