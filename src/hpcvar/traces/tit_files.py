"""The files of a SimGrid TIT trace: the file itself, or an index and the per-rank files it names.

Kept apart from the parser (hpcvar.traces.tit) and free of numpy, so that a command may read the files and start
the C parse (hpcvar.traces.tit_prefetch) while it imports the rest.
"""

from __future__ import annotations

import re
from pathlib import Path

from hpcvar.errors import InputFileError, read_user_bytes

# the first line that is not blank and does not start with '#' (str.splitlines' and str.strip's ASCII sets)
_FIRST_LINE = re.compile(rb"(?:^|(?<=[\n\r\v\f\x1c-\x1e]))(?!#)[ \t\x1f]*[^ \t\x1f\n\r\v\f\x1c-\x1e]"
                         rb"[^\n\r\v\f\x1c-\x1e]*")


def sources(path: Path) -> list[tuple[str, bytes]]:
    """(name, bytes) of the files to parse: the file itself, or the per-rank files its lines name."""
    data = read_user_bytes(path)
    if not is_index(data):
        return [(str(path), data)]
    return [(str(fp), read_user_bytes(fp)) for fp in index_entries(path, data.decode())]


def is_index(data: bytes) -> bool:
    """An index of per-rank files: its first line that is not blank nor starts with '#' has one field that
    is not a rank."""
    if data.isascii():
        m = _FIRST_LINE.search(data)
        first = m.group().decode().split() if m else []
    else:
        first = next((ln.split() for ln in data.decode().splitlines() if ln.strip() and not ln.startswith("#")),
                     [])
    return bool(first) and len(first) == 1 and not first[0].lstrip("p").isdigit()


def index_entries(path: Path, text: str):
    """The files an index names, each checked when reached. SimGrid's recorder writes them as it was given the
    index's name (relative to its working directory, or absolute): an entry is looked for relative to the
    index's directory, then as ``<index>_files/<name>`` beside the index (SimGrid's layout, moved), then
    relative to the working directory (where SimGrid's replay looks)."""
    for ln, entry in enumerate(text.splitlines(), 1):
        entry = entry.strip()
        if not entry or entry.startswith("#"):
            continue
        e = Path(entry)
        tried = [e if e.is_absolute() else path.parent / e]
        if e.parent.name:
            tried.append(path.parent / e.parent.name / e.name)
        if not e.is_absolute():
            tried.append(Path.cwd() / e)
        found = next((t for t in tried if t.is_file()), None)
        if found is None:
            raise InputFileError(f"the index names a missing file '{entry}' (looked for "
                                 f"{', '.join(str(t) for t in dict.fromkeys(tried))})", str(path), ln,
                                 todo="Keep the per-rank files beside the index, as SimGrid writes them")
        yield found
