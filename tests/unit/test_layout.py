"""The shape of the house (issues #19, #25): the table of kinds is complete and resolvable, library code never
imports the command line (not by an import statement anywhere, nor by an importlib string), the import-time graph
of src/hpcvar has no cycles (test_module_import_graph_has_no_cycles says what that means), a kind is one folder
with one contract (its job takes its Params and a context and returns the Run; it never imports its views; only
the command line, characterize and the table reach a kind), and folder-level imports run down only."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from hpcvar.cli.bench import command_ref
from hpcvar.results.context import JobContext
from hpcvar.results.kinds import KINDS, bench_commands, resolve
from hpcvar.results.params import Params
from hpcvar.results.store import Run

SRC = Path(__file__).resolve().parents[2] / "src" / "hpcvar"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


_REF = re.compile(r"hpcvar(\.\w+)*(:\w+)?")  # "hpcvar.testbed.launcher:TestbedLauncher", as importlib is given


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
    (``f"{_PKG}.launcher:Launcher"``)."""
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
    launch = _imports(MODULES["hpcvar.launch"], False)
    assert "hpcvar.testbed.launcher" in launch  # an importlib string of the launchers' registry
    assert not any(m.startswith("hpcvar.cli") for m in _imports(MODULES["hpcvar.results.kinds"], False))
    store = _import_time_graph()["hpcvar.results.store"]
    assert "hpcvar.results.schema" in store and "hpcvar.results" not in store  # its own package is not an edge
    assert "hpcvar.results.params" not in _import_time_graph()["hpcvar.results.context"]  # under TYPE_CHECKING
    assert "hpcvar.kinds.latency.job" not in _import_time_graph()["hpcvar.cli.bench_latency"]  # inside a function
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert _folder("hpcvar.kinds.sim_app.job") == "kinds" and _folder("hpcvar.characterize") == "characterize"
    assert _kind_of("hpcvar.kinds.sim_app.views") == "sim_app" and _kind_of("hpcvar.sim.replay") is None
    assert ("report", "bench") in _folder_edges({"hpcvar.report.x": {"hpcvar.bench.runner"}})


# ---- a kind is one folder with one contract (issue #25) -----------------------------------------------------------

def _kind_of(module: str) -> str | None:
    """'hpcvar.kinds.latency.views' -> 'latency'."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["hpcvar", "kinds"] else None


def test_every_kind_is_a_folder_with_a_job_and_views():
    for command, kind in KINDS.items():
        folder = SRC / "kinds" / kind.folder
        assert (folder / "job.py").is_file() and (folder / "views.py").is_file(), command
        for view in ("job", "render", "section", "metrics", "plots"):
            ref = kind.ref(view)
            if ref:
                assert ref.startswith(f"hpcvar.kinds.{kind.folder}.{'job' if view == 'job' else 'views'}:"), ref


def test_only_the_command_line_characterize_and_the_table_reach_a_kind():
    """Import statements anywhere and importlib strings; a kind's own modules import each other (views import
    their job), and no kind imports another kind."""
    allowed = ("hpcvar.cli", "hpcvar.characterize", "hpcvar.results.kinds", "hpcvar.__main__")
    offenders = []
    for name, path in MODULES.items():
        reached = {m for m in _imports(path, False) if _kind_of(m)}
        own = _kind_of(name)
        if own:
            reached = {m for m in reached if _kind_of(m) != own}
        elif name == "hpcvar.kinds" or name.startswith(allowed):
            continue
        offenders += [f"{name} -> {m}" for m in sorted(reached)]
    assert not offenders, offenders


def test_report_imports_no_kind_and_no_engine():
    """report/ is the view toolkit: the kinds' views import it, never the other way round."""
    engines = {"bench", "sim", "noise", "traces", "models", "launch", "testbed", "kinds", "characterize"}
    bad = [(name, m) for name, path in MODULES.items() if name.startswith("hpcvar.report")
           for m in _imports(path, False) if _folder(m) in engines]
    assert not bad, bad


def test_no_job_imports_its_views():
    bad = [(name, m) for name, path in MODULES.items() if name.startswith("hpcvar.kinds.") and name.endswith(".job")
           for m in _imports(path, False) if m.startswith(name.rpartition(".")[0] + ".views")]
    assert not bad, bad


@pytest.mark.parametrize("command", sorted(KINDS))
def test_every_job_takes_its_params_and_a_context_and_returns_the_run(command):
    import inspect
    import typing

    fn = KINDS[command].view("job")
    hints = typing.get_type_hints(fn)
    first, second = list(inspect.signature(fn).parameters)[:2]
    assert isinstance(hints[first], type) and issubclass(hints[first], Params) and hints[first] is not Params, \
        (command, hints[first])
    assert isinstance(hints[second], type) and issubclass(hints[second], JobContext), (command, hints[second])
    assert hints["return"] is Run, (command, hints["return"])
    assert len(inspect.signature(fn).parameters) == 2, f"{command}: a job takes (params, ctx) only"


# Folders by level: an import (anywhere in a module, deferred ones included) goes to a folder of the same or a
# lower level, never up. The engines (level 2) are ordered among themselves the same way, so that none reaches
# back into one built on it: noise lies under sim (jitter traces are what sim replays), report is the toolkit the
# views use, beside the engines and above none of them. importlib strings are not imports here (the table of
# kinds and the launchers' registry resolve theirs when used).
LEVELS = {"errors": 0, "units": 0, "_memory": 0, "stats": 0, "results": 1, "metadata": 1, "_native": 1,
          "compare": 2, "launch": 2, "testbed": 2, "traces": 2, "models": 2, "noise": 2, "sim": 2, "bench": 2,
          "report": 2, "kinds": 3, "characterize": 4, "cli": 5, "__main__": 6}
ENGINES = ["compare", "launch", "testbed", "traces", "models", "noise", "sim", "bench"]  # each only imports earlier


def _folder(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "hpcvar" else None


def _folder_edges(imports: dict[str, set[str]]) -> set[tuple[str, str]]:
    out = set()
    for name, ms in imports.items():
        for m in ms:
            a, b = _folder(name), _folder(m)
            if a and b and a != b and b in LEVELS:
                out.add((a, b))
    return out


def _up(a: str, b: str) -> bool:
    if LEVELS[b] != LEVELS[a]:
        return LEVELS[b] > LEVELS[a]
    if "report" in (a, b):
        return a != "report" or b != "compare"  # engines never import the toolkit; it uses compare only
    return a in ENGINES and b in ENGINES and ENGINES.index(b) > ENGINES.index(a)


def test_folder_level_imports_run_down_only():
    imports = {name: {m for m in _imports(path, True) | _deferred(path)} for name, path in MODULES.items()}
    up = sorted((a, b) for a, b in _folder_edges(imports) if a in LEVELS and _up(a, b))
    assert not up, f"imports that run back up: {up}"
    for gone in (("noise", "sim"), ("report", "bench"), ("report", "noise")):
        assert gone not in _folder_edges(imports), gone


def _deferred(path: Path) -> set[str]:
    """Every import statement of a module (function bodies and TYPE_CHECKING blocks included), no string."""
    tree = ast.parse(path.read_text())
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("hpcvar"))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([module] if module else []))
            if module.startswith("hpcvar"):
                out.add(module)
    return out
