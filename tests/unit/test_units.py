import pytest

from hpcvar.errors import UsageError
from hpcvar.units import format_size, format_time_ns, parse_list, parse_rate, parse_size, parse_time


@pytest.mark.parametrize("text,value", [("8", 8), ("1KiB", 1024), ("4MiB", 4 << 20), ("1k", 1024), ("1M", 1 << 20),
                                        ("2kB", 2000), ("1.5KiB", 1536), ("0", 0), ("1GiB", 1 << 30)])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["abc", "-1", "1.3B", "4 parsecs", ""])
def test_parse_size_rejects_and_names_flag(text):
    with pytest.raises(UsageError) as e:
        parse_size(text, "--sizes")
    assert e.value.where == "--sizes"


def test_parse_time_and_rate():
    assert parse_time("2us") == pytest.approx(2e-6)
    assert parse_time("1h") == 3600
    assert parse_time("50", default_unit="ms") == pytest.approx(0.05)
    assert parse_rate("200mbit") == 200e6
    with pytest.raises(UsageError):
        parse_rate("200MB/s")


def test_parse_list_with_ranges():
    size = lambda s: parse_size(s, "--sizes")  # noqa: E731
    assert parse_list("0,8,1KiB", size, "--sizes") == [0, 8, 1024]
    assert parse_list("1..16", size, "--x") == [1, 2, 4, 8, 16]
    assert parse_list("1..100:x10", size, "--x") == [1, 10, 100]
    assert parse_list("10..40:10", size, "--x") == [10, 20, 30, 40]
    assert parse_list("1..1M", size, "--x")[-1] == 1 << 20
    assert parse_list("0..4", size, "--x") == [0, 1, 2, 4]
    with pytest.raises(UsageError):
        parse_list("8,,9", size, "--x")
    with pytest.raises(UsageError):
        parse_list("16..1", size, "--x")


def test_formatting():
    assert format_size(1 << 20) == "1MiB"
    assert format_size(1000) == "1000B"
    assert format_time_ns(512) == "512 ns"
    assert format_time_ns(2.5e6) == "2.5 ms"
