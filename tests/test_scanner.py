"""The scanner on small code strings: templates, exceptions, guards, assignments, code context, problems."""

from __future__ import annotations

import ast
import dataclasses
import re
import textwrap

import pytest

from vllm_errors.scanner import scan_module


def scan(code: str, path: str = "vllm/pkg/mod.py"):
    return scan_module(path, textwrap.dedent(code).encode())


def only_site(code: str, path: str = "vllm/pkg/mod.py"):
    result = scan(code, path)
    assert not result.problems
    assert len(result.sites) == 1, result.sites
    return result.sites[0]


# (code, template, placeholders, form)
TEMPLATES = [
    ("raise ValueError('plain text')", "plain text", (), "literal"),
    ("raise ValueError('a ' 'b' f'{c}')", "a b{c}", ("c",), "concat"),
    ("raise ValueError(f'len {self.max_model_len} > {limit:>8}')", "len {self.max_model_len} > {limit}", ("self.max_model_len", "limit"), "fstring"),
    ("raise ValueError(f'mode {cudagraph_mode.name!r}')", "mode {cudagraph_mode.name}", ("cudagraph_mode.name",), "fstring"),
    ("raise ValueError(f'{x=} too big')", "x={x} too big", ("x",), "fstring"),
    ("raise ValueError(f'braces {{kept}} {v}')", "braces {{kept}} {v}", ("v",), "fstring"),
    ("raise ValueError(f'tab\\there {v}')", "tab\there {v}", ("v",), "fstring"),
    ("raise ValueError(rf'raw\\d {v}')", "raw\\d {v}", ("v",), "fstring"),
    ("raise ValueError('got ' + str(n) + ' items')", "got {str(n)} items", ("str(n)",), "plus"),
    ("raise ValueError('bad %s and %d%%' % (a, b))", "bad {a} and {b}%", ("a", "b"), "percent"),
    ("raise ValueError('bad %(name)s' % vars)", "bad {name}", ("name",), "percent"),
    ("raise ValueError('bad {} and {k}'.format(a, k=b))", "bad {a} and {b}", ("a", "b"), "format"),
    ("raise ValueError('bad {0}/{0}'.format(a))", "bad {a}/{a}", ("a", "a"), "format"),
    ("raise HTTPException(status_code=400, detail=f'no {x}')", "no {x}", ("x",), "fstring"),
    ("raise HTTPException(400, 'missing model')", "missing model", (), "literal"),
    ("raise ValueError(message='kw message')", "kw message", (), "literal"),
    ("raise ValueError", "", (), "empty"),
    ("raise ValueError()", "", (), "empty"),
    ("raise ValueError(msg)", None, ("msg",), "dynamic"),
    ("raise ValueError(str(e))", None, ("str(e)",), "dynamic"),
    ("assert x > 0, f'x must be positive, got {x}'", "x must be positive, got {x}", ("x",), "fstring"),
]


@pytest.mark.parametrize(("code", "template", "placeholders", "form"), TEMPLATES, ids=[t[0] for t in TEMPLATES])
def test_message_template(code, template, placeholders, form):
    site = only_site(f"def f(self, x, a, b, n, e, v, limit, vars, msg, cudagraph_mode):\n    {code}\n")
    assert (site.message.template, site.message.placeholders, site.message.form) == (template, placeholders, form)


def test_message_from_local_variable_and_augmented_assignment():
    site = only_site(
        """
        def f(a, b):
            msg = f"first {a}"
            msg += " then " + b
            raise RuntimeError(msg)
        """
    )
    assert site.message.template == "first {a} then {b}"
    assert site.message.form == "variable"


@pytest.mark.parametrize(
    ("body", "template"),
    [
        # A value set in a branch the raise is not in leaves the variable open: no branch's text is the message
        # (a message of a variable alone is one computed at run time).
        ('kind = cfg.kind\n    if kind == "a":\n        kind = "b"\n    raise RuntimeError(f"Unknown kind: {kind}")', "Unknown kind: {kind}"),
        ('if x:\n        msg = "one"\n    else:\n        msg = "two"\n    raise RuntimeError(msg)', None),
        ('msg = "base"\n    if x:\n        msg += " more"\n    raise RuntimeError(msg)', "base"),  # what every message starts with
        # Under the raise's own condition, or before it at its level, the value is known.
        ('if x:\n        msg = f"bad {x}"\n        raise RuntimeError(msg)', "bad {x}"),
        ('msg = "old"\n    msg = "new"\n    raise RuntimeError(msg)', "new"),
    ],
)
def test_a_local_is_inlined_only_where_its_value_is_certain(body, template):
    assert only_site(f"def f(x, cfg):\n    {body}\n").message.template == template


