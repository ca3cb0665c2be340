"""Every remedy names a flag the command has (issue #27).

The test walks the source of hpcvar (its abstract syntax trees): every string that gives a remedy naming a flag
("use --np 2", "raise --bench-iters", "pass --runs-dir", "give another -o"), every flag an error names as where
it happened (the ``where`` of UsageError, InputFileError, ...), and finds the commands that can reach it: the
command-line tree (click's own introspection) gives each command's callback and flags; the call graph (calls,
functions passed as values, classes made, whose methods then count as reached) leads from the callback to the
functions holding the strings; a kind's views count as reached by its command. Each flag must be an option of
every command that reaches the string. A flag inside a quoted command ('hpcvar bench ace --bench-iters 100') is
checked on that command instead. The number of remedies checked is printed (pytest -s) and asserted above a
floor, so that a walker that finds nothing fails.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import click

SRC = Path(__file__).resolve().parents[2] / "src"
PKG = SRC / "hpcvar"

# a flag named by a remedy: a verb, at most three words, the flag ("use --np 2", "give another --runs-dir")
REMEDY = re.compile(r"(?i)\b(?:use|raise|lower|pass|give|add|set|choose|try|drop|increase|decrease|consider|rerun|"
                    r"run it with|with)\s+(?:[a-z]+\s+){0,3}?(--[a-z][a-z0-9-]*|-o\b)")
# a command named in a remedy: 'hpcvar bench ace --bench-iters 100' (up to the closing quote)
QUOTED = re.compile(r"['\"`]hpcvar ([^'\"`]*)['\"`]")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-o\b)")
ERRORS = re.compile(r"Error$")


# ---- the command line ---------------------------------------------------------------------------------------

def command_tree() -> dict[str, tuple[set[str], str, str]]:
    """{'bench latency': (its flags, callback module, callback name)} over every command."""
    from hpcvar.cli import cli

    out: dict[str, tuple[set[str], str, str]] = {}

    def walk(cmd: click.Command, path: list[str], ctx: click.Context) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None:
                    walk(sub, [*path, name], click.Context(sub, parent=ctx, info_name=name))
            return
        flags = {o for p in cmd.params if isinstance(p, click.Option) for o in (*p.opts, *p.secondary_opts)}
        cb = cmd.callback
        while hasattr(cb, "__wrapped__"):
            cb = cb.__wrapped__
        out[" ".join(path)] = (flags, cb.__module__, cb.__qualname__)

    walk(cli, [], click.Context(cli, info_name="hpcvar"))
    return out


# ---- the source -------------------------------------------------------------------------------------------

def module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def text_of(node: ast.AST) -> str | None:
    """A string literal or an f-string (its values as '{}')."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


class Module:
    """One source module: its imports, its functions (top-level and methods; nested ones belong to their
    enclosing function), the edges out of each and the remedies in each."""

    def __init__(self, path: Path):
        self.name = module_name(path)
        self.package = self.name if path.name == "__init__.py" else self.name.rpartition(".")[0]
        self.tree = ast.parse(path.read_text(), str(path))
        self.imports: dict[str, tuple[str, str | None]] = {}  # local name -> (module, attribute or None)
        self.classes: dict[str, list[str]] = {}  # class -> its methods' qualified names
        self.functions: dict[str, ast.AST] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(self.package.split(".")[: len(self.package.split(".")) - node.level + 1]
                                    + ([base] if base else []))
                for a in node.names:
                    self.imports[a.asname or a.name] = (base, a.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    self.imports[a.asname or a.name.split(".")[0]] = (a.name if a.asname else a.name.split(".")[0],
                                                                      None)
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = []
                for sub in node.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.functions[f"{node.name}.{sub.name}"] = sub
                        self.classes[node.name].append(f"{node.name}.{sub.name}")
        body = [n for n in self.tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                  ast.ClassDef))]
        self.functions["<module>"] = ast.Module(body=body, type_ignores=[])


def load_modules() -> dict[str, Module]:
    return {m.name: m for m in (Module(p) for p in sorted(PKG.rglob("*.py")))}


def resolve(mods: dict[str, Module], mod: Module, name: str, owner: str | None) -> list[tuple[str, str]]:
    """The functions a name used in ``mod`` (inside class ``owner``) may mean: a function or class of the
    module, or one imported from another module of hpcvar."""
    if name in mod.functions:
        return [(mod.name, name)]
    if name in mod.classes:
        return [(mod.name, q) for q in mod.classes[name]] + [(mod.name, "<module>")]
    if name in mod.imports:
        m, attr = mod.imports[name]
        target = mods.get(m)
        if attr is None or target is None:
            sub = mods.get(f"{m}.{attr}") if attr else None
            return [(sub.name, "<module>")] if sub else []
        return resolve(mods, target, attr, None) if attr in target.functions or attr in target.classes or \
            attr in target.imports else []
    return []


