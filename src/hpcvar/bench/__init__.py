"""MPI benchmarks: one module per benchmark, all run through bench.runner."""
