"""Facts of a whole file that the per-site scan does not keep, read with the stdlib parser (several times faster
than libcst) and cached per blob like the scan.

The first fact is the `assert` without a message: it has no page (the catalog holds errors with a message),
but users paste its expression ("assert outputs.scheduler_stats is not None") with no traceback, and the
lookup can still say where it is.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from typing import TYPE_CHECKING, Sequence

from .model import AssertSite, BareAssert, Catalog, SourceFile

if TYPE_CHECKING:  # the lookup imports assert_key: it must not load the scanner
    from .cache import ScanCache

FACTS_VERSION = 1  # bump when what file_facts reads changes: cached facts of another version are not read
_NOT_KEY = re.compile(r"[\s()]+")


def assert_key(expression: str) -> str:
    """An expression as the lookup compares it, however it was wrapped or quoted: no spaces, no parentheses,
    double quotes. `assert (a\n  <= b)` and `assert a <= b` have the same key. The site's box does the same."""
    return _NOT_KEY.sub("", expression.replace("'", '"'))


class _Asserts(ast.NodeVisitor):
    def __init__(self, path: str, text: str) -> None:
        self.path, self.lines = path, text.splitlines()
        self.scope: list[str] = []
        self.found: list[BareAssert] = []

    def _scoped(self, node: ast.AST) -> None:
        self.scope.append(node.name)  # type: ignore[attr-defined]
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_Assert(self, node: ast.Assert) -> None:
        if node.msg is None:
            self.found.append(BareAssert(self.path, node.lineno, ".".join(self.scope), assert_key(self._text(node.test))))

    def _text(self, node: ast.expr) -> str:
        # ast.get_source_segment re-splits the whole file on every call; the lines are split once here.
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        if first == last:
            return self.lines[first][node.col_offset : node.end_col_offset]
        return "\n".join([self.lines[first][node.col_offset :], *self.lines[first + 1 : last], self.lines[last][: node.end_col_offset]])


def file_asserts(path: str, data: bytes) -> tuple[BareAssert, ...]:
    """The asserts without a message of one file; none when it does not parse (the scan reports that)."""
    text = data.decode("utf-8", errors="replace")
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return ()
    visitor = _Asserts(path, text)
    visitor.visit(tree)
    return tuple(visitor.found)


def facts_key(path: str, blob: str) -> str:
    return hashlib.sha256(f"facts\x1f{FACTS_VERSION}\x1f{path}\x1f{blob}".encode()).hexdigest()


def release_asserts(files: Sequence[SourceFile], cache: "ScanCache") -> tuple[BareAssert, ...]:
    """Every assert without a message of a release's files, from the cache where a blob was read before."""
    keys = [facts_key(f.path, f.blob) for f in files]
    stored = cache.get_many(keys)
    found: list[BareAssert] = []
    new: dict[str, bytes] = {}
    for f, key in zip(files, keys):
        if key in stored:
            rows = json.loads(stored[key])
            found += [BareAssert(f.path, line, function, expression) for line, function, expression in rows]
            continue
        asserts = file_asserts(f.path, f.data)
        new[key] = json.dumps([[a.line, a.function, a.expression] for a in asserts]).encode()
        found += asserts
    if new:
        cache.put_many(new)
        cache.commit()
    return tuple(sorted(found, key=lambda a: (a.path, a.line)))


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

