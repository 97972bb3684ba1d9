"""Raise and assert sites in one parsed module, with their guards, messages and context; and its classes."""

from __future__ import annotations

import ast
import re
import string
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Iterator, Optional, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState

from .. import messages
from ..facts import module_name
from ..messages import Part
from .units import Unit, bounds, unit_of
from ..model import (
    Assignment,
    AttributeFact,
    Code,
    Condition,
    ExceptionClass,
    ExceptionRef,
    Message,
    RaiseSite,
)

CONTEXT_AFTER = 12  # lines shown below a raise
CONTEXT_ABOVE_MAX = 40  # never more lines than this above a raise, however far its guard starts
MAX_ASSIGNMENTS = 12
MAX_FACT = 200  # characters of an attribute's value kept as a fact
MAX_VARIANTS = 8  # other messages a site can produce, kept for lookup and the page
# A value that reads a setting: what can lead to a user's lever (a parallel group's size is a flag's value).
_SETTING_READ = re.compile(r"config|\benvs\.|\bargs\b|parallel_world_size|_group\(\)\.world_size")
MESSAGE_KEYWORDS = ("detail", "message", "msg")
MAX_EXITS = 8  # the nearest early exits of a block that a raise records as guards

_FORMATTER = string.Formatter()
_PERCENT = re.compile(r"(%%|%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?[diouxXeEfFgGcrsa])")
_PERCENT_KEY = re.compile(r"%\(([^)]*)\)")

_POSITIONED = (
    cst.FunctionDef,
    cst.ClassDef,
    cst.If,
    cst.While,
    cst.For,
    cst.Try,
    cst.TryStar,
    cst.With,
    cst.Match,
    cst.ExceptHandler,
    cst.ExceptStarHandler,
    cst.Raise,
    cst.Assert,
    cst.Assign,
    cst.AnnAssign,
    cst.AugAssign,
    cst.Expr,  # `errors.append(...)`: a reason added before the raise, or after it
)


class _LineRecorder(CodegenState):
    """Codegen that notes the lines of the few node kinds the scan needs.

    libcst's PositionProvider records a full range for every node and costs ~95 ms a file
    on vLLM; generating the code once and counting newlines costs ~5 ms.
    """

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.line = 1
        self.lines: dict[cst.CSTNode, tuple[int, int]] = {}

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.line += value.count("\n")

    @contextmanager
    def record_syntactic_position(
        self,
        node: cst.CSTNode,
        *,
        start_node: Optional[cst.CSTNode] = None,
        end_node: Optional[cst.CSTNode] = None,
    ) -> Iterator[None]:
        if not isinstance(node, _POSITIONED):
            yield
            return
        start = self.line
        yield
        end = self.line
        if self.tokens and self.tokens[-1].endswith("\n"):
            end -= 1  # a compound statement's own last token is the newline ending it
        self.lines[node] = (start, max(start, end))


def node_lines(module: cst.Module, tree: ast.Module | None = None, text: str = "") -> dict[cst.CSTNode, tuple[int, int]]:
    """The first and last lines of the statements the scan needs. From CPython's tree of the same text, walked beside
    libcst's, where there is one (ten times faster than generating the code); else by generating it."""
    if tree is not None:
        try:
            return _lines_from_tree(module, tree, text.split("\n"))
        except _Mismatch:
            pass  # a tree of another shape: the code generation below is right whatever it is
    recorder = _LineRecorder(module)
    module._codegen(recorder)  # the same entry point libcst's position providers use
    return recorder.lines


_RENAMED = {"Del": "Delete"}  # libcst's names of CPython's statements where they differ (`async def` is a FunctionDef too)


class _Mismatch(Exception):
    """The two trees do not hold the same statements."""


def _statements(block: cst.BaseSuite | cst.Module) -> list[cst.CSTNode]:
    """A block's statements as CPython's tree has them: each small statement of a line (`a = 1; b()`) on its own."""
    if not isinstance(block, (cst.IndentedBlock, cst.Module)):  # `if x: a; b`
        return list(block.body)
    found: list[cst.CSTNode] = []
    for statement in block.body:
        found += statement.body if isinstance(statement, cst.SimpleStatementLine) else [statement]
    return found


