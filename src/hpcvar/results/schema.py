"""The one place that owns table names, column names, units and SCHEMA_VERSION.

Units live in column names (``_ns``, ``_bytes``, ``_bytes_per_s``, ``_pct``).
Every table a command writes is declared here; ``check_table`` refuses a frame
that lacks a declared column, so that a renamed column cannot slip through.

Version history:
  1 (0.1.0): first version: run.json + Parquet tables per run.
"""

from __future__ import annotations

from hpcvar.errors import ResultsError

SCHEMA_VERSION = 1

# table name -> {column: description with unit}
TABLES: dict[str, dict[str, str]] = {
    # hpcvar bench latency
    "latency.samples": {
        "size_bytes": "message size (bytes)",
        "iter": "iteration index within the size",
        "rtt_ns": "round-trip time of one ping-pong (ns)",
        "oneway_ns": "one-way latency = rtt_ns / 2 (ns)",
    },
    "latency.summary": {
        "size_bytes": "message size (bytes)",
        "n": "number of samples",
        "median_ns": "median one-way latency (ns)",
        "mean_ns": "mean one-way latency (ns)",
        "min_ns": "minimum one-way latency (ns)",
        "max_ns": "maximum one-way latency (ns)",
        "p90_ns": "90th percentile of one-way latency (ns)",
        "p99_ns": "99th percentile of one-way latency (ns)",
        "p99_9_ns": "99.9th percentile of one-way latency (ns)",
        "mad_ns": "median absolute deviation (ns)",
        "cv": "coefficient of variation (stdev / mean)",
        "median_ci_lo_ns": "95% CI of the median, low (ns)",
        "median_ci_hi_ns": "95% CI of the median, high (ns)",
        "outliers": "samples flagged by the modified z-score > 3.5",
        "bw_bytes_per_s": "size / median one-way latency (bytes/s)",
    },
}


def check_table(name: str, df) -> None:
    """Raise ResultsError unless ``df`` has every column declared for ``name``."""
    cols = TABLES.get(name)
    if cols is None:
        raise ResultsError(f"table '{name}' is not declared in hpcvar.results.schema", None,
                           "Declare its columns in schema.TABLES")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ResultsError(f"table '{name}' lacks columns {missing}", None, "Fix the producer to match the schema")


def check_version(version, where: str) -> None:
    if version != SCHEMA_VERSION:
        raise ResultsError(
            f"schema version {version!r} is not the version this hpcvar reads ({SCHEMA_VERSION})", where,
            "Read it with the hpcvar version that wrote it (see run.json 'hpcvar_version')")
