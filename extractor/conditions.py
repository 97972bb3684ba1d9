"""Guard conditions as logic: parsed from their source text, negated (De Morgan), and said in words."""

from __future__ import annotations

import ast

from .markup import code

_INVERSE = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_WORDS = {
    ast.Eq: "is",
    ast.NotEq: "is not",
    ast.Lt: "is less than",
    ast.LtE: "is at most",
    ast.Gt: "is greater than",
    ast.GtE: "is at least",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "is in",
    ast.NotIn: "is not in",
}


def parse(text: str) -> ast.expr | None:
    """The expression, each node remembering its text as written (`"naive"`, not unparse's `'naive'`)."""
    text = text.strip()
    tree = None
    # `if x := f():` is valid, but its test alone parses only in parentheses.
    for candidate in (text, f"({text})"):
        try:
            tree = ast.parse(candidate, mode="eval").body
            text = candidate
            break
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    if tree is None:
        return None
    for node in ast.walk(tree):
        segment = ast.get_source_segment(text, node) if hasattr(node, "lineno") else None
        if segment is not None:
            node.written = " ".join(segment.split())  # type: ignore[attr-defined]
    return tree


_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
        ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}


def src(node: ast.AST) -> str:
    """The expression's text, in the code's own spelling where the code wrote it."""
    written = getattr(node, "written", None)
    if isinstance(node, ast.NamedExpr):
        return f"({written or ast.unparse(node)})"  # its parentheses are not part of its source segment
    if written:
        return written
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return f"{_operand(node.left)} {_OPS[type(node.ops[0])]} {_operand(node.comparators[0])}"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return f"not {_operand(node.operand)}"
    if isinstance(node, ast.BoolOp):
        joiner = " and " if isinstance(node.op, ast.And) else " or "
        return joiner.join(_operand(v) for v in node.values)
    return ast.unparse(node)


def _operand(node: ast.AST) -> str:
    return f"({src(node)})" if isinstance(node, (ast.BoolOp, ast.Compare)) else src(node)


def negate(node: ast.expr) -> ast.expr:
    """The condition that holds exactly when `node` does not, with `not` pushed inward."""
    if isinstance(node, ast.BoolOp):
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return ast.BoolOp(op=other, values=[negate(v) for v in node.values])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return node.operand
    if isinstance(node, ast.Compare):
        pairs = split_chain(node)
        if len(pairs) > 1:
            return ast.BoolOp(op=ast.Or(), values=[negate(p) for p in pairs])
        return ast.Compare(left=node.left, ops=[_INVERSE[type(node.ops[0])]()], comparators=node.comparators)
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return ast.Constant(value=not node.value)
    return ast.UnaryOp(op=ast.Not(), operand=node)


def split_chain(node: ast.Compare) -> list[ast.Compare]:
    """`a < b <= c` is `a < b and b <= c`."""
    lefts = [node.left, *node.comparators[:-1]]
    return [ast.Compare(left=l, ops=[op], comparators=[r]) for l, op, r in zip(lefts, node.ops, node.comparators)]


def conjuncts(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return [c for v in node.values for c in conjuncts(v)]
    if isinstance(node, ast.Compare) and len(node.ops) > 1:
        return list(split_chain(node))
    return [node]


def disjuncts(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        return [d for v in node.values for d in disjuncts(v)]
    return [node]


def is_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(is_literal(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return is_literal(node.operand)
    return False


def is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _items(node: ast.expr) -> str:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts:
        return ", ".join(code(src(e)) for e in node.elts)
    return code(src(node))


def say(node: ast.expr) -> str:
    """The condition in words, with code in code spans: `x` is greater than `y`."""
    if isinstance(node, ast.BoolOp):
        joiner = ", and " if isinstance(node.op, ast.And) else ", or "
        return joiner.join(_merged_phrases(node))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = node.operand
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "isinstance" and len(inner.args) == 2:
            return f"{code(src(inner.args[0]))} is not {_kind_of(inner.args[1])}"
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "hasattr" and len(inner.args) == 2:
            return f"{code(src(inner.args[0]))} has no attribute {code(src(inner.args[1]))}"
        if isinstance(inner, (ast.Compare, ast.BoolOp)):
            return say(negate(inner))
        return f"{code(src(inner))} is false or empty"
    if isinstance(node, ast.Compare):
        pairs = split_chain(node)
        if len(pairs) > 1:
            return ", and ".join(say(p) for p in pairs)
        op, right = type(node.ops[0]), node.comparators[0]
        left = code(src(node.left))
        if op in (ast.In, ast.NotIn) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
            return f"{left} is {'one of' if op is ast.In else 'none of'} {_items(right)}"
        if is_none(right) and op in (ast.Is, ast.IsNot, ast.Eq, ast.NotEq):
            return f"{left} is {'None' if op in (ast.Is, ast.Eq) else 'set (not None)'}"
        return f"{left} {_WORDS[op]} {code(src(right))}"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "isinstance" and len(node.args) == 2:
            return f"{code(src(node.args[0]))} is {_kind_of(node.args[1])}"
        if node.func.id == "hasattr" and len(node.args) == 2:
            return f"{code(src(node.args[0]))} has the attribute {code(src(node.args[1]))}"
    if isinstance(node, ast.Call):
        return f"{code(src(node))} returns true"
    if isinstance(node, ast.NamedExpr):
        return f"{say(node.value)} (kept as {code(src(node.target))})"
    if isinstance(node, ast.Constant):
        return "always" if node.value else "never"
    return f"{code(src(node))} is true"


def _kind_of(types: ast.expr) -> str:
    if isinstance(types, ast.Tuple):
        return "one of " + ", ".join(code(src(t)) for t in types.elts)
    return f"a {code(src(types))}"


def _merged_phrases(node: ast.BoolOp) -> list[str]:
    """`x != "a" and x is not None` reads better as `x` is neither `"a"` nor None."""
    phrases: list[str] = []
    values = list(node.values)
    i = 0
    while i < len(values):
        value = values[i]
        if isinstance(node.op, ast.And) and isinstance(value, ast.Compare) and len(value.ops) == 1 and isinstance(value.ops[0], (ast.NotEq, ast.IsNot)):
            left = src(value.left)
            group = [value.comparators[0]]
            j = i + 1
            while j < len(values):
                nxt = values[j]
                if isinstance(nxt, ast.Compare) and len(nxt.ops) == 1 and isinstance(nxt.ops[0], (ast.NotEq, ast.IsNot)) and src(nxt.left) == left:
                    group.append(nxt.comparators[0])
                    j += 1
                else:
                    break
            if len(group) > 1:
                names = ["None" if is_none(g) else code(src(g)) for g in group]
                phrases.append(f"{code(left)} is neither {', '.join(names[:-1])} nor {names[-1]}")
                i = j
                continue
        phrases.append(say(value) if not isinstance(value, ast.BoolOp) else f"({say(value)})")
        i += 1
    return phrases


def attribute_chain(node: ast.expr) -> list[str] | None:
    """`self.model_config.max_model_len` -> ["self", "model_config", "max_model_len"]."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *parts]
    return None


def specificity(node: ast.expr) -> int:
    """How directly a condition names something to change: a comparison with a literal beats a call."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        right = node.comparators[0]
        if is_none(right):
            return 3
        if is_literal(right):
            return 5 if isinstance(node.ops[0], (ast.Eq, ast.In)) else 4
        return 3
    if attribute_chain(node) or isinstance(node, ast.UnaryOp) and attribute_chain(node.operand):
        return 2
    return 1
