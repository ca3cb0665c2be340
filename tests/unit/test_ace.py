"""ACE model, EA parsing and the checks made before any launch (no MPI needed)."""

from __future__ import annotations

import dataclasses
import io
import json
import math

import pytest

from hpcvar.errors import UsageError
from hpcvar.kinds.ace import job as ace
from hpcvar.models import ace as model
from tests.conftest import run_cli

MIB = 1 << 20
RUN3 = "pattern=pairs,mode=blocking,size=1MiB,load=20,cycles=1000,alpha=75.9us,beta=0.01057us/B,name=run3"
RUN4 = "pattern=pairs,mode=blocking,size=1MiB,load=20,cycles=1000,alpha=80.3us,beta=0.01097us/B,name=run4"


def _main(args):
    """The CLI in-process (the same error boundary as the console script)."""
    import sys

    from hpcvar.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        with pytest.raises(SystemExit) as e:
            main(["bench", "ace", *args])
    finally:
        sys.stdout, sys.stderr = old
    return e.value.code, out.getvalue(), err.getvalue()


def _predict(*args):
    code, out, err = _main(["--predict-only", "--json", *args])
    assert code == 0, err
    return json.loads(out)["eas"]


def test_predict_only_reproduces_paper_runs_3_and_4():
    res = run_cli(["bench", "ace", "--predict-only", "--json", "--np", "4", "--ea", RUN3, "--ea", RUN4])
    assert res.returncode == 0, res.stderr
    run3, run4 = json.loads(res.stdout)["eas"]
    # the paper: 22.3 ms and 23.2 ms per cycle (and 22.336 / 23.173 ms from unrounded betas)
    assert round(run3["t_comm_s"] * 1e3, 1) == 22.3
    assert round(run4["t_comm_s"] * 1e3, 1) == 23.2
    assert run3["t_comm_s"] == pytest.approx(2 * (75.9e-6 + 0.01057e-6 * MIB), rel=1e-12)
    assert run3["t_comm_s"] == pytest.approx(22.336e-3, rel=1e-3)
    assert run4["t_comm_s"] == pytest.approx(23.173e-3, rel=1e-3)
    assert run3["messages_per_cycle"] == 2.0
    # equation (6) at L = 20%: T_comp = 4 T_comm; equation (4): T_run = c (T_comp + T_comm)
    assert run3["t_comp_s"] == pytest.approx(run3["t_comm_s"] * 100 / 20 - run3["t_comm_s"], rel=1e-12)
    assert run3["t_comp_s"] == pytest.approx(4 * run3["t_comm_s"], rel=1e-12)
    assert run3["t_run_s"] == pytest.approx(1000 * (run3["t_comp_s"] + run3["t_comm_s"]), rel=1e-12)
    # the two EAs got disjoint ranks
    assert (run3["first_rank"], run4["first_rank"]) == (0, 2)


def test_paper_betas_are_truncated_to_four_digits():
    """22.336 ms needs beta = 0.010578 us/B: the paper printed it truncated as 0.01057 (our reading)."""
    beta3 = (22.336e-3 / 2 - 75.9e-6) / MIB
    beta4 = (23.173e-3 / 2 - 80.3e-6) / MIB
    assert math.floor(beta3 * 1e6 * 1e5) / 1e5 == pytest.approx(0.01057)
    assert math.floor(beta4 * 1e6 * 1e5) / 1e5 == pytest.approx(0.01097)


def test_equation_6_over_loads_and_sweeps():
    eas = _predict("--ea", RUN3, "--loads", "10,50,100", "--sizes", "1KiB,1MiB")
    assert [(e["size_bytes"], e["load_pct"]) for e in eas] == [
        (1024, 10), (1024, 50), (1024, 100), (MIB, 10), (MIB, 50), (MIB, 100)]
    for e in eas:
        assert e["t_comp_s"] == pytest.approx(e["t_comm_s"] * (100 / e["load_pct"] - 1), rel=1e-12, abs=1e-18)
    assert eas[1]["t_comp_s"] == pytest.approx(eas[1]["t_comm_s"])  # 50%: compute = communication
    assert eas[2]["t_comp_s"] == 0.0  # 100%: no compute
    assert eas[0]["t_comm_s"] == pytest.approx(2 * (75.9e-6 + 0.01057e-6 * 1024))


