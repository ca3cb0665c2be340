"""Raw files written by the native programs before issue #19's C redesign (ba3e1d1) still read to the
same tables: tests/data/<bench>_ba3e1d1 holds the raw file of a tiny real run, its params and the tables
that run stored."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from hpcvar.kinds.ace.job import Ace, AceParams
from hpcvar.kinds.fanin.job import Fanin, FaninParams
from hpcvar.results import read_raw

DATA = Path(__file__).resolve().parent.parent / "data"


def _expected(d: Path) -> tuple[dict, dict[str, pd.DataFrame]]:
    """The params (run.json's dict) and the tables of the stored run."""
    doc = json.loads((d / "expected.json").read_text())
    tables = {}
    for name, t in doc["tables"].items():
        df = pd.DataFrame(t["data"], columns=t["columns"])
        tables[name] = df.astype(dict(zip(t["columns"], t["dtypes"], strict=True))) if len(df) else df
    return doc["params"], tables


@pytest.mark.parametrize("bench,params_class,folder", [(Ace(), AceParams, "ace_ba3e1d1"),
                                                      (Fanin(), FaninParams, "fanin_ba3e1d1")])
def test_old_raw_reads_to_the_same_tables(bench, params_class, folder):
    doc, expected = _expected(DATA / folder)
    params = params_class.from_json(doc)
    assert json.dumps(params.to_json()) == json.dumps(doc)  # the stored dict, key for key and in order
    raw = read_raw(DATA / folder / "launch-001.raw")
    got = bench.tables([raw], params)
    assert set(got) == set(expected)
    for name, want in expected.items():
        have = got[name].reset_index(drop=True)
        assert list(have.columns) == list(want.columns), name
        pd.testing.assert_frame_equal(have, want, check_dtype=False, rtol=1e-12, obj=name)
        assert [t.kind for t in have.dtypes] == [t.kind for t in want.dtypes], name
