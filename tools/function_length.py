#!/usr/bin/env python3
"""Functions longer than a limit in C sources (make lint runs it over native/ with --max 80).

A function is a top-level definition: a line at column 0 that opens a body (``type name(args) {``, the braces of
.clang-format), up to the ``}`` at column 0 that closes it. Its length is the number of lines from the first
line of its signature to the closing brace, both included; comments and blank lines count (a long comment in a
function is a sign that it does too much). Comments and string and character literals are blanked before
braces are matched, so a brace inside them does not count.

    python3 tools/function_length.py --max 80 native     # prints FILE:LINE: name is N lines; exits 1 if any
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

_LITERALS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_NAME = re.compile(r"([A-Za-z_]\w*)\s*\(")


def _blank(text: str) -> str:
    """``text`` with comments and literals replaced by spaces, newlines kept (line numbers stay right)."""
    return _LITERALS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def functions(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, number of lines) of every top-level function definition in C source ``text``."""
    lines = _blank(text).split("\n")
    out = []
    depth, start, name = 0, None, None
    for i, line in enumerate(lines):
        if depth == 0 and start is None and line[:1].strip() and not line.startswith(("#", "}")):
            m = _NAME.search(line)
            sig = i
            if m and "=" not in line.split("(")[0]:
                start, name = sig, m.group(1)
        opened = depth == 0 and "{" in line
        depth += line.count("{") - line.count("}")
        if start is not None and depth == 0 and (opened or line.startswith("}")):
            if opened and "}" in line.split("{", 1)[1] or line.startswith("}"):
                out.append((name, start + 1, i - start + 1))
            start = None
        elif start is not None and depth == 0 and line.rstrip().endswith(";"):
            start = None  # a declaration, not a definition
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=80, help="longest function allowed, in lines")
    ap.add_argument("paths", nargs="+", help="C files or directories (searched for *.c and *.h)")
    args = ap.parse_args(argv)
    files = sorted({f for p in map(Path, args.paths) for f in ([p] if p.is_file() else
                                                                [*p.rglob("*.c"), *p.rglob("*.h")])})
    bad = [(f, line, name, n) for f in files for name, line, n in functions(f.read_text(errors="replace"))
           if n > args.max]
    for f, line, name, n in bad:
        print(f"{f}:{line}: {name} is {n} lines (at most {args.max}): split it into functions of one role each")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