@pytest.mark.parametrize("pattern,mode,ranks,dims,periodic,m", [
    ("pairs", "blocking", 2, None, False, 2), ("pairs", "nonblocking", 8, None, False, 1),
    ("ring", "blocking", 4, None, False, 2), ("ring", "nonblocking", 5, None, False, 1),
    ("cart2d", "blocking", 4, [2, 2], False, 4), ("cart2d", "nonblocking", 4, [2, 2], True, 4),
    ("cart2d", "nonblocking", 9, [3, 3], False, 4), ("cart3d", "blocking", 8, [2, 2, 2], True, 12),
    ("cart3d", "nonblocking", 12, [3, 2, 2], False, 4), ("alltoall", "blocking", 8, None, False, 7),
    ("allreduce", "nonblocking", 5, None, False, 3), ("bcast", "blocking", 16, None, False, 4),
])
def test_messages_per_cycle(pattern, mode, ranks, dims, periodic, m):
    assert model.messages_per_cycle(pattern, mode, ranks, dims, periodic) == m


def test_fit_and_dims():
    a, b = model.fit_alpha_beta([0, 1024, 4096], [5.0 + 0.25 * x for x in (0, 1024, 4096)])
    assert (a, b) == (pytest.approx(5.0), pytest.approx(0.25))
    with pytest.raises(ValueError):
        model.fit_alpha_beta([8, 8], [1.0, 2.0])
    assert model.balanced_dims(12, 2) == [4, 3]
    assert model.balanced_dims(8, 3) == [2, 2, 2]
    assert model.balanced_dims(5, 2) is None
    assert model.balanced_dims(4, 3) is None


def test_parse_ea_units_and_defaults():
    s = ace.parse_ea("pattern=cart2d,mode=nonblocking,size=64KiB,load=12.5,cycles=1K,ranks=0.5,dims=2x2,"
                     "periodic=yes,alpha=2us,beta=1ns/B,bench_sizes=0:1KiB")
    assert (s.size, s.load, s.cycles, s.ranks, s.dims, s.periodic) == (65536, 12.5, 1024, 0.5, [2, 2], True)
    assert s.alpha_s == pytest.approx(2e-6) and s.beta_s_per_byte == pytest.approx(1e-9)
    assert s.bench_sizes == [0, 1024]
    (ea,) = ace.resolve([s], 8)
    assert (ea.nranks, ea.dims, ea.messages) == (4, [2, 2], 4.0)


@pytest.mark.parametrize("text,needle", [
    ("pattern=pairs,load=0", "outside 1..100"),
    ("pattern=pairs,load=101", "outside 1..100"),
    ("pattern=mesh", "unknown pattern 'mesh'"),
    ("pattern=pairs,colour=red", "unknown EA key 'colour'"),
    ("pattern=pairs,alpha=1us", "alpha and beta go together"),
    ("pattern=pairs,size=1MiB,size=2MiB", "given twice"),
    ("pattern=pairs,beta=fast,alpha=1us", "not a per-byte time"),
    ("pattern=pairs,ranks=1.5", "neither a whole count"),
])
def test_parse_ea_errors(text, needle):
    with pytest.raises(UsageError) as e:
        ace.parse_ea(text)
    assert needle in e.value.what and e.value.where == "--ea"


def _err(args):
    code, out, err = _main(args)
    assert code == 2, (out, err)
    assert err.startswith("error: ")
    return err


