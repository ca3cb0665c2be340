"""Scheme language (docs/formats.md 'Communication schemes') and the model CLI on schemes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcvar.errors import InputFileError, UsageError
from hpcvar.models.scheme import load_scheme, parse_scheme
from hpcvar.models.sharing import load_params, write_params
from tests.conftest import run_cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "schemes"


def test_parse_full_syntax():
    s = parse_scheme("# c\nnodes 0 1 2 n3\nsize 4MiB\na: 0 -> 1\nb: 0->2 1KiB  # own size\n1 -> n3; x_1: n3 -> 0\n")
    assert [(c.name, c.src, c.dst, c.size_bytes) for c in s.comms] == [
        ("a", "0", "1", 4 << 20), ("b", "0", "2", 1024), ("c", "1", "n3", 4 << 20), ("x_1", "n3", "0", 4 << 20)]
    assert s.nodes == ["0", "1", "2", "n3"]


def test_node_order_numeric_then_first_seen():
    assert parse_scheme("a: 10 -> 2; b: 2 -> 1").nodes == ["1", "2", "10"]
    assert parse_scheme("a: x -> y; b: w -> x").nodes == ["x", "y", "w"]


def test_inline_and_file(tmp_path):
    assert load_scheme("a: 0->1; b: 0->2").pairs() == [("0", "1"), ("0", "2")]
    f = tmp_path / "s.scheme"
    f.write_text("a: 0 -> 1\n")
    assert load_scheme(str(f)).source == str(f)


@pytest.mark.parametrize("text,where,what", [
    ("a: 0 -> 1\nb: 0 1\n", "t.scheme:2:6", "expected 'SRC -> DST'"),
    ("a: 0 -> 0\n", "t.scheme:1:4", "to itself"),
    ("nodes 0 1\na: 0 -> 1\nb: 1 -> 2\n", "t.scheme:3:9", "unknown node '2'"),
    ("# nothing\n\n", "t.scheme", "no communication"),
    ("a: 0 -> 1\na: 1 -> 2\n", "t.scheme:2:1", "defined twice"),
    ("a: 0 -> 1 4 MiB\n", "t.scheme:1:13", "unexpected 'MiB'"),
    ("a: 0 -> 1 lots\n", "t.scheme:1:11", "not a size"),
    ("a: 0 -> 1 -> 2\n", "t.scheme:1:11", "not a size"),
    ("  1a: 0 -> 1\n", "t.scheme:1:3", "not a communication name"),
    ("a: 0 -> 1; b: 0 => 2\n", "t.scheme:1:17", "expected 'SRC -> DST'"),
])
def test_syntax_errors_name_line_and_column(text, where, what):
    with pytest.raises(InputFileError) as e:
        parse_scheme(text, "t.scheme")
    assert e.value.where == where
    assert what in e.value.what
    assert e.value.todo


def test_every_example_parses():
    files = sorted(EXAMPLES.glob("*.scheme"))
    assert len(files) >= 8
    for f in files:
        assert load_scheme(str(f)).comms


def test_missing_file_is_a_usage_error():
    with pytest.raises(UsageError, match="does not exist"):
        load_scheme("/nonexistent/file.scheme")


def test_params_file_round_trip(tmp_path):
    p = tmp_path / "g.json"
    write_params(p, "gige", {"beta": 0.8, "gamma_in": 0.01, "gamma_out": 0.02})
    assert load_params(p) == ("gige", {"beta": 0.8, "gamma_in": 0.01, "gamma_out": 0.02})
    p.write_text("{ not json")
    with pytest.raises(InputFileError) as e:
        load_params(p)
    assert e.value.where.startswith(str(p) + ":1:")


# ---- the CLI as a subprocess

def test_cli_penalties_json_figure6():
    res = run_cli(["model", "penalties", str(EXAMPLES / "fig5.scheme"), "--model", "myrinet", "--json"], check=True)
    out = json.loads(res.stdout)
    assert out["model"] == "myrinet"
    assert [c["name"] for c in out["communications"]] == list("abcdef")
    assert [c["penalty"] for c in out["communications"]] == [5, 5, 5, 2.5, 2.5, 2.5]


def test_cli_penalties_times_and_params(tmp_path):
    p = tmp_path / "g.json"
    write_params(p, "gige", {"beta": 0.9, "gamma_in": 0.0, "gamma_out": 0.0})
    res = run_cli(["model", "penalties", "a: 0->1; b: 0->2", "--model", "gige", "--params", str(p),
                   "--t-ref", "10ms", "--json"], check=True)
    comms = json.loads(res.stdout)["communications"]
    assert [c["penalty"] for c in comms] == pytest.approx([1.8, 1.8])
    assert [c["t_predicted_s"] for c in comms] == pytest.approx([0.018, 0.018])
    res = run_cli(["model", "penalties", "a: 0->1", "--model", "maxmin", "--size", "25MB", "--bandwidth", "200mbit",
                   "--json"], check=True)
    assert json.loads(res.stdout)["communications"][0]["t_predicted_s"] == pytest.approx(1.0)


@pytest.mark.parametrize("args,needle", [
    (["a: 0->1; b: 0 =>2", "--model", "gige"], "error: expected 'SRC -> DST' here (<inline>:1:15)"),
    (["a: 1->1", "--model", "maxmin"], "to itself (<inline>:1:4)"),
    (["a: 0->1", "--model", "maxmin", "--beta", "1"], "(--beta)"),
    ([str(EXAMPLES / "fig5.scheme"), "--model", "myrinet", "--max-states", "2"], "(--max-states)"),
])
def test_cli_bad_input(args, needle):
    res = run_cli(["model", "penalties", *args])
    assert res.returncode == 2
    assert needle in res.stderr