def test_message_from_module_constant():
    site = only_site(
        """
        ERR = "module level message"

        def f():
            raise RuntimeError(ERR)
        """
    )
    assert (site.message.template, site.message.form) == ("module level message", "constant")


def test_parameter_message_has_no_invented_template():
    site = only_site("def f(msg):\n    raise RuntimeError(msg)\n")
    assert site.message.template is None
    assert site.message.note and "msg" in site.message.note


# The regex of a template matches the message Python actually formats.
FORMATTED = [
    ("f'limit {a} exceeds {b}!'", {"a": 10, "b": "x y"}),
    ("'a %s b %r' % (a, b)", {"a": 1, "b": "q"}),
    ("'{}: {k}'.format(a, k=b)", {"a": "[x]", "b": "(y)"}),
    ("'multi '\n    'line (with regex chars.*+?)' + f' {a}'", {"a": 3}),
]


@pytest.mark.parametrize(("expr", "values"), FORMATTED, ids=[f[0][:30] for f in FORMATTED])
def test_pattern_matches_the_formatted_message(expr, values):
    site = only_site(f"def f(a, b):\n    raise ValueError({expr})\n")
    formatted = eval(f"({expr})", {}, values)  # noqa: S307 - our own test strings
    match = re.fullmatch(site.message.pattern, formatted, re.S)
    assert match, (site.message.pattern, formatted)


# (code, exception as written, qualified name, how)
EXCEPTIONS = [
    ("from vllm.exceptions import VLLMValidationError\ndef f():\n    raise VLLMValidationError('x')", "VLLMValidationError", "vllm.exceptions.VLLMValidationError", "call"),
    ("from vllm import exceptions as ex\ndef f():\n    raise ex.Bad('x')", "ex.Bad", "vllm.exceptions.Bad", "call"),
    ("from .errors import Local\ndef f():\n    raise Local('x')", "Local", "vllm.pkg.errors.Local", "call"),
    ("from ..top import Up\ndef f():\n    raise Up('x')", "Up", "vllm.top.Up", "call"),
    ("class Mine(Exception): pass\ndef f():\n    raise Mine('x')", "Mine", "vllm.pkg.mod.Mine", "call"),
    ("def f():\n    raise NotImplementedError", "NotImplementedError", "NotImplementedError", "name"),
    ("def f():\n    try:\n        g()\n    except (KeyError, IndexError):\n        raise", "raise", "KeyError | IndexError", "reraise"),
    ("def f():\n    try:\n        g()\n    except OSError as e:\n        raise e", "e", "OSError", "reraise"),
    ("def f(self):\n    raise self._make_error('boom')", "self._make_error('boom')", "", "factory"),
    ("def f():\n    err = TimeoutError('late')\n    raise err", "TimeoutError", "TimeoutError", "call"),
    ("def f():\n    raise _Private('x')", "_Private", "_Private", "call"),
]


@pytest.mark.parametrize(("code", "written", "qualname", "how"), EXCEPTIONS, ids=[e[1] + "-" + e[3] for e in EXCEPTIONS])
def test_exception_resolution(code, written, qualname, how):
    site = only_site(code)
    assert (site.exception.written, site.exception.qualname, site.exception.how) == (written, qualname, how)


def test_factory_message_is_its_first_string_argument():
    site = only_site("def f(node):\n    raise _error(node, f'bad {node}')\n")
    assert site.exception.how == "factory"
    assert site.message.template == "bad {node}"


def test_init_module_relative_imports_resolve_inside_the_package():
    site = only_site("from .errors import E\ndef f():\n    raise E('x')\n", path="vllm/pkg/__init__.py")
    assert site.exception.qualname == "vllm.pkg.errors.E"


def guards(site):
    return [(g.kind, " ".join(g.code.split()), g.holds) for g in site.guard]


def test_guard_if_elif_else_chain():
    result = scan(
        """
        def f(a, b):
            if a:
                raise ValueError("one")
            elif b > 2:
                raise ValueError("two")
            else:
                raise ValueError("three")
        """
    )
    one, two, three = result.sites
    assert guards(one) == [("if", "a", True)]
    assert guards(two) == [("else", "a", False), ("elif", "b > 2", True)]
    assert guards(three) == [("else", "a", False), ("else", "b > 2", False)]


