"""Settings a user can change, read from one module: engine config fields, the CLI flags that set them, VLLM_* variables."""

from __future__ import annotations

import re

import libcst as cst

from ..model import ConfigField, EnvVar, Flag
from .raises import dotted_name

_GETENV_DEFAULT = re.compile(r"getenv\(\s*(['\"])(?P<name>\w+)\1\s*,\s*(?P<default>[^()]*?|\w+\([^()]*\))\s*\)")
ENV_DICT = "environment_variables"


def _is_config_class(node: cst.ClassDef) -> bool:
    for decorator in node.decorators:
        target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
        if (dotted_name(target) or "").rpartition(".")[2] == "config":
            return True
    return False


def _literal_aliases(module: cst.Module) -> dict[str, cst.BaseExpression]:
    """Module-level `Name = Literal[...]` (and `Name: TypeAlias = ...`) type aliases."""
    aliases: dict[str, cst.BaseExpression] = {}
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                aliases[small.targets[0].target.value] = small.value
            elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
                aliases[small.target.value] = small.value
    return aliases


def _choices(module: cst.Module, annotation: cst.BaseExpression, aliases: dict, depth: int = 0) -> list[str]:
    """The literal values a type admits: `Literal["a", "b"]`, through aliases and `X | None` unions."""
    if depth > 5:
        return []
    if isinstance(annotation, cst.Subscript):
        name = (dotted_name(annotation.value) or "").rpartition(".")[2]
        if name == "Literal":
            return [module.code_for_node(el.slice.value).strip() for el in annotation.slice if isinstance(el.slice, cst.Index)]
        if name in ("SkipValidation", "Annotated", "Optional"):
            first = annotation.slice[0].slice
            return _choices(module, first.value, aliases, depth + 1) if isinstance(first, cst.Index) else []
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        return _choices(module, annotation.left, aliases, depth + 1) + _choices(module, annotation.right, aliases, depth + 1)
    if isinstance(annotation, cst.Name) and annotation.value in aliases:
        return _choices(module, aliases[annotation.value], aliases, depth + 1)
    return []


def _docstring_after(body: list[cst.BaseStatement], index: int) -> str | None:
    """The attribute docstring: a string statement right below the field."""
    if index + 1 < len(body):
        nxt = body[index + 1]
        if isinstance(nxt, cst.SimpleStatementLine) and len(nxt.body) == 1 and isinstance(nxt.body[0], cst.Expr):
            value = nxt.body[0].value
            if isinstance(value, (cst.SimpleString, cst.ConcatenatedString)):
                text = value.evaluated_value
                if isinstance(text, str):
                    return _clean_doc(text)
    return None


def _clean_doc(text: str) -> str:
    lines = text.strip().split("\n")
    indent = min((len(line) - len(line.lstrip()) for line in lines[1:] if line.strip()), default=0)
    return "\n".join([lines[0].strip(), *(line[indent:].rstrip() for line in lines[1:])]).strip()


def _default_of(module: cst.Module, value: cst.BaseExpression | None) -> str | None:
    """`= 8`, `= field(default=8)`, `= Field(default=8)`; a default_factory has no single value to show."""
    if value is None:
        return None
    if isinstance(value, cst.Call) and (dotted_name(value.func) or "").rpartition(".")[2] in ("field", "Field"):
        for arg in value.args:
            if arg.keyword is not None and arg.keyword.value == "default":
                return module.code_for_node(arg.value).strip()
        return None
    return module.code_for_node(value).strip()


def config_fields(path: str, module: cst.Module, lines: dict) -> list[ConfigField]:
    aliases = _literal_aliases(module)
    found = []
    for cls in module.body:
        if not isinstance(cls, cst.ClassDef) or not _is_config_class(cls):
            continue
        body = list(cls.body.body)
        for index, stmt in enumerate(body):
            if not isinstance(stmt, cst.SimpleStatementLine) or not isinstance(stmt.body[0], cst.AnnAssign):
                continue
            ann = stmt.body[0]
            if not isinstance(ann.target, cst.Name) or (dotted_name(getattr(ann.annotation.annotation, "value", ann.annotation.annotation)) or "").endswith("ClassVar"):
                continue
            default = _default_of(module, ann.value)
            found.append(
                ConfigField(
                    config=cls.name.value,
                    name=ann.target.value,
                    type=module.code_for_node(ann.annotation.annotation).strip(),
                    default=default,
                    choices=tuple(dict.fromkeys(_choices(module, ann.annotation.annotation, aliases))),
                    doc=_docstring_after(body, index),
                    path=path,
                    line=lines.get(ann, (0, 0))[0],
                )
            )
    return found


