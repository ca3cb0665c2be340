"""The kinds of runs, one folder each (filled kind by kind; see hpcvar.results.kinds)."""