def _lines_from_tree(module: cst.Module, tree: ast.Module, text: list[str]) -> dict[cst.CSTNode, tuple[int, int]]:
    """node_lines from CPython's line numbers. A compound statement ends where code generation ends it: at the last
    line of its last block, comment lines indented into the block after its last statement (libcst's footer) included;
    a statement whose last line ends in a backslash goes on to the next."""
    lines: dict[cst.CSTNode, tuple[int, int]] = {}

    def continued(end: int) -> int:
        while end < len(text) and text[end - 1].rstrip().endswith("\\") and "#" not in text[end - 1]:
            end += 1
        return end

    def block(suite, statements: list[ast.stmt]) -> int:
        mine = _statements(suite)
        if len(mine) != len(statements):
            raise _Mismatch
        end = 0
        for node, twin in zip(mine, statements):
            end = statement(node, twin)
        return end + len(suite.footer) if isinstance(suite, cst.IndentedBlock) else end

    def statement(node: cst.CSTNode, twin: ast.stmt) -> int:
        if type(twin).__name__ not in (type(node).__name__, "Async" + type(node).__name__, _RENAMED.get(type(node).__name__)):
            raise _Mismatch(type(node).__name__, type(twin).__name__)
        end = continued(twin.end_lineno or twin.lineno)
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.With)):
            end = block(node.body, twin.body)
        elif isinstance(node, cst.If):
            end = block(node.body, twin.body)
            if isinstance(node.orelse, cst.If):  # `elif`
                end = statement(node.orelse, twin.orelse[0])
            elif node.orelse is not None:
                end = block(node.orelse.body, twin.orelse)
        elif isinstance(node, (cst.While, cst.For)):
            end = block(node.body, twin.body)
            if node.orelse is not None:
                end = block(node.orelse.body, twin.orelse)
        elif isinstance(node, (cst.Try, cst.TryStar)):
            end = block(node.body, twin.body)
            if len(node.handlers) != len(twin.handlers):
                raise _Mismatch
            for handler, caught in zip(node.handlers, twin.handlers):
                end = block(handler.body, caught.body)
                lines[handler] = (caught.lineno, max(caught.lineno, end))
            if node.orelse is not None:
                end = block(node.orelse.body, twin.orelse)
            if node.finalbody is not None:
                end = block(node.finalbody.body, twin.finalbody)
        elif isinstance(node, cst.Match):
            if len(node.cases) != len(twin.cases):
                raise _Mismatch
            for case, twin_case in zip(node.cases, twin.cases):
                end = block(case.body, twin_case.body)
        if isinstance(node, _POSITIONED):
            lines[node] = (twin.lineno, max(twin.lineno, end))
        return end

    block(module, tree.body)
    return lines


@dataclass
class _Scope:
    name: str
    kind: str  # module, class, function
    line: int
    end_line: int
    doc: str | None = None
    guards: list[tuple[Condition, cst.CSTNode | None]] = field(default_factory=list)
    handlers: list[tuple[str, str | None]] = field(default_factory=list)  # (caught types as written, bound name)
    exits: list[list[tuple[Condition, cst.CSTNode]]] = field(default_factory=lambda: [[]])  # per enclosing block
    # (name, op, value, line, code, the guards it sits under: the conditions of its enclosing blocks)
    assigns: list[tuple[str, str, cst.CSTNode, int, str, tuple[Condition, ...]]] = field(default_factory=list)
    items: list[tuple[str, cst.BaseExpression, int]] = field(default_factory=list)  # `errors.append(x)`: (list, x, line)


@dataclass
class _PendingSite:
    """A site whose exception name is resolved once all of the module's imports are known."""

    site: RaiseSite
    dotted: str | None  # the name to resolve, or None when `site.exception` is final
    caught: tuple[str, ...] = ()  # for re-raises: the handler's types as written
    unit: int | None = None  # the top-level definition it is in, whose own imports it sees