def test_guard_loops_except_match_and_assert():
    result = scan(
        """
        def f(items, mode):
            for item in items:
                while item.busy:
                    try:
                        item.go()
                    except (KeyError, ValueError) as e:
                        raise RuntimeError("failed") from e
            match mode:
                case "fast":
                    assert items, "need items"
        """
    )
    loop, case = result.sites
    assert guards(loop) == [("for", "item in items", True), ("while", "item.busy", True), ("except", "(KeyError, ValueError)", True)]
    assert loop.cause == "e"
    assert guards(case) == [("case", 'mode matches "fast"', True), ("assert", "items", False)]


def test_guard_starts_fresh_in_a_nested_function():
    site = only_site(
        """
        def outer(a):
            if a:
                def inner(b):
                    if b:
                        raise ValueError("inner")
                return inner
        """
    )
    assert site.function == "outer.inner"
    assert guards(site) == [("if", "b", True)]


def test_assignments_follow_the_guard_names_transitively():
    site = only_site(
        """
        def init(cfg, vllm_config):
            model_config = vllm_config.model_config
            unrelated = 3
            use_mla = mla_enabled(model_config)
            if use_mla and cfg.remote_serde != "naive":
                raise ValueError("MLA only works with naive serde mode..")
            use_mla = False
        """
    )
    assert [(a.name, a.code, a.line) for a in site.assignments] == [
        ("model_config", "model_config = vllm_config.model_config", 3),
        ("use_mla", "use_mla = mla_enabled(model_config)", 5),
    ]


def test_qualified_function_names():
    result = scan(
        """
        class Outer:
            class Inner:
                def method(self):
                    raise ValueError("in method")
        raise ImportError("at import")
        """
    )
    assert [s.function for s in result.sites] == ["Outer.Inner.method", "<module>"]


def test_asserts_without_message_are_not_sites():
    assert scan("def f(x):\n    assert x\n").sites == ()


def test_lines_and_code_context_match_the_file():
    code = "\n".join(["x = 1"] * 50) + "\ndef f(a):\n    b = a\n    if b:\n        raise ValueError(\n            'multi'\n            ' line'\n        )\n    return 1\n"
    site = only_site(code)
    lines = code.split("\n")
    assert (site.line, site.end_line) == (54, 57)
    assert lines[site.line - 1].strip() == "raise ValueError("
    assert site.code.first_line == 51  # the function starts there: context never leaves it
    assert site.code.text == "\n".join(lines[50:58])


def test_line_numbers_agree_with_ast_on_awkward_layout():
    code = textwrap.dedent(
        '''
        """Module doc
        over lines."""
        @decorator(
            arg,
        )
        def f(a, b):  # comment
            s = """triple
            quoted"""
            if (a and
                    b):
                raise ValueError(f"""x
        {a}""")
            assert a, \\
                "continued"
        '''
    )
    result = scan_module("vllm/x.py", code.encode())
    expected = [(n.lineno, n.end_lineno) for n in ast.walk(ast.parse(code)) if isinstance(n, (ast.Raise, ast.Assert))]
    assert sorted((s.line, s.end_line) for s in result.sites) == sorted(expected)


def test_exception_class_candidates_carry_resolved_bases_and_docs():
    result = scan(
        '''
        from vllm.exceptions import VLLMError
        class Mine(VLLMError):
            """Raised when mine."""
        class Plain:
            pass
        '''
    )
    assert [(c.qualname, c.bases, c.doc, c.line) for c in result.classes] == [
        ("vllm.pkg.mod.Mine", ("vllm.exceptions.VLLMError",), "Raised when mine.", 3)
    ]


