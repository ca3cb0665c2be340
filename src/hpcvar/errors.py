"""Typed errors of hpcvar.

Library code raises these; the one CLI boundary (hpcvar.cli) prints
``error: <what> (<where>). <what to do>`` and exits with ``exit_code``.
``where`` names the flag (``--sizes``) or the place in a file (``scheme.txt:3:7``).
"""

from __future__ import annotations

import os
import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class HpcvarError(Exception):
    """Base class: a failure with a place and a remedy."""

    exit_code = 1

    def __init__(self, what: str, where: str | None = None, todo: str | None = None):
        # what often quotes the user's input: control characters in it (a newline in a flag, a NUL in a
        # file) are shown escaped, so that the error stays one line
        what = _CONTROL.sub(lambda m: repr(m.group())[1:-1], str(what))
        super().__init__(what)
        self.what = what
        self.where = where
        self.todo = todo

    def render(self) -> str:
        msg = f"error: {self.what}"
        if self.where:
            msg += f" ({self.where})"
        msg += "."
        if self.todo:
            msg += f" {self.todo}"
        return msg


class UsageError(HpcvarError):
    """The user's input is wrong (bad flag value, bad file content): exit code 2."""

    exit_code = 2


class InputFileError(UsageError):
    """A file the user gave is malformed; ``where`` is ``path:line[:column]``."""

    def __init__(self, what: str, path: str, line: int | None = None, column: int | None = None,
                 todo: str | None = None):
        where = str(path)
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        super().__init__(what, where, todo)
        self.path, self.line, self.column = path, line, column


class MissingToolError(HpcvarError):
    """A program or library hpcvar needs is not installed."""


class LaunchError(HpcvarError):
    """An MPI job failed or timed out."""


class LaunchTimeout(LaunchError):
    """An MPI job ran past its timeout and was stopped (``timeout_s``: the limit it had). Exit code 124, as
    coreutils' timeout: a script can tell "too slow or hung" from other failures."""

    exit_code = 124

    def __init__(self, what: str, where: str | None = None, todo: str | None = None, timeout_s: float = 0.0):
        super().__init__(what, where, todo)
        self.timeout_s = timeout_s


class ResultsError(HpcvarError):
    """A run directory or results file cannot be used."""


def read_user_text(path: str | os.PathLike[str], todo: str | None = None) -> str:
    """The text of a file the user gave; a file that is not UTF-8 (binary, damaged) or cannot be read is an
    InputFileError naming the file and the line of the first bad byte, never a UnicodeDecodeError."""
    return read_user_bytes(path, todo).decode()


def read_user_bytes(path: str | os.PathLike[str], todo: str | None = None) -> bytes:
    """The bytes of a text file the user gave, checked as read_user_text checks them (UTF-8, readable)
    without keeping a decoded copy: parsers in C take the bytes."""
    from pathlib import Path

    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise InputFileError(f"cannot read the file: {e.strerror or e}", str(p), todo=todo) from None
    if data.isascii():
        return data
    try:
        data.decode()
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputFileError(f"byte {e.start} (0x{data[e.start]:02x}) is not UTF-8 text", str(p), line,
                             todo=todo or "Give a text file (UTF-8)") from None
    return data
