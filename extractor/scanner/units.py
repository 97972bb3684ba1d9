"""A module's top-level definitions, the unit the scan cache stores below a whole file.

Between two vLLM releases most changed files change in a few functions only. A
definition's scan depends on its own text and on what the module around it provides
(imports, constants, the names of its classes), not on where it sits: so its result is
stored with line numbers relative to its start, under a key made of its text and that
context, and a changed file is scanned with its cached definitions replaced by stubs of
the same lines.
"""

from __future__ import annotations

import ast
import functools
import bisect
import hashlib
from dataclasses import dataclass, replace
from typing import Sequence

from ..model import AttributeFact, ExceptionClass, RaiseSite


@dataclass(frozen=True)
class Unit:
    start: int  # first line, decorators included
    end: int
    kind: str  # "def" (top-level function), "class" (top-level class) or "method" (a function in one)
    name: str
    text: str  # its lines as written; for a class, with its methods stubbed (`stubbed`)
    context: str  # the module-level statements binding a name it uses, the local classes it names, its class
    owner: int | None = None  # a method's class, as an index into the units


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@functools.lru_cache(maxsize=2)
def parse(text: str) -> ast.Module | None:
    """CPython's tree of a module; None when CPython cannot parse it. The last trees are kept: the whole-program
    facts (extractor/facts.py) read the tree the scan just parsed, and neither changes it."""
    try:
        return ast.parse(text)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return None


def depth(tree: ast.AST) -> int:
    """How deep the tree nests (iteratively: a deep tree must not exhaust the stack here either)."""
    best, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        best = max(best, d)
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return best


def top_units(text: str, tree: ast.Module | None = None) -> tuple[Unit, ...] | None:
    """The module's top-level functions and classes and the classes' methods, in source order; None when
    CPython cannot parse it.

    A definition's scan reads, outside itself, only names it uses: resolved through the
    module's imports, inlined from its string constants, or known as its classes. So each
    unit's context is the text of the module-level statements that bind a name it uses.
    Positions are left out on purpose: a definition moved by an edit elsewhere keeps its key.
    A class is a unit of its own lines outside its methods: most edits touch one method.
    """
    tree = tree or parse(text)
    if tree is None:
        return None
    lines = text.split("\n")
    bindings: dict[str, list[str]] = {}
    defs = []
    for stmt in tree.body:
        if isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
            defs.append(stmt)
        elif not isinstance(stmt, ast.Expr):
            for name in dict.fromkeys(_bound_names(stmt)):
                bindings.setdefault(name, []).append(_source(lines, stmt))
    classes = {stmt.name for stmt in defs if isinstance(stmt, ast.ClassDef)}

    def context(nodes: list[ast.AST], *extra: str) -> str:
        used = sorted({n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)})
        found = [f"{name} = {' | '.join(bindings[name])}" for name in used if name in bindings]
        return "\n".join([*found, *(f"class {name}" for name in used if name in classes), *extra])

    units: list[Unit] = []
    for stmt in defs:
        start, end = _extent(stmt)
        if isinstance(stmt, _FUNCTIONS):
            units.append(Unit(start, end, "def", stmt.name, _source(lines, stmt), context([stmt])))
            continue
        methods = [m for m in stmt.body if isinstance(m, _FUNCTIONS)]
        owner = len(units)
        members = [Unit(*_extent(m), "method", m.name, _source(lines, m), context([m], f"in class {stmt.name}"), owner) for m in methods]
        rest = [*stmt.decorator_list, *stmt.bases, *stmt.keywords, *(b for b in stmt.body if not isinstance(b, _FUNCTIONS))]
        # __init__ stays in the class's own text: the message `raise Cls()` carries is read from it.
        shell = stubbed("\n".join(lines[start - 1 : end]), [_moved(m, 1 - start) for m in members], [k for k, m in enumerate(members) if m.name != "__init__"])
        units.append(Unit(start, end, "class", stmt.name, shell, context(rest)))
        units.extend(members)
    return tuple(units)


def _extent(stmt: ast.stmt) -> tuple[int, int]:
    return min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))]), stmt.end_lineno or stmt.lineno


def _source(lines: list[str], stmt: ast.stmt) -> str:
    start, end = _extent(stmt)
    return "\n".join(lines[start - 1 : end])


def _moved(unit: Unit, delta: int) -> Unit:
    return replace(unit, start=unit.start + delta, end=unit.end + delta)


def _bound_names(stmt: ast.stmt):
    for node in ast.walk(stmt):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                yield alias.asname or alias.name.partition(".")[0] if isinstance(node, ast.Import) else alias.asname or alias.name
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            yield node.id


def unit_key(version: str, path: str, unit: Unit) -> str:
    return _digest(version, path, unit.context, unit.kind, unit.text)


def module_key(version: str, path: str, text: str, units: Sequence[Unit]) -> str:
    """The key of the module-level statements' own results: the text with every definition stubbed, positions included."""
    return _digest(version, path, "module", stubbed(text, units, [i for i, u in enumerate(units) if u.owner is None]))


def stubbed(text: str, units: Sequence[Unit], which) -> str:
    """The text with the chosen units replaced by stubs of the same lines: a class or function of the
    same name and indentation whose body is blank lines and one `pass`, so line numbers, class
    names and the definitions' extents stay as they were."""
    lines = text.split("\n")
    for i in which:
        u = units[i]
        first = lines[u.start - 1]
        indent = first[: len(first) - len(first.lstrip())]
        head = f"{indent}class {u.name}:" if u.kind == "class" else f"{indent}def {u.name}():"
        if u.start == u.end:
            lines[u.start - 1] = f"{head} pass"
            continue
        lines[u.start - 1] = head
        for n in range(u.start, u.end - 1):
            lines[n] = ""
        lines[u.end - 1] = f"{indent}    pass"
    return "\n".join(lines)


def unit_of(line: int, units: Sequence[Unit]) -> int | None:
    """The innermost unit holding `line`: a method before its class. Units are in source order,
    a class before its methods, so their first lines are sorted."""
    i = bisect.bisect_right(units, line, key=lambda u: u.start) - 1
    if i < 0:
        return None
    if line <= units[i].end:
        return i
    owner = units[i].owner
    return owner if owner is not None and line <= units[owner].end else None


def bounds(line: int, units: Sequence[Unit], last: int) -> tuple[int, int]:
    """The lines a site's context may show: its own function, or the gap between two definitions
    (of the module, or of the class it is in), so that no unit's scan shows another's lines."""
    i = unit_of(line, units)
    if i is not None and units[i].kind != "class":
        return units[i].start, units[i].end
    low, high = (units[i].start, units[i].end) if i is not None else (1, last)
    for u in units:
        if u.owner == i:
            if u.end < line:
                low = max(low, u.end + 1)
            elif u.start > line:
                high = min(high, u.start - 1)
    return low, high


def shift_site(site: RaiseSite, delta: int) -> RaiseSite:
    """The site with every line number moved by `delta` (0 stays 0: it means "no line")."""
    def at(n: int) -> int:
        return n + delta if n else n

    return replace(
        site,
        line=at(site.line),
        end_line=at(site.end_line),
        guard=tuple(replace(c, line=at(c.line)) for c in site.guard),
        assignments=tuple(replace(a, line=at(a.line)) for a in site.assignments),
        code=replace(site.code, first_line=at(site.code.first_line)),
    )


def shift_attribute(fact: AttributeFact, delta: int) -> AttributeFact:
    return replace(fact, line=fact.line + delta)


def shift_class(cls: ExceptionClass, delta: int) -> ExceptionClass:
    return replace(cls, line=cls.line + delta if cls.line else cls.line)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
