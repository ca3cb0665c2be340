"""Fuzzing every size / time / rate / CPU-list flag parser and the key=value specs (--ea, --synthetic,
noise components, --rate-of, --depth, --wait)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from hpcvar import units
from tests.fuzz.harness import FUZZ, outcome, sane_number, token_text


@FUZZ
@given(token_text())
def test_parse_size(text):
    v, _ = outcome(units.parse_size, text, "--sizes", where="--sizes")
    if v is not None:
        assert isinstance(v, int)
        sane_number(v, "a size", 0, units.MAX_SIZE)


@FUZZ
@given(token_text(), st.sampled_from(["s", "us", "ns"]))
def test_parse_time(text, unit):
    v, _ = outcome(units.parse_time, text, "--duration", unit, where="--duration")
    if v is not None:
        sane_number(v, "a time", 0, units.MAX_TIME_S)


@FUZZ
@given(token_text())
def test_parse_rate(text):
    v, _ = outcome(units.parse_rate, text, "--rate", where="--rate")
    if v is not None:
        sane_number(v, "a rate", 0, units.MAX_RATE_BPS)


@FUZZ
@given(token_text(max_size=10), st.sampled_from(["size", "time", "int"]))
def test_parse_list(text, kind):
    item = {"size": lambda t: units.parse_size(t, "--sizes"), "time": lambda t: units.parse_time(t, "--sizes"),
            "int": lambda t: units.parse_int(t, "--sizes")}[kind]
    v, _ = outcome(units.parse_list, text, item, "--sizes", where="--sizes")
    if v is not None:
        assert 0 < len(v) <= 100000
        for x in v:
            sane_number(x, "a list item", 0, max(units.MAX_SIZE, units.MAX_TIME_S))


@FUZZ
@given(token_text(), st.integers(-5, 5), st.integers(-5, 100) | st.none())
def test_parse_int(text, lo, hi):
    v, _ = outcome(units.parse_int, text, "--np", lo, hi, where="--np")
    if v is not None:
        assert isinstance(v, int) and v >= lo and (hi is None or v <= hi)


@FUZZ
@given(token_text(["0-1", "0,1", "1-0", "99999999999", "3-"]))
def test_parse_cpus(text):
    from hpcvar.noise.collector import parse_cpus

    v, _ = outcome(parse_cpus, text, "--cpus", where="--cpus")
    if v is not None:
        assert v and all(isinstance(c, int) and c >= 0 for c in v)


@FUZZ
@given(token_text(["periodic", "poisson", "periodic:", "poisson:", "250Hz", "5us", "phase="], max_size=10))
def test_noise_component(text):
    from hpcvar.noise.collector import parse_component

    v, _ = outcome(parse_component, text, "--component", where="--component")
    if v is not None:
        sane_number(v["hz"], "a frequency", 1e-12, 1e15)
        sane_number(v["duration_s"], "a duration", 1e-15, 1e6)
        sane_number(v["phase_s"], "a phase", 0, units.MAX_TIME_S)


@FUZZ
@given(token_text(["poisson", "periodic", "250Hz", "2us", "GHz", "0.1Hz"], max_size=10))
def test_synthetic_spec_and_freq(text):
    from hpcvar.sim import synth

    v, _ = outcome(synth.parse_spec, text, "--synthetic", where="--synthetic")
    for _kind, rate, detour in v or []:
        sane_number(rate, "a rate", 1e-12, 1e15)
        sane_number(detour, "a detour", 0, units.MAX_TIME_S)
    f, _ = outcome(synth.parse_freq, text, "--freq", where="--freq")
    if f is not None:
        sane_number(f, "a frequency", 1e-12, 1e15)


EA_KEYS = ["pattern", "mode", "size", "load", "cycles", "ranks", "alpha", "beta", "name", "pairs", "blocking",
           "1MiB", "20", "75.9us", "0.01057us/B", "nan", "inf", "-1", "1e999"]


@FUZZ
@given(st.lists(st.sampled_from(EA_KEYS + ["=", ",", "=", ","]), max_size=14).map("".join) | st.text(max_size=30))
def test_parse_ea(text):
    from hpcvar.kinds.ace.job import parse_ea

    v, _ = outcome(parse_ea, text, "--ea", where="--ea")
    if v is not None:
        if v.size is not None:
            sane_number(v.size, "size", 0, units.MAX_SIZE)
        if v.load is not None:
            sane_number(v.load, "load", 0, 100)
        for x in (v.alpha_s, v.beta_s_per_byte):
            if x is not None:
                sane_number(x, "alpha/beta", 0, units.MAX_TIME_S)


@FUZZ
@given(st.lists(token_text(["h1=", "h2=", "h0=", "h3=", "200mbit"]), max_size=3), st.integers(1, 4))
def test_rate_of(items, nhosts):
    from hpcvar.testbed.plan import parse_rate_of

    v, _ = outcome(parse_rate_of, items, nhosts, where="--rate-of")
    for r in (v or {}).values():
        sane_number(r, "a rate", 0, units.MAX_RATE_BPS)


@FUZZ
@given(token_text(["deep", "sleep", "sleep:", "spin", "yield", "auto", "any", "exact", "single", "dual"]))
def test_fanin_lists(text):
    from hpcvar.kinds.fanin import job as fanin

    v, _ = outcome(fanin.parse_depth_list, text, "--depth", where="--depth")
    assert v is None or all(d == "deep" or (isinstance(d, int) and 1 <= d <= 1 << 31) for d in v)
    outcome(fanin.parse_choice_list, text, ("any", "exact"), "--match", where="--match")
    outcome(fanin.parse_wait, text)


def test_the_absurd_values_the_campaign_found_are_refused():
    import pytest

    from hpcvar.errors import UsageError

    for bad in ("1e400", "1e30", "99999999999999999999999TiB"):
        with pytest.raises(UsageError):
            units.parse_size(bad, "--sizes")
    for bad in ("1e400s", "1e400", "1e300h"):
        with pytest.raises(UsageError):
            units.parse_time(bad, "--duration")
    with pytest.raises(UsageError):
        units.parse_rate("1e400gbit", "--rate")
    assert math.isclose(units.parse_time("2us", "--t"), 2e-6)
