"""Fuzzing stored runs: run.json and Parquet tables truncated, corrupted or from a future schema; reading
them (Run.open, read_table, runs list) ends in a run or one ResultsError naming the file."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcvar.results import Run
from hpcvar.results.store import list_runs
from tests.fuzz.harness import FUZZ, mutated, outcome


def _seed() -> tuple[bytes, bytes]:
    """run.json and a Parquet table of a real run, made in a directory removed at once."""
    with tempfile.TemporaryDirectory(prefix="hpcvar-fuzz-runs-") as d:
        run = Run.create("bench latency", {"sizes": [8]}, Path(d), argv=["hpcvar"])
        run.write_table("noise.periods", pd.DataFrame({"host": ["h"], "cpu": [0], "rank": [0], "hz": [250.0],
                                                       "strength": [0.9], "harmonics": [3]}))
        run.finish("complete", {"x": 1})
        return (run.path / "run.json").read_bytes(), (run.path / "noise.periods.parquet").read_bytes()


RUN_JSON, TABLE = _seed()
_BASE: list[Path] = []


@pytest.fixture(scope="module", autouse=True)
def _runs_dir(tmp_path_factory):
    _BASE.append(tmp_path_factory.mktemp("fuzz-runs"))
    yield
    _BASE.pop()


def _copy(run_json: bytes, table: bytes) -> Path:
    d = Path(tempfile.mkdtemp(dir=_BASE[-1])) / "run"
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
