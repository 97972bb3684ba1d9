"""Facts of a whole file that the per-site scan does not keep, read with the stdlib parser (several times faster
than libcst) and cached per blob like the scan.

- the `assert` without a message: it has no page (the catalog holds errors with a message), but users
  paste its expression ("assert outputs.scheduler_stats is not None") with no traceback, and the lookup
  can still say where it is;
- definitions with their parameters, calls with their arguments, and locals assigned once: linked per
  release (extractor/program.py), they tell where a parameter a guard reads comes from;
- the vLLM modules a file imports (or names in a string, as `importlib` and lazy loaders take them), and the
  modules it registers under a name users select (`KVConnectorFactory.register_connector("NixlConnector",
  "vllm...nixl", ...)`, a registry dict `{"LlamaForCausalLM": ("llama", "LlamaForCausalLM")}`, an Enum of class
  paths): linked per release, they tell which selection a file's code runs under.
"""

from __future__ import annotations

import ast
import collections
import hashlib
import json
import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Sequence

from .conditions import conjuncts, negate
from .messages import merge_parts, template_of
from .model import AssertSite, BareAssert, Catalog, SourceFile

if TYPE_CHECKING:  # the lookup imports assert_key: it must not load the scanner
    from .cache import ScanCache

FACTS_VERSION = 30  # bump when what file_facts reads changes: cached facts of another version are not read
_NOT_KEY = re.compile(r"[\s()]+")
_MODULE = re.compile(r"^vllm(?:\.[A-Za-z_][A-Za-z0-9_]*)+$")  # a vLLM module's dotted name, or a class's in one
MIN_REGISTRY = 3  # entries a dict of (module, class) pairs needs to be taken for a registry
_CONSTANT = re.compile(r"^_?[A-Z][A-Z0-9_]*$")  # how constants are named
MAX_CONSTANT = 60  # characters of a constant's literal kept


def assert_key(expression: str) -> str:
    """An expression as the lookup compares it, however it was wrapped or quoted: no spaces, no parentheses,
    double quotes. `assert (a\n  <= b)` and `assert a <= b` have the same key. The site's box does the same."""
    return _NOT_KEY.sub("", expression.replace("'", '"'))


@dataclass(frozen=True)
class Definition:
    qualname: str  # "Class.method", "function", "Class" for a class
    line: int
    params: tuple[str, ...]  # in order, `self` included; "*" for *args or **kwargs; none for a class
    returns: str = ""  # the class its return annotation names (`-> MultiModalConfig | None` -> "MultiModalConfig"), or ""
    # A function's: the class each parameter's annotation names ("" where none), in the order of params.
    # A class's: the last names of its bases, and the names of the fields its body annotates (`max_tokens: int | None`).
    annotations: tuple[str, ...] = ()
    bases: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    abstract: bool = False  # a function decorated with @abstractmethod
    decorators: tuple[str, ...] = ()  # a function's decorators' last names: ("model_validator", "classmethod")
    unset: tuple[str, ...] = ()  # a class's fields declared `field(init=False)`: vLLM fills them itself, no user sets them
    # A function's locals bound more than once (assigned in branches, updated, a loop's target too): one assignment is
    # not where they come from.
    rebound: tuple[str, ...] = ()
    # A function's: the literal each parameter defaults to (`is_ue8m0: bool = True` gives "True"), "" where it has none or
    # its default is no literal; in the order of params.
    defaults: tuple[str, ...] = ()