class _FlagVisitor(cst.CSTVisitor):
    """`add_argument("--flag", "-f", **cache_kwargs["field"])` with `cache_kwargs = get_kwargs(CacheConfig)` before it."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self.kwargs_of: dict[str, str] = {}
        self.flags: list[Flag] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if isinstance(value, cst.Call) and (dotted_name(value.func) or "").endswith("get_kwargs") and value.args:
            config = dotted_name(value.args[0].value)
            for target in node.targets:
                if isinstance(target.target, cst.Name) and config:
                    self.kwargs_of[target.target.value] = config.rpartition(".")[2]

    def visit_Call(self, node: cst.Call) -> None:
        if not isinstance(node.func, cst.Attribute) or node.func.attr.value != "add_argument":
            return
        names = [a.value.evaluated_value for a in node.args if not a.star and a.keyword is None and isinstance(a.value, cst.SimpleString)]
        names = [n for n in names if isinstance(n, str) and n.startswith("-")]
        if not names:
            return
        config, field = self._setting_of(node)
        self.flags.append(Flag(flags=tuple(names), config=config, field=field, path=self.path, line=self.line_of(names[0])))

    def _setting_of(self, node: cst.Call) -> tuple[str, str]:
        """The config field a flag sets, from `**cache_kwargs["x"]` or `**{**cache_kwargs["x"], ...}`; ("", "") for none."""
        for arg in node.args:
            if arg.star != "**":
                continue
            subs = [arg.value] if isinstance(arg.value, cst.Subscript) else [
                e.value for e in getattr(arg.value, "elements", ()) if isinstance(e, cst.StarredDictElement)
            ]
            for sub in subs:
                if isinstance(sub, cst.Subscript) and isinstance(sub.value, cst.Name) and sub.value.value in self.kwargs_of:
                    key = sub.slice[0].slice
                    if isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString):
                        return self.kwargs_of[sub.value.value], str(key.value.evaluated_value)
        return "", ""

    def line_of(self, flag: str) -> int:
        """Calls are not among the nodes whose lines the codegen records; the flag's string is unique."""
        at = self.text.find(f'"{flag}"')
        return self.text.count("\n", 0, at) + 1 if at >= 0 else 0


def flags(path: str, module: cst.Module, text: str) -> list[Flag]:
    visitor = _FlagVisitor(path, text)
    module.visit(visitor)
    return visitor.flags


def env_vars(path: str, module: cst.Module, text: str) -> list[EnvVar]:
    """The keys of vLLM's `environment_variables` dict, each documented by the comment block above it."""
    file_lines = text.split("\n")
    found = []
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        small = stmt.body[0]
        target = small.target if isinstance(small, cst.AnnAssign) else small.targets[0].target if isinstance(small, cst.Assign) else None
        if not isinstance(target, cst.Name) or target.value != ENV_DICT or not isinstance(small.value, cst.Dict):
            continue
        for element in small.value.elements:
            if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
                continue
            name = element.key.evaluated_value
            if not isinstance(name, str):
                continue
            line = next((i + 1 for i, row in enumerate(file_lines) if row.strip().startswith((f'"{name}"', f"'{name}'"))), 0)
            doc: list[str] = []
            row = line - 2
            while row >= 0 and file_lines[row].strip().startswith("#"):
                doc.insert(0, file_lines[row].strip().lstrip("#").strip())
                row -= 1
            value = module.code_for_node(element.value)
            default = next((m.group("default").strip() for m in _GETENV_DEFAULT.finditer(value) if m.group("name") == name), None)
            doc_text = " ".join(d for d in doc if d and not d.startswith(("=", "-"))) or None
            found.append(EnvVar(name=name, doc=doc_text, default=default, path=path, line=line))
    return found


def _generates_flags(cls: cst.ClassDef) -> bool:
    """A class that declares a flag per field: `add_argument(f"--{key.replace('_', '-')}", ...)` in a loop."""
    for call in _calls(cls):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_argument":
            for arg in call.args:
                if isinstance(arg.value, cst.FormattedString) and arg.value.parts and isinstance(arg.value.parts[0], cst.FormattedStringText) and arg.value.parts[0].value == "--":
                    return True
    return False


def _calls(node: cst.CSTNode) -> list[cst.Call]:
    found: list[cst.Call] = []

    class Calls(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            found.append(call)

    node.visit(Calls())
    return found


def generated_flags(path: str, module: cst.Module, text: str, fields: list[ConfigField]) -> list[Flag]:
    """Flags made from field names: for a generating @config class and its subclasses in this module."""
    classes = {c.name.value: c for c in module.body if isinstance(c, cst.ClassDef)}
    generators = {name for name, cls in classes.items() if _generates_flags(cls)}
    if not generators:
        return []
    generating = {
        name for name, cls in classes.items()
        if name in generators or any((dotted_name(b.value) or "") in generators for b in cls.bases)
    }
    found = []
    for field in fields:
        if field.config in generating:
            flag = "--" + field.name.replace("_", "-")
            at = text.find(f"    {field.name}:")
            found.append(Flag(flags=(flag,), config=field.config, field=field.name, path=path, line=text.count("\n", 0, at) + 1 if at >= 0 else field.line))
    return found
