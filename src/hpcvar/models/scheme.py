"""Communication schemes: named point-to-point communications between nodes.

The language (docs/formats.md, "Communication schemes"), one statement per line
or separated by ``;`` (inline schemes on the command line)::

    # Figure 2, third scheme: an outgoing conflict of degree 3
    nodes 0 1 2 3          # optional; when given, every node used must be declared
    size 20MiB             # optional default size of the communications below
    a: 0 -> 1
    b: 0 -> 2 4MiB         # a size of its own
    0 -> 3                 # unnamed: gets the next free letter (c)

Node names are numbers or identifiers (letters, digits, ``_``, ``-``, ``.``).
Every error names ``file:line:column`` (``<inline>:1:col`` for inline text).
Node order (used to place nodes on hosts, docs/models.md): the ``nodes`` line if
given, else numerically when every name is a number, else first appearance.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from pathlib import Path

from hpcvar import units
from hpcvar.errors import InputFileError, UsageError

INLINE = "<inline>"
_NODE = r"[A-Za-z0-9_][A-Za-z0-9_.\-]*"
_TOKEN = re.compile(r"\s*(->|:|(?:[A-Za-z0-9_.]|-(?!>))+|\S)")  # '0->1' is three tokens
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NODE_RE = re.compile(_NODE)
_KEYWORDS = {"nodes", "size"}


@dataclass(frozen=True)
class Comm:
    name: str
    src: str
    dst: str
    size_bytes: int | None = None  # None: the benchmark's --size
    line: int = 0


@dataclass
class Scheme:
    comms: list[Comm]
    nodes: list[str] = field(default_factory=list)  # in placement order
    source: str = INLINE

    def pairs(self) -> list[tuple[str, str]]:
        return [(c.src, c.dst) for c in self.comms]

    def node_index(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.nodes)}

    def to_text(self) -> str:
        lines = [f"nodes {' '.join(self.nodes)}"]
        for c in self.comms:
            size = f" {c.size_bytes}" if c.size_bytes is not None else ""
            lines.append(f"{c.name}: {c.src} -> {c.dst}{size}")
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict:
        return {"nodes": list(self.nodes), "communications": [
            {"name": c.name, "src": c.src, "dst": c.dst, "size_bytes": c.size_bytes} for c in self.comms]}


def _tokens(text: str, col0: int) -> list[tuple[str, int]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            break
        out.append((m.group(1), col0 + m.start(1)))
        pos = m.end()
    return out


def _auto_names(used: set[str]):
    for n in range(1, 4):
        for letters in _product(string.ascii_lowercase, n):
            if letters not in used:
                yield letters


def _product(alphabet: str, n: int):
    if n == 1:
        yield from alphabet
        return
    for head in alphabet:
        for tail in _product(alphabet, n - 1):
            yield head + tail


def parse_scheme(text: str, source: str = INLINE) -> Scheme:
    """Parse scheme text; ``source`` names it in errors (a path or ``<inline>``)."""
    p = _SchemeParser(source)
    for lineno, line in enumerate(text.splitlines() or [""], start=1):
        body = line.split("#", 1)[0]
        col_base = 1
        for stmt in body.split(";"):
            toks = _tokens(stmt, col_base)
            col_base += len(stmt) + 1
            if not toks:
                continue
            head = toks[0][0]
            if head in _KEYWORDS and (len(toks) == 1 or toks[1][0] not in (":", "->")):
                p.keyword(toks, lineno)
            else:
                p.communication(toks, lineno)
    return p.scheme()


class _SchemeParser:
    """The state of parse_scheme: the declared nodes, the default size, the communications read so far."""

    def __init__(self, source: str):
        self.source = source
        self.declared: list[str] | None = None
        self.default_size: int | None = None
        self.raw: list[tuple[str | None, str, str, int | None, int, int]] = []  # name, src, dst, size, line, col
        self.names: set[str] = set()

    def err(self, what: str, line: int, col: int, todo: str) -> InputFileError:
        return InputFileError(what, self.source, line, col, todo)

    def keyword(self, toks: list[tuple[str, int]], lineno: int) -> None:
        """'nodes A B ...' or 'size SIZE'."""
        (head, hcol), args = toks[0], toks[1:]
        if head != "nodes":
            if len(args) != 1:
                raise self.err("'size' takes one size", lineno, hcol, "Write e.g. 'size 20MiB'")
            self.default_size = _size(args[0][0], self.source, lineno, args[0][1])
            return
        if self.declared is not None:
            raise self.err("a second 'nodes' line", lineno, hcol, "Declare every node on one 'nodes' line")
        if not args:
            raise self.err("'nodes' lists no node", lineno, hcol, "Write e.g. 'nodes 0 1 2'")
        self.declared = []
        for tok, c in args:
            if not _NODE_RE.fullmatch(tok):
                raise self.err(f"'{tok}' is not a node name", lineno, c,
                               "Use numbers or names of letters, digits, '_', '-', '.'")
            if tok in self.declared:
                raise self.err(f"node '{tok}' is declared twice", lineno, c, "Remove the duplicate")
            self.declared.append(tok)

    def communication(self, toks: list[tuple[str, int]], lineno: int) -> None:
        """'[name:] SRC -> DST [SIZE]'."""
        head, hcol = toks[0]
        name, rest = None, toks
        if len(toks) >= 2 and toks[1][0] == ":":
            name, rest = self.new_name(head, lineno, hcol), toks[2:]
        if len(rest) < 3 or rest[1][0] != "->":
            c = rest[1][1] if len(rest) >= 2 else (rest[0][1] + len(rest[0][0]) if rest else
                                                   toks[-1][1] + len(toks[-1][0]))
            raise self.err("expected 'SRC -> DST' here", lineno, c,
                           "Write a communication as 'a: 0 -> 1' (optionally followed by a size such as 4MiB)")
        (src, scol), _, (dst, dcol) = rest[0], rest[1], rest[2]
        for tok, c in ((src, scol), (dst, dcol)):
            self.check_node(tok, lineno, c)
        if src == dst:
            raise self.err(f"communication from node '{src}' to itself", lineno, scol,
                           "A scheme describes network transfers between two different nodes")
        size = self.default_size
        if len(rest) >= 4:
            size = _size(rest[3][0], self.source, lineno, rest[3][1])
        if len(rest) > 4:
            raise self.err(f"unexpected '{rest[4][0]}'", lineno, rest[4][1],
                           "A line holds 'name: SRC -> DST [SIZE]'; separate statements with ';' or new lines")
        self.raw.append((name, src, dst, size, lineno, hcol))

    def new_name(self, name: str, lineno: int, col: int) -> str:
        if not _NAME_RE.fullmatch(name):
            raise self.err(f"'{name}' is not a communication name", lineno, col,
                           "Names start with a letter or '_' and contain letters, digits, '_'")
        if name in self.names:
            raise self.err(f"communication '{name}' is defined twice", lineno, col, "Give each a distinct name")
        self.names.add(name)
        return name

    def check_node(self, tok: str, lineno: int, col: int) -> None:
        if not _NODE_RE.fullmatch(tok):
            raise self.err(f"'{tok}' is not a node name", lineno, col,
                           "Use numbers or names of letters, digits, '_', '-', '.'")
        if self.declared is not None and tok not in self.declared:
            raise self.err(f"unknown node '{tok}'", lineno, col,
                           f"Declared nodes are {' '.join(self.declared)}; add it to the 'nodes' line")

    def scheme(self) -> Scheme:
        """The communications read (unnamed ones named in order), and the nodes: declared, else as met."""
        if not self.raw:
            raise InputFileError("the scheme has no communication", self.source, None, None,
                                 "Write at least one line such as 'a: 0 -> 1'")
        gen = _auto_names(self.names)
        comms = [Comm(name or next(gen), src, dst, size, line) for name, src, dst, size, line, _ in self.raw]
        if self.declared is not None:
            return Scheme(comms, self.declared, self.source)
        seen: list[str] = []
        for comm in comms:
            for n in (comm.src, comm.dst):
                if n not in seen:
                    seen.append(n)
        nodes = sorted(seen, key=int) if all(n.isdigit() for n in seen) else seen
        return Scheme(comms, nodes, self.source)


def _size(tok: str, source: str, line: int, col: int) -> int:
    try:
        size = units.parse_size(tok, "size")
    except UsageError:
        raise InputFileError(f"'{tok}' is not a size", source, line, col,
                             "Use bytes or a unit: 4096, 64KiB, 20MiB") from None
    if size <= 0:
        raise InputFileError("a communication size must be positive", source, line, col, "Use e.g. 20MiB")
    return size


def load_scheme(ref: str) -> Scheme:
    """A scheme from a file path or, when ``ref`` contains '->' and is no file, inline text."""
    p = Path(ref)
    if "->" in ref and not p.exists():
        return parse_scheme(ref, INLINE)
    if not p.is_file():
        raise UsageError(f"scheme file '{ref}' does not exist", "SCHEME",
                         "Give a scheme file (see examples/schemes/) or an inline scheme such as 'a: 0->1; b: 0->2'")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"scheme file '{ref}' is not UTF-8 text (byte {e.start})", "SCHEME",
                         "Give a scheme file in UTF-8 text (see examples/schemes/)") from None
    except OSError as e:
        raise UsageError(f"cannot read scheme file '{ref}': {e}", "SCHEME", "Check the path and its permissions") \
            from None
    return parse_scheme(text, str(p))


def scheme_from_pairs(pairs: list[tuple[str, str]]) -> Scheme:
    """A scheme from (src, dst) pairs (the programmatic form), validated like a file."""
    text = "\n".join(f"{s} -> {d}" for s, d in pairs)
    return parse_scheme(text, "<communications>")


__all__ = ["Comm", "INLINE", "Scheme", "load_scheme", "parse_scheme", "scheme_from_pairs"]