def dotted_name(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted_name(node.value)
        return f"{head}.{node.attr.value}" if head else None
    return None


def read_names(node: cst.CSTNode) -> list[str]:
    """Names an expression reads (roots of attribute chains), in order, without keyword names."""
    found: list[str] = []

    def walk(n: cst.CSTNode) -> None:
        if isinstance(n, cst.Name):
            if n.value not in found:
                found.append(n.value)
        elif isinstance(n, cst.Attribute):
            walk(n.value)
        elif isinstance(n, cst.Arg):
            walk(n.value)
        else:
            for child in n.children:
                walk(child)

    walk(node)
    return found


class _Visitor(cst.CSTVisitor):
    def __init__(self, path: str, module: cst.Module, text: str, lines: dict[cst.CSTNode, tuple[int, int]], units: Sequence[Unit]) -> None:
        self.path = path
        self.units = units
        self.unit: int | None = None  # the top-level definition being visited
        self.unit_imports: dict[int, dict[str, str]] = {}
        self.module = module
        self.modname = module_name(path)
        self.package = self.modname if path.endswith("__init__.py") else self.modname.rpartition(".")[0]
        self.file_lines = text.split("\n")
        self.lines = lines
        self.imports: dict[str, str] = {}
        self.constants: dict[str, cst.BaseExpression] = {}
        self.local_classes: set[str] = set()
        self.scopes = [_Scope("<module>", "module", 1, len(self.file_lines))]
        self.elifs: set[cst.If] = set()
        self.subjects: list[cst.BaseExpression] = []
        self.attributes: list[AttributeFact] = []
        self.pending: list[_PendingSite] = []
        self.override: dict[int, list[Part]] = {}  # while a variant is built: a node's parts, by the node's id
        self.classes: list[tuple[ExceptionClass, list[str], int | None]] = []
        for stmt in module.body:
            if isinstance(stmt, cst.ClassDef):
                self.local_classes.add(stmt.name.value)
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign) and len(small.targets) == 1:
                        target = small.targets[0].target
                        if isinstance(target, cst.Name):
                            self.constants[target.value] = small.value
                    elif isinstance(small, cst.AnnAssign) and small.value is not None:
                        if isinstance(small.target, cst.Name):
                            self.constants[small.target.value] = small.value

    # --- helpers -----------------------------------------------------------------------

    def src(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node).strip()

    def expr_src(self, node: cst.CSTNode) -> str:
        """An expression's text on one line, as a placeholder name."""
        return " ".join(self.src(node).split())

    def line_of(self, node: cst.CSTNode, default: int = 0) -> int:
        return self.lines.get(node, (default, default))[0]

    @property
    def scope(self) -> _Scope:
        return self.scopes[-1]

    def qualname(self) -> str:
        names = [s.name for s in self.scopes[1:]]
        return ".".join(names) if names else "<module>"

    def resolve(self, dotted: str, unit: int | None) -> str:
        """A name as written, qualified through the module's imports and those of its own top-level definition.

        Imports inside one function do not reach another: so a definition's scan never
        depends on the bodies of the others, and can be cached on its own.
        """
        head, _, rest = dotted.partition(".")
        own = self.unit_imports.get(unit, {}) if unit is not None else {}
        if head in own:
            base = own[head]
        elif head in self.imports:
            base = self.imports[head]
        elif head in self.local_classes:
            base = f"{self.modname}.{head}"
        else:
            return dotted
        return f"{base}.{rest}" if rest else base

    def push_guard(self, kind: str, code: str, holds: bool, line: int, expr: cst.CSTNode | None) -> None:
        self.scope.guards.append((Condition(kind=kind, code=code, holds=holds, line=line), expr))

    def pop_guard(self) -> None:
        self.scope.guards.pop()

    # --- imports -----------------------------------------------------------------------

    @property
    def bound_imports(self) -> dict[str, str]:
        if self.unit is None:
            return self.imports
        return self.unit_imports.setdefault(self.unit, {})

    def on_visit(self, node: cst.CSTNode) -> bool:
        """Statements are what the scan reads; an expression never holds one, and what the scan needs of an
        expression it reads from the statement's node. So the walk stops at expressions and at the small
        statements made of them: most of a tree's nodes, never visited."""
        descend = super().on_visit(node)
        return descend and not isinstance(node, _LEAVES)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name) or ""
            if alias.asname is not None:
                self.bound_imports[dotted_name(alias.asname.name) or full] = full
            else:
                head = full.partition(".")[0]
                self.bound_imports[head] = head

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        base = dotted_name(node.module) if node.module is not None else ""
        if node.relative:
            package = self.package.split(".") if self.package else []
            up = len(node.relative) - 1
            package = package[: len(package) - up] if up else package
            base = ".".join(p for p in [*package, base] if p)
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            bound = dotted_name(alias.asname.name) if alias.asname is not None else name
            if bound:
                self.bound_imports[bound] = f"{base}.{name}" if base else name

    # --- scopes ------------------------------------------------------------------------

    def _enter(self, node: cst.FunctionDef | cst.ClassDef, kind: str) -> None:
        start, end = self.lines.get(node, (0, 0))
        if len(self.scopes) == 1 or self._is_method(kind):
            self.unit = unit_of(start, self.units)
        doc = node.get_docstring() if kind == "function" else None
        first = doc.strip().split("\n\n")[0].strip() if doc else None
        self.scopes.append(_Scope(node.name.value, kind, start, end, " ".join(first.split()) if first else None))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._enter(node, "function")

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._leave()

    def _leave(self) -> None:
        left = self.scopes.pop()
        if len(self.scopes) == 1:
            self.unit = None
        elif self._is_method(left.kind):
            self.unit = unit_of(self.scopes[1].line, self.units)

    def _is_method(self, kind: str) -> bool:
        """Whether a function entered (or left) now is a method of a top-level class: a unit of its own."""
        return kind == "function" and len(self.scopes) == 2 and self.scopes[1].kind == "class"

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if node.bases:
            names = [self.qualname_prefix() + node.name.value]
            bases = [dotted_name(arg.value) or self.expr_src(arg.value) for arg in node.bases if not arg.keyword]
            doc = node.get_docstring()
            qual = f"{self.modname}.{names[0]}"
            self.classes.append(
                (
                    ExceptionClass(
                        qualname=qual,
                        name=node.name.value,
                        module=self.modname,
                        path=self.path,
                        line=self.line_of(node),
                        bases=(),
                        doc=doc.strip() if doc else None,
                        message=self.class_message(node),
                    ),
                    bases,
                    self.unit if len(self.scopes) > 1 else unit_of(self.line_of(node), self.units),
                )
            )
        self._enter(node, "class")

    def class_message(self, node: cst.ClassDef) -> Message | None:
        """The message an instance made with no arguments carries: what `__init__` passes to the base class.

        `super().__init__("The engine is busy ...")`, a name bound to such a string in `__init__`
        or the class body (`self.MESSAGE`), or the default of the parameter passed on.
        """
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        init = next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        if init is None or not isinstance(init.body, cst.IndentedBlock):
            return None
        bound = {**_simple_assigns(body), **_simple_assigns(init.body.body)}
        params = [*init.params.params, *init.params.kwonly_params]
        defaults = {p.name.value: p.default for p in params if p.default is not None}
        for stmt in init.body.body:
            call = _base_init_call(stmt)
            if call is None:
                continue
            positional = [a.value for a in call.args if a.keyword is None and not a.star]
            if isinstance(call.func.value, cst.Name):  # Base.__init__(self, message)
                positional = positional[1:]
            arg = positional[0] if positional else None
            name = arg.attr.value if isinstance(arg, cst.Attribute) and dotted_name(arg.value) in ("self", "cls", node.name.value) else None
            name = arg.value if isinstance(arg, cst.Name) else name
            value = bound.get(name, defaults.get(name)) if name else arg
            if isinstance(value, _STRINGS):
                message = self.message_of(value, self.line_of(node))
                return message if message.template and message.form in ("literal", "concat", "fstring") else None
            return None
        return None

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._leave()

    def qualname_prefix(self) -> str:
        names = [s.name for s in self.scopes[1:]]
        return "".join(f"{n}." for n in names)

    # --- assignments -------------------------------------------------------------------

    def _note_assign(self, target: cst.BaseExpression, op: str, value: cst.BaseExpression, stmt: cst.CSTNode) -> None:
        if op == "=" and isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            self._note_attribute(target.attr.value, value, stmt)
        if isinstance(target, cst.Name):
            names = [target.value]
        elif isinstance(target, (cst.Tuple, cst.List)):
            # `a, self.b = ...` binds `a`; `self` is not rebound by it.
            names = [el.value.value for el in target.elements if isinstance(el.value, cst.Name)]
        else:
            names = []
        for name in names:
            self.scope.assigns.append((name, op, value, self.line_of(stmt), self.src(stmt), tuple(c for c, _ in self.scope.guards)))

    def _note_attribute(self, attr: str, value: cst.BaseExpression, stmt: cst.CSTNode) -> None:
        """`self.x = <a setting>` in a method of a class: a fact the annotator follows from a guard to a lever."""
        if self.scope.kind != "function" or self.scopes[-2].kind != "class":
            return
        text = self.expr_src(value)
        if len(text) <= MAX_FACT and _SETTING_READ.search(text):
            cls = f"{self.modname}.{'.'.join(s.name for s in self.scopes[1:-1])}"
            self.attributes.append(AttributeFact(cls=cls, attr=attr, value=text, line=self.line_of(stmt)))

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._note_assign(target.target, "=", node.value, node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._note_assign(node.target, "=", node.value, node)

    def visit_Expr(self, node: cst.Expr) -> None:
        """`errors.append("...")` or `errors.extend([...])`: the items of a list a message may be joined from."""
        call = node.value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)
                and call.func.attr.value in ("append", "extend") and len(call.args) == 1):
            return
        value = call.args[0].value
        values = [value] if call.func.attr.value == "append" else _list_items(value)
        self.scope.items += [(call.func.value.value, v, self.line_of(node)) for v in values]

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        op = "+=" if isinstance(node.operator, cst.AddAssign) else "op="
        self._note_assign(node.target, op, node.value, node)

    # --- guards ------------------------------------------------------------------------

    def visit_If(self, node: cst.If) -> None:
        if isinstance(node.orelse, cst.If):
            self.elifs.add(node.orelse)

    def leave_If(self, original_node: cst.If) -> None:
        # Code after `if x: return` runs only when `x` is false: a guard of every raise below it.
        node = original_node
        if node.orelse is None and node not in self.elifs and _always_exits(node.body) and self.scope.exits:
            exits = self.scope.exits[-1]
            exits.append((Condition(kind="exit", code=self.src(node.test), holds=False, line=self.line_of(node)), node.test))
            del exits[:-MAX_EXITS]

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.scope.exits.append([])

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self.scope.exits.pop()

    def visit_If_body(self, node: cst.If) -> None:
        kind = "elif" if node in self.elifs else "if"
        self.push_guard(kind, self.src(node.test), True, self.line_of(node), node.test)

    def leave_If_body(self, node: cst.If) -> None:
        self.pop_guard()

    def visit_If_orelse(self, node: cst.If) -> None:
        self.push_guard("else", self.src(node.test), False, self.line_of(node), node.test)

    def leave_If_orelse(self, node: cst.If) -> None:
        self.pop_guard()

    def visit_While_body(self, node: cst.While) -> None:
        self.push_guard("while", self.src(node.test), True, self.line_of(node), node.test)

    def leave_While_body(self, node: cst.While) -> None:
        self.pop_guard()

    def visit_For_body(self, node: cst.For) -> None:
        code = f"{self.src(node.target)} in {self.src(node.iter)}"
        self.push_guard("for", code, True, self.line_of(node), node.iter)

    def leave_For_body(self, node: cst.For) -> None:
        self.pop_guard()

    def _visit_handler_body(self, node: cst.ExceptHandler | cst.ExceptStarHandler) -> None:
        types = self.src(node.type) if node.type is not None else ""
        bound = node.name.name.value if node.name is not None and isinstance(node.name.name, cst.Name) else None
        self.push_guard("except", types, True, self.line_of(node), None)
        self.scope.handlers.append((types, bound))

    def _leave_handler_body(self) -> None:
        self.pop_guard()
        self.scope.handlers.pop()

    def visit_ExceptHandler_body(self, node: cst.ExceptHandler) -> None:
        self._visit_handler_body(node)

    def leave_ExceptHandler_body(self, node: cst.ExceptHandler) -> None:
        self._leave_handler_body()

    def visit_ExceptStarHandler_body(self, node: cst.ExceptStarHandler) -> None:
        self._visit_handler_body(node)

    def leave_ExceptStarHandler_body(self, node: cst.ExceptStarHandler) -> None:
        self._leave_handler_body()

    def visit_Match(self, node: cst.Match) -> None:
        self.subjects.append(node.subject)

    def leave_Match(self, original_node: cst.Match) -> None:
        self.subjects.pop()

    def visit_MatchCase_body(self, node: cst.MatchCase) -> None:
        subject = self.src(self.subjects[-1]) if self.subjects else "?"
        code = f"{subject} matches {self.src(node.pattern)}"
        self.push_guard("case", code, True, self.line_of(node), self.subjects[-1] if self.subjects else None)

    def leave_MatchCase_body(self, node: cst.MatchCase) -> None:
        self.pop_guard()

    # --- messages ----------------------------------------------------------------------

    def parts(self, node: cst.BaseExpression, line: int, depth: int = 0) -> tuple[list[Part], str]:
        """The message parts an expression formats to, and the form of the code that builds them."""
        if self.override and id(node) in self.override:
            return self.override[id(node)], "variable"
        if depth > 8:
            return [(True, self.expr_src(node))], "dynamic"
        if isinstance(node, cst.SimpleString):
            value = node.evaluated_value
            if isinstance(value, str):
                return [(False, value)], "literal"
            return [(True, self.expr_src(node))], "dynamic"
        if isinstance(node, cst.ConcatenatedString):
            left, _ = self.parts(node.left, line, depth + 1)
            right, _ = self.parts(node.right, line, depth + 1)
            return left + right, "concat"
        if isinstance(node, cst.FormattedString):
            return self.fstring_parts(node, line, depth), "fstring"
        if isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, cst.Add):
                left, lform = self.parts(node.left, line, depth + 1)
                right, rform = self.parts(node.right, line, depth + 1)
                if any(not hole for hole, _ in left + right):
                    return left + right, "plus"
            elif isinstance(node.operator, cst.Modulo) and isinstance(node.left, cst.SimpleString):
                return self.percent_parts(node), "percent"
            return [(True, self.expr_src(node))], "dynamic"
        if isinstance(node, cst.Call):
            func = node.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value == "format"
                and isinstance(func.value, (cst.SimpleString, cst.ConcatenatedString))
            ):
                return self.format_parts(func.value, node.args), "format"
            return [(True, self.expr_src(node))], "dynamic"
        if isinstance(node, cst.Name):
            found = self.local_value(node.value, line)
            if found is not None:
                parts: list[Part] = []
                for value in found:
                    more, _ = self.parts(value, line, depth + 1)
                    parts += more
                return parts, "variable"
            value = self.constants.get(node.value)
            if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.BinaryOperation)):
                parts, _ = self.parts(value, line, depth + 1)
                return parts, "constant"
        return [(True, self.expr_src(node))], "dynamic"

    def local_value(self, name: str, line: int) -> list[cst.BaseExpression] | None:
        """The values a local variable was built from before `line`: `msg = ...` then any `msg += ...`.

        None unless the assignment runs whenever `line` does: one in a branch the raise is not in
        (`if model_type == "cohere": model_type = "command-r"`) leaves the variable's value open. Text a
        branch appends (`if ...: msg += " Set --x."`) is left out: every message starts with the rest.
        """
        if self.scope.kind != "function":
            return None
        now = [c for c, _ in self.scope.guards]
        appended: list[cst.BaseExpression] = []
        for bound, op, value, at, _, under in reversed(self.scope.assigns):
            if bound != name or at > line:
                continue
            if len(under) > len(now) or any(a is not b for a, b in zip(under, now)):
                if op == "+=":
                    continue  # text added only sometimes: the template is what every message starts with
                return None
            if op == "+=":
                appended.insert(0, value)
            elif op == "=":
                return [value, *appended]
            else:
                return None
        return None

    def fstring_parts(self, node: cst.FormattedString, line: int, depth: int) -> list[Part]:
        prefix = node.prefix.lower().replace("f", "")
        quote = node.quote
        parts: list[Part] = []
        for piece in node.parts:
            if isinstance(piece, cst.FormattedStringText):
                parts.append((False, _unescape(piece.value, prefix, quote)))
            elif isinstance(piece, cst.FormattedStringExpression):
                text = self.expr_src(piece.expression)
                if piece.equal is not None and not isinstance(piece.equal, cst.MaybeSentinel):
                    parts.append((False, self.module.code_for_node(piece.expression) + "="))
                    parts.append((True, text))
                    continue
                # `msg = f"..."; raise X(f"{msg} more")`: the message is msg's text, not a placeholder
                inlined = self.string_parts(piece.expression, line, depth) if piece.conversion is None and piece.format_spec is None else None
                parts.extend(inlined if inlined is not None else [(True, text)])
        return parts

    def string_parts(self, node: cst.BaseExpression, line: int, depth: int) -> list[Part] | None:
        """The parts of a name bound to a string built in this function or module; None for anything else."""
        if self.override and id(node) in self.override:
            return self.override[id(node)]
        if not isinstance(node, cst.Name):
            return None
        values = self.local_value(node.value, line)
        if values is None and node.value in self.constants:
            values = [self.constants[node.value]]
        if not values or not all(isinstance(v, _STRING_BUILDERS) for v in values):
            return None
        parts: list[Part] = []
        for value in values:
            parts += self.parts(value, line, depth + 1)[0]
        return parts

    def percent_parts(self, node: cst.BinaryOperation) -> list[Part]:
        template = node.left.evaluated_value if isinstance(node.left, cst.SimpleString) else None
        if not isinstance(template, str):
            return [(True, self.expr_src(node))]
        right = node.right
        values = [el.value for el in right.elements] if isinstance(right, cst.Tuple) else [right]
        names = [self.expr_src(v) for v in values]
        parts: list[Part] = []
        pieces = _PERCENT.split(template)
        index = 0
        for i, piece in enumerate(pieces):
            if i % 2 == 0:
                parts.append((False, piece))
            elif piece == "%%":
                parts.append((False, "%"))
            else:
                key = _PERCENT_KEY.match(piece)
                name = key.group(1) if key else (names[index] if index < len(names) else piece)
                index += 0 if key else 1
                parts.append((True, name))
        return parts

    def format_parts(self, node: cst.BaseExpression, args: tuple[cst.Arg, ...]) -> list[Part]:
        literal = node.evaluated_value if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)) else None
        if not isinstance(literal, str):
            return [(True, self.expr_src(node))]
        positional = [self.expr_src(a.value) for a in args if a.keyword is None and not a.star]
        keywords = {a.keyword.value: self.expr_src(a.value) for a in args if a.keyword is not None}
        parts: list[Part] = []
        auto = 0
        try:
            parsed = list(_FORMATTER.parse(literal))
        except ValueError:
            return [(True, self.expr_src(node))]
        for text, field_name, _spec, _conv in parsed:
            parts.append((False, text))
            if field_name is None:
                continue
            head = field_name.split(".")[0].split("[")[0]
            if head == "":
                name = positional[auto] if auto < len(positional) else "{}"
                auto += 1
            elif head.isdigit():
                name = positional[int(head)] if int(head) < len(positional) else field_name
            else:
                name = keywords.get(head, field_name)
            parts.append((True, name))
        return parts

    def message_of(self, node: cst.BaseExpression | None, line: int) -> Message:
        if node is None:
            return messages.message_of([], "empty")
        parts, form = self.parts(node, line)
        message = messages.message_of(parts, form)
        variants: list[str] = []
        for point, choices in self.choice_points(node, line):
            for choice in choices:
                self.override = {id(point): choice}
                try:
                    other = messages.message_of(self.parts(node, line)[0], form).template
                finally:
                    self.override = {}
                if other and other != message.template and other not in variants:
                    variants.append(other)
        return replace(message, variants=tuple(variants[:MAX_VARIANTS])) if variants else message

    def choice_points(self, node: cst.BaseExpression, line: int, depth: int = 0) -> Iterator[tuple[cst.CSTNode, list[list[Part]]]]:
        """Where a message can read otherwise: a local assigned in branches (`msg = "A"` here, `msg = "B"`
        there), text appended only sometimes (`if x: msg += " Set --y."`), a list of reasons joined
        (`"; ".join(errors)` after `errors.append(...)`); each with the parts it can be instead."""
        if depth > 4 or self.scope.kind != "function":
            return
        if isinstance(node, cst.Name):
            choices = self.name_choices(node.value, line)
            if choices:
                yield node, choices
            for value in self.local_value(node.value, line) or ():
                yield from self.choice_points(value, line, depth + 1)
        elif joined := _joined_name(node):
            items = [self.parts(v, line)[0] for name, v, at in self.scope.items if name == joined and at <= line]
            items += [self.parts(v, line)[0] for bound, op, value, at, _, _ in self.scope.assigns
                      if bound == joined and at <= line and op in ("=", "+=") for v in _list_items(value)]
            if items:
                yield node, items[:MAX_VARIANTS]
        elif isinstance(node, cst.FormattedString):
            for piece in node.parts:
                if isinstance(piece, cst.FormattedStringExpression):
                    yield from self.choice_points(piece.expression, line, depth + 1)
        elif isinstance(node, cst.ConcatenatedString) or isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
            yield from self.choice_points(node.left, line, depth + 1)
            yield from self.choice_points(node.right, line, depth + 1)

    def name_choices(self, name: str, line: int) -> list[list[Part]]:
        """The texts a local can hold at `line` besides the one every path gives it: the values set in branches
        since its last certain value, or that value with each text a branch appends."""
        now = [c for c, _ in self.scope.guards]
        base = self.local_value(name, line)
        sometimes: list[cst.BaseExpression] = []
        for bound, op, value, at, _, under in reversed(self.scope.assigns):
            if bound != name or at > line:
                continue
            certain = len(under) <= len(now) and all(a is b for a, b in zip(under, now))
            if op in ("=", "+=") and isinstance(value, _STRING_BUILDERS) and (op == "=") == (base is None):
                sometimes.insert(0, value)
            if certain and op == "=" or op not in ("=", "+="):
                break
        if base is None:
            choices = [self.parts(value, line)[0] for value in sometimes]
            return choices[:MAX_VARIANTS] if len(choices) > 1 else []
        head = [p for value in base for p in self.parts(value, line)[0]]
        return [head + self.parts(value, line)[0] for value in sometimes][:MAX_VARIANTS]

    # --- sites -------------------------------------------------------------------------

    def visit_Raise(self, node: cst.Raise) -> None:
        line, end = self.lines.get(node, (0, 0))
        exc = node.exc
        cause = self.expr_src(node.cause.item) if node.cause is not None else None
        dotted: str | None = None
        caught: tuple[str, ...] = ()
        message = messages.message_of([], "empty")
        if exc is None:
            types = self.scope.handlers[-1][0] if self.scope.handlers else ""
            ref = ExceptionRef(written="raise", qualname="", how="reraise")
            caught = _split_types(types)
            message = Message(template=None, placeholders=(), form="reraise", pattern=None,
                              note=f"re-raises the exception caught by `except {types}`".replace(" ``", "").strip())
        elif isinstance(exc, cst.Call):
            ref, dotted, message = self.call_exception(exc, line)
        else:
            name = dotted_name(exc)
            handler = next((h for h in reversed(self.scope.handlers) if name and h[1] == name), None)
            built = self.local_value(name, line) if name and "." not in name else None
            if handler is not None:
                ref = ExceptionRef(written=name or "", qualname="", how="reraise")
                caught = _split_types(handler[0])
                message = Message(template=None, placeholders=(), form="reraise", pattern=None,
                                  note=f"re-raises the exception caught by `except {handler[0]} as {name}`")
            elif built and len(built) == 1 and isinstance(built[0], cst.Call):
                ref, dotted, message = self.call_exception(built[0], line)  # error = X(...); raise error
            elif name and _looks_like_class(name):
                ref = ExceptionRef(written=name, qualname="", how="name")
                dotted = name
            else:
                ref = ExceptionRef(written=self.expr_src(exc), qualname="", how="instance")
                message = Message(template=None, placeholders=(), form="dynamic", pattern=None,
                                  note=f"raises the exception object `{self.expr_src(exc)}` built elsewhere")
        self.add_site(node, "raise", line, end, ref, message, [], cause, dotted, caught)

    def call_exception(self, call: cst.Call, line: int) -> tuple[ExceptionRef, str | None, Message]:
        """`X(...)` raises class X; anything else called is a factory whose class the scan cannot know."""
        name = dotted_name(call.func)
        if name and _looks_like_class(name):
            return ExceptionRef(written=name, qualname="", how="call"), name, self.message_of(_message_arg(call, name), line)
        ref = ExceptionRef(written=self.expr_src(call), qualname="", how="factory")
        return ref, None, self.message_of(_message_arg(call, ref.written, factory=True), line)

    def visit_Assert(self, node: cst.Assert) -> None:
        if node.msg is None:
            return
        line, end = self.lines.get(node, (0, 0))
        ref = ExceptionRef(written="assert", qualname="AssertionError", how="assert")
        own = [(Condition(kind="assert", code=self.src(node.test), holds=False, line=line), node.test)]
        self.add_site(node, "assert", line, end, ref, self.message_of(node.msg, line), own, None, None, ())

    def add_site(self, node, kind, line, end, ref, message, own, cause, dotted, caught) -> None:
        exits = [exit for block in self.scope.exits for exit in block]
        guards = [*exits, *self.scope.guards, *own]
        assignments = self.assignments_for([expr for _, expr in guards if expr is not None], line)
        site = RaiseSite(
            path=self.path,
            line=line,
            end_line=end,
            function=self.qualname(),
            function_doc=next((s.doc for s in reversed(self.scopes) if s.kind == "function"), None),
            kind=kind,
            exception=ref,
            message=message,
            guard=tuple(cond for cond, _ in guards),
            assignments=assignments,
            cause=cause,
            code=self.context(line, end, guards, assignments),
        )
        self.pending.append(_PendingSite(site, dotted, caught, self.unit))

    def assignments_for(self, exprs: list[cst.CSTNode], line: int) -> tuple[Assignment, ...]:
        """The latest assignment before `line` of each name the guard reads, and of the names those read."""
        if self.scope.kind != "function":
            return ()
        wanted = [name for expr in exprs for name in read_names(expr)]
        seen: set[str] = set()
        found: dict[int, Assignment] = {}
        while wanted and len(found) < MAX_ASSIGNMENTS:
            name = wanted.pop(0)
            if name in seen:
                continue
            seen.add(name)
            for bound, _op, value, at, code, _ in reversed(self.scope.assigns):
                if bound == name and at <= line:
                    found.setdefault(at, Assignment(name=name, code=code, line=at))
                    wanted += read_names(value)
                    break
        return tuple(sorted(found.values(), key=lambda a: (a.line, a.name)))

    def context(self, line, end, guards, assignments) -> Code:
        scope = next((s for s in reversed(self.scopes) if s.kind == "function"), self.scopes[0])
        anchors = [line] + [c.line for c, _ in guards if c.line] + [a.line for a in assignments]
        # Never past the top-level definition (or the gap between two): a definition's scan stands alone.
        low, high = bounds(line, self.units, len(self.file_lines))
        first = max(scope.line or 1, min(anchors) - 3, line - CONTEXT_ABOVE_MAX, low)
        last = min(end + CONTEXT_AFTER, scope.end_line if scope.end_line >= end else len(self.file_lines), high)
        first, last = self._outside_strings(first, line, end, last)
        lines = self.file_lines[first - 1 : last]
        while lines and not lines[-1].strip() and len(lines) > 1:
            lines.pop()
        return Code(first_line=first, text="\n".join(line.rstrip("\r") for line in lines))

    def _outside_strings(self, first: int, line: int, end: int, last: int) -> tuple[int, int]:
        """Move the context's ends out of triple-quoted strings (docstrings, mostly).

        A highlighter reading from the middle of a docstring sees its closing quotes as an
        opening one, and shows all the code after it as a string.
        """
        for quote in ('"""', "'''"):
            above = self.file_lines[first - 1 : line - 1]
            if sum(row.count(quote) for row in above) % 2:
                first += next(i for i, row in enumerate(above) if quote in row) + 1
            below = self.file_lines[end:last]
            if sum(row.count(quote) for row in below) % 2:
                last = end + max(i for i, row in enumerate(below) if quote in row)
        return first, last

    def finish(self) -> tuple[tuple[RaiseSite, ...], tuple[ExceptionClass, ...], tuple[AttributeFact, ...]]:
        sites = []
        for item in self.pending:
            site = item.site
            if item.dotted is not None:
                qual = self.resolve(item.dotted, item.unit)
                site = _replace_qualname(site, qual)
            elif item.caught or site.exception.how == "reraise":
                qual = " | ".join(self.resolve(t, item.unit) for t in item.caught) or "BaseException"
                site = _replace_qualname(site, qual)
            sites.append(site)
        classes = []
        for cls, bases, unit in self.classes:
            resolved = tuple(self.resolve(b, unit) if _looks_dotted(b) else b for b in bases)
            classes.append(ExceptionClass(**{**cls.__dict__, "bases": resolved}))
        return tuple(sites), tuple(classes), tuple(self.attributes)


