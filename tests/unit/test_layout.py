"""The shape of the house (issue #19): the table of kinds is complete and resolvable, library code never
imports the command line (not by an import statement anywhere, nor by an importlib string), and the
import-time graph of src/hpcvar has no cycles (test_module_import_graph_has_no_cycles says what that means)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from hpcvar.cli.bench import command_ref
from hpcvar.results.kinds import KINDS, bench_commands, resolve

SRC = Path(__file__).resolve().parents[2] / "src" / "hpcvar"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


_REF = re.compile(r"hpcvar(\.\w+)*(:\w+)?")  # "hpcvar.report.terminal:render_latency", as importlib is given


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_time_nodes(body: list[ast.stmt]):
    """The statements Python runs when the module is imported: the top level, into if/try/with/for blocks and
    class bodies, but not into functions (they run later) nor under ``if TYPE_CHECKING:`` (never run)."""
    for node in body:
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _import_time_nodes(node.orelse)
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from _import_time_nodes(getattr(node, field, []) or [])
        for h in getattr(node, "handlers", []) or []:
            yield from _import_time_nodes(h.body)


def _strings(tree: ast.Module) -> list[str]:
    """Every string constant of a module, f-strings whose parts are module-level string constants included
    (kinds.py writes ``f"{_R}.terminal:render_latency"``)."""
    consts = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
              and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
              for t in n.targets if isinstance(t, ast.Name)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                elif isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name) and v.value.id in consts:
                    parts.append(consts[v.value.id])
                else:
                    break
            else:
                out.append("".join(parts))
    return out


def _imports(path: Path, top_level_only: bool) -> set[str]:
    """The hpcvar modules (or module.attribute names) ``path`` imports: with ``top_level_only``, the import
    statements run at import time; else every import statement anywhere plus every importlib reference, a
    string ``"hpcvar.x.y"`` or ``"hpcvar.x.y:attr"`` (the table of kinds, the launchers)."""
    tree = ast.parse(path.read_text())
    nodes = _import_time_nodes(tree.body) if top_level_only else ast.walk(tree)
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("hpcvar"))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: from its package upwards
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([module] if module else []))
            if module.startswith("hpcvar"):
                out.add(module)
                out.update(f"{module}.{a.name}" for a in node.names)
    if not top_level_only:
        out.update(s.partition(":")[0] for s in _strings(tree) if _REF.fullmatch(s))
    return out


MODULES = {_module_name(p): p for p in SRC.rglob("*.py")}


@pytest.mark.parametrize("command", sorted(KINDS))
def test_every_view_of_every_kind_resolves(command):
    kind = KINDS[command]
    assert kind.section or kind.render, f"{command} has neither a report section nor a terminal renderer"
    for view in ("job", "render", "section", "metrics", "plots"):
        if kind.ref(view):
            assert callable(kind.view(view)), (command, view)
    if kind.cli:  # relative to the command-line package, which alone resolves it
        assert callable(resolve(command_ref(kind.cli))), (command, "cli")


def test_bench_commands_come_from_the_table():
    assert set(bench_commands()) == {k.command.split()[1] for k in KINDS.values() if k.command.startswith("bench ")}


def test_library_code_never_imports_the_command_line():
    offenders = sorted(name for name, path in MODULES.items()
                       if not name.startswith("hpcvar.cli") and name != "hpcvar.__main__"
                       and any(m == "hpcvar.cli" or m.startswith("hpcvar.cli.") for m in _imports(path, False)))
    assert not offenders, f"library modules importing hpcvar.cli: {offenders}"


def _import_time_graph() -> dict[str, set[str]]:
    """Module -> the hpcvar modules it imports while it is itself being imported (see the cycle test)."""
    graph = {}
    for name, path in MODULES.items():
        deps = set()
        for m in _imports(path, True):
            while m and m not in MODULES:  # 'hpcvar.results.Run' -> the module hpcvar.results
                m = m.rpartition(".")[0]
            while m:  # the module and the packages above it, whose __init__ runs first ...
                if m != name and not name.startswith(m + "."):  # ... but not the importer's own packages
                    deps.add(m)
                m = m.rpartition(".")[0]
        graph[name] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each as one cycle through them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(_one_cycle(graph, set(comp)))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def _one_cycle(graph: dict[str, set[str]], comp: set[str]) -> list[str]:
    """A shortest cycle through the first module of a strongly connected component (breadth-first)."""
    start = min(comp)
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & comp):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, v, start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return sorted(comp)


def test_module_import_graph_has_no_cycles():
    """No cycle in the import-time graph of src/hpcvar.

    What "cycle" means here: modules A -> B -> ... -> A where each imports the next *while it is itself
    being imported*, i.e. by a statement Python runs when the module is first imported: the module's top level,
    including top-level ``if``/``try``/``with``/``for`` blocks and class bodies, but not function bodies (they
    run later, when every module is loaded) and not ``if TYPE_CHECKING:`` blocks (never run). ``import
    hpcvar.a.b`` and ``from hpcvar.a.b import x`` count as importing the module ``hpcvar.a.b`` and the packages
    above it (their ``__init__`` runs first), except the importer's own packages (already being imported when
    it runs); ``from hpcvar.a import b`` counts ``hpcvar.a.b`` when ``b`` is a module. In such a cycle one
    module runs while the other is half initialised, so what works depends on which is imported first
    ("cannot import name ... from partially initialized module"). Deferred imports inside functions (the
    command line's lazy loading, the table of kinds) cannot form one and are not counted.
    """
    cycles = _cycles(_import_time_graph())
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_layout_checks_see_what_they_claim():
    """The parsing above on known cases: deferred and importlib references count for the command-line check,
    TYPE_CHECKING and function-level imports do not count for the cycle check."""
    kinds = _imports(MODULES["hpcvar.results.kinds"], False)
    assert "hpcvar.kinds.sim_app.job" in kinds  # strings of the table
    assert not any(m.startswith("hpcvar.cli") for m in kinds)
    assert "hpcvar.testbed.launcher" in _imports(MODULES["hpcvar.launch"], False)
    store = _import_time_graph()["hpcvar.results.store"]
    assert "hpcvar.results.schema" in store and "hpcvar.results" not in store  # its own package is not an edge
    assert "hpcvar.results.params" not in _import_time_graph()["hpcvar.results.context"]  # under TYPE_CHECKING
    assert "hpcvar.kinds.latency.job" not in _import_time_graph()["hpcvar.cli.bench_latency"]  # inside a function
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
