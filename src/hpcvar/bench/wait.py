"""How ranks wait for MPI (a benchmark's ``--wait``): MPI's own spin, or test and yield / sleep, for ranks that
outnumber the cores they share (native/common/hv_mpi.h, ``hv_wait`` and ``ctx.wait_us``). Shared by ``bench
fanin`` and ``bench bsp``."""

from __future__ import annotations

from hpcvar import units
from hpcvar.errors import UsageError

DEFAULT_SLEEP_US = 50


def parse_wait(text: str) -> str:
    """Normalize --wait: auto, spin, yield, sleep (50 us) or sleep:TIME (a whole number of microseconds, 1us..1s,
    with its unit: sleep:20us). The normalized form, stored with the run, is sleep:N with N in microseconds."""
    t = text.strip().lower()
    if t in ("auto", "spin", "yield"):
        return t
    if t == "sleep":
        return f"sleep:{DEFAULT_SLEEP_US}"
    if t.startswith("sleep:"):
        num = t[len("sleep:"):]
        if num.isdigit():
            # a bare number: microseconds or seconds would be a guess
            raise units.no_unit(num, "--wait", "us")
        try:
            us = units.parse_time(num, "--wait") * 1e6
        except UsageError:
            us = 0.0
        if abs(us - round(us)) < 1e-6 and 1 <= round(us) <= 1_000_000:
            return f"sleep:{round(us)}"
    raise UsageError(f"'{text}' is not a way to wait", "--wait",
                     "Give auto, spin, yield, sleep or sleep:TIME (between tests, 1us to 1s, e.g. sleep:20us)")


def resolve_wait(wait: str, np_: int, slots: int | None) -> str:
    """auto: spin (MPI's own busy wait) unless the ranks outnumber the cores they share, then sleep."""
    if wait != "auto":
        return wait
    return f"sleep:{DEFAULT_SLEEP_US}" if slots and np_ > slots else "spin"


def wait_us(wait: str) -> int:
    """The native --wait-us: 0 spin, -1 yield, N sleep N microseconds."""
    if wait == "spin":
        return 0
    if wait == "yield":
        return -1
    return int(wait.split(":", 1)[1])


__all__ = ["DEFAULT_SLEEP_US", "parse_wait", "resolve_wait", "wait_us"]