def _replace_qualname(site: RaiseSite, qualname: str) -> RaiseSite:
    return replace(site, exception=replace(site.exception, qualname=qualname))


def _always_exits(body: cst.BaseSuite) -> bool:
    """Whether a block ends by leaving normally. An `if` that raises is left out on purpose:
    making its test true only trades one error for another, so it is no way out."""
    last = body.body[-1] if isinstance(body, cst.IndentedBlock) and body.body else body
    if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return isinstance(last.body[-1], (cst.Return, cst.Continue, cst.Break))
    return False


def _simple_assigns(statements) -> dict[str, cst.BaseExpression]:
    """`NAME = value` statements of a block, the last binding of each name."""
    found = {}
    for stmt in statements:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                found[small.targets[0].target.value] = small.value
            elif isinstance(small, cst.AnnAssign) and small.value is not None and isinstance(small.target, cst.Name):
                found[small.target.value] = small.value
    return found


def _base_init_call(stmt: cst.CSTNode) -> cst.Call | None:
    """`super().__init__(...)` or `Base.__init__(self, ...)` as a statement of its own."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr):
        return None
    call = stmt.body[0].value
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "__init__"):
        return None
    owner = call.func.value
    if isinstance(owner, cst.Call) and dotted_name(owner.func) == "super" or isinstance(owner, cst.Name):
        return call
    return None


def _looks_dotted(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))


def _looks_like_class(dotted: str) -> bool:
    """`ValueError`, `errors.Invalid`: class names are capitalised; `self._make_error` is a factory."""
    last = dotted.rpartition(".")[2].lstrip("_")
    return last[:1].isupper() and not dotted.startswith("self.")


def _split_types(types: str) -> tuple[str, ...]:
    text = types.strip().strip("()")
    return tuple(t.strip() for t in text.split(",") if t.strip())


_LEAVES = (cst.BaseExpression, cst.BaseSmallStatement, cst.Decorator, cst.Parameters, cst.Annotation, cst.EmptyLine,
           cst.TrailingWhitespace, cst.BaseParenthesizableWhitespace, cst.Newline, cst.Comment, cst.Arg, cst.AsName)
_STRINGS = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
_STRING_BUILDERS = (*_STRINGS, cst.BinaryOperation)


def _list_items(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The elements of a list or tuple display written out (`[a, b]`); none for anything else."""
    if isinstance(node, (cst.List, cst.Tuple)):
        return [el.value for el in node.elements if isinstance(el, cst.Element)]
    return []


