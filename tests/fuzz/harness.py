"""The fuzz campaign's rules (docs/robustness.md): every parser of user input, given anything, ends in a result
or in one HpcvarError that names the flag or the file (``where``); never another exception, a hang, or a
silently accepted absurd value (negative or non-finite sizes and times, sizes beyond memory).

``FUZZ_EXAMPLES`` (environment) sets the examples per test: the suite uses a few hundred at most so that each
parser takes seconds; tests/fuzz/run_campaign.py runs the same tests with many more."""

from __future__ import annotations

import math
import os
import signal
from contextlib import contextmanager

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from hpcvar.errors import HpcvarError

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=os.environ.get("FUZZ_RANDOM") is None,
                suppress_health_check=list(HealthCheck), database=None)
HANG_S = 10  # CPU seconds: one parse of a small input never takes this long
HANG_WALL_S = 120  # wall-clock seconds, for a parse blocked without using the CPU


@contextmanager
def no_hang(what: str, cpu_s: float = HANG_S):
    """Fail a parse that spins for HANG_S of CPU time (ITIMER_PROF: a loaded machine, where the suite shares
    2 cores with others, does not count) or stays blocked for HANG_WALL_S."""
    def _spin(signum, frame):
        raise AssertionError(f"{what} hung: {cpu_s:g} s of CPU time")

    def _wall(signum, frame):
        raise AssertionError(f"{what} hung: blocked for {HANG_WALL_S} s")

    old_prof = signal.signal(signal.SIGPROF, _spin)
    old_alrm = signal.signal(signal.SIGALRM, _wall)
    signal.setitimer(signal.ITIMER_PROF, cpu_s)
    signal.alarm(HANG_WALL_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.alarm(0)
        signal.signal(signal.SIGPROF, old_prof)
        signal.signal(signal.SIGALRM, old_alrm)


def outcome(fn, *args, where: str | None = None, hang_s: float = HANG_S, **kwargs):
    """(result, None) or (None, the HpcvarError); anything else propagates and fails the example. A given
    ``where`` must appear in the error's place (the flag, or the file's name)."""
    with no_hang(getattr(fn, "__name__", "parser"), hang_s):
        try:
            return fn(*args, **kwargs), None
        except HpcvarError as e:
            assert e.what and isinstance(e.what, str), e
            assert e.where, f"error without a place: {e.render()}"
            if where is not None:
                assert where in e.where, f"error names {e.where!r}, not {where!r}: {e.render()}"
            assert "\n" not in e.what, e.render()
            return None, e


def sane_number(x, what: str = "value", lo: float = 0.0, hi: float = math.inf) -> None:
    assert isinstance(x, (int, float)) and not isinstance(x, bool), (what, x)
    assert math.isfinite(x), f"{what} accepted a non-finite value {x!r}"
    assert lo <= x <= hi, f"{what} accepted an absurd value {x!r}"


# ---- inputs ----------------------------------------------------------------------------------------------
# the pieces of numbers and units that parsers trip on
TOKENS = ["0", "1", "8", "-1", "1.5", ".5", "1e3", "1e400", "1e-400", "nan", "inf", "-inf", "NaN", "1_000",
          "0x10", "K", "k", "KiB", "MiB", "GiB", "TiB", "kB", "B", "b", "us", "µs", "ns", "ms", "s", "m", "h",
          "min", "bit", "kbit", "mbit", "gbit", "Hz", "kHz", "/s", "..", ":", ":x", "x2", "x1", ",", "=", "-", " ",
          "\t", "\n", "", "all", "9" * 30, "\x00", "é", "%"]


def token_text(extra: list[str] | None = None, max_size: int = 8):
    return st.lists(st.sampled_from(TOKENS + (extra or [])), max_size=max_size).map("".join) | st.text(max_size=20)


INTERESTING = [b"-1", b"nan", b"inf", b"1e999", b"-0", b"\n", b"#", b" ", b"\t", b"0", b"\xff\xfe", b"=", b",",
               b":", b"\x00", b"9999999999999999999999", b"1e-999", b"->", b"[", b"{", b"\"", b"\r\n"]


@st.composite
def mutated(draw, seed: bytes, max_mutations: int = 6) -> bytes:
    """``seed`` with a few random mutations: byte flips, deletions, insertions of troublesome tokens,
    truncation, a duplicated or dropped line."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, max_mutations))):
        kind = draw(st.sampled_from(["flip", "delete", "insert", "truncate", "dupline", "dropline", "replace"]))
        n = len(data)
        pos = draw(st.integers(0, max(0, n - 1)))
        if kind == "flip" and n:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "delete" and n:
            del data[pos:pos + draw(st.integers(1, 16))]
        elif kind == "insert":
            data[pos:pos] = draw(st.sampled_from(INTERESTING) | st.binary(max_size=8))
        elif kind == "truncate":
            del data[pos:]
        elif kind in ("dupline", "dropline", "replace"):
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            if kind == "dupline":
                lines.insert(i, lines[i])
            elif kind == "dropline":
                del lines[i]
            else:  # a number in the line becomes a troublesome one
                toks = lines[i].split(b" ")
                j = draw(st.integers(0, len(toks) - 1))
                toks[j] = draw(st.sampled_from(INTERESTING))
                lines[i] = b" ".join(toks)
            data = bytearray(b"\n".join(lines))
    return bytes(data)
