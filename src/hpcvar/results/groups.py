"""Which runs belong together: the same command on the same set of hosts.

``hpcvar history`` draws one series per group and ``hpcvar runs prune --keep-last N`` keeps the N newest runs
of each group. The hosts of a run are those its ranks or collectors ran on (the native programs' ``hosts``
header, a multi-node run's ``nodes``), and for a characterization those of its steps; a run that records none
(a simulation, an old run) is of the machine it ran on (``metadata.host``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpcvar.results.store import Run


def run_hosts(run: Run) -> tuple[str, ...]:
    """The sorted set of hosts ``run`` measured (a characterization: its steps' hosts)."""
    hosts: set[str] = set()
    for r in [run, *run.children()]:
        hosts.update(_own_hosts(r))
    if not hosts:
        host = (run.info.get("metadata") or {}).get("host")
        if host:
            hosts.add(str(host))
    return tuple(sorted(hosts))


def _own_hosts(run: Run) -> list[str]:
    nodes = run.info.get("nodes") or []
    if nodes:
        return [str(n) for n in nodes]
    native = (run.info.get("metadata") or {}).get("native") or {}
    return [h for h in str(native.get("hosts") or "").split(",") if h]


def group_key(run: Run) -> tuple[str, str]:
    """(hosts joined by commas, command): runs with equal keys form one series."""
    return (",".join(run_hosts(run)), str(run.info.get("command") or ""))


def group_label(key: tuple[str, str]) -> str:
    hosts, command = key
    return f"{command} on {hosts or 'an unknown host'}"
