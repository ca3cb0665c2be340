"""Reading the raw output of the native programs (format: native/common/hv_out.h).

A raw file is a header of ``#@key=value`` lines, a ``#@columns=`` line, then
points: ``#@point k=v ...``, rows (CSV, or ``#@rows_binary=N`` + float64
bytes), ``#@point_end rows=N``. A trailing point without its end marker (the
job was killed while writing it) is dropped and counted in ``incomplete``.
An empty file, or one cut inside its first line, is a launch stopped before it
wrote its header (killed, or timed out, while MPI started): no point measured
(``unstarted``), not a damaged file. The native programs write and flush the
header before they measure anything.

The first line names the format version, ``#@hpcvar_raw=N``. The reader refuses a
file without it, and a version it does not read (a newer hpcvar's, or one no
longer supported), instead of guessing at its content.

Stored compactly: once a benchmark's tables are written from its raw files, each raw file is replaced by its
zstd-compressed copy ``<name>.raw.zst`` (a standard zstd stream: ``zstd -dc`` shows it; the content is unchanged,
so the format version below is the content's). ``read_raw`` reads either form, and ``raw_files`` lists a
directory's raw files in either form (issue 26: text rows took about 30 bytes per sample, compressed about 4).

Version history (RAW_FORMAT_VERSION; native/common/hv_out.h HV_RAW_FORMAT_VERSION
writes the same number):
  1: header, columns, points (CSV or binary rows), point end markers; written
     before and after issue 19's C redesign (tests/data/*_ba3e1d1 hold such files).
When the format changes, bump both numbers and keep reading the older versions
that can still be read (add them to RAW_FORMAT_READABLE) with a test file each.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hpcvar.errors import InputFileError, ResultsError

RAW_FORMAT_VERSION = 1  # the version the native programs of this hpcvar write
COMPRESSED_SUFFIX = ".zst"  # a raw file compressed once its run's tables were written from it
# zstd level of raw files: 9 stores 8-byte round trips in 3.5 bytes each against 4.0 at the default 3, at about
# 1 s per million samples, once per run (19 gains 13% more at 35 times the time)
ZSTD_LEVEL = 9
RAW_FORMAT_READABLE = frozenset({1})  # every version this reader reads (the current one and older ones)
_VERSION_KEY = b"#@hpcvar_raw="


@dataclass
class RawPoint:
    params: dict[str, str]
    rows: np.ndarray  # shape (n, ncols), float64

    def param(self, key: str, conv: Callable[[str], Any] = int) -> Any:
        return conv(self.params[key])


@dataclass
class RawFile:
    path: Path
    meta: dict[str, str] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    points: list[RawPoint] = field(default_factory=list)
    incomplete: int = 0
    unstarted: bool = False  # empty, or cut inside the version line: the launch ended before its header

    def column(self, point: RawPoint, name: str) -> np.ndarray:
        return point.rows[:, self.columns.index(name)]


def _parse_kv(text: str, path: str | os.PathLike[str], lineno: int) -> dict[str, str]:
    out = {}
    for tok in text.split():
        k, sep, v = tok.partition("=")
        if not sep:
            raise InputFileError(f"'{tok}' is not key=value", str(path), lineno)
        out[k] = v
    return out


def check_raw_version(data: bytes, path: str | os.PathLike[str]) -> int:
    """The format version on the first line of a raw file; an error naming the file and what to do if the line
    is missing or the version is not one this hpcvar reads."""
    first = data[:data.find(b"\n")] if b"\n" in data else data
    if not first.startswith(_VERSION_KEY):
        raise InputFileError(
            "not an hpcvar raw file: the first line is not the format version '#@hpcvar_raw=N'", str(path), 1,
            todo="Give a file written by hpcvar's native programs; if it was one, it is damaged: re-run the "
                 "measurement")
    text = first[len(_VERSION_KEY):].decode("utf-8", errors="replace").strip()
    where = f"{path}:1"
    try:
        version = int(text)
    except ValueError:
        raise ResultsError(f"raw format version '{text}' is not a version number hpcvar knows", where,
                           "The file is damaged or not hpcvar's: re-run the measurement") from None
    if version in RAW_FORMAT_READABLE:
        return version
    readable = ", ".join(str(v) for v in sorted(RAW_FORMAT_READABLE))
    if version > RAW_FORMAT_VERSION:
        raise ResultsError(
            f"raw format version {version} is newer than this hpcvar reads ({readable})", where,
            "A newer hpcvar's native programs wrote it: upgrade hpcvar to read it, or re-run the measurement with "
            "this one (and with HPCVAR_NATIVE_DIR set, point it at native programs built from this hpcvar)")
    raise ResultsError(
        f"raw format version {version} is older than this hpcvar reads ({readable})", where,
        "Re-run the measurement with this hpcvar, or read the file with the hpcvar version that wrote it")


def raw_bytes(path: str | os.PathLike[str]) -> bytes:
    """The content of a raw file, ``<name>.raw`` or its compressed form ``<name>.raw.zst`` (given either name:
    ``x.raw`` is read from ``x.raw.zst`` once it was compressed)."""
    path = Path(path)
    if path.suffix != COMPRESSED_SUFFIX and not path.exists() and _zst(path).exists():
        path = _zst(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputFileError(f"cannot read raw output: {e.strerror}", str(path)) from None
    if path.suffix != COMPRESSED_SUFFIX:
        return data
    import pyarrow as pa

    try:
        with pa.CompressedInputStream(pa.BufferReader(data), "zstd") as f:
            return bytes(f.read())
    except (OSError, pa.ArrowException) as e:
        raise InputFileError(f"cannot decompress the raw file: {str(e).splitlines()[0][:200]}", str(path),
                             todo="The file is damaged (truncated?): re-run the measurement") from None


def _zst(path: Path) -> Path:
    return path.with_name(path.name + COMPRESSED_SUFFIX)


def raw_files(directory: str | os.PathLike[str], pattern: str = "*.raw") -> list[Path]:
    """The raw files of a directory matching ``pattern`` (a ``.raw`` glob), compressed or not, sorted by name.
    A file present in both forms (its compression was interrupted between writing the copy and removing the
    original) is listed once, as its complete compressed copy."""
    d = Path(directory)
    if not d.is_dir():
        return []
    plain = set(d.glob(pattern))
    packed = {p for p in d.glob(pattern + COMPRESSED_SUFFIX)}
    out = packed | {p for p in plain if _zst(p) not in packed}
    return sorted(out, key=lambda p: p.name.removesuffix(COMPRESSED_SUFFIX))


def compress_raw(path: str | os.PathLike[str]) -> Path:
    """Replace the raw file ``path`` by its zstd-compressed copy ``path.zst`` (written atomically, then the
    original removed); returns the new path. A file already compressed is left as it is."""
    from hpcvar.results.store import atomic_write_bytes

    path = Path(path)
    if path.suffix == COMPRESSED_SUFFIX:
        return path
    target = _zst(path)
    if not target.exists():
        import pyarrow as pa

        data = pa.Codec("zstd", compression_level=ZSTD_LEVEL).compress(path.read_bytes(), asbytes=True)
        atomic_write_bytes(target, data)
    path.unlink()
    return target


def read_raw(path: str | os.PathLike[str]) -> RawFile:  # noqa: C901, PLR0915  (one loop over the lines)
    """Parse one raw file (plain, or compressed ``.raw.zst``: see ``raw_bytes``); malformed content raises
    InputFileError with file:line, a format version this hpcvar does not read a ResultsError
    (``check_raw_version``)."""
    path = Path(path)
    data = raw_bytes(path)
    raw = RawFile(path)
    pos, lineno, n = 0, 0, len(data)
    cur: dict[str, str] | None = None
    cur_rows: list[str] = []
    cur_bin: np.ndarray | None = None

    def next_line() -> str:
        nonlocal pos, lineno
        end = data.find(b"\n", pos)
        if end < 0:
            end = n
        line = data[pos:end].decode("utf-8", errors="replace")
        pos = end + 1
        lineno += 1
        return line

    if b"\n" not in data and _VERSION_KEY.startswith(data):
        raw.unstarted = True
        return raw
    check_raw_version(data, path)
    while pos < n:
        start_line = lineno + 1
        line = next_line()
        if line.startswith("#@point_end"):
            if cur is None:
                raise InputFileError("'#@point_end' without '#@point'", str(path), start_line)
            ncols = len(raw.columns)
            if cur_bin is not None:
                rows = cur_bin
            elif cur_rows:
                rows = np.loadtxt(io.StringIO("\n".join(cur_rows)), delimiter=",", ndmin=2)
            else:
                rows = np.zeros((0, ncols))
            if rows.shape[1] != ncols:
                raise InputFileError(f"point has {rows.shape[1]} columns, header says {ncols}", str(path), start_line)
            raw.points.append(RawPoint(cur, rows))
            cur, cur_rows, cur_bin = None, [], None
        elif line.startswith("#@point"):
            cur = _parse_kv(line[len("#@point"):], path, start_line)
            cur_rows, cur_bin = [], None
        elif line.startswith("#@rows_binary="):
            count = int(line.split("=", 1)[1])
            nbytes = count * len(raw.columns) * 8
            if pos + nbytes > n:
                break  # truncated binary block: incomplete point
            cur_bin = np.frombuffer(data, dtype="<f8", count=count * len(raw.columns), offset=pos).reshape(
                count, len(raw.columns)).copy()
            pos += nbytes + 1  # the block ends with a newline
        elif line.startswith("#@columns="):
            raw.columns = line.split("=", 1)[1].split(",")
        elif line.startswith("#@"):
            k, _, v = line[2:].partition("=")
            raw.meta[k] = v
        elif line.strip():
            if cur is None:
                raise InputFileError("data row outside a point", str(path), start_line)
            cur_rows.append(line)
    if cur is not None:
        raw.incomplete += 1
    return raw
