"""hpcvar: measure, model and predict interconnect and OS variability of MPI applications."""

__version__ = "0.1.0"