# (bytes, problem kind)
PROBLEMS = [
    (b"def f(:\n    pass\n", "syntax"),
    (b"x = '\xff\xfe'\n", "encoding"),
    (b"x = 1\n" * 400_000, "size"),
    (b"x = " + b"(" * 3000 + b")" * 3000 + b"\n", "depth"),  # segfaults libcst's parser
    (b"x = " + b"+".join([b"1"] * 50_000) + b"\n", "depth"),  # takes libcst minutes
    (b"x = " + b"-" * 9_000 + b"1\n", "depth"),  # 4.5 GB, then libcst's parser segfaults
    (b"x = (" + b"\n".join([b"-"] * 9_000) + b"1)\n", "depth"),  # the same over lines
    (b"".join(b"x%d = " % k + b"+".join([b"a"] * 4_900) + b"\n" for k in range(20)), "depth"),  # 107 s in libcst
    (b"x = 'a\x00b'\n", "syntax"),  # libcst's evaluated_value raises on it
    (b"# -*- coding: ascii -*-\nx = '\xe9'\n", "encoding"),
    (b"def f():\n    x = " + b"+".join([b"1"] * 2_000) + b"\n", "depth"),  # deeper than the parser is safe on: refused up front
]


@pytest.mark.parametrize(("data", "kind"), PROBLEMS, ids=[p[1] for p in PROBLEMS])
def test_problems_are_returned_not_raised(data, kind):
    result = scan_module("vllm/bad.py", data)
    assert [p.kind for p in result.problems] == [kind]
    assert result.sites == ()


def test_a_refused_or_undecodable_file_names_its_line():
    assert [(p.kind, p.line) for p in scan_module("vllm/bad.py", b"x = 1\ny = 'a\x00b'\n").problems] == [("syntax", 2)]
    assert [(p.kind, p.line) for p in scan_module("vllm/bad.py", b"x = 1\ny = 2\nz = '\xff'\n").problems] == [("encoding", 3)]


# Files CPython runs, so the scanner reads them too: (bytes, the message of the one raise, its line)
ODD_FILES = [
    (b"def f(a):\r    if a:\r        raise ValueError('cr only')\r", "cr only", 3),
    (b"def f(a):\r\n    if a:\r\n        raise ValueError('crlf')\r\n", "crlf", 3),
    (b"def f(a):\n\tif a:\n\t\traise ValueError('tabs')\n", "tabs", 3),
    (b"def f(a):\n    if a:\n\t\traise ValueError('tabs after spaces')\n", "tabs after spaces", 3),
    (b"def f(a):\n\f    if a:\n        raise ValueError('form feed')\n", "form feed", 3),
    (b"# -*- coding: latin-1 -*-\ndef f():\n    raise ValueError('caf\xe9')\n", "caf\u00e9", 3),
    (b"\xef\xbb\xbfdef f():\n    raise ValueError('bom')\n", "bom", 2),
]


@pytest.mark.parametrize(("data", "message", "line"), ODD_FILES, ids=[f[1] for f in ODD_FILES])
def test_odd_files_cpython_accepts_are_scanned(data, message, line):
    result = scan_module("vllm/odd.py", data)
    assert result.problems == ()
    assert [(s.message.template, s.line) for s in result.sites] == [(message, line)]


def test_text_from_the_source_is_shown_never_obeyed():
    # Escapes in the code, and the characters themselves in it: colour codes, a bell, the right-to-left override.
    data = b'def f(a):\n    if a:\n        raise ValueError("\\x1b[31mred\\x1b[0m \\x07 \\u202egnp.exe \x1b[1m{a}")\n'
    site = scan_module("vllm/odd.py", data).sites[0]
    assert site.message.template == "\\x1b[31mred\\x1b[0m \\x07 \\u202egnp.exe \\x1b[1m{{a}}"  # a plain string: its braces are text
    assert "\x1b" not in site.code.text and "\x07" not in site.code.text and "\\x1b[1m" in site.code.text
    unprintable = [c for c in repr(dataclasses.asdict(site)) if ord(c) < 32 or 0x202A <= ord(c) <= 0x202E]
    assert unprintable == []


def test_code_context_never_starts_or_ends_inside_a_docstring():
    code = (
        "def f(a):\n"
        '    """Doc line one.\n'
        "\n"
        "    More doc.\n"
        '    """\n'
        "    if a:\n"
        "        raise ValueError('x')\n"
        "    s = '''\n"
        + "    text\n" * 20
        + "    '''\n"
    )
    site = only_site(code)
    assert site.code.first_line == 6 and site.code.text.startswith("    if a:")
    assert site.code.text.split("\n")[-1] == "        raise ValueError('x')"


def test_local_strings_inside_an_fstring_are_inlined():
    site = only_site(
        """
        def check(n, limit, loud):
            msg = f"n ({n}) is greater than limit ({limit})."
            note = "Be careful."
            count = 3
            raise ValueError(f"{msg} Set ALLOW=1. {note} {count!r} {loud}")
        """
    )
    assert site.message.template == "n ({n}) is greater than limit ({limit}). Set ALLOW=1. Be careful. {count} {loud}"


