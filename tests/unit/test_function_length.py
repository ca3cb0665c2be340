"""tools/function_length.py, the 80-line limit of C functions that make lint applies to native/."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("function_length", ROOT / "tools" / "function_length.py")
assert _spec is not None and _spec.loader is not None
fl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fl)

SOURCE = r"""#include <stdio.h>
/* a comment { with a brace */
static int add(int a,
               int b) {
    const char *s = "}{";  /* braces in a literal */
    char c = '{';
    if (a) {
        return a + b;
    }
    return b + (s[0] == c);
}

int decl(int x);
typedef struct { int x; } point;
static const int TABLE[] = {1, 2, 3};

int main(void) { return add(1, 2); }
"""


def test_functions_are_found_with_their_lengths():
    assert fl.functions(SOURCE) == [("add", 3, 9), ("main", 17, 1)]


def test_a_long_function_fails_and_is_named(tmp_path, capsys):
    body = "\n".join(f"    x += {i};" for i in range(85))
    (tmp_path / "long.c").write_text(f"int f(void) {{\n    int x = 0;\n{body}\n    return x;\n}}\n")
    (tmp_path / "short.c").write_text(SOURCE)
    assert fl.main(["--max", "80", str(tmp_path / "short.c")]) == 0
    assert fl.main(["--max", "80", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "long.c:1: f is 89 lines (at most 80)" in out and "short.c" not in out


def test_native_keeps_to_the_limit():
    assert fl.main(["--max", "80", str(ROOT / "native")]) == 0
