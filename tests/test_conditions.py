"""Conditions in words and negated: example tables for every operator the guards use."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_errors import conditions as c

# (condition, in words)
SAID = [
    ("a and b", "`a` is true, and `b` is true"),
    ("a or b", "`a` is true, or `b` is true"),
    ("not a", "`a` is false or empty"),
    ("x == 'naive'", "`x` is `'naive'`"),
    ('x != "naive"', '`x` is not `"naive"`'),
    ("n > limit", "`n` is greater than `limit`"),
    ("n <= 8", "`n` is at most `8`"),
    ("0 < n <= 8", "`0` is less than `n`, and `n` is at most `8`"),
    ("x is None", "`x` is None"),
    ("x is not None", "`x` is set (not None)"),
    ("mode in ('a', 'b')", "`mode` is one of `'a'`, `'b'`"),
    ("mode not in MODES", "`mode` is not in `MODES`"),
    ("isinstance(x, int)", "`x` is a `int`"),
    ("not isinstance(x, (int, float))", "`x` is not one of `int`, `float`"),
    ("hasattr(m, 'w')", "`m` has the attribute `'w'`"),
    ("not hasattr(config, 'first_dense')", "`config` has no attribute `'first_dense'`"),
    ("is_mla(cfg)", "`is_mla(cfg)` returns true"),
    ("(n := len(xs)) > 3", "`(n := len(xs))` is greater than `3`"),
    ("not (n := len(xs))", "`(n := len(xs))` is false or empty"),
    ("engine := find(name)", "`find(name)` returns true (kept as `engine`)"),
    ("x != 'a' and x is not None", "`x` is neither `'a'` nor None"),
    ("not (a and b)", "`a` is false or empty, or `b` is false or empty"),
    ("s.count('`') > 1", "``s.count('`')`` is greater than `1`"),
]


@pytest.mark.parametrize(("text", "words"), SAID, ids=[s[0] for s in SAID])
def test_say(text, words):
    assert c.say(c.parse(text)) == words


# (condition, its negation)
NEGATED = [
    ("a and b", "not a or not b"),
    ("a or b", "not a and (not b)"),
    ("not a", "a"),
    ("x == 1", "x != 1"),
    ("x < 1", "x >= 1"),
    ("x >= 1", "x < 1"),
    ("x is None", "x is not None"),
    ("x in xs", "x not in xs"),
    ("0 < x < 9", "0 >= x or x >= 9"),
    ("isinstance(x, int)", "not isinstance(x, int)"),
    ("a and (b or c == 2)", "not a or (not b and c != 2)"),
]


@pytest.mark.parametrize(("text", "negation"), NEGATED, ids=[n[0] for n in NEGATED])
def test_negate(text, negation):
    assert ast.unparse(c.negate(c.parse(text))) == ast.unparse(ast.parse(negation, mode="eval").body)


def test_disjuncts_rank_literal_comparisons_first():
    guard = c.parse('use_mla and (serde != "naive" and serde is not None)')
    options = sorted(c.disjuncts(c.negate(guard)), key=lambda n: -c.specificity(n))
    assert [c.src(o) for o in options] == ['serde == "naive"', "serde is None", "not use_mla"]


def test_code_span_survives_backticks():
    assert c.code("a`b") == "``a`b``"
    assert c.code("`x`") == "`` `x` ``"


def test_unparsable_condition_is_none():
    assert c.parse("if x:") is None


NAMES = st.sampled_from(["a", "b", "x.y", "f(z)"])
ATOMS = st.one_of(
    NAMES,
    st.builds(lambda n, op, v: f"{n} {op} {v}", NAMES, st.sampled_from(["==", "!=", "<", ">=", "in"]), st.sampled_from(["1", "'s'", "(1, 2)"])),
    st.builds(lambda n, op: f"{n} {op} None", NAMES, st.sampled_from(["is", "is not"])),
)
EXPRS = st.recursive(ATOMS, lambda inner: st.one_of(
    st.builds(lambda a, b: f"({a}) and ({b})", inner, inner),
    st.builds(lambda a, b: f"({a}) or ({b})", inner, inner),
    st.builds(lambda a: f"not ({a})", inner),
), max_leaves=6)


@settings(max_examples=200, deadline=None)
@given(text=EXPRS, values=st.dictionaries(st.sampled_from(["a", "b"]), st.booleans()))
def test_negation_is_the_logical_complement(text, values):
    """Evaluated on the same values, a condition and its negation always disagree."""

    class Obj:
        y = 1

    env = {"a": values.get("a", True), "b": values.get("b", False), "x": Obj(), "f": lambda z: z, "z": 0}
    node = c.parse(text)
    try:
        original = bool(eval(compile(ast.Expression(node), "<t>", "eval"), {}, env))  # noqa: S307 - generated test expressions
    except TypeError:
        return  # `1 in 1` and the like: not a boolean condition
    negated = bool(eval(compile(ast.fix_missing_locations(ast.Expression(c.negate(node))), "<t>", "eval"), {}, env))  # noqa: S307
    assert negated is not original
