"""A run's figures as the Prometheus text format that node_exporter's textfile collector reads.

The collector reads every ``*.prom`` file of its directory (``--collector.textfile.directory``) at each scrape; a
file must be whole (written to a temporary name in the same directory, then renamed: a reader never sees half a
file), carry no timestamps (the collector refuses them) and use each metric family once. The text is made by
prometheus_client (``generate_latest``, text format 0.0.4, which the collector parses), every family a gauge with
the ``hpcvar_`` prefix. Series are labelled by node, CPU, link (``src``, ``dst``), size and quantile, not by run:
a nightly job overwrites the file, and the series stay the same from night to night (the run's id is in
``hpcvar_run_info``).
"""

from __future__ import annotations

from hpcvar import __version__
from hpcvar.errors import UsageError
from hpcvar.export.figures import Figure, mpi_name, run_figures
from hpcvar.results.groups import run_hosts
from hpcvar.results.store import Run

PREFIX = "hpcvar_"


def _client():
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise UsageError("the Prometheus export needs the prometheus_client package", "prometheus",
                         "pip install 'hpcvar[prometheus]' (or pip install prometheus-client)") from None
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.exposition import generate_latest
    from prometheus_client.registry import CollectorRegistry

    return GaugeMetricFamily, generate_latest, CollectorRegistry


def _info(run: Run) -> Figure:
    mpi = mpi_name(run)
    return Figure("run_info", "The run these figures come from (value 1)", 1.0,
                  {"run": run.id, "command": str(run.info.get("command")), "hosts": ",".join(run_hosts(run)),
                   "hpcvar_version": str(run.info.get("hpcvar_version") or __version__), "mpi": mpi})


def families(run: Run) -> list:
    """The run's figures as prometheus_client gauge families (one per name, its samples in order)."""
    gauge, _, _ = _client()
    figs = [_info(run), *run_figures(run)]
    out: dict[str, object] = {}
    keys: dict[str, list[str]] = {}
    for f in figs:
        name = PREFIX + f.name
        if name not in out:
            keys[name] = sorted(f.labels)
            out[name] = gauge(name, f.help, labels=keys[name])
        out[name].add_metric([f.labels.get(k, "") for k in keys[name]], f.value)  # type: ignore[attr-defined]
    return list(out.values())


def prometheus_text(run: Run) -> str:
    """The text node_exporter's textfile collector reads."""
    _, generate_latest, registry_cls = _client()

    class _Run:
        def collect(self):
            return families(run)

    registry = registry_cls(auto_describe=False)
    registry.register(_Run())
    return generate_latest(registry).decode()