def test_bad_input_fails_before_launch(runs_dir):
    # the CLI never reaches a launch: no run directory is created
    assert "outside 1..100" in _err(["--ea", "pattern=pairs,load=150"])
    assert "(--loads)" in _err(["--ea", "pattern=pairs", "--loads", "10,120"])
    assert "ask for at least 6 ranks, the job has 4" in _err(["--np", "4", "--ea", "pattern=pairs,ranks=4",
                                                             "--ea", "pattern=pairs,ranks=2"])
    assert "5 ranks do not factor into a 2-D grid" in _err(["--np", "5", "--ea", "pattern=cart2d"])
    assert "do not factor 4 ranks" in _err(["--np", "4", "--ea", "pattern=cart2d,dims=3x3"])
    assert "4 ranks do not factor into a 3-D grid" in _err(["--np", "4", "--ea", "pattern=cart3d"])
    assert "unknown pattern 'star'" in _err(["--ea", "pattern=star"])
    assert "needs even sides" in _err(["--np", "6", "--ea", "pattern=cart2d,periodic=yes"])
    assert "even number of ranks" in _err(["--np", "3", "--ea", "pattern=pairs"])
    assert "no alpha and beta" in _err(["--predict-only", "--ea", "pattern=pairs"])
    assert not runs_dir.exists() or not any(runs_dir.iterdir())


def test_config_file(tmp_path):
    cfg = tmp_path / "eas.toml"
    cfg.write_text('[[ea]]\nname = "run3"\npattern = "pairs"\nsize = "1MiB"\nload = 20\ncycles = 1000\n'
                   'alpha = "75.9us"\nbeta = "0.01057us/B"\n\n[[ea]]\nname = "coll"\npattern = "alltoall"\n'
                   'ranks = 0.5\nsize = 1024\nalpha = "10us"\nbeta = "1ns/B"\n')
    run3, coll = _predict("--np", "4", "--config", str(cfg))
    assert round(run3["t_comm_s"] * 1e3, 1) == 22.3
    assert coll["ranks"] == 2 and coll["messages_per_cycle"] == 1
    assert coll["t_comm_s"] == pytest.approx(1e-5 + 1e-9 * 1024)
    # a bare time is refused (seconds? microseconds?), with the remedy
    cfg.write_text('[[ea]]\npattern = "pairs"\nalpha = 1e-5\nbeta = "1ns/B"\n')
    assert "'1e-05' has no unit" in _err(["--config", str(cfg)])
    cfg.write_text('[[ea]]\npattern = "pairs"\nload = 0\n')
    assert f"({cfg}: ea[0].load)" in _err(["--config", str(cfg)])
    cfg.write_text('[[ea]]\npattern = "pairs"\nspeed = 3\n')
    assert f"({cfg}: ea[0].speed)" in _err(["--config", str(cfg)])
    cfg.write_text('[[ea]\npattern = "pairs"\n')
    assert f"({cfg}:1" in _err(["--config", str(cfg)])


