"""Facts of a whole file that the per-site scan does not keep, read with the stdlib parser (several times faster
than libcst) and cached per blob like the scan.

- the `assert` without a message: it has no page (the catalog holds errors with a message), but users
  paste its expression ("assert outputs.scheduler_stats is not None") with no traceback, and the lookup
  can still say where it is;
- definitions with their parameters, calls with their arguments, and locals assigned once: linked per
  release (extractor/program.py), they tell where a parameter a guard reads comes from.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from pydantic import TypeAdapter

from .model import AssertSite, BareAssert, Catalog, SourceFile

if TYPE_CHECKING:  # the lookup imports assert_key: it must not load the scanner
    from .cache import ScanCache

FACTS_VERSION = 2  # bump when what file_facts reads changes: cached facts of another version are not read
_NOT_KEY = re.compile(r"[\s()]+")


def assert_key(expression: str) -> str:
    """An expression as the lookup compares it, however it was wrapped or quoted: no spaces, no parentheses,
    double quotes. `assert (a\n  <= b)` and `assert a <= b` have the same key. The site's box does the same."""
    return _NOT_KEY.sub("", expression.replace("'", '"'))


@dataclass(frozen=True)
class Definition:
    qualname: str  # "Class.method", "function", "Class" for a class
    line: int
    params: tuple[str, ...]  # in order, `self` included; "*" for *args or **kwargs; none for a class


@dataclass(frozen=True)
class Call:
    caller: str  # qualified name of the function making the call, "" at module level
    line: int
    name: str  # the callee's last name: `self.f(x)` -> "f", `Config(x)` -> "Config"
    receiver: str  # what it is called on: "self", "super()", another expression's text, "" for a plain name
    args: tuple[str, ...]  # each positional argument's text; "*" for a starred one
    keywords: tuple[tuple[str, str], ...]  # (name, text); ("*", text) for **kwargs


@dataclass(frozen=True)
class Binding:
    function: str  # where: its qualified name
    name: str  # a local given one value by a plain `name = value`
    value: str  # the value's text


@dataclass(frozen=True)
class FileFacts:
    asserts: tuple[BareAssert, ...] = ()
    definitions: tuple[Definition, ...] = ()
    calls: tuple[Call, ...] = ()
    bindings: tuple[Binding, ...] = ()  # only locals assigned once in their function


_FILE_FACTS = TypeAdapter(FileFacts)
MAX_TEXT = 300  # characters of an argument or a value kept: longer ones are no setting


class _Facts(ast.NodeVisitor):
    def __init__(self, path: str, text: str) -> None:
        self.path, self.lines = path, text.splitlines()
        self.scope: list[str] = []
        self.asserts: list[BareAssert] = []
        self.definitions: list[Definition] = []
        self.calls: list[Call] = []
        self.assigned: dict[tuple[str, str], list[str]] = {}

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        a = node.args
        params = [p.arg for p in [*a.posonlyargs, *a.args]] + (["*"] if a.vararg else []) + [p.arg for p in a.kwonlyargs]
        self.definitions.append(Definition(".".join([*self.scope, node.name]), node.lineno, tuple(params)))
        self._scoped(node)

    def _class(self, node: ast.ClassDef) -> None:
        self.definitions.append(Definition(".".join([*self.scope, node.name]), node.lineno, ()))
        self._scoped(node)

    def _scoped(self, node: ast.AST) -> None:
        self.scope.append(node.name)  # type: ignore[attr-defined]
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _function
    visit_ClassDef = _class

    def visit_Assert(self, node: ast.Assert) -> None:
        if node.msg is None:
            self.asserts.append(BareAssert(self.path, node.lineno, ".".join(self.scope), assert_key(self._text(node.test))))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name:
            receiver = self._text(func.value)[:MAX_TEXT] if isinstance(func, ast.Attribute) else ""
            args = tuple("*" if isinstance(x, ast.Starred) else self._text(x)[:MAX_TEXT] for x in node.args)
            keywords = tuple((k.arg or "*", self._text(k.value)[:MAX_TEXT]) for k in node.keywords)
            self.calls.append(Call(".".join(self.scope), node.lineno, name, receiver, args, keywords))
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if self.scope and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.assigned.setdefault((".".join(self.scope), node.targets[0].id), []).append(self._text(node.value)[:MAX_TEXT])
        self.generic_visit(node)

    def _text(self, node: ast.AST) -> str:
        # ast.get_source_segment re-splits the whole file on every call; the lines are split once here.
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1  # type: ignore[attr-defined]
        if first == last:
            return self.lines[first][node.col_offset : node.end_col_offset]  # type: ignore[attr-defined]
        return "\n".join([self.lines[first][node.col_offset :], *self.lines[first + 1 : last], self.lines[last][: node.end_col_offset]])  # type: ignore[attr-defined]

    def facts(self) -> FileFacts:
        bindings = tuple(Binding(f, n, v[0]) for (f, n), v in self.assigned.items() if len(v) == 1)
        return FileFacts(tuple(self.asserts), tuple(self.definitions), tuple(self.calls), bindings)


def file_facts(path: str, data: bytes) -> FileFacts:
    """What the whole-program stage needs of one file; nothing when it does not parse (the scan reports that)."""
    text = data.decode("utf-8", errors="replace")
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return FileFacts()
    visitor = _Facts(path, text)
    visitor.visit(tree)
    return visitor.facts()


def file_asserts(path: str, data: bytes) -> tuple[BareAssert, ...]:
    """The asserts without a message of one file."""
    return file_facts(path, data).asserts


def facts_key(path: str, blob: str) -> str:
    return hashlib.sha256(f"facts\x1f{FACTS_VERSION}\x1f{path}\x1f{blob}".encode()).hexdigest()


def release_facts(files: Sequence[SourceFile], cache: "ScanCache") -> dict[str, FileFacts]:
    """Each file's facts, by path, from the cache where a blob was read before."""
    keys = [facts_key(f.path, f.blob) for f in files]
    stored = cache.get_many(keys)
    found: dict[str, FileFacts] = {}
    new: dict[str, bytes] = {}
    for f, key in zip(files, keys):
        if key in stored:
            found[f.path] = _FILE_FACTS.validate_json(stored[key])
            continue
        found[f.path] = file_facts(f.path, f.data)
        new[key] = _FILE_FACTS.dump_json(found[f.path])
    if new:
        cache.put_many(new)
        cache.commit()
    return found


def release_asserts(facts: dict[str, FileFacts]) -> tuple[BareAssert, ...]:
    """Every assert without a message of a release."""
    return tuple(sorted((a for f in facts.values() for a in f.asserts), key=lambda a: (a.path, a.line)))


def assert_sites(catalogs: Sequence[Catalog]) -> tuple[AssertSite, ...]:
    """The asserts without a message of `catalogs` (oldest first), one per file, function and expression,
    with its line in each release that has it."""
    lines: dict[tuple[str, str, str], list[tuple[str, int]]] = {}
    for catalog in catalogs:
        for a in catalog.bare_asserts:
            seen = lines.setdefault((a.path, a.function, a.expression), [])
            if not seen or seen[-1][0] != catalog.snapshot.ref:  # the same check twice in a function: its first
                seen.append((catalog.snapshot.ref, a.line))
    return tuple(AssertSite(*key, tuple(found)) for key, found in sorted(lines.items()))

