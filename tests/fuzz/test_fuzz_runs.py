"""Fuzzing stored runs: run.json and Parquet tables truncated, corrupted or from a future schema; reading
them (Run.open, read_table, runs list) ends in a run or one ResultsError naming the file."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from hpcvar.results import Run
from hpcvar.results.store import list_runs
from tests.fuzz.harness import FUZZ, mutated, outcome

_BASE = Path(tempfile.mkdtemp(prefix="hpcvar-fuzz-runs-"))
_RUN = Run.create("bench latency", {"sizes": [8]}, _BASE, argv=["hpcvar"])
_RUN.write_table("noise.periods", pd.DataFrame({"host": ["h"], "cpu": [0], "rank": [0], "hz": [250.0],
                                                "strength": [0.9], "harmonics": [3]}))
_RUN.finish("complete", {"x": 1})
RUN_JSON = (_RUN.path / "run.json").read_bytes()
TABLE = (_RUN.path / "noise.periods.parquet").read_bytes()


def _copy(run_json: bytes, table: bytes) -> Path:
    d = Path(tempfile.mkdtemp(dir=_BASE)) / "run"
    d.mkdir()
    (d / "run.json").write_bytes(run_json)
    (d / "noise.periods.parquet").write_bytes(table)
    return d


@FUZZ
@given(mutated(RUN_JSON) | st.sampled_from([RUN_JSON.replace(b'"schema_version": ', b'"schema_version": 9'),
                                            RUN_JSON[: len(RUN_JSON) // 2], b"", b"[]", b"null"]))
def test_run_json(data):
    d = _copy(data, TABLE)
    try:
        run, _ = outcome(Run.open, d, where=str(d))
        if run is not None:
            assert isinstance(run.info, dict)
        outcome(list_runs, d.parent)
    finally:
        shutil.rmtree(d.parent)


@FUZZ
@given(mutated(TABLE, max_mutations=3) | st.sampled_from([TABLE[:100], TABLE[: len(TABLE) // 2], b""]))
def test_parquet_table(data):
    d = _copy(RUN_JSON, data)
    try:
        run = Run.open(d)
        outcome(run.read_table, "noise.periods", where="noise.periods.parquet")
    finally:
        shutil.rmtree(d.parent)