@dataclass(frozen=True)
class Call:
    caller: str  # qualified name of the function making the call, "" at module level
    line: int
    name: str  # the callee's last name: `self.f(x)` -> "f", `Config(x)` -> "Config"
    method: bool  # called on something (`x.f()`), not by a plain name
    args: tuple[str, ...]  # each positional argument: its dotted name (`config.block_size`), a literal's source (`'silu'`,
    # `1`, or `'a' if x else 'b'` of two literals), "" for any other expression, "*" for a starred one
    keywords: tuple[tuple[str, str], ...]  # (name, dotted name or ""); ("*", ...) for **kwargs
    # The handlers around the call, in its function, that catch without raising again: (the class's last name, or
    # "*" for a bare `except:`, and the handler's line), innermost try first.
    caught: tuple[tuple[str, int], ...] = ()
    # What holds wherever the call runs, in its function: the tests of the `if`s and `while`s around it (negated in an
    # `else`), `assert`s before it and `if x: raise/return` exits before it; each conjunct as ast.unparse writes it.
    known: tuple[str, ...] = ()
    receiver: str = ""  # what a method is called on, as a dotted name: "self", "self.model_runner", "os.path"; "" for others
    # The lines of the handlers (`except ...:`) of the `try` statements whose body holds the call, in its function,
    # innermost first, whatever the handlers do: what a raise in a handler reports a failure of.
    tried: tuple[int, ...] = ()
    # Those of `known` that hold because the code raises where they do not (`assert x`, `if not x: raise ...`): no way
    # around the call, since where they fail another error comes first.
    enforced: tuple[str, ...] = ()
    # The handlers around the call, in its function, that raise again only under a test (`except E: if strict: raise`):
    # they may take the error and go on, as `caught` has them.
    spared: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Binding:
    function: str  # where: its qualified name
    name: str  # a local given one value by a plain `name = value`
    value: str  # the value: a dotted name (`vllm_config.cache_config`); others are not kept


@dataclass(frozen=True)
class Registration:
    registry: str  # the call (`KVConnectorFactory.register_connector`), dict (`_TEXT_GENERATION_MODELS`) or Enum class
    name: str  # what users select it by: "NixlConnector", "LlamaForCausalLM", "FLASH_ATTN"
    module: str  # the dotted name of the module vLLM imports for it
    cls: str = ""  # the class vLLM takes from that module for it, where the registration names one


@dataclass(frozen=True)
class FileFacts:
    asserts: tuple[BareAssert, ...] = ()
    definitions: tuple[Definition, ...] = ()
    calls: tuple[Call, ...] = ()
    bindings: tuple[Binding, ...] = ()  # only locals assigned once in their function
    # The dotted names the file imports (`from .a import b` as "vllm.pkg.a.b": the program finds the module by the
    # longest known prefix) or names in a string, outside `if TYPE_CHECKING:`; registrations not included.
    imports: tuple[str, ...] = ()
    registrations: tuple[Registration, ...] = ()
    # Module-level constants given a literal once: (name, the literal's source, line); `MAX_LOGPROB_TOKEN_IDS = 128`;
    # and a top-level class's `name = "serve"`, as ("Class.name", "'serve'", line).
    constants: tuple[tuple[str, str, int], ...] = ()
    # The imports made only under tests of the platform (`if current_platform.is_rocm():`): (the dotted name, the
    # platforms it is imported on, comma-separated, of PLATFORMS).
    platform_imports: tuple[tuple[str, str], ...] = ()
    # What the handlers that catch without raising again log: (the handler's line, the level, the message as a
    # template with `{placeholders}`), the first log call of each; `logger.warning("Failed to load %s: %s", name, e)`
    # as ("warning", "Failed to load {name}: {e}").
    logged: tuple[tuple[int, str, str], ...] = ()
    # The raises inside `try` blocks, in their function: (the raise's line, the lines of the handlers of the trys around
    # it, innermost first, those that catch without raising again, as Call.caught has them, and those that may, as
    # Call.spared has them).
    raises: tuple[tuple[int, tuple[int, ...], tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]], ...] = ()


PLATFORMS = frozenset({"cuda", "rocm", "xpu", "cpu", "tpu"})  # vLLM's in-tree platforms, as `current_platform.is_x()` tests them
_PLATFORM_TESTS = {"is_cuda": {"cuda"}, "is_rocm": {"rocm"}, "is_xpu": {"xpu"}, "is_cpu": {"cpu"}, "is_tpu": {"tpu"},
                   "is_cuda_alike": {"cuda", "rocm"}}


