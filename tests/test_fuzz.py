"""Fuzzing the scanner: whatever a file holds, a scan gives a result or a listed problem, never an exception.

Programs from Python's grammar (hypothesmith) and odd files built from the shapes that broke it once
(NUL bytes, \\r line ends, tabs and form feeds, encoding declarations, deep nesting, long sums, bytes
that are no text), with a fixed seed. The suite runs a few of each; CI runs many more:

    VLLM_ERRORS_FUZZ=2000 .venv/bin/pytest -q tests/test_fuzz.py
"""

from __future__ import annotations

import os

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_errors.model import ModuleScan
from vllm_errors.scanner import scan_module

EXAMPLES = int(os.environ.get("VLLM_ERRORS_FUZZ", "40"))
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])

BASE = "def check(a, b):\n    if a > b:\n        raise ValueError(f\"a ({a}) must not exceed b ({b})\")\n    assert a, 'a is empty'\n"
DEEP = st.sampled_from(["-", "~", "+", "not ", "("]).flatmap(lambda op: st.integers(300, 12_000).map(lambda n: op * n))


@st.composite
def odd_files(draw) -> bytes:
    """A small program with one of the shapes that broke the scanner, or several, at a random place."""
    text = draw(st.sampled_from([BASE, "class E(Exception):\n    pass\n\n" + BASE, ""]))
    for _ in range(draw(st.integers(1, 3))):
        shape = draw(st.sampled_from(["nul", "cr", "tabs", "formfeed", "coding", "deep", "sum", "bytes", "cut", "controls"]))
        at = draw(st.integers(0, len(text)))
        if shape == "nul":
            text = text[:at] + "\x00" + text[at:]
        elif shape == "cr":
            text = text.replace("\n", draw(st.sampled_from(["\r", "\r\n", "\n\r"])))
        elif shape == "tabs":
            text = text.replace("    ", "\t")
        elif shape == "formfeed":
            text = text.replace("\n    ", "\n\f    ", 1)
        elif shape == "coding":
            text = f"# -*- coding: {draw(st.sampled_from(['latin-1', 'ascii', 'utf-16', 'nonsense', 'cp1252']))} -*-\n" + text
        elif shape == "deep":
            text += "x = " + draw(DEEP) + "1\n"
        elif shape == "sum":
            text += "".join(f"y{k} = " + "+".join(["a"] * draw(st.integers(100, 6_000))) + "\n" for k in range(draw(st.integers(1, 3))))
        elif shape == "bytes":
            return text.encode()[:at] + draw(st.binary(max_size=64)) + text.encode()[at:]
        elif shape == "cut":
            text = text[:at]
        else:
            text = text[:at] + draw(st.text(st.characters(codec="utf-8", categories=["Cc", "Cf", "Zl", "Zp"]), max_size=8)) + text[at:]
    return text.encode("utf-8", "surrogatepass")


def check(data: bytes) -> ModuleScan:
    result = scan_module("vllm/fuzz.py", data)
    assert isinstance(result, ModuleScan)
    for problem in result.problems:
        assert problem.kind in ("syntax", "encoding", "size", "depth", "crash") and problem.detail
    for site in result.sites:
        assert site.line >= 1 and site.path == "vllm/fuzz.py"
        for text in (site.message.template or "", site.code.text):
            assert not any(ord(c) < 32 and c not in "\t\n" for c in text), "control characters reach the scan"
    return result


@FUZZ
@given(hypothesmith.from_grammar())
def test_programs_of_pythons_grammar_scan(source):
    check(source.encode("utf-8", "surrogatepass"))


@FUZZ
@given(odd_files())
def test_odd_files_scan(data):
    check(data)


def test_the_odd_file_generator_reaches_each_outcome():
    """The generator is no decoration: over a fixed sample, the scanner finds sites, and refuses files."""
    seen = set()

    @settings(max_examples=200, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(odd_files())
    def sample(data):
        result = check(data)
        seen.add("sites" if result.sites else result.problems[0].kind if result.problems else "nothing")

    sample()
    assert {"sites", "depth", "syntax"} <= seen, seen


@pytest.mark.parametrize("codec", ["utf-16", "latin-1"])
def test_a_declared_encoding_is_how_the_file_is_read(codec):
    text = f"# -*- coding: {codec} -*-\n" + BASE.replace("must not exceed", "d\u00e9passe")
    result = scan_module("vllm/fuzz.py", text.encode(codec))
    if codec == "utf-16":  # CPython reads a coding line only from ASCII-compatible bytes: this file is no source to it
        assert result.problems and result.sites == ()
    else:
        assert [s.message.template for s in result.sites][0] == "a ({a}) d\u00e9passe b ({b})"
