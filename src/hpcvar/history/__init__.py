"""hpcvar history: the stored runs of one command on one set of hosts as series, and where they changed.

- ``series``: runs grouped (hpcvar.results.groups) and selected by time; per metric (the raw samples
  ``hpcvar compare`` tests, hpcvar.compare.metrics_of) one point per run: the median with its 95% CI.
- ``changes``: change points found by ruptures (PELT) on each series, confirmed by compare's test on the
  samples of the segments either side, and the HPX-style symbol of each change from a bootstrap CI of the ratio
  of the levels; the last run tested against the runs since the last change.
- ``views``: the terminal table, the figures, the HTML page, CSV (Apache Otava reads it as it is) and JSON.

docs/watch.md explains the method and its constants.
"""
