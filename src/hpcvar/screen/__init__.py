"""Screening an allocation (hpcvar screen, docs/screen.md): the engine, apart from the kind's job and views.

- plan.py: which pairs of nodes are measured, in rounds of disjoint pairs (mpiGraph's schedule);
- tables.py: the raw points of hv_screen as tidy tables;
- analysis.py: per-node and per-link figures with their CIs, validity (load, steal), the outliers
  (hpcvar.stats.outliers), their attribution to a node or a pair, and what they cost.
"""
