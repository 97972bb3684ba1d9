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
import bisect
import hashlib
from dataclasses import dataclass, replace
from typing import Sequence

from ..model import ExceptionClass, RaiseSite


@dataclass(frozen=True)
class Unit:
    start: int  # first line, decorators included
    end: int
    kind: str  # "def" or "class"
    name: str
    text: str  # its lines, exactly as written


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Layout:
    units: tuple[Unit, ...]
    context: str  # what a definition's scan may read outside itself (see `top_units`)


def top_units(text: str) -> Layout | None:
    """The module's top-level functions and classes, and their context; None when CPython cannot parse it.

    The context is every other top-level statement but bare expressions (the docstring, calls),
    which a definition's scan never reads, and the class names. Positions are left out on
    purpose: a definition moved by an edit elsewhere keeps its key.
    """
    try:
        tree = ast.parse(text)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return None
    lines = text.split("\n")
    units, context = [], []
    for stmt in tree.body:
        start = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
        end = stmt.end_lineno or stmt.lineno
        if isinstance(stmt, _DEFS):
            kind = "class" if isinstance(stmt, ast.ClassDef) else "def"
            units.append(Unit(start, end, kind, stmt.name, "\n".join(lines[start - 1 : end])))
        elif not isinstance(stmt, ast.Expr):
            context.append("\n".join(lines[start - 1 : end]))
    context.append(",".join(sorted(u.name for u in units if u.kind == "class")))
    return Layout(tuple(units), "\n".join(context))


def unit_key(version: str, path: str, context: str, unit: Unit) -> str:
    return _digest(version, path, context, unit.kind, unit.text)


def module_key(version: str, path: str, text: str, units: Sequence[Unit]) -> str:
    """The key of the module-level statements' own results: the text with every definition stubbed, positions included."""
    return _digest(version, path, "module", stubbed(text, units, range(len(units))))


def stubbed(text: str, units: Sequence[Unit], which) -> str:
    """The text with the chosen units replaced by stubs of the same lines: a class or function of the
    same name whose body is blank lines and one `pass`, so line numbers, class names and the
    definitions' extents stay as they were."""
    lines = text.split("\n")
    for i in which:
        u = units[i]
        head = f"class {u.name}:" if u.kind == "class" else f"def {u.name}():"
        if u.start == u.end:
            lines[u.start - 1] = f"{head} pass"
            continue
        lines[u.start - 1] = head
        for n in range(u.start, u.end - 1):
            lines[n] = ""
        lines[u.end - 1] = "    pass"
    return "\n".join(lines)


def unit_of(line: int, units: Sequence[Unit]) -> int | None:
    i = bisect.bisect_right([u.start for u in units], line) - 1
    return i if i >= 0 and line <= units[i].end else None


def bounds(line: int, units: Sequence[Unit], last: int) -> tuple[int, int]:
    """The lines a site's context may show: its own definition, or the gap between two definitions."""
    i = bisect.bisect_right([u.start for u in units], line) - 1
    if i >= 0 and line <= units[i].end:
        return units[i].start, units[i].end
    return (units[i].end + 1 if i >= 0 else 1), (units[i + 1].start - 1 if i + 1 < len(units) else last)


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


def shift_class(cls: ExceptionClass, delta: int) -> ExceptionClass:
    return replace(cls, line=cls.line + delta if cls.line else cls.line)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