def _joined_name(node: cst.BaseExpression) -> str | None:
    """`"; ".join(errors)` -> "errors": a message joined from a local list."""
    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "join"
            and isinstance(node.func.value, _STRINGS) and len(node.args) == 1 and isinstance(node.args[0].value, cst.Name)):
        return node.args[0].value.value
    return None


def _message_arg(call: cst.Call, written: str, factory: bool = False) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in MESSAGE_KEYWORDS:
            return arg.value
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if factory:
        # A factory's own signature is unknown: its message is the first argument written as a string.
        return next((a for a in positional if isinstance(a, _STRINGS)), None)
    if written.rpartition(".")[2].endswith("HTTPException"):
        return positional[1] if len(positional) > 1 else None
    return positional[0] if positional else None


def _unescape(raw: str, prefix: str, quote: str) -> str:
    """The text an f-string's literal piece stands for: escapes decoded, doubled braces single."""
    text = raw
    if "r" not in prefix and "\\" in raw:
        try:
            text = ast.literal_eval(f"{prefix}{quote}{raw}{quote}")
        except (SyntaxError, ValueError):
            text = raw
    return text.replace("{{", "{").replace("}}", "}")


def scan_raises(path: str, module: cst.Module, text: str, lines: dict, units: Sequence[Unit] = ()) -> tuple[tuple[RaiseSite, ...], tuple[ExceptionClass, ...], tuple[AttributeFact, ...]]:
    visitor = _Visitor(path, module, text, lines, units)
    module.visit(visitor)
    return visitor.finish()