@pytest.mark.parametrize(
    ("body", "template", "variants"),
    [
        # Reasons appended to a list and joined: each is a message the site can give.
        ('errors = check(x)\n    if x > 8:\n        errors.append(f"Rank {x} exceeds 8.")\n    errors.extend(["No bias.", f"Mode {cfg}."])\n'
         '    if errors:\n        raise ValueError(" ".join(errors))', None, ("Rank {x} exceeds 8.", "No bias.", "Mode {cfg}.")),
        # Text set in branches: each branch's text, and the message with it.
        ('hint = ""\n    if x:\n        hint = f"Try {x}. "\n    raise ValueError(f"Too big. {hint}Stop.")', "Too big. {hint}Stop.",
         ("Too big. Stop.", "Too big. Try {x}. Stop.")),
        ('if x:\n        msg = "one"\n    else:\n        msg = "two"\n    raise RuntimeError(msg)', None, ("one", "two")),
        # Text appended only sometimes: the message with it.
        ('msg = "base"\n    if x:\n        msg += " more"\n    raise RuntimeError(msg)', "base", ("base more",)),
        # A value replaced on every path is no other message; one certain value has no variants.
        ('msg = "old"\n    msg = "new"\n    raise RuntimeError(msg)', "new", ()),
        ('msg = "A"\n    if x:\n        msg = "B"\n    msg = "C"\n    raise RuntimeError(msg)', "C", ()),
        ('raise RuntimeError(f"Unknown kind: {x}")', "Unknown kind: {x}", ()),
    ],
)
def test_other_messages_a_site_can_give_are_its_variants(body, template, variants):
    message = only_site(f"def f(x, cfg):\n    {body}\n").message
    assert (message.template, message.variants) == (template, variants)


def test_reasons_appended_after_the_raise_are_no_variant_of_it():
    message = only_site(
        "def f(x):\n    errors = []\n    if x:\n        errors.append('First reason.')\n"
        "    if errors:\n        raise ValueError(' '.join(errors))\n    errors.append('Later reason.')\n"
    ).message
    assert message.variants == ("First reason.",)


TRICKY_LINES = '''\
import functools


@functools.cache
async def fetch(x):  # a decorated coroutine
    if x: return 1; del x
    elif x is None:
        raise ValueError("none")
    else:
        pass
        # a comment closing the block belongs to it


def loop(items):
    for item in items:
        while item:
            item -= 1
        else:
            assert item == 0, "not drained"
    else:
        return 0 \\

    try:
        x = 1; y: int = 2
    except (KeyError, ValueError) as e:
        raise RuntimeError("bad") from e
    except* OSError:
        pass
    else:
        x += y
    finally:
        del x
    with open("f") as f, open("g"):
        match f:
            case 1:
                raise KeyError("one")
            case _:
                pass


class Holder:
    """The docstring."""
    value = 1
'''


def test_statement_lines_from_cpythons_tree_are_those_code_generation_gives():
    import libcst as cst
    from vllm_errors.scanner.raises import node_lines

    text = TRICKY_LINES.replace("except* OSError", "except OSError")  # `except*` mixed with `except` is no Python
    module = cst.parse_module(text)
    generated = node_lines(module)
    from_tree = node_lines(module, ast.parse(text), text)
    assert from_tree == generated
    by_kind = {(type(node).__name__, start) for node, (start, _) in from_tree.items()}
    assert {("FunctionDef", 5), ("If", 6), ("If", 7), ("Raise", 8), ("Assert", 19), ("ExceptHandler", 25), ("Match", 34)} <= by_kind
    # the comment indented into the `else` block ends `fetch`; the backslash carries `return 0` on to the blank line
    assert generated[module.body[1]] == (5, 11)
    loop = module.body[2]
    assert from_tree[loop.body.body[0]] == (15, 22)


def test_a_tree_of_other_statements_falls_back_to_code_generation():
    import libcst as cst
    from vllm_errors.scanner.raises import node_lines

    module = cst.parse_module("def f():\n    raise ValueError('x')\n")
    other = ast.parse("def f():\n    pass\n    pass\n")
    assert node_lines(module, other, "") == node_lines(module)