def test_tables_from_a_synthetic_raw_point(tmp_path):
    """Raw point -> per-process fits, prediction, error and dispersion, without MPI."""
    from hpcvar.results import read_raw

    spec = ace.parse_ea("pattern=pairs,size=1KiB,load=50,cycles=3,bench_sizes=0:1KiB")
    params = ace.AceParams(eas=(spec,), np=2, loads=None, sizes=None, repeat=1, bench_iters=2, bench_warmup=0)
    (point,) = ace.sweep_points(params)
    # per process: exchange time = m (alpha + beta n) with m = 2; rank 0: alpha 10 us, beta 1 ns/B; rank 1: 20 us, 3
    rows = []
    for rank, (a, b) in enumerate([(10e3, 1.0), (20e3, 3.0)]):
        for n in (0, 1024):
            for it in range(2):
                rows.append(f"0,0,{rank},{rank},{it},{n},nan,nan,{2 * (a + b * n)},nan")
    alpha, beta = 15e3, 2.0
    tcomm = 2 * (alpha + beta * 1024)  # 34096 ns; load 50% -> T_comp = T_comm
    for rank in (0, 1):
        for c in range(3):
            rows.append(f"1,0,{rank},{rank},{c},1024,{tcomm},{tcomm + 10 * c},{tcomm * (1 + c)},{100 + c}")
    label = " ".join(f"{k}={point[k]}" for k in sorted(point))
    run_ns = 3 * 2 * tcomm * 1.1
    text = ("#@hpcvar_raw=1\n#@program=hv_ace\n#@columns=phase,ea,rank,world_rank,iter,size_bytes,t_comp_req_ns,"
            "t_comp_ns,t_comm_ns,t_barr_ns\n"
            f"#@point {label} neas=1 ea0_name=ea0 ea0_alpha_ns={alpha} ea0_beta_ns_per_byte={beta} "
            f"ea0_t_comm_ns={tcomm} ea0_t_comp_ns={tcomm} ea0_run_ns={run_ns} ea0_run_min_ns={run_ns} "
            "ea0_check=1 ea0_fixed=0\n" + "\n".join(rows) + f"\n#@point_end rows={len(rows)}\n")
    f = tmp_path / "launch-001.raw"
    f.write_text(text)
    bench = ace.Ace()
    raw = read_raw(f)
    assert bench.raw_point_key(raw.points[0]) == bench.point_key(point)  # resume matches the point
    tables = bench.tables([raw], params)
    fits = tables["ace.fits"].sort_values("rank")
    assert fits["alpha_ns"].tolist() == pytest.approx([10e3, 20e3])
    assert fits["beta_ns_per_byte"].tolist() == pytest.approx([1.0, 3.0])
    (s,) = tables["ace.summary"].to_dict("records")
    assert s["pred_t_comm_ns"] == pytest.approx(tcomm) and s["pred_t_comp_ns"] == pytest.approx(tcomm)
    assert s["pred_t_run_ns"] == pytest.approx(3 * 2 * tcomm)
    assert s["error_pct"] == pytest.approx(10.0)
    assert s["comm_mean_ns"] == pytest.approx(2 * tcomm) and s["comm_max_ns"] == pytest.approx(3 * tcomm)
    assert s["comm_variance_ns"] == pytest.approx(s["comm_stdev_ns"] ** 2)
    assert s["barr_mean_ns"] == pytest.approx(101.0)
    assert s["comp_error_median_pct"] == pytest.approx(10 / tcomm * 100)
    assert s["stored_cycles"] == 6 and s["check_ok"] == 1
    res = bench.result(tables, params)
    (e,) = res["eas"]
    assert e["measured_t_run_s"] == pytest.approx(run_ns * 1e-9) and e["alpha_beta_measured"]
    assert s["fit_fallback"] == 0 and e["fit_fallback"] is False  # raw files before the flag existed read as 0
    f.write_text(text.replace("ea0_fixed=0", "ea0_fixed=0 ea0_fit_fallback=1"))
    tables = bench.tables([read_raw(f)], params)
    assert tables["ace.summary"]["fit_fallback"].tolist() == [1]
    assert bench.result(tables, params)["eas"][0]["fit_fallback"] is True


def test_fit_fallback_is_reported_and_warned():
    """A point whose native phase 1 fell back to the measured time at the EA's size: flag, JSON and warning."""
    import pandas as pd

    bench = ace.Ace()
    base = {"point": 0, "name": "ring", "size_bytes": 4096, "load_pct": 50, "fixed": 0, "alpha_ns": 3975.4,
            "pred_t_comm_ns": 7950.8}
    ok = pd.DataFrame([{**base, "fit_fallback": 0}])
    assert bench.warnings({"ace.summary": ok}, {}) == []
    fell = pd.DataFrame([{**base, "fit_fallback": 1}])
    (w,) = bench.warnings({"ace.summary": fell}, {})
    assert "EA 'ring' at point 0 (4096 B" in w and "3.98 us" in w and "--bench-iters" in w
    zero = pd.DataFrame([{**base, "fit_fallback": 0, "pred_t_comm_ns": 0.0}])
    (w,) = bench.warnings({"ace.summary": zero}, {})
    assert "T_comm and T_comp are 0" in w and "bench_sizes" in w
    given = pd.DataFrame([{**base, "fit_fallback": 0, "fixed": 1, "pred_t_comm_ns": 0.0}])
    assert bench.warnings({"ace.summary": given}, {}) == []  # alpha = beta = 0 given on purpose


