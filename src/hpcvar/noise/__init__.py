"""OS jitter: trace model and formats (trace.py), collector front end, analysis."""
