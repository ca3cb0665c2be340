"""The shape of the house (issue #19): the table of kinds is complete and resolvable, library code never
imports the command line, and the import graph of src/hpcvar has no cycles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hpcvar.kinds import KINDS, bench_commands

SRC = Path(__file__).resolve().parents[2] / "src" / "hpcvar"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("hpcvar"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hpcvar") and not node.level:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


MODULES = {_module_name(p): p for p in SRC.rglob("*.py")}


@pytest.mark.parametrize("command", sorted(KINDS))
def test_every_view_of_every_kind_resolves(command):
    kind = KINDS[command]
    assert kind.section or kind.render, f"{command} has neither a report section nor a terminal renderer"
    for view in ("job", "render", "section", "metrics", "cli"):
        if getattr(kind, view):
            assert callable(kind.view(view)), (command, view)


def test_bench_commands_come_from_the_table():
    assert set(bench_commands()) == {k.command.split()[1] for k in KINDS.values() if k.command.startswith("bench ")}


def test_library_code_never_imports_the_command_line():
    offenders = sorted(name for name, path in MODULES.items()
                       if not name.startswith("hpcvar.cli") and name != "hpcvar.__main__"
                       and any(m == "hpcvar.cli" or m.startswith("hpcvar.cli.") for m in _imports(path, False)))
    assert not offenders, f"library modules importing hpcvar.cli: {offenders}"


def test_module_import_graph_has_no_cycles():
    graph = {}
    for name, path in MODULES.items():
        deps = set()
        for m in _imports(path, True):
            while m and m not in MODULES:  # 'hpcvar.results.Run' -> the module hpcvar.results
                m = m.rpartition(".")[0]
            if m and m != name:
                deps.add(m)
        graph[name] = deps
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(n: str, stack: list[str]) -> bool:
        state[n] = 1
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                cycle.extend(stack[stack.index(d):] + [n, d] if d in stack else [n, d])
                return True
            if not state.get(d) and visit(d, stack + [n]):
                return True
        state[n] = 2
        return False

    for n in sorted(graph):
        if not state.get(n) and visit(n, []):
            break
    assert not cycle, f"import cycle: {' -> '.join(cycle)}"
