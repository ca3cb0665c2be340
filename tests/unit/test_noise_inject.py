"""The injector's report line as the CLI reads it."""

from __future__ import annotations

import math

from hpcvar.noise.collector import parse_inject_result


def test_parse_inject_result_reads_every_field_per_cpu():
    out = ("cpu=1 bursts=350 burned_ns=304482644 late_ns_p50=64500 late_ns_max=29251772 overruns=11 rt=1\n"
           "cpu=3 bursts=10 burned_ns=9000000 late_ns_p50=-1 late_ns_max=0 overruns=0 rt=0\n")
    a, b = parse_inject_result(out)
    assert a == {"cpu": 1, "bursts": 350, "burned_ns": 304482644.0, "late_ns_max": 29251772.0,
                 "late_ns_p50": 64500.0, "overruns": 11, "realtime": True}
    assert b["cpu"] == 3 and b["late_ns_p50"] == -1.0 and b["realtime"] is False


def test_parse_inject_result_ignores_other_lines_and_reads_an_older_binary():
    out = "hv_noise_inject: starting\ncpu=0 bursts=2 burned_ns=2000 late_ns_max=5 rt=1\n"
    (r,) = parse_inject_result(out)
    assert r["bursts"] == 2 and r["overruns"] == 0 and math.isnan(r["late_ns_p50"])

