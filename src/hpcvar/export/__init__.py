"""hpcvar's figures in the formats of the tools sites already run (docs/watch.md):

- ``figures``: the per-node, per-CPU and per-link figures of a stored run (and of a characterization's steps),
  read from its declared tables; what the Prometheus export and the ReFrame references are made of;
- ``prometheus``: the text format node_exporter's textfile collector reads;
- ``reframe``: ReFrame references (value, lower, upper, unit) with bounds from the measured dispersion;
- ``caliper``: Caliper JSON (json-split) with the run's metadata, one profile per run, which Thicket reads;
- ``extrap``: Extra-P JSON Lines from sweeps over size, ranks, clients or queue length, every repetition kept.
"""