def edges(mods: dict[str, Module], mod: Module, qual: str) -> set[tuple[str, str]]:
    """Where function ``qual`` of ``mod`` leads: names it uses (calls, functions passed on, classes made),
    module.attr of imported modules, self.method."""
    owner = qual.split(".")[0] if "." in qual else None
    out: set[tuple[str, str]] = set()
    for node in ast.walk(mod.functions[qual]):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            out.update(resolve(mods, mod, node.id, owner))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            base = node.value.id
            if base == "self" and owner and f"{owner}.{node.attr}" in mod.functions:
                out.add((mod.name, f"{owner}.{node.attr}"))
            elif base in mod.imports and mod.imports[base][1] is None:
                target = mods.get(mod.imports[base][0])
                if target is not None:
                    out.update(resolve(mods, target, node.attr, None))
            elif base in mod.imports:
                m, attr = mod.imports[base]
                target = mods.get(f"{m}.{attr}")
                if target is not None:
                    out.update(resolve(mods, target, node.attr, None))
    return out


def remedies(mod: Module, qual: str) -> list[tuple[int, str, str]]:
    """(line, flag, command named or '') of every remedy in function ``qual``, and every flag an error names
    as where it happened."""
    out = []
    docs = {id(n.value) for n in ast.walk(mod.functions[qual]) if isinstance(n, ast.Expr)}  # docstrings
    for node in ast.walk(mod.functions[qual]):
        if id(node) in docs:
            continue
        if isinstance(node, ast.Call):
            fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if ERRORS.search(fn or ""):
                where = node.args[1] if len(node.args) > 1 else next(
                    (k.value for k in node.keywords if k.arg == "where"), None)
                w = text_of(where) if where is not None else None
                if w and FLAG.fullmatch(w):
                    out.append((node.lineno, w, ""))
        text = text_of(node)
        if text is None or isinstance(node, ast.Constant) and text is None:
            continue
        quoted_spans = []
        for q in QUOTED.finditer(text):
            quoted_spans.append(q.span())
            for f in FLAG.finditer(q.group(1)):
                out.append((node.lineno, f.group(1), q.group(1)))
        for r in REMEDY.finditer(text):
            if not any(a <= r.start(1) < b for a, b in quoted_spans):
                out.append((node.lineno, r.group(1), ""))
    return out


def reached(mods: dict[str, Module], start: set[tuple[str, str]]) -> set[tuple[str, str]]:
    seen, todo = set(), list(start)
    while todo:
        node = todo.pop()
        if node in seen or node[0] not in mods or node[1] not in mods[node[0]].functions:
            continue
        seen.add(node)
        todo.extend(edges(mods, mods[node[0]], node[1]) - seen)
    return seen


def kind_views(mods: dict[str, Module], command: str) -> set[tuple[str, str]]:
    """A kind's job and views: the functions of kinds/<folder>/ (reached through the table of kinds)."""
    from hpcvar.results.kinds import kind_of

    kind = kind_of(command)
    if kind is None:
        return set()
    prefix = f"hpcvar.kinds.{kind.folder}."
    return {(m, q) for m, mod in mods.items() if m.startswith(prefix) for q in mod.functions}


def command_for(tree: dict, words: str) -> str | None:
    """The longest command the words of a quoted 'hpcvar ...' start with."""
    parts = words.split()
    for n in range(len(parts), 0, -1):
        if " ".join(parts[:n]) in tree:
            return " ".join(parts[:n])
    return None


