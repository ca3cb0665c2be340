"""sim app --breakdown: measured and predicted time per task by MPI call kind and phase (hpcvar.sim.breakdown),
on a hand-worked trace (both engines), the sums S_m and S_p on random traces, and the stored table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpcvar.sim import breakdown, replay_native
from hpcvar.sim.replay import Cluster, Simulator, mapping, measured
from hpcvar.traces.parquet import Trace, make_events, write_parquet
from tests.conftest import run_cli

MS = 1_000_000
# task 0: a 1 MB send, two Irecvs completed by one Waitall (two wait rows with the call's times), a Sendrecv;
# task 1: the matching receive, two 1000 B sends, its Sendrecv. Both spans are 5 ms.
ROWS = [dict(task=0, op="init"),
        dict(task=0, op="send", peer=1, bytes=10**6, t_start_ns=0, t_end_ns=2 * MS),
        dict(task=0, op="irecv", peer=1, bytes=1000, t_start_ns=3 * MS, t_end_ns=3 * MS + 100),
        dict(task=0, op="irecv", peer=1, bytes=1000, t_start_ns=3 * MS + 100, t_end_ns=3 * MS + 200),
        dict(task=0, op="wait", req=2, t_start_ns=3 * MS + 200, t_end_ns=3_500_000),
        dict(task=0, op="wait", req=3, t_start_ns=3 * MS + 200, t_end_ns=3_500_000),
        dict(task=0, op="sendrecv", peer=1, bytes=8, t_start_ns=4 * MS, t_end_ns=4_100_000),
        dict(task=0, op="sendrecv_recv", peer=1, bytes=8, t_start_ns=4 * MS, t_end_ns=4_100_000),
        dict(task=0, op="finalize", t_start_ns=5 * MS, t_end_ns=5 * MS),
        dict(task=1, op="init"),
        dict(task=1, op="recv", peer=0, bytes=10**6, t_start_ns=0, t_end_ns=2 * MS),
        dict(task=1, op="send", peer=0, bytes=1000, t_start_ns=3 * MS, t_end_ns=3 * MS + 500),
        dict(task=1, op="send", peer=0, bytes=1000, t_start_ns=3 * MS + 500, t_end_ns=3 * MS + 1000),
        dict(task=1, op="sendrecv", peer=0, bytes=8, t_start_ns=4 * MS, t_end_ns=4_100_000),
        dict(task=1, op="sendrecv_recv", peer=0, bytes=8, t_start_ns=4 * MS, t_end_ns=4_100_000),
        dict(task=1, op="finalize", t_start_ns=5 * MS, t_end_ns=5 * MS)]
# (task, kind) -> (calls, measured ns, predicted s): 1 GB/s, no latency, every message rendezvous (--eager 0).
# Predicted: the 1 MB transfer 1 ms; after 1 ms of compute both 1000 B transfers (1 us each, one after the
# other) end task 0's two waits; task 0 reaches its Sendrecv at 2.502 ms, task 1 at 3.001 ms, whose 8 B
# (8 ns) ends both at 3.001008 ms.
EXPECT = {(0, "send"): (1, 2 * MS, 1e-3), (0, "irecv"): (2, 200, 0.0), (0, "wait"): (1, 499_800, 2e-6),
          (0, "sendrecv"): (1, 100_000, 0.499008e-3),
          (1, "recv"): (1, 2 * MS, 1e-3), (1, "send"): (2, 1000, 2e-6), (1, "sendrecv"): (1, 100_000, 8e-9)}


def _engines():
    return ["python"] + (["native"] if replay_native.available() else [])


def _replay(rows, ntasks, engine, cl=None, **kw):
    tr = Trace(make_events(rows), ntasks)
    cl = cl or Cluster(nodes=ntasks, cores_per_node=1, bandwidth=1e9, latency=0.0)
    res = Simulator(tr, cl, mapping("rrn", ntasks, cl), eager_bytes=kw.pop("eager", 0), engine=engine, **kw).run()
    return tr, res


@pytest.mark.parametrize("engine", _engines())
def test_hand_worked_split_by_kind(engine):
    tr, res = _replay(ROWS, 2, engine)
    g = breakdown.grid(tr, 1)
    df = breakdown.rows(g, res, "rrn", "none", 0).set_index(["task", "kind"])
    assert set(df.index) == set(EXPECT)
    for key, (calls, m_ns, pred) in EXPECT.items():
        assert df.loc[key, "calls"] == calls, key
        assert df.loc[key, "measured_s"] == m_ns * 1e-9, key
        assert df.loc[key, "predicted_s"] == pytest.approx(pred, rel=1e-12, abs=1e-18), key
    # a Waitall's rows and a Sendrecv's halves count once: the kinds sum to the union S_m, exactly in ns
    _, s_m = measured(tr)
    assert g.measured_ns.reshape(2, -1).sum(axis=1).tolist() == [2_600_000.0, 2_101_000.0]
    assert s_m * 1e9 == pytest.approx([2_600_000, 2_101_000], abs=1e-6)
    assert df.groupby("task")["predicted_s"].sum().to_numpy() == pytest.approx(res.comm_s, rel=1e-12)


@pytest.mark.parametrize("engine", _engines())
def test_phases_are_slices_of_the_measured_span(engine):
    tr, res = _replay(ROWS, 2, engine)
    df = breakdown.rows(breakdown.grid(tr, 2), res, "rrn", "none", 0)
    # spans 0..5 ms: the 1 MB exchange starts in phase 0 (0-2.5 ms), everything else in phase 1
    first = df[df["phase"] == 0]
    assert set(zip(first["task"], first["kind"], strict=True)) == {(0, "send"), (1, "recv")}
    assert first["phase_end_s"].tolist() == [2.5e-3, 2.5e-3]
    later = df[df["phase"] == 1].set_index(["task", "kind"])
    assert later.loc[(0, "wait"), "measured_s"] == 499_800e-9
    assert later["phase_start_s"].unique().tolist() == [2.5e-3] and later["phase_end_s"].unique().tolist() == [5e-3]


def test_rows_out_of_order_and_unsorted_trace():
    """The grid sorts rows by (task, seq) and the union by time: a shuffled frame gives the same cells."""
    ev = make_events(ROWS)
    shuffled = Trace(ev.sample(frac=1.0, random_state=3).reset_index(drop=True), 2)
    a = breakdown.grid(Trace(ev, 2), 3)
    b = breakdown.grid(shuffled, 3)
    assert a.measured_ns.tolist() == b.measured_ns.tolist() and a.calls.tolist() == b.calls.tolist()


@pytest.mark.parametrize("seed", range(8))
def test_kinds_and_phases_sum_to_s_m_and_s_p_on_random_traces(seed):
    """Also on traces with probes and polls (seeds 6, 7): a row's polls are measured time of its kind."""
    from tests.unit.test_replay_native import probe_case, random_case

    if seed >= 6:
        tr, cl, _ = probe_case(seed, "maxmin")
        assert tr.events["poll_ns"].sum() > 0
    else:
        _, tr, cl, _ = random_case(seed, "maxmin")
    results = [Simulator(tr, cl, mapping("rrn", tr.ntasks, cl), model="maxmin", eager_bytes=65536,
                         engine=e).run() for e in _engines()]
    g = breakdown.grid(tr, 1 + seed % 4)
    _, s_m = measured(tr)
    # measured: integer ns, so the sum over kinds x phases is S_m exactly
    assert (g.measured_ns.reshape(tr.ntasks, -1).sum(axis=1) * 1e-9).tolist() == pytest.approx(s_m.tolist(),
                                                                                               rel=1e-15)
    per_row = [breakdown.predicted_row_s(g, r) for r in results]
    for res in results:
        cells = breakdown.predicted_s(g, res).reshape(tr.ntasks, -1).sum(axis=1)
        np.testing.assert_allclose(cells, res.comm_s, rtol=1e-12, atol=1e-18)
    assert all(d.tolist() == per_row[0].tolist() for d in per_row)  # both engines: the same row times