def _platforms_tested(test: ast.expr) -> frozenset[str] | None:
    """The platforms on which `test` holds, where it is a test of the platform vLLM runs on (`current_platform.is_rocm()`,
    `not current_platform.is_cpu()`); None for any other test."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _platforms_tested(test.operand)
        return PLATFORMS - inner if inner is not None else None
    if isinstance(test, ast.Call) and not test.args and isinstance(test.func, ast.Attribute) and test.func.attr in _PLATFORM_TESTS \
            and dotted(test.func.value).rpartition(".")[2] == "current_platform":
        return frozenset(_PLATFORM_TESTS[test.func.attr])
    return None


def _caught_names(node: ast.expr | None) -> list[str]:
    """The last names of the classes an `except` clause catches: ["*"] for a bare one."""
    if node is None:
        return ["*"]
    found = node.elts if isinstance(node, ast.Tuple) else [node]
    return [d.rpartition(".")[2] for d in map(dotted, found) if d]


_EXITS = (ast.Raise, ast.Return, ast.Continue, ast.Break)
MAX_KNOWN = 8  # conditions kept per call: the innermost
MAX_KNOWN_TEXT = 160  # characters of one condition kept


def _returned_class(node: ast.expr | None) -> str:
    """The class a return annotation names: `X`, `mod.X`, `"X"`, `X | None`, `Optional[X]`; "" for anything else."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _returned_class(node.right if isinstance(node.left, ast.Constant) and node.left.value is None else node.left)
    if isinstance(node, ast.Subscript) and dotted(node.value).rpartition(".")[2] == "Optional":
        return _returned_class(node.slice)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a forward reference: "X | None"
        try:
            return _returned_class(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return ""
    return dotted(node).rpartition(".")[2] if isinstance(node, (ast.Name, ast.Attribute)) else ""


def module_name(path: str) -> str:
    """`vllm/a/b.py` -> `vllm.a.b`; a package's `__init__.py` is the package."""
    parts = path[:-3].split("/") if path.endswith(".py") else path.split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _string(node: ast.expr | None) -> str:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def _literal(node: ast.expr) -> str:
    """The source of a short literal (`'silu'`, `-1`, `None`, `(1, 2)`), or of a choice between two (`'a' if x else 'b'`);
    "" for any other expression."""
    values = [node.body, node.orelse] if isinstance(node, ast.IfExp) else [node]
    for value in values:
        try:
            ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return ""
    text = ast.unparse(node)
    return text if len(text) <= MAX_CONSTANT else ""


def dotted(node: ast.expr) -> str:
    """`a.b.c` for a chain of names and attributes; "" for any other expression."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


_LOG_LEVELS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "info_once", "warning_once", "debug_once"}
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[diouxXeEfFgGcrsa%]")


def _logged(call: ast.Call) -> tuple[str, str] | None:
    """(the level, the message as a template) of a log call: `logger.warning("Failed: %s", e)`, `warnings.warn(f"...")`;
    None for any other call, or a message that is no literal text."""
    func = call.func
    if not isinstance(func, ast.Attribute) or not call.args:
        return None
    receiver = dotted(func.value).rpartition(".")[2].lower()
    if receiver == "warnings" and func.attr == "warn":
        level = "warning"
    elif func.attr in _LOG_LEVELS and "log" in receiver:
        level = func.attr.removesuffix("_once")
        level = {"warn": "warning", "exception": "error"}.get(level, level)
    else:
        return None
    message, rest = call.args[0], list(call.args[1:])
    if isinstance(message, ast.BinOp) and isinstance(message.op, ast.Mod):
        operand = message.right
        rest = list(operand.elts) if isinstance(operand, ast.Tuple) else [operand]
        message = message.left
    if isinstance(message, ast.Constant) and isinstance(message.value, str):
        parts: list[tuple[bool, str]] = []
        at = 0
        for found in _PERCENT.finditer(message.value):
            parts.append((False, message.value[at:found.start()]))
            if found.group(0) == "%%":
                parts.append((False, "%"))
            else:  # filled by the next argument: a literal's own text, or the argument's source as the placeholder
                value = rest.pop(0) if rest else None
                literal = isinstance(value, ast.Constant) and isinstance(value.value, (str, int, float))
                parts.append((False, str(value.value)) if literal else (True, ast.unparse(value) if value else "..."))
            at = found.end()
        parts.append((False, message.value[at:]))
    elif isinstance(message, ast.JoinedStr):
        parts = [(False, v.value) if isinstance(v, ast.Constant) else (True, ast.unparse(v.value))
                 for v in message.values if isinstance(v, (ast.Constant, ast.FormattedValue))]
    else:
        return None
    merged = merge_parts(parts)
    return (level, template_of(merged)) if any(not hole and text.strip() for hole, text in merged) else None


class _Facts(ast.NodeVisitor):
    def __init__(self, path: str, text: str) -> None:
        self.path, self.lines = path, text.splitlines()
        self.scope: list[str] = []
        self.asserts: list[BareAssert] = []
        self.definitions: list[Definition] = []
        self.calls: list[Call] = []
        self.assigned: dict[tuple[str, str], list[str]] = {}
        self.handlers: list[tuple[str, int]] = []  # of the try bodies the visit is in, in the current function
        self.sparing: list[tuple[str, int]] = []  # of those, the handlers that raise again only under a test
        self.tries: list[int] = []  # the lines of all their handlers, innermost first (Call.tried)
        self.known: list[str] = []  # what holds at the statement visited, in the current function (Call.known)
        self.enforced: set[str] = set()  # those of them an assert or a raise enforces, in the current function
        parts = module_name(path).split(".")
        self.package = parts if path.endswith("__init__.py") else parts[:-1]
        self.imports: list[str] = []
        self.registrations: list[Registration] = []
        self.constants: list[tuple[str, str, int]] = []
        self.type_checking = False
        self.platforms = PLATFORMS  # where the statement visited runs, by the platform tests around it
        self.platform_imports: list[tuple[str, frozenset[str]]] = []
        self.bound: collections.Counter[tuple[str, str]] = collections.Counter()  # (function, local) -> times bound
        self.functions: set[str] = set()  # the qualified names of the functions (not classes) defined
        self.logged: list[tuple[int, str, str]] = []
        self.raises: list[tuple[int, tuple[int, ...], tuple[tuple[str, int], ...]]] = []

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        a = node.args
        named = [*a.posonlyargs, *a.args, *([a.vararg] if a.vararg else []), *a.kwonlyargs]
        params = [p.arg if p is not a.vararg else "*" for p in named]
        positional = [*a.posonlyargs, *a.args]
        given = {id(p): d for p, d in zip(positional[len(positional) - len(a.defaults):], a.defaults)}
        given.update({id(p): d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
        defaults = tuple(_literal(given[id(p)]) if id(p) in given else "" for p in named)
        decorators = tuple(dotted(d.func if isinstance(d, ast.Call) else d).rpartition(".")[2] for d in node.decorator_list)
        self.definitions.append(Definition(".".join([*self.scope, node.name]), node.lineno, tuple(params), _returned_class(node.returns),
                                           tuple(_returned_class(p.annotation) for p in named), abstract="abstractmethod" in decorators,
                                           decorators=tuple(d for d in decorators if d), defaults=defaults if any(defaults) else ()))
        self.functions.add(".".join([*self.scope, node.name]))
        self._scoped(node)

    def _class(self, node: ast.ClassDef) -> None:
        fields = tuple(x.target.id for x in node.body if isinstance(x, ast.AnnAssign) and isinstance(x.target, ast.Name))
        # `class FlashMLAImpl(MLAAttentionImpl[FlashMLAMetadata])`: built on MLAAttentionImpl
        named = [b.value if isinstance(b, ast.Subscript) else b for b in node.bases]
        bases = tuple(dotted(b).rpartition(".")[2] for b in named if dotted(b))
        unset = tuple(x.target.id for x in node.body if isinstance(x, ast.AnnAssign) and isinstance(x.target, ast.Name)
                       and isinstance(x.value, ast.Call) and dotted(x.value.func).rpartition(".")[2] == "field"
                       and any(k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False for k in x.value.keywords))
        self.definitions.append(Definition(".".join([*self.scope, node.name]), node.lineno, (), "", (), bases, fields, unset=unset))
        for x in node.body if not self.scope else ():  # `name = "serve"`: what a command class is called on the command line
            if isinstance(x, ast.Assign) and [dotted(t) for t in x.targets] == ["name"] and _string(x.value):
                self.constants.append((f"{node.name}.name", ast.unparse(x.value), x.lineno))
        if not self.scope and "Enum" in bases:  # `FLASH_ATTN = "vllm.v1.attention.backends.flash_attn.FlashAttentionBackend"`
            for x in node.body:
                if isinstance(x, ast.Assign) and len(x.targets) == 1 and isinstance(x.targets[0], ast.Name):
                    value = _string(x.value)
                    if _MODULE.match(value):
                        self.registrations.append(Registration(node.name, x.targets[0].id, *value.rsplit(".", 1)))
        self._scoped(node)

    def _scoped(self, node: ast.AST) -> None:
        self.scope.append(node.name)  # type: ignore[attr-defined]
        outer, self.handlers = self.handlers, []  # a function's body runs when it is called, not where it is defined
        sparing, self.sparing = self.sparing, []
        known, self.known, tries, self.tries, enforced, self.enforced = self.known, [], self.tries, [], self.enforced, set()
        self.generic_visit(node)
        self.scope.pop()
        self.handlers, self.known, self.tries, self.enforced, self.sparing = outer, known, tries, enforced, sparing

    def generic_visit(self, node: ast.AST) -> None:
        for _, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                self._block(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    def _block(self, stmts: list[ast.stmt], holding: ast.expr | None = None) -> None:
        """Statements in order: what an `assert` or an early exit leaves true holds for the ones after it."""
        depth = len(self.known)
        if holding is not None:
            self._hold(holding)
        for stmt in stmts:
            self.visit(stmt)
            if isinstance(stmt, ast.Assert):
                self._hold(stmt.test, enforced=True)
            elif isinstance(stmt, ast.If) and not stmt.orelse and stmt.body and isinstance(stmt.body[-1], _EXITS):
                self._hold(negate(stmt.test), enforced=isinstance(stmt.body[-1], ast.Raise))
        del self.known[depth:]

    def _hold(self, test: ast.expr, enforced: bool = False) -> None:
        for part in conjuncts(test):
            text = ast.unparse(part)
            if len(text) <= MAX_KNOWN_TEXT:
                self.known.append(text)
                if enforced:
                    self.enforced.add(text)

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        tested = _platforms_tested(node.test)  # `if current_platform.is_rocm():` imports what runs on ROCm only
        outer_platforms = self.platforms
        if dotted(node.test).rpartition(".")[2] == "TYPE_CHECKING":  # imported for the type checker: never run
            outer, self.type_checking = self.type_checking, True
            self._block(node.body, node.test)
            self.type_checking = outer
        else:
            self.platforms = outer_platforms & tested if tested is not None else outer_platforms
            self._block(node.body, node.test)
        self.platforms = outer_platforms - tested if tested is not None else outer_platforms
        self._block(node.orelse, negate(node.test))
        self.platforms = outer_platforms

    def _bind(self, *targets: ast.expr | None) -> None:
        """Count the names a statement binds in the current function (Definition.rebound): names, and names in a
        tuple or a starred target; `x[i] -= 1` changes x but does not bind it."""
        todo = [t for t in targets if t is not None]
        while todo and self.scope:
            target = todo.pop()
            if isinstance(target, ast.Name):
                self.bound[(".".join(self.scope), target.id)] += 1
            elif isinstance(target, (ast.Tuple, ast.List)):
                todo += target.elts
            elif isinstance(target, ast.Starred):
                todo.append(target.value)

    def _bound_by(self, node: ast.AST) -> None:
        """A statement that binds names besides assignments: a loop's target, `with ... as`, `:=`, `x += 1`."""
        targets = [i.optional_vars for i in node.items] if isinstance(node, (ast.With, ast.AsyncWith)) else [node.target]  # type: ignore[attr-defined]
        self._bind(*targets)
        self.generic_visit(node)

    visit_AugAssign = visit_For = visit_AsyncFor = visit_With = visit_AsyncWith = visit_NamedExpr = _bound_by

    def visit_Import(self, node: ast.Import) -> None:
        self._bind_imports(node)
        if not self.type_checking:
            self._imported([a.name for a in node.names if a.name.split(".")[0] == "vllm"])

    def _imported(self, names: list[str]) -> None:
        self.imports += names
        self.platform_imports += [(name, self.platforms) for name in names]

    def _bind_imports(self, node: ast.Import | ast.ImportFrom) -> None:  # `import pandas as pd` binds `pd`
        self._bind(*(ast.Name(id=(a.asname or a.name).split(".")[0]) for a in node.names))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._bind_imports(node)
        if self.type_checking:
            return
        base = self.package[: len(self.package) - node.level + 1] if node.level else []
        module = ".".join([*base, *(node.module or "").split(".")]).strip(".")
        if module.split(".")[0] == "vllm":
            self._imported([module, *(f"{module}.{a.name}" for a in node.names if a.name != "*")])

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _MODULE.match(node.value) and not self.type_checking:
            self.imports.append(node.value)  # `importlib.import_module("vllm.x")`, `resolve_obj_by_qualname("vllm.x.C")`

    def visit_While(self, node: ast.While) -> None:
        self.visit(node.test)
        self._block(node.body, node.test)
        self._block(node.orelse)

    def _try(self, node: ast.Try) -> None:
        keeping = [h for h in node.handlers if not any(isinstance(n, ast.Raise) for n in ast.walk(h))]  # catch, raise nothing
        catching = [(name, h.lineno) for h in keeping for name in _caught_names(h.type)]
        # a handler whose raise sits under a test may also go on (`except E: if not fallback: raise`)
        maybe = [(name, h.lineno) for h in node.handlers if h not in keeping and not any(isinstance(x, ast.Raise) for x in h.body)
                 for name in _caught_names(h.type)]
        outer, self.handlers = self.handlers, catching + self.handlers
        sparing, self.sparing = self.sparing, maybe + self.sparing
        tries, self.tries = self.tries, [h.lineno for h in node.handlers] + self.tries
        self._block(node.body)
        self.handlers, self.tries, self.sparing = outer, tries, sparing
        for handler in keeping:
            said = next((found for n in ast.walk(handler) if isinstance(n, ast.Call) for found in [_logged(n)] if found), None)
            if said:
                self.logged.append((handler.lineno, *said))
        for part in (*node.handlers, *node.orelse, *node.finalbody):
            self.visit(part)

    visit_Try = _try
    visit_TryStar = _try

    def visit_Raise(self, node: ast.Raise) -> None:
        if self.tries:
            self.raises.append((node.lineno, tuple(self.tries), tuple(self.handlers), tuple(self.sparing)))
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = _function
    visit_ClassDef = _class

    def visit_Assert(self, node: ast.Assert) -> None:
        if node.msg is None:
            self.asserts.append(BareAssert(self.path, node.lineno, ".".join(self.scope), assert_key(self._text(node.test))))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if not self.scope:  # `Factory.register_connector("Name", "vllm.module", "Class")` as the module is imported
            strings = [_string(x) for x in [*node.args, *(k.value for k in node.keywords)]]
            modules = [x for x in strings if _MODULE.match(x)]
            names = [x for x in strings if x and not _MODULE.match(x)]
            if len(modules) == 1 and names and dotted(node.func):
                cls = names[1] if len(names) > 1 and names[1].isidentifier() else ""
                self.registrations.append(Registration(dotted(node.func), names[0], modules[0], cls))
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name:
            args = tuple("*" if isinstance(x, ast.Starred) else dotted(x) or _literal(x) for x in node.args)
            keywords = tuple((k.arg or "*", dotted(k.value) or _literal(k.value)) for k in node.keywords)
            known = tuple(dict.fromkeys(self.known[-MAX_KNOWN:]))
            self.calls.append(Call(".".join(self.scope), node.lineno, name, isinstance(func, ast.Attribute), args, keywords, tuple(self.handlers),
                                   known, dotted(func.value) if isinstance(func, ast.Attribute) else "", tuple(self.tries),
                                   tuple(t for t in known if t in self.enforced), tuple(self.sparing)))
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._bind(*node.targets)
        if self.scope and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.assigned.setdefault((".".join(self.scope), node.targets[0].id), []).append(dotted(node.value))
        if not self.scope and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self._registry(node.targets[0].id, node.value)
            self._constant(node.targets[0].id, node.value, node.lineno)
        self.generic_visit(node)

    def _constant(self, name: str, value: ast.expr, line: int) -> None:
        """`MAX_TOKENS = 128` at module level: a literal a guard may compare with."""
        if not _CONSTANT.match(name):
            return
        try:
            ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return
        text = ast.unparse(value)
        if len(text) <= MAX_CONSTANT:
            self.constants.append((name, text, line))

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._bind(node.target)
        if not self.scope and isinstance(node.target, ast.Name) and node.value is not None:
            self._registry(node.target.id, node.value)
            self._constant(node.target.id, node.value, node.lineno)
        self.generic_visit(node)

    def _registry(self, target: str, value: ast.expr) -> None:
        """`{"LlamaForCausalLM": ("llama", "LlamaForCausalLM"), ...}`: names and the modules vLLM imports for them
        (relative to the file's package unless they start with `vllm.`)."""
        if not isinstance(value, ast.Dict):
            return
        pairs = [(_string(k), [_string(e) for e in v.elts]) for k, v in zip(value.keys, value.values)
                 if k is not None and isinstance(v, ast.Tuple) and len(v.elts) == 2]
        pairs = [(k, m, cls) for k, (m, cls) in pairs if k and m and cls]
        if len(pairs) < MIN_REGISTRY:
            return
        for key, module, cls in pairs:
            absolute = module if _MODULE.match(module) else ".".join([*self.package, module])
            self.registrations.append(Registration(target, key, absolute, cls))

    def _text(self, node: ast.AST) -> str:
        # ast.get_source_segment re-splits the whole file on every call; the lines are split once here.
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1  # type: ignore[attr-defined]
        if first == last:
            return self.lines[first][node.col_offset : node.end_col_offset]  # type: ignore[attr-defined]
        return "\n".join([self.lines[first][node.col_offset :], *self.lines[first + 1 : last], self.lines[last][: node.end_col_offset]])  # type: ignore[attr-defined]

    def facts(self) -> FileFacts:
        bindings = tuple(Binding(f, n, v[0]) for (f, n), v in self.assigned.items() if len(v) == 1 and v[0])
        registered = {r.module for r in self.registrations} | {f"{r.module}.{n}" for r in self.registrations for n in (r.name, r.cls)}
        imports = tuple(dict.fromkeys(i for i in self.imports if i not in registered))
        assigned = collections.Counter(name for name, _, _ in self.constants)  # given twice (in branches): no one value
        constants = tuple(x for x in self.constants if assigned[x[0]] == 1)
        where: dict[str, frozenset[str]] = {}
        for name, platforms in self.platform_imports:
            where[name] = where.get(name, frozenset()) | platforms
        platform_imports = tuple((name, ",".join(sorted(where[name]))) for name in imports if where.get(name, PLATFORMS) != PLATFORMS)
        rebound: dict[str, list[str]] = {}
        for (function, name), times in sorted(self.bound.items()):
            if times > 1:
                rebound.setdefault(function, []).append(name)
        definitions = tuple(replace(d, rebound=tuple(rebound[d.qualname])) if d.qualname in rebound and d.qualname in self.functions else d
                            for d in self.definitions)
        return FileFacts(tuple(self.asserts), definitions, tuple(self.calls), bindings, imports, tuple(self.registrations), constants,
                         platform_imports, tuple(self.logged), tuple(self.raises))


def file_facts(path: str, data: bytes) -> FileFacts:
    """What the whole-program stage needs of one file; nothing when it does not parse (the scan reports that)."""
    text = data.decode("utf-8", errors="replace")
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return FileFacts()
    return tree_facts(path, text, tree)


def tree_facts(path: str, text: str, tree: ast.Module) -> FileFacts:
    visitor = _Facts(path, text)
    visitor.visit(tree)
    return visitor.facts()


def stored_facts(path: str, blob: str, found: FileFacts) -> dict[str, bytes]:
    """A file's facts as the cache keeps them, by key: its asserts, and its program facts."""
    asserts, program = _encoded(found)
    return {facts_key(path, blob, "asserts"): asserts, facts_key(path, blob, "program"): program}


def facts_key(path: str, blob: str, part: str) -> str:
    return hashlib.sha256(f"facts\x1f{FACTS_VERSION}\x1f{part}\x1f{path}\x1f{blob}".encode()).hexdigest()


# Stored as lists, not objects: a release has some 400,000 calls, and key names would be most of the bytes.
def _encoded(f: FileFacts) -> tuple[bytes, bytes]:
    """(the asserts, the program facts) as stored."""
    asserts = json.dumps([[a.line, a.function, a.expression] for a in f.asserts]).encode()
    program = json.dumps([[[d.qualname, d.line, d.params, d.returns, d.annotations, d.bases, d.fields, d.abstract, d.decorators, d.unset, d.rebound, d.defaults]
                           for d in f.definitions],
                          [[c.caller, c.line, c.name, c.method, c.args, c.keywords, c.caught, c.known, c.receiver, c.tried, c.enforced, c.spared] for c in f.calls],
                          [[b.function, b.name, b.value] for b in f.bindings], f.imports,
                          [[r.registry, r.name, r.module, r.cls] for r in f.registrations], f.constants, f.platform_imports, f.logged, f.raises],
                         separators=(",", ":")).encode()
    return asserts, program


def _program_facts(data: bytes) -> FileFacts:
    definitions, calls, bindings, imports, registrations, constants, platform_imports, logged, raises = json.loads(data)
    return FileFacts((), tuple(Definition(q, line, tuple(p), r, tuple(a), tuple(b), tuple(f), x, tuple(dec), tuple(u), tuple(rb), tuple(df))
                           for q, line, p, r, a, b, f, x, dec, u, rb, df in definitions),
                     tuple(Call(c, line, n, m, tuple(a), tuple(map(tuple, k)), tuple(map(tuple, h)), tuple(w), r, tuple(t), tuple(e),
                                tuple(map(tuple, sp))) for c, line, n, m, a, k, h, w, r, t, e, sp in calls),
                     tuple(Binding(*b) for b in bindings), tuple(imports), tuple(Registration(*r) for r in registrations),
                     tuple(map(tuple, constants)), tuple(map(tuple, platform_imports)), tuple(map(tuple, logged)),
                     tuple((line, tuple(tried), tuple(map(tuple, caught)), tuple(map(tuple, spared))) for line, tried, caught, spared in raises))


def _read(path: str, data: bytes) -> tuple[bytes, bytes]:
    return _encoded(file_facts(path, data))


def _read_all(files: Sequence[SourceFile]) -> list[tuple[bytes, bytes]]:
    """Each file's facts as stored; in one process per core when there are many (a release read for the first time)."""
    if len(files) < 64 or (os.cpu_count() or 1) < 2:
        return [_read(f.path, f.data) for f in files]
    with ProcessPoolExecutor() as pool:
        return list(pool.map(_read, [f.path for f in files], [f.data for f in files], chunksize=16))


def release_facts(files: Sequence[SourceFile], cache: "ScanCache") -> tuple[tuple[BareAssert, ...], Callable[[], dict[str, FileFacts]]]:
    """The release's asserts without a message, and a function that reads its program facts (definitions, calls,
    bindings) from the cache when first asked: only the newest release of a history is annotated, and a history of
    73 releases would otherwise read 73 programs. Files not read before are read now, both parts at once."""
    asserts_keys = [facts_key(f.path, f.blob, "asserts") for f in files]
    program_keys = {f.path: facts_key(f.path, f.blob, "program") for f in files}
    stored = cache.get_many(asserts_keys)
    asserts: list[BareAssert] = []
    new: dict[str, bytes] = {}
    missing = [f for f, key in zip(files, asserts_keys) if key not in stored]
    for f, (asserts_data, program_data) in zip(missing, _read_all(missing)):
        stored[facts_key(f.path, f.blob, "asserts")] = new[facts_key(f.path, f.blob, "asserts")] = asserts_data
        new[program_keys[f.path]] = program_data
    for f, key in zip(files, asserts_keys):
        asserts += [BareAssert(f.path, line, function, expression) for line, function, expression in json.loads(stored[key])]
    if new:
        cache.put_many(new)
        cache.commit()
    directory = cache.directory

    def program() -> dict[str, FileFacts]:
        from .cache import ScanCache

        with ScanCache(directory, readonly=True) as reader:
            data = reader.get_many(program_keys.values())
        return {path: _program_facts(data[key]) for path, key in program_keys.items() if key in data}

    return tuple(sorted(asserts, key=lambda a: (a.path, a.line))), program


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