# Functions the call graph reaches from commands whose flags cannot lead to the branch that names the flag (the
# graph sees functions, not branches). Each entry: (module, function, flag) -> why that command cannot get there.
NOT_REACHABLE = {
    ("hpcvar.compare", "check_comparable", "--force"): "the report's verdict compares with force=True",
    ("hpcvar.kinds.ace.job", "more_iters_remedy", "--bench-iters"):
        "characterize passes within='characterize', which names 'hpcvar bench ace --bench-iters' "
        "(test_self_warnings)",
    ("hpcvar.kinds.ace.job", "resolve", "--ea"): "characterize's EA is fixed and valid",
    ("hpcvar.kinds.queues.job", "PostedQueue.validate", "--traversed"): "the posted-queue kind only",
    ("hpcvar.kinds.screen.job", "validate", "--nodes"): "characterize's screen parameters are fixed and valid",
    ("hpcvar.kinds.screen.job", "validate", "--noise"): "characterize's screen parameters are fixed and valid",
    ("hpcvar.screen.plan", "plan_rounds", "--pairs"): "characterize's screen asks for pairs auto",
    ("hpcvar.launch", "oversubscription_warning", "--np"): "screen passes its own flag (Screen.np_flag)",
    ("hpcvar.launch.mpi", "default_mpiexec", "--launcher"): "'hpcvar info' catches it and shows the error",
    ("hpcvar.models.sharing", "stopgo_states", "--max-states"):
        "max_states comes from the model's parameters, set by the commands that have the flag",
    ("hpcvar.models.sharing", "_myrinet", "--samples"):
        "samples come from the model's parameters, set by the commands that have the flag; the replay core's "
        "error names sim app's --params",
    ("hpcvar.models.sharing", "explain", "--model"): "bench sharing and characterize name a known model",
    ("hpcvar.models.sharing", "check_params", "--model"): "bench sharing and characterize name a known model",
    ("hpcvar.models.sharing", "_check_gige", "--beta"): "parameters of a fit or a --params file, checked there",
    ("hpcvar.models.sharing", "_check_myrinet", "--myrinet-method"): "the default method of the commands here",
    ("hpcvar.noise.formats", "_need_freq", "--freq"): "these read traces hpcvar recorded, which carry freq_hz",
    ("hpcvar.noise.formats", "_check_span", "--freq"): "these read traces hpcvar recorded, which carry freq_hz",
    ("hpcvar.noise.trace", "JitterTrace.validate", "--freq"): "traces hpcvar recorded or synthesized carry freq_hz",
    ("hpcvar.noise.formats", "load_trace", "--from"): "an unknown format comes only from --from (sniffing "
                                                     "always gives a known one)",
    ("hpcvar.noise.formats", "save_trace", "--cpu"): "noise synth passes its own flag (cpu_flag, --ncpus)",
    ("hpcvar.sim.jitter", "simulate", "--threads"): "characterize and screen simulate with fixed valid options",
    ("hpcvar.sim.jitter", "simulate", "--window-origin"): "characterize and screen do not align on windows",
    ("hpcvar.sim.jitter", "simulate", "--tasks"): "characterize and screen simulate with fixed valid task counts",
    ("hpcvar.sim.jitter", "_native_buffer", "--tasks"): "characterize and screen simulate with fixed task counts",
    ("hpcvar.traces.load", "load_trace", "--from"): "trace cut reads with fmt auto, which gives a known format",
    ("hpcvar.traces.tit", "dialect_code", "--dialect"): "trace cut and export read with the auto dialect",
    ("hpcvar.traces.tit", "read_tit", "--flops-rate"): "trace cut reads with the default flop rate",
}

# 'hpcvar demo' runs 'hpcvar characterize --quick --np 2' (cli/demo.py): what characterize's code says, it says
# with characterize's flags beside the demo's own
RUNS_AS = {"demo": "characterize"}


def check_all() -> tuple[int, list[str]]:
    tree = command_tree()
    for cmd, other in RUNS_AS.items():
        tree[cmd] = (tree[cmd][0] | tree[other][0], *tree[cmd][1:])
    mods = load_modules()
    sites: dict[tuple[str, str], list] = {(m, q): remedies(mod, q) for m, mod in mods.items() for q in mod.functions}
    users: dict[tuple[str, str], set[str]] = defaultdict(set)
    for cmd, (_, module, qual) in tree.items():
        for node in reached(mods, {(module, qual)}) | reached(mods, kind_views(mods, cmd)):
            users[node].add(cmd)
    checked, bad = 0, []
    for node, found in sites.items():
        for line, flag, quoted in found:
            where = f"{node[0].replace('.', '/')}.py:{line}"
            if quoted:
                cmd = command_for(tree, quoted)
                if cmd is None:
                    continue  # 'hpcvar <subcommand>' spelt partly: the words are not a command
                checked += 1
                if flag not in tree[cmd][0]:
                    bad.append(f"{where}: '{flag}' is not an option of 'hpcvar {cmd}' (named as 'hpcvar {quoted}')")
                continue
            cmds = users.get(node)
            if not cmds:
                continue  # reached by no command (library code for other callers, tests)
            checked += 1
            if (node[0], node[1], flag) in NOT_REACHABLE:
                cmds = {c for c in cmds if flag in tree[c][0]} or cmds & set()
            lacking = sorted(c for c in cmds if flag not in tree[c][0])
            if lacking:
                bad.append(f"{where} ({node[1]}): '{flag}' is not an option of " + ", ".join(lacking))
    return checked, bad


def test_the_exceptions_are_still_needed():
    """Every entry of NOT_REACHABLE names a function that exists and still names its flag (no stale excuse)."""
    mods = load_modules()
    for (m, q, flag), why in NOT_REACHABLE.items():
        assert m in mods and q in mods[m].functions, (m, q)
        assert flag in {f for _, f, _ in remedies(mods[m], q)}, (m, q, flag, why)


def test_every_remedy_names_a_flag_of_the_command_that_gives_it():
    checked, bad = check_all()
    print(f"\nremedies checked: {checked}; naming a flag the command lacks: {len(bad)}")
    assert checked >= 300, checked  # the walker finds the remedies (over 300 when this test was written)
    assert not bad, "\n".join(bad)