def _options(argv: list[str]) -> dict[str, str]:
    assert len(argv) % 2 == 0 and all(a.startswith("--") for a in argv[::2]), argv
    return dict(zip(argv[::2], argv[1::2], strict=True))


def test_native_argv_is_flat_numbers_per_ea():
    """hv_ace gets one comma list per EA field (numbers, names aside): no EA text for C to parse again."""
    params = ace.AceParams(eas=(ace.parse_ea("name=grid,pattern=cart2d,mode=nonblocking,size=2KiB,load=12.5,"
                                             "cycles=7,ranks=6,periodic=yes,alpha=2us,beta=1ns/B"),
                                ace.parse_ea("name=p2p,pattern=pairs,size=1KiB,load=50,cycles=3,ranks=2,"
                                             "bench_sizes=0:256:1KiB")),
                           np=8, loads=None, sizes=None, repeat=1, bench_iters=4, bench_warmup=1)
    (point,) = ace.sweep_points(params)
    bench = ace.Ace()
    a = _options(bench.argv(params, [point]))
    assert a.pop("--label") == bench.point_key(point)
    assert "--eas" not in a
    for flag, value in a.items():
        assert flag.startswith(("--ea-", "--bench-")) and "=" not in value and ";" not in value and ":" not in value
        if flag != "--ea-name":
            [float(x) for x in value.split(",")]  # numbers only (ValueError otherwise)
    per_ea = {k: v.split(",") for k, v in a.items() if k not in ("--ea-dims", "--ea-bench-sizes", "--bench-iters",
                                                                   "--bench-warmup")}
    assert all(len(v) == 2 for v in per_ea.values()), per_ea
    assert per_ea["--ea-name"] == ["grid", "p2p"]
    assert per_ea["--ea-first"] == ["0", "6"] and per_ea["--ea-ranks"] == ["6", "2"]
    assert per_ea["--ea-pattern"] == [str(model.PATTERNS.index("cart2d")), str(model.PATTERNS.index("pairs"))]
    assert per_ea["--ea-mode"] == ["1", "0"] and per_ea["--ea-periodic"] == ["1", "0"]
    assert per_ea["--ea-size"] == ["2048", "1024"] and per_ea["--ea-cycles"] == ["7", "3"]
    assert [float(x) for x in per_ea["--ea-load"]] == [12.5, 50.0]
    assert [float(x) for x in per_ea["--ea-msgs"]] == [4.0, 2.0]
    assert a["--ea-dims"] == "3,2,0,0,0,0"  # three sides per EA, 0 where none
    assert per_ea["--ea-fixed"] == ["1", "0"]
    assert float(per_ea["--ea-alpha-ns"][0]) == pytest.approx(2000.0) and per_ea["--ea-alpha-ns"][1] == "0"
    assert float(per_ea["--ea-beta-ns"][0]) == pytest.approx(1.0) and per_ea["--ea-beta-ns"][1] == "0"
    assert per_ea["--ea-bench-count"] == ["0", "3"] and a["--ea-bench-sizes"] == "0,256,1024"
    assert (a["--bench-iters"], a["--bench-warmup"]) == ("4", "1")
    # with every EA's alpha and beta given there are no phase-1 sizes at all
    params = dataclasses.replace(params, eas=params.eas[:1])
    a = _options(bench.argv(params, [point]))
    assert a["--ea-bench-count"] == "0" and "--ea-bench-sizes" not in a


def test_native_pattern_codes_follow_the_c_enum():
    """--ea-pattern sends indices into model.PATTERNS: the P_* enum of native/bench/ace.c has the same order."""
    import re
    from pathlib import Path

    src = (Path(__file__).resolve().parents[2] / "native" / "bench" / "ace.c").read_text()
    (body,) = re.findall(r"enum \{ (P_PAIRS[^}]*)\}", src)
    names = [n.strip()[2:].lower() for n in body.split(",") if n.strip()]
    assert names[-1] == "count" and tuple(names[:-1]) == model.PATTERNS
    assert model.MODES == ("blocking", "nonblocking")  # --ea-mode 0 / 1