def test_sim_app_breakdown_is_stored_and_shown(tmp_path, runs_dir):
    p = write_parquet(Trace(make_events(ROWS), 2), tmp_path / "hand.trace")
    res = run_cli(["sim", "app", str(p), "--bandwidth", "1GB/s", "--latency", "0", "--eager", "0",
                   "--breakdown", "--phases", "2", "--no-plots", "--json"])
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["breakdown"]["phases"] == 2
    run = Path(out["run"])
    bd = pd.read_parquet(run / "replay.breakdown.parquet")
    assert list(bd.columns) == breakdown.COLUMNS
    tasks = pd.read_parquet(run / "replay.tasks.parquet").set_index("task")
    sums = bd.groupby("task")[["measured_s", "predicted_s"]].sum()
    assert sums["measured_s"].to_numpy() == pytest.approx(tasks["measured_comm_s"].to_numpy(), rel=1e-12)
    assert sums["predicted_s"].to_numpy() == pytest.approx(tasks["comm_s"].to_numpy(), rel=1e-12)
    show = run_cli(["runs", "show", str(run)])
    assert show.returncode == 0, show.stderr
    assert "breakdown by call kind" in show.stdout and "breakdown by phase" in show.stdout
    assert "sendrecv" in show.stdout
    from hpcvar.report.sections import section_for
    from hpcvar.results.store import Run

    sec = section_for(Run.open(run))
    assert sec is not None and any("by MPI call kind" in c for c, _ in sec.tables)


def test_phases_need_breakdown(tmp_path, runs_dir):
    p = write_parquet(Trace(make_events(ROWS), 2), tmp_path / "hand.trace")
    res = run_cli(["sim", "app", str(p), "--phases", "2"])
    assert res.returncode != 0 and "--breakdown" in res.stderr
    res = run_cli(["sim", "app", str(p), "--breakdown", "--phases", "65"])
    assert res.returncode != 0 and "--phases" in res.stderr
